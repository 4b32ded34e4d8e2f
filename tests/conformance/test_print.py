"""tl.device_print and print in a kernel: printed per program after the launch, line for line as
Triton's interpreter prints them (the interpreter runs this file in a subprocess)."""
import os
import subprocess
import sys

import pytest
import torch
import triton
import triton.language as tl

from triton_iree import DeviceError


@triton.jit
def print_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.device_print("x: ", x)
    tl.device_print("sum and big", tl.sum(x, 0), x > 3)
    tl.store(x_ptr + offs, x * 2, mask=offs < n)


@triton.jit
def print_2d_kernel(x_ptr, R: tl.constexpr, C: tl.constexpr):
    r = tl.program_id(0) * R + tl.arange(0, R)
    x = tl.load(x_ptr + r[:, None] * C + tl.arange(0, C)[None, :])
    tl.device_print("tile", x)
    tl.device_print("hex", x.to(tl.int32, bitcast=True), hex=True)
    tl.device_print("pids", tl.program_id(0), tl.program_id(1))


@triton.jit
def print_in_loop_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros((BLOCK,), tl.float32)
    for i in range(pid + n):   # a different count in each program
        acc += tl.load(x_ptr + i * BLOCK + tl.arange(0, BLOCK))
        tl.device_print("i", i)
        if i % 2 == 1:
            tl.device_print("acc", acc)
    tl.device_print("end", pid)


@triton.jit
def print_in_while_kernel(n_ptr):
    n = tl.load(n_ptr + tl.program_id(0))
    steps = 0
    while n != 1:   # Collatz: a data-dependent trip count
        n = tl.where(n % 2 == 0, n // 2, 3 * n + 1)
        steps += 1
        tl.device_print("n", n)
    tl.device_print("steps", steps)


CASES = {
    "int32": lambda: (print_kernel, (3,), [torch.arange(10, dtype=torch.int32), 10], dict(BLOCK=4)),
    "uint8": lambda: (print_kernel, (2,), [torch.arange(250, 256, dtype=torch.uint8), 6], dict(BLOCK=4)),
    "float16": lambda: (print_kernel, (2,), [torch.linspace(-2, 2, 8, dtype=torch.float16), 8], dict(BLOCK=4)),
    "2d": lambda: (print_2d_kernel, (2, 2), [torch.linspace(-1, 1, 16)], dict(R=2, C=4)),
    "loop and if": lambda: (print_in_loop_kernel, (3,), [torch.linspace(-1, 1, 20), 2], dict(BLOCK=4)),
    "while": lambda: (print_in_while_kernel, (3,), [torch.tensor([6, 1, 7], dtype=torch.int32)], {}),
}


def _run(case: str) -> None:
    kernel, grid, args, meta = CASES[case]()
    kernel[grid](*args, **meta)


def _interpreter_output(case: str) -> str:
    env = dict(os.environ, TRITON_INTERPRET="1")
    # Triton 3.6's interpreter needs numpy < 2 inside loops: the oracle's Python, when set.
    python = os.environ.get("TRITON_IREE_ORACLE_PYTHON") or sys.executable
    return subprocess.run([python, __file__, case], env=env, capture_output=True, text=True,
                          check=True, timeout=300).stdout


@pytest.mark.construct("tl.device_print")
@pytest.mark.parametrize("case", list(CASES))
def test_device_print_prints_as_the_interpreter(case, capfd):
    capfd.readouterr()
    _run(case)
    ours = capfd.readouterr().out
    assert ours == _interpreter_output(case), ours


@pytest.mark.construct("tl.device_print")
def test_device_print_does_not_change_the_kernel(capfd):
    x = torch.arange(10, dtype=torch.int32)
    print_kernel[(3,)](x, 10, BLOCK=4)
    assert torch.equal(x, torch.arange(10, dtype=torch.int32) * 2)
    assert len(capfd.readouterr().out.splitlines()) == 3 * 3


@pytest.mark.construct("tl.device_print")
def test_prints_past_the_capacity_are_counted_not_kept(monkeypatch, capfd):
    monkeypatch.setenv("TRITON_IREE_PRINTS_PER_PROGRAM", "3")
    capfd.readouterr()
    print_in_loop_kernel[(2,)](torch.zeros(40), 4, BLOCK=4)
    out, err = capfd.readouterr()
    # Each program keeps its first 3 prints: i 0, i 1, acc.
    assert out.splitlines() == [f"({p}, 0, 0)  {m}" for p in (0, 1)
                                for m in ("i:  [0]", "i:  [1]", "acc:  [0. 0. 0. 0.]")], out
    # Program 0 printed 4 i, 2 acc and end; program 1 5 i, 2 acc and end.
    assert "program (0, 0, 0) printed 7 times; the 4 prints after its first 3 were not kept" in err, err
    assert "program (1, 0, 0) printed 8 times; the 5 prints after its first 3 were not kept" in err, err


@pytest.mark.construct("tl.device_print")
def test_device_print_in_checked_mode_prints_and_checks(capfd):
    capfd.readouterr()
    print_kernel[(1,)](torch.arange(4, dtype=torch.int32), 4, BLOCK=4)
    unchecked = capfd.readouterr().out
    x = torch.arange(4, dtype=torch.int32)
    print_kernel[(1,)](x, 4, BLOCK=4, check_bounds=True)
    assert capfd.readouterr().out == unchecked and len(unchecked.splitlines()) == 3, unchecked
    assert torch.equal(x, torch.arange(4, dtype=torch.int32) * 2)
    with pytest.raises(DeviceError, match="out-of-bounds load"):
        print_kernel[(1,)](torch.arange(4, dtype=torch.int32), 8, BLOCK=8, check_bounds=True)
    # The program ran on without the failing load (`other` where it was not performed) and its
    # prints are printed before the error is raised.
    assert "(0, 0, 0)  x:  [0 0 0 0 0 0 0 0]\n" in capfd.readouterr().out


if __name__ == "__main__":
    _run(sys.argv[1])
