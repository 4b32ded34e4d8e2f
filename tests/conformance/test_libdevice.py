"""tl.extra.libdevice, against torch: math per dtype, predicates, conversions, and the ways
kernels import it (Inductor's `from triton.language.extra import libdevice` among them)."""
import os

import pytest
import torch
import triton
import triton.language as tl
import triton.language.extra.libdevice
from triton.language.extra import libdevice
from triton.language.extra.libdevice import rsqrt

import triton_iree
from triton_iree import libdevice as bound

BLOCK = 64
N = 3 * BLOCK - 5


@triton.jit
def unary_kernel(x_ptr, out_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, FN(tl.load(x_ptr + offs, mask=m)), mask=m)


@triton.jit
def binary_kernel(x_ptr, y_ptr, out_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, FN(tl.load(x_ptr + offs, mask=m), tl.load(y_ptr + offs, mask=m)), mask=m)


def _run(name, *inputs, out_dtype=None):
    out = torch.empty(N, dtype=out_dtype or inputs[0].dtype)
    kernel = unary_kernel if len(inputs) == 1 else binary_kernel
    kernel[(triton.cdiv(N, BLOCK),)](*inputs, out, N, FN=getattr(bound, name), BLOCK=BLOCK)
    return out


def _inputs(lo, hi, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(N, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dtype)


# libdevice function -> (torch reference, input range)
UNARY = {
    "exp": (torch.exp, (-20, 20)), "exp2": (torch.exp2, (-20, 20)), "expm1": (torch.expm1, (-2, 2)),
    "log": (torch.log, (1e-3, 1e3)), "log2": (torch.log2, (1e-3, 1e3)),
    "log10": (torch.log10, (1e-3, 1e3)), "log1p": (torch.log1p, (-0.5, 2)),
    "sqrt": (torch.sqrt, (0, 100)), "rsqrt": (torch.rsqrt, (1e-2, 100)),
    "sin": (torch.sin, (-6, 6)), "cos": (torch.cos, (-6, 6)), "tan": (torch.tan, (-1.2, 1.2)),
    "sinh": (torch.sinh, (-5, 5)), "cosh": (torch.cosh, (-5, 5)), "tanh": (torch.tanh, (-5, 5)),
    "asin": (torch.asin, (-0.99, 0.99)), "acos": (torch.acos, (-0.99, 0.99)),
    "atan": (torch.atan, (-10, 10)), "asinh": (torch.asinh, (-10, 10)),
    "acosh": (torch.acosh, (1.01, 10)), "atanh": (torch.atanh, (-0.9, 0.9)),
    "erf": (torch.erf, (-3, 3)), "cbrt": (lambda x: torch.sign(x) * x.abs() ** (1 / 3), (-50, 50)),
    "abs": (torch.abs, (-5, 5)), "floor": (torch.floor, (-5, 5)), "ceil": (torch.ceil, (-5, 5)),
    "trunc": (torch.trunc, (-5, 5)), "rint": (torch.round, (-5, 5)),
    "nearbyint": (torch.round, (-5, 5)),
    "round": (lambda x: torch.sign(x) * torch.floor(x.abs() + 0.5), (-5, 5)),
    "rcp_rn": (torch.reciprocal, (-5, 5)),
}
BINARY = {
    "pow": (torch.pow, (0.1, 4), (-3, 3)), "atan2": (torch.atan2, (-5, 5), (-5, 5)),
    "fmod": (torch.fmod, (-20, 20), (0.5, 4)), "copysign": (torch.copysign, (-5, 5), (-5, 5)),
    "div_rn": (torch.div, (-5, 5), (0.5, 4)), "add_rn": (torch.add, (-5, 5), (-5, 5)),
    "mul_rn": (torch.mul, (-5, 5), (-5, 5)), "hypot": (torch.hypot, (-5, 5), (-5, 5)),
}
# Exactly rounded in IREE (no approximation): compared bit for bit.
EXACT = {"abs", "floor", "ceil", "trunc", "rint", "nearbyint", "round", "sqrt", "fmod", "copysign",
         "div_rn", "add_rn", "mul_rn", "rcp_rn"}
TOL = {torch.float32: 1e-5, torch.float64: 1e-12, torch.float16: 1e-3}


# The suite's Vulkan pass (tests/plugins/on_target.py). Vulkan's precision rules let a driver
# round an f32 division (OpFDiv) to 2.5 ulp and compute an f32 square root as the reciprocal of
# its inverse square root; SPIR-V for Vulkan has no way to ask for a correctly rounded one, and
# NVIDIA's driver gave div_rn, rcp_rn and sqrt 1 ulp off. There they are compared within those
# bounds (3 ulp for the division and reciprocal, 5 for the square root).
VULKAN = os.environ.get("TRITON_IREE_TEST_TARGET") == "vulkan"
VULKAN_ULPS = {"div_rn": 3, "rcp_rn": 3, "sqrt": 5}


def _check(name, out, ref):
    if VULKAN and name in VULKAN_ULPS and out.dtype == torch.float32:
        torch.testing.assert_close(out, ref, rtol=VULKAN_ULPS[name] * 2.0 ** -23, atol=0)
        return
    # f64 sqrt is within 1 ulp on llvm-cpu, not always correctly rounded
    tol = 0 if name in EXACT and (name, out.dtype) != ("sqrt", torch.float64) else TOL[out.dtype]
    torch.testing.assert_close(out, ref, rtol=tol, atol=tol)


@pytest.mark.construct("tl.extra.libdevice")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, dtype):
    ref_fn, (lo, hi) = UNARY[name]
    x = _inputs(lo, hi, dtype)
    if dtype == torch.float64 and name in bound.NO_F64:
        with pytest.raises(triton_iree.UnsupportedError,
                           match=rf"tl\.extra\.libdevice\.{name} .* type f64 .*test_libdevice\.py:\d+"):
            _run(name, x)
        return
    if name in ("rint", "nearbyint", "round"):
        x[:8] = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, -3.5], dtype=dtype)   # the ties
    # torch computes f16 in f32 too, rounding once
    ref = ref_fn(x.double()).to(dtype) if dtype != torch.float16 else ref_fn(x.float()).to(dtype)
    _check(name, _run(name, x), ref)


