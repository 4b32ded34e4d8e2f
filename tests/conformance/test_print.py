"""tl.device_print and print in a kernel: printed per program after the launch, line for line as
Triton's interpreter prints them (the interpreter runs this file in a subprocess)."""
import os
import subprocess
import sys

import pytest
import torch
import triton
import triton.language as tl

from triton_iree import UnsupportedError


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
def print_in_loop_kernel(x_ptr, n):
    for i in range(n):
        tl.device_print("i", i)


CASES = {
    "int32": lambda: (print_kernel, (3,), [torch.arange(10, dtype=torch.int32), 10], dict(BLOCK=4)),
    "uint8": lambda: (print_kernel, (2,), [torch.arange(250, 256, dtype=torch.uint8), 6], dict(BLOCK=4)),
    "float16": lambda: (print_kernel, (2,), [torch.linspace(-2, 2, 8, dtype=torch.float16), 8], dict(BLOCK=4)),
    "2d": lambda: (print_2d_kernel, (2, 2), [torch.linspace(-1, 1, 16)], dict(R=2, C=4)),
}


def _run(case: str) -> None:
    kernel, grid, args, meta = CASES[case]()
    kernel[grid](*args, **meta)


def _interpreter_output(case: str) -> str:
    env = dict(os.environ, TRITON_INTERPRET="1")
    return subprocess.run([sys.executable, __file__, case], env=env, capture_output=True, text=True,
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
def test_device_print_in_a_loop_is_refused_at_its_line():
    with pytest.raises(UnsupportedError, match=r"^tl\.device_print inside a loop or an if is not supported") as e:
        print_in_loop_kernel[(1,)](torch.zeros(1), 3)
    assert e.value.loc.startswith(f"{__file__}:"), e.value.loc


@pytest.mark.construct("tl.device_print")
def test_device_print_in_checked_mode_is_refused():
    with pytest.raises(UnsupportedError, match=r"^tl\.device_print in checked mode .* is not supported"):
        print_kernel[(1,)](torch.zeros(4, dtype=torch.int32), 4, BLOCK=4, debug=True)


if __name__ == "__main__":
    _run(sys.argv[1])
