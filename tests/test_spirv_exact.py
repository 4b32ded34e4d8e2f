"""The SPIR-V targets' float arithmetic is rounded op by op: every float add, subtract,
multiply, divide, remainder, negation and dot product of their SPIR-V carries the NoContraction
decoration (`targets.spirv.Vulkan.rewrite_executables`), written between two iree-compile stages
(`compile.commands`). Without it Vulkan lets a driver contract and reassociate float arithmetic,
and Mesa's lavapipe folded (x + 1.5 2^52) - 1.5 2^52 into x: x - round(x) in f32 sin's argument
reduction was 0 for every x. The rewrite and the commands are checked without a device; the
rounding itself on a Vulkan device (lavapipe without a GPU; skipped without one, except in CI)."""
import os
import re
import shlex
import subprocess
import sys

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from triton_iree import aot, compile as iree_compile, runtime, targets
from triton_iree.errors import CompileError, LaunchError

ARCH = os.environ.get("TRITON_IREE_TEST_VULKAN_ARCH", "llvmpipe")

SPIRV = """module {
  spirv.module Logical GLSL450 requires #spirv.vce<v1.0, [Shader, Float64], []> {
    spirv.func @f(%x: f64, %y: f64, %a: vector<4xf32>, %b: vector<4xf32>, %c: f32, %i: i32) -> f32 "None" {
      %0 = spirv.FMul %x, %y : f64
      %1 = spirv.FAdd %a, %b : vector<4xf32>
      %2 = spirv.FSub %0, %y : f64
      %3 = spirv.FNegate %c : f32
      %4 = spirv.Dot %a, %b : vector<4xf32> -> f32
      %5 = spirv.GL.Fma %c, %c, %3 : f32
      %6 = spirv.IAdd %i, %i : i32
      spirv.ReturnValue %4 : f32
    }
  }
}
"""


def test_the_rewrite_marks_every_float_op_once():
    vulkan = targets.Vulkan(arch="ampere")
    marked = vulkan.rewrite_executables(SPIRV)
    assert marked.count("{no_contraction}") == 5
    assert re.search(r"spirv\.FMul %\w+, %\w+ \{no_contraction\} : f64", marked)
    assert re.search(r"spirv\.Dot %\w+, %\w+ \{no_contraction\} : vector<4xf32> -> f32", marked)
    assert re.search(r"spirv\.GL\.Fma %\w+, %\w+, %\w+ : f32", marked) and re.search(r"spirv\.IAdd %\w+, %\w+ : i32", marked)
    assert vulkan.rewrite_executables(marked) == marked