@pytest.mark.construct("tl.extra.libdevice")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name, dtype):
    ref_fn, xr, yr = BINARY[name]
    x, y = _inputs(*xr, dtype), _inputs(*yr, dtype, seed=1)
    if dtype == torch.float64 and name in bound.NO_F64:
        with pytest.raises(triton_iree.UnsupportedError, match=rf"tl\.extra\.libdevice\.{name} .* type f64"):
            _run(name, x, y)
        return
    _check(name, _run(name, x, y), ref_fn(x.double(), y.double()).to(dtype))


@pytest.mark.construct("tl.extra.libdevice")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", ["isnan", "isinf", "signbit", "finitef"])
def test_predicates(name, dtype):
    x = _inputs(-5, 5, dtype)
    x[:6] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, -float("nan")], dtype=dtype)
    ref = {"isnan": torch.isnan, "isinf": torch.isinf, "finitef": torch.isfinite,
           "signbit": torch.signbit}[name](x).to(torch.int32)
    if name == "finitef" and dtype == torch.float64:
        name = "isfinited"
    torch.testing.assert_close(_run(name, x, out_dtype=torch.int32), ref, rtol=0, atol=0)


@pytest.mark.construct("tl.extra.libdevice")
@pytest.mark.parametrize("name, src, dst, ref_fn", [
    ("float2int_rn", torch.float32, torch.int32, torch.round),
    ("float2int_rz", torch.float32, torch.int32, torch.trunc),
    ("float2int_rd", torch.float32, torch.int32, torch.floor),
    ("float2int_ru", torch.float32, torch.int32, torch.ceil),
    ("double2ll_rn", torch.float64, torch.int64, torch.round),
    ("llrint", torch.float32, torch.int64, torch.round),
    ("int2float_rn", torch.int32, torch.float32, lambda x: x),
    ("ll2double_rn", torch.int64, torch.float64, lambda x: x),
    ("double2float_rn", torch.float64, torch.float32, lambda x: x),
])
def test_conversions(name, src, dst, ref_fn):
    x = _inputs(-1000, 1000, torch.float64)
    x[:6] = torch.tensor([0.5, 1.5, -0.5, -2.5, 2.5, -1.5])
    if not dst.is_floating_point:   # out of range saturates and NaN is 0, as on CUDA
        x[6:11] = torch.tensor([1e30, -1e30, float("inf"), -float("inf"), float("nan")])
    x = x.to(src)
    r = ref_fn(x.double())
    if dst.is_floating_point:
        ref = r.to(dst)
    else:
        info = torch.iinfo(dst)
        r = r.nan_to_num(0.0)
        big, small = r >= 2.0 ** (info.bits - 1), r < -2.0 ** (info.bits - 1)
        ref = torch.where(big | small, 0, r).to(dst)
        ref[big], ref[small] = info.max, info.min
    torch.testing.assert_close(_run(name, x, out_dtype=dst), ref, rtol=0, atol=0)


