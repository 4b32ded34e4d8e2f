"""The math expansions on the SPIR-V targets, as emitted (no device needed): f32 sin / cos / tan
take their general argument reduction per element (no tile-wide test: a reduction and an
scf.if made IREE's SPIR-V configuration fail), a float value that one linalg op alone reads is
computed in that op's body (as tiles, in workgroup memory, f32 trig of 1024 elements took 266
KiB and f64 tanh / erf 40 / 49 KiB, beyond lavapipe's 32 KiB; f16 cbrt's f32 argument as a tile
of its own gave 'contains conflicting lowering configuration'), and f32 / f16 / bf16 fmod is
integer arithmetic (OpFRem is not exact). The results are checked on lavapipe by the
conformance suite's Vulkan pass (test_f32_trig.py, test_f64_math.py, test_libdevice.py)."""
import re

import pytest
import triton
import triton.language as tl
from triton.language.extra import libdevice

from triton_iree import aot, libdevice as bound, targets

from helpers import program_versions


@pytest.fixture(autouse=True)
def unvalidated(monkeypatch):
    monkeypatch.setenv(targets.UNVALIDATED_TARGETS_VAR, "1")


def _module(fn, sig, consts, target="vulkan", arch="llvmpipe"):
    kw = {} if target == "llvm-cpu" else {"arch": arch}
    return aot.compile_kernel(fn, sig, consts, target=target, vmfb=False, **kw).module


def _compute_ops(module: str) -> int:
    return len(re.findall(r"= linalg\.(?:generic|map) ", module))


@triton.jit
def trig_kernel(x_ptr, sin_ptr, cos_ptr, tan_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(sin_ptr + offs, tl.sin(x), mask=m)
    tl.store(cos_ptr + offs, tl.cos(x), mask=m)
    tl.store(tan_ptr + offs, libdevice.tan(x), mask=m)


TRIG_SIG = "x_ptr=*fp32,sin_ptr=*fp32,cos_ptr=*fp32,tan_ptr=*fp32,n=i32"


def test_f32_trig_is_one_op_per_function_without_a_tile_wide_test():
    module = _module(trig_kernel, TRIG_SIG, {"BLOCK": 1024})
    versions = program_versions(module)   # the full-tile version and the masked one
    assert len(versions) == 2 and '"reduction"' not in module
    assert all("scf.if" not in v and _compute_ops(v) == 3 for v in versions)
    cpu = _module(trig_kernel, TRIG_SIG, {"BLOCK": 1024}, target="llvm-cpu")
    assert "scf.if" in cpu   # the CPU keeps the short reduction for tiles below 2^24


@triton.jit
def unary_kernel(x_ptr, out_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, FN(tl.load(x_ptr + offs, mask=m, other=1.0)), mask=m)


@pytest.mark.parametrize("fn, dtype", [(bound.tanh, "fp64"), (bound.erf, "fp64"), (bound.sin, "fp64"),
                                       (bound.cbrt, "fp16")])
def test_a_function_of_a_tile_is_one_op(fn, dtype):
    module = _module(unary_kernel, f"x_ptr=*{dtype},out_ptr=*{dtype},n=i32", {"FN": fn, "BLOCK": 1024})
    assert all(_compute_ops(v) == 1 for v in program_versions(module)), module   # in each version


def test_f64_tanh_of_1024_elements_fits_lavapipes_workgroup_memory():
    aot.compile_kernel(unary_kernel, "x_ptr=*fp64,out_ptr=*fp64,n=i32", {"FN": bound.tanh, "BLOCK": 1024},
                       target="vulkan", arch="llvmpipe")


@triton.jit
def rem_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) % tl.load(y_ptr + offs))


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_float_remainder_is_integer_arithmetic(dtype):
    sig = f"x_ptr=*{dtype},y_ptr=*{dtype},out_ptr=*{dtype}"
    module = _module(rem_kernel, sig, {"BLOCK": 64})
    assert "arith.remf" not in module and "arith.remui" in module
    assert "arith.remf" in _module(rem_kernel, sig, {"BLOCK": 64}, target="llvm-cpu")