@triton.jit
def _round_trip_kernel(x_ptr, y_ptr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    tl.store(y_ptr + tl.arange(0, 16), x.to(tl.float16).to(tl.float32) + x.to(tl.float16).to(tl.float32))


def test_an_upcast_of_a_downcast_is_built_from_bits():
    """NVIDIA's Vulkan driver reads FConvert(FConvert(x)) as x (NoContraction or not): on the
    SPIR-V targets the upcast of a rounded value is integer arithmetic on its bits."""
    def module(target):
        return aot.compile_kernel(_round_trip_kernel, "x_ptr=*fp32, y_ptr=*fp32", target=target,
                                  arch="ampere" if target == "vulkan" else None, vmfb=False).module
    assert "arith.extf" in module("llvm-cpu")
    spirv = module("vulkan")
    assert "arith.truncf" in spirv and "arith.extf" not in spirv and "arith.uitofp" in spirv


def test_executables_it_cannot_read_are_an_error():
    with pytest.raises(CompileError, match="no_contraction"):
        targets.Vulkan(arch="ampere").rewrite_executables('%5 = spirv.FAdd %a, %b : f32\n')


def test_the_spirv_targets_compile_in_two_stages_with_the_rewrite_between():
    one = iree_compile.commands(targets.LlvmCpu.of(), "k.iree.mlir", "k.vmfb")
    assert len(one) == 1 and one[0] == iree_compile.command_line(targets.LlvmCpu.of(), "k.iree.mlir", "k.vmfb")
    for target in (targets.Vulkan(arch="llvmpipe"), targets.MetalSpirv(arch="ios")):
        first, rewrite, second = iree_compile.commands(target, "k.iree.mlir", "k.vmfb")
        assert "--compile-to=executable-targets" in first and "-o=k.executables.mlir" in first
        assert rewrite == [sys.executable, "-m", "triton_iree.compile", target.name, target.arch,
                           "k.executables.mlir"]
        assert second[1] == "k.executables.mlir" and "--compile-from=executable-targets" in second


class _Unmarked(targets.Vulkan):
    executable_rewrite = ""


def test_modules_built_with_the_rewrite_are_cached_apart():
    assert iree_compile.cache_key("m", targets.Vulkan(arch="ampere")) != iree_compile.cache_key(
        "m", _Unmarked(arch="ampere"))


@triton.jit
def round_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    if x.dtype == tl.float64:
        r = (x + 6755399441055744.0) - 6755399441055744.0    # 1.5 2^52: x rounded to an integer
    else:
        r = (x + 12582912.0) - 12582912.0                    # 1.5 2^23
    tl.store(out_ptr + offs, r, mask=m)


# NoContraction, as a Vulkan module carries it: OpDecorate (opcode 71, 3 words) <id> NoContraction (42).
_NO_CONTRACTION = re.compile(rb"\x47\x00\x03\x00....\x2a\x00\x00\x00", re.S)


def test_the_vulkan_module_carries_no_contraction(monkeypatch):
    monkeypatch.setenv(targets.UNVALIDATED_TARGETS_VAR, "1")
    vmfb = aot.compile_kernel(round_kernel, "x_ptr=*fp64,out_ptr=*fp64,n=i32", {"BLOCK": 16}, target="vulkan",
                              arch="ampere").vmfb
    assert len(_NO_CONTRACTION.findall(vmfb)) >= 2


def test_the_printed_commands_rebuild_the_module(tmp_path, monkeypatch):
    monkeypatch.setenv(targets.UNVALIDATED_TARGETS_VAR, "1")
    src = tmp_path / "k.py"
    src.write_text("import triton\nimport triton.language as tl\n\n@triton.jit\n"
                   "def twice(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
                   "    offs = tl.arange(0, BLOCK)\n"
                   "    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0 + 1.0, mask=offs < n)\n")
    out = tmp_path / "twice.vmfb"
    r = subprocess.run([sys.executable, "-m", "triton_iree", "compile", f"{src}:twice", "-o", str(out),
                        "--target", "vulkan", "--signature", "x_ptr=*fp32,out_ptr=*fp32,n=i32",
                        "--constexpr", "BLOCK=64", "--print-command"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 3, r.stdout
    out.unlink()
    for line in lines:
        step = subprocess.run(shlex.split(line), capture_output=True, text=True, timeout=600)
        assert step.returncode == 0, step.stderr
    assert "{no_contraction}" in (tmp_path / "twice.executables.mlir").read_text()
    assert _NO_CONTRACTION.search(out.read_bytes())


@pytest.fixture
def vulkan_device(monkeypatch):
    monkeypatch.setenv(targets.UNVALIDATED_TARGETS_VAR, "1")
    try:
        runtime.get_device("vulkan")
    except LaunchError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: no usable Vulkan device ({e.message})", pytrace=False)
        pytest.skip(f"no usable Vulkan device ({e.message})")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_adding_and_subtracting_a_large_constant_rounds(vulkan_device, dtype):
    sig = f"x_ptr=*fp{64 if dtype == torch.float64 else 32},out_ptr=*fp{64 if dtype == torch.float64 else 32},n=i32"
    run = aot.Launcher(aot.compile_kernel(round_kernel, sig, {"BLOCK": 16}, target="vulkan", arch=ARCH).vmfb,
                       "round_kernel", sig, target="vulkan")
    x = torch.tensor([0.4, 0.5, 1.5, 2.5, -0.6, 7.25, -3.5, 100.7, 0.1, -0.1, 3.0, 4.5], dtype=dtype)
    out = torch.zeros_like(x)
    run(x, out, len(x), grid=(1,))
    assert torch.equal(out, torch.from_numpy(np.round(x.numpy())))   # ties to even, as the addition rounds