@pytest.mark.construct("tl.extra.libdevice")
def test_bitcasts():
    x = _inputs(-5, 5, torch.float32)
    bits = _run("float_as_int", x, out_dtype=torch.int32)
    assert torch.equal(bits, x.view(torch.int32))
    assert torch.equal(_run("int_as_float", bits, out_dtype=torch.float32), x)


@pytest.mark.construct("tl.extra.libdevice")
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_integer(dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-(1 << 30), 1 << 30, (N,), generator=g, dtype=dtype)
    torch.testing.assert_close(_run("abs", x), x.abs(), rtol=0, atol=0)
    bits = 32 if dtype == torch.int32 else 64
    u = x.numpy().astype(f"u{bits // 8}")
    popc = torch.tensor([bin(int(v)).count("1") for v in u], dtype=torch.int32)
    clz = torch.tensor([bits - int(v).bit_length() for v in u], dtype=torch.int32)
    torch.testing.assert_close(_run("popc", x, out_dtype=torch.int32), popc, rtol=0, atol=0)
    torch.testing.assert_close(_run("clz", x, out_dtype=torch.int32), clz, rtol=0, atol=0)


@triton.jit
def gelu_layernorm_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # Inductor's forms: `libdevice.erf`, `tl.extra.libdevice.exp`, and a function imported by name.
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    g = 0.5 * x * (1 + libdevice.erf(x * 0.7071067811865476))
    mean = tl.sum(g, 0) / n
    d = tl.where(m, g - mean, 0.0)
    y = d * rsqrt(tl.sum(d * d, 0) / n + 1e-5)
    tl.store(out_ptr + offs, y + triton.language.extra.libdevice.exp(-y * y), mask=m)


@pytest.mark.construct("tl.extra.libdevice")
def test_import_forms():
    x = _inputs(-3, 3, torch.float32)
    out = torch.empty_like(x)
    gelu_layernorm_kernel[(1,)](x, out, N, BLOCK=256)
    g = torch.nn.functional.gelu(x.double())
    y = (g - g.mean()) / torch.sqrt(g.var(unbiased=False) + 1e-5)
    torch.testing.assert_close(out, (y + torch.exp(-y * y)).float(), rtol=1e-5, atol=1e-5)


@triton.jit
def lgamma_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, libdevice.lgamma(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)


@pytest.mark.construct("tl.extra.libdevice")
def test_unsupported_function_is_named():
    x = torch.rand(10)
    with pytest.raises(triton_iree.UnsupportedError, match=r"tl\.extra\.libdevice\.lgamma.*test_libdevice\.py:\d+"):
        lgamma_kernel[(1,)](x, 10, BLOCK=16)


SPECIAL = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1.0, -1.0, 1e-30, 1e30, -1e30, 0.5, -0.5]


