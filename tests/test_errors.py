"""Bad launches, compile limits and refused targets: each a clear error, never a wrong answer,
a hang or a leftover process."""
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_iree
from triton_iree import CompileError, LaunchError, UnsupportedError, reader
from triton_iree.backend import compiler
from triton_iree import compile as iree_compile, targets
from triton_iree.ttshared import prepare

import kernels as K

DATA = Path(__file__).parent / "data" / "ttshared"


@pytest.mark.parametrize("grid", [(2.5,), (np.float32(2.0),), (2, 1.0), ("2",)])
def test_grids_that_are_not_non_negative_integers_are_refused_before_anything_runs(grid):
    x = torch.rand(64)
    out = torch.full((64,), 7.0)
    for bad in (grid, (-1,), (1, -3)):
        with pytest.raises(LaunchError, match="grid"):
            K.add_kernel[bad](x, x, out, 64, BLOCK_SIZE=16)
        assert torch.all(out == 7.0)
    K.add_kernel[(np.int64(4),)](x, x, out, 64, BLOCK_SIZE=16)
    assert torch.equal(out, x + x)


@triton.jit
def _u64_kernel(out_ptr, x):
    tl.store(out_ptr, x)
    tl.store(out_ptr + 1, x // 3)
    tl.store(out_ptr + 2, x >> 60)
    tl.store(out_ptr + 3, (x > 5).to(tl.int64))


@pytest.mark.parametrize("x", [2 ** 63, 2 ** 63 + 12345, 2 ** 64 - 1])
def test_u64_scalars_of_2_pow_63_and_above_compute_as_unsigned(x):
    out = torch.zeros(4, dtype=torch.int64)
    _u64_kernel[(1,)](out, x)
    v = np.uint64(x)
    want = np.array([v, v // np.uint64(3), v >> np.uint64(60), 1], dtype=np.uint64).view(np.int64)
    np.testing.assert_array_equal(out.numpy(), want)


@pytest.mark.parametrize("target,arch", [("hip", None), ("rocm", None), ("vulkan", "rdna3")])
def test_gpu_targets_are_refused_until_validated(target, arch, monkeypatch):
    monkeypatch.delenv(targets.UNVALIDATED_TARGETS_VAR, raising=False)
    with pytest.raises(UnsupportedError, match="not validated yet.*wrong answers"):
        triton_iree.activate(target, arch=arch)
    with pytest.raises(UnsupportedError, match=targets.UNVALIDATED_TARGETS_VAR):
        targets.make_target(target, arch=arch)
    monkeypatch.setenv(targets.UNVALIDATED_TARGETS_VAR, "1")
    assert targets.make_target(target, arch=arch).driver != "local-task"


def test_vulkan_is_validated_for_the_arches_it_was_validated_on(monkeypatch):
    """The suite's GPU pass passed on NVIDIA's Vulkan driver (ampere, the default)."""
    monkeypatch.delenv(targets.UNVALIDATED_TARGETS_VAR, raising=False)
    assert targets.make_target("vulkan").arch == "ampere"
    for arch in ("rdna3", "llvmpipe"):
        with pytest.raises(UnsupportedError, match=f"not validated yet for arch '{arch}' .only for ampere."):
            targets.make_target("vulkan", arch=arch)


def test_cuda_is_validated_for_triton_kernels_but_not_for_linalg_input(monkeypatch):
    """CUDA code generation passed the test suite's GPU part on an H200 (tests/plugins/on_target.py);
    triton-shared's linalg carries no GPU lowering configuration and stays refused."""
    monkeypatch.delenv(targets.UNVALIDATED_TARGETS_VAR, raising=False)
    assert targets.make_target("cuda").driver == "cuda"
    with pytest.raises(UnsupportedError, match="not validated yet for linalg input"):
        targets.make_target("cuda", triton=False)


def _fake_iree_compile(tmp_path, monkeypatch, body: str) -> Path:
    """Makes iree.compiler find a shell script as iree-compile (IREE_TOOL_PATH)."""
    tools = tmp_path / "tools"
    tools.mkdir()
    exe = tools / "iree-compile"
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(0o755)
    monkeypatch.setenv("IREE_TOOL_PATH", str(tools))
    monkeypatch.setenv("TMPDIR", str(tmp_path))   # where failed compiles keep their input
    monkeypatch.setattr(tempfile, "tempdir", None)
    return exe


def test_a_crashing_iree_compile_reports_its_signal_and_a_reproducer(tmp_path, monkeypatch):
    _fake_iree_compile(tmp_path, monkeypatch, "echo 'Stack dump:' >&2; kill -SEGV $$")
    with pytest.raises(CompileError) as e:
        iree_compile.compile_module("module {}", targets.make_target(), name="crashy", use_cache=False)
    first = str(e.value).splitlines()[0]
    assert "signal SIGSEGV (11)" in first and "crashed" in first and "to reproduce: " in first
    command = first.split("to reproduce: ", 1)[1].split()
    kept = Path(command[1])
    assert command[0].endswith("iree-compile") and kept.read_text() == "module {}"
    assert kept.parent.parent == tmp_path
    assert "--iree-llvmcpu-disable-distribution" in command
    assert "Stack dump:" in str(e.value)


def test_compile_time_limit(tmp_path, monkeypatch):
    _fake_iree_compile(tmp_path, monkeypatch, "exec sleep 60")
    monkeypatch.setenv(iree_compile.TIMEOUT_VAR, "1.5")
    t0 = time.monotonic()
    with pytest.raises(CompileError, match=r"1\.5 s limit.*TRITON_IREE_COMPILE_TIMEOUT"):
        iree_compile.compile_module("module {}", targets.make_target(), name="slow", use_cache=False)
    assert time.monotonic() - t0 < 30
    monkeypatch.setenv(iree_compile.TIMEOUT_VAR, "soon")
    with pytest.raises(CompileError, match="not a positive number"):
        iree_compile.compile_module("module {}", targets.make_target(), name="slow", use_cache=False)


def test_a_failed_compile_names_only_files_that_exist(tmp_path, monkeypatch):
    _fake_iree_compile(tmp_path, monkeypatch, "echo \"$1:1:1: error: no\" >&2; exit 1")
    with pytest.raises(CompileError) as e:
        iree_compile.compile_module("module {}", targets.make_target(), name="bad", use_cache=False)
    command = str(e.value).splitlines()[1].split()
    assert command[0] == "$" and command[1].endswith("iree-compile")
    kept = Path(command[2])
    assert kept.read_text() == "module {}" and kept.parent.parent == tmp_path
    assert f"{kept}:1:1: error: no" in str(e.value)


@triton.jit
def _big_tile_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    m = (r[:, None] < n) & (r[None, :] < n)
    x = tl.load(x_ptr + r[:, None] * n + r[None, :], mask=m)
    tl.store(y_ptr + r[:, None] * n + r[None, :], tl.exp(x) * 2 + 1, mask=m)


def test_tiles_over_the_stack_limit_say_which_line_and_what_to_change(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))   # where the failed compile keeps its input
    monkeypatch.setattr(tempfile, "tempdir", None)
    x = torch.rand(1000, 1000)
    y = torch.full_like(x, 7.0)
    with pytest.raises(CompileError) as e:
        _big_tile_kernel[(1,)](x, y, 1000, BLOCK=1024)
    err = e.value
    first = str(err).splitlines()[0]
    line = _big_tile_kernel.fn.__code__.co_firstlineno
    assert "the largest tile, 1024x1024" in first and "use smaller block sizes" in first
    assert isinstance(err, triton_iree.errors.ResourceLimitError) and err.needed > err.limit == 1048576
    assert err.loc.startswith(f"{__file__}:") and line < int(err.loc.split(":")[-2]) <= line + 5
    command = first.split("to reproduce: ", 1)[1].split()
    assert Path(command[1]).is_file() and Path(command[1]).parent.parent == tmp_path
    assert torch.all(y == 7.0)


def test_a_long_compile_says_once_what_it_compiles_unless_quiet(tmp_path, monkeypatch, capsys):
    """iree-compile may run for minutes: after PROGRESS_AFTER_S one line names the kernel and target."""
    _fake_iree_compile(tmp_path, monkeypatch, "exec sleep 60")
    monkeypatch.setenv(iree_compile.TIMEOUT_VAR, "4")
    for quiet in ("0", "1"):
        monkeypatch.setenv(iree_compile.QUIET_VAR, quiet)
        with pytest.raises(CompileError, match="4 s limit"):
            iree_compile.compile_module("module {}", targets.make_target(), name="hangs", use_cache=False)
        err = capsys.readouterr().err
        assert err == ("" if quiet == "1" else "triton-iree: compiling hangs for llvm-cpu ...\n")


def test_an_announced_compile_also_says_when_it_is_done(tmp_path, monkeypatch, capsys):
    from iree.compiler.tools.binaries import find_tool
    real = find_tool("iree-compile")
    _fake_iree_compile(tmp_path, monkeypatch, f'sleep 3\nexec "{real}" "$@"')
    monkeypatch.setenv(iree_compile.SLOW_COMPILE_VAR, "1000")   # the "took" line only because it was announced
    monkeypatch.delenv(iree_compile.QUIET_VAR, raising=False)
    module = ("func.func @neg(%x: tensor<7xf32>) -> tensor<7xf32> {\n"
              "  %y = arith.negf %x : tensor<7xf32>\n  return %y : tensor<7xf32>\n}\n")
    vmfb = iree_compile.compile_module(module, targets.make_target(), name="slow3", use_cache=False)
    assert vmfb
    start, done = capsys.readouterr().err.splitlines()
    assert start == "triton-iree: compiling slow3 for llvm-cpu ..."
    assert re.fullmatch(r"triton-iree: compiling slow3 for llvm-cpu took \d+\.\d s", done), done


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")
def test_iree_compile_dies_with_the_process_that_started_it(tmp_path, monkeypatch):
    pidfile = tmp_path / "child.pid"
    _fake_iree_compile(tmp_path, monkeypatch, f"echo $$ > {pidfile}\nexec sleep 120")
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        from triton_iree import compile as c, targets
        c.compile_module("module {}", targets.make_target(), name="orphan", use_cache=False)
    """)])
    try:
        deadline = time.monotonic() + 60
        while not (pidfile.exists() and pidfile.read_text().strip()):
            assert parent.poll() is None and time.monotonic() < deadline, "iree-compile never started"
            time.sleep(0.05)
        child = int(pidfile.read_text())
        assert not _gone(child)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 5
    while not _gone(child):
        if time.monotonic() > deadline:
            os.kill(child, signal.SIGKILL)
            pytest.fail("iree-compile outlived the process that started it")
        time.sleep(0.05)


def _with_step(step: str) -> str:
    text = (DATA / "matmul_k_loop_mixed.mlir").read_text()
    text = text.replace("%c32_i32 = arith.constant 32 : i32",
                        f"%c32_i32 = arith.constant 32 : i32\n    %step = arith.constant {step} : i32")
    return text.replace("step %c32_i32 iter_args", "step %step iter_args")


@pytest.mark.parametrize("step", ["0", "-1", "-2147483648"])
def test_triton_shared_loops_with_non_positive_constant_steps_are_refused(step):
    with pytest.raises(UnsupportedError, match=f"'scf.for': a step of {step} .*positive") as e:
        prepare(_with_step(step), "matmul.mlir")
    assert e.value.loc == "matmul.mlir:32:13"


@triton.jit
def _step_kernel(x_ptr, n):
    acc = 0
    for i in range(0, n, 4):
        acc += i
    tl.store(x_ptr, acc)


@pytest.mark.parametrize("step", ["0", "-4"])
def test_ttir_loops_with_non_positive_constant_steps_are_refused(step):
    text = compiler.kernel_ttir(_step_kernel, dict(x_ptr="*i32", n="i32"), {})
    assert text.count("value = 4 : i32") == 1
    with pytest.raises(UnsupportedError,
                       match=rf"a for loop \(scf\.for\) is not supported by triton-iree: a step of {step} "):
        reader.read_ttir(text.replace("value = 4 : i32", f"value = {step} : i32"))


@triton.jit
def _sort_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.sort(tl.load(x_ptr + offs)))


@triton.jit
def _topk_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + tl.arange(0, 4), tl.topk(tl.load(x_ptr + offs), 4))


@pytest.mark.parametrize("fn,name,ty", [(_sort_kernel, "tl.sort", "*fp32"), (_topk_kernel, "tl.topk", "*fp32"),
                                        (_sort_kernel, "tl.sort", "*i32")])
def test_sort_expansion_that_is_not_triton_network_is_refused_at_the_users_line(fn, name, ty):
    """tl.sort / tl.topk are replaced by the network Triton's library builds only when its
    expansion computes the same: its last compare-and-swap step changed from > to == must be refused."""
    text = compiler.kernel_ttir(fn, dict(x_ptr=ty, out_ptr=ty, BLOCK="constexpr"), dict(BLOCK=16))
    cmp, gt, eq = ('"arith.cmpf"', "predicate = 2 : i64", "predicate = 1 : i64") if ty == "*fp32" else \
        ('"arith.cmpi"', "predicate = 4 : i64", "predicate = 0 : i64")
    reader.read_ttir(text)   # as Triton builds it: read
    at = text.index(gt, text.rindex(cmp + "(", 0, text.rindex(gt)))
    with pytest.raises(UnsupportedError, match=f"^{name} is not supported by triton-iree here: its expansion is "
                                               "not the bitonic sort") as e:
        reader.read_ttir(text[:at] + eq + text[at + len(gt):])
    src, first = fn.fn.__code__.co_filename, fn.fn.__code__.co_firstlineno
    assert e.value.loc.startswith(f"{src}:{first + 3}:")