@pytest.mark.construct("tl.extra.libdevice")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_special_values(name, dtype):
    # Zeros, infinities, NaN and far-out values: the results C's math library gives (sin, cos,
    # tan: triton-iree's argument reduction, f32_trig.py and f64_trig.py; see test_f32_trig.py).
    if dtype == torch.float64 and name in bound.NO_F64:
        pytest.skip(f"{name} is refused on f64 (test_unary)")
    x = torch.tensor(SPECIAL * 16, dtype=dtype)[:N]
    ref = UNARY[name][0](x.double()).to(dtype)
    out = _run(name, x)
    tol = 0 if name in EXACT and (name, dtype) != ("sqrt", torch.float64) else TOL[dtype]
    torch.testing.assert_close(out, ref, rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.construct("tl.extra.libdevice")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pow_special_values(dtype):
    # exp(y * log(x)) alone gets negative bases, 0 ** 0, 1 ** nan and (-1) ** inf wrong.
    xs = [-2.0, -2.0, -2.0, 0.0, 0.0, -0.0, -0.0, 2.0, -8.0, float("inf"), -float("inf"), -float("inf"),
          float("nan"), 1.0, -1.5, 4.0, -1.0, -0.5]
    ys = [3.0, 2.0, 0.5, 0.0, -1.0, -3.0, 3.0, 0.5, 1 / 3, -1.0, 3.0, 2.0, 0.0, float("nan"), 2.0, -0.5,
          float("inf"), -float("inf")]
    x, y = torch.tensor(xs * 11, dtype=dtype)[:N], torch.tensor(ys * 11, dtype=dtype)[:N]
    torch.testing.assert_close(_run("pow", x, y), torch.pow(x, y), rtol=TOL[dtype], atol=0, equal_nan=True)
    n = torch.tensor([3, 2, -1, 0, -3, 5] * 40, dtype=torch.int32)[:N]
    torch.testing.assert_close(_run("pow", x, n), torch.pow(x, n.to(dtype)), rtol=TOL[dtype], atol=0,
                               equal_nan=True)


@pytest.mark.construct("tl.extra.libdevice")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_hypot_special_values(dtype):
    big = 1e30 if dtype == torch.float32 else 1e300   # the squares overflow
    xs = [0.0, -0.0, 3.0, big, -big, 1e-30, float("inf"), float("nan"), float("nan"), -float("inf"), 5.0]
    ys = [0.0, 0.0, -4.0, big, 1.0, 1e-30, float("nan"), float("inf"), 2.0, 0.0, -0.0]
    x, y = torch.tensor(xs * 17, dtype=dtype)[:N], torch.tensor(ys * 17, dtype=dtype)[:N]
    torch.testing.assert_close(_run("hypot", x, y), torch.hypot(x, y), rtol=TOL[dtype], atol=0, equal_nan=True)


@triton.jit
def fmod_kernel(x_ptr, y_ptr, out_ptr, n, LIBDEVICE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1.0)
    y = tl.load(y_ptr + offs, mask=m, other=1.0)
    tl.store(out_ptr + offs, libdevice.fmod(x, y) if LIBDEVICE else x % y, mask=m)


@pytest.mark.construct("tl.extra.libdevice")
@pytest.mark.parametrize("form, dtype", [("fmod", torch.float32), ("%", torch.float32), ("%", torch.float16),
                                         ("%", torch.bfloat16)])
def test_fmod_is_exact_over_the_whole_range(form, dtype):
    # fmod is always exactly representable: bit for bit C's, for quotients of any size,
    # subnormals, zeros, infinities and NaN (Vulkan's OpFRem is not exact; see f32_fmod.py).
    g = torch.Generator().manual_seed(5)
    n = 8 * BLOCK
    lo, hi = (-24, 16) if dtype == torch.float16 else (-149, 128)   # the dtype's magnitudes

    def mags():
        return torch.exp2(torch.rand(n, generator=g, dtype=torch.float64) * (hi - lo) + lo) * \
            (torch.randint(0, 2, (n,), generator=g) * 2 - 1)
    x, y = mags(), mags()
    x[:2 * BLOCK] = torch.rand(2 * BLOCK, generator=g, dtype=torch.float64) * 40 - 20
    y[:2 * BLOCK] = torch.rand(2 * BLOCK, generator=g, dtype=torch.float64) * 3.5 + 0.5
    special = torch.tensor([0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-45, -3e-39, 3.4e38, 1.5, -7.0],
                           dtype=torch.float64)
    x[-100:], y[-100:] = special.repeat_interleave(10), special.repeat(10)
    x, y = x.to(dtype), y.to(dtype)
    out = torch.empty_like(x)
    fmod_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, LIBDEVICE=form == "fmod", BLOCK=BLOCK)
    ref = torch.fmod(x.double(), y.double()).to(dtype)   # exact in f64, representable in dtype
    same = (out.view(torch.int16 if dtype != torch.float32 else torch.int32) ==
            ref.view(torch.int16 if dtype != torch.float32 else torch.int32)) | (out.isnan() & ref.isnan())
    assert bool(same.all()), (x[~same][:4], y[~same][:4], out[~same][:4], ref[~same][:4])
