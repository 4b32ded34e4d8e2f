"""f64_exp_log: f64 exp, log and the functions built on them as inline arithmetic (what the
SPIR-V targets use; GLSL.std.450 has no f64 Exp or Log).

The expansions are evaluated here op by op with numpy (each tile op as the IEEE operation it
is), so their accuracy is measured on any machine, against mpmath, in ulp, over the whole f64
range and at C's special values; and the SPIR-V target's rewrite of a kernel is checked to leave
no op that IREE's SPIR-V code generation refuses on f64 (it compiles for `ampere`, the NVIDIA
GPU whose run found the failures). Vulkan runs of the same functions: test_vulkan.py.
"""
import math

import mpmath
import numpy as np
import pytest
import triton
import triton.language as tl
from triton.language.extra import libdevice

from triton_iree import f64_exp_log as E, reader, targets, tile as t


class _V:
    """A value of the numpy evaluation: an array of f64, i64 or bool."""

    def __init__(self, a):
        self.a = np.asarray(a)
        self.dtype = {np.float64: "f64", np.int64: "i64"}.get(self.a.dtype.type, "i1")


_CMPF = {"ogt": np.greater, "olt": np.less, "oeq": np.equal, "oge": np.greater_equal, "ole": np.less_equal}


def _op(name, xs, dtype="f64", attrs=None):
    a = [x.a for x in xs]
    with np.errstate(all="ignore"):
        if name == "arith.cmpf":
            p = attrs["predicate"]
            r = np.isnan(a[0]) | np.isnan(a[1]) if p == "uno" else _CMPF[p](a[0], a[1])
        elif name == "arith.cmpi":
            r = {"eq": np.equal, "slt": np.less}[attrs["predicate"]](a[0], a[1])
        elif name == "arith.bitcast":
            r = a[0].view(np.int64 if dtype == "i64" else np.float64)
        elif name == "arith.shrui":
            r = (a[0].view(np.uint64) >> a[1].view(np.uint64)).view(np.int64)
        else:
            r = {"arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply,
                 "arith.divf": np.divide, "arith.andi": np.bitwise_and, "arith.ori": np.bitwise_or,
                 "arith.shrsi": np.right_shift, "arith.shli": np.left_shift, "arith.addi": np.add,
                 "arith.subi": np.subtract, "arith.maxsi": np.maximum, "arith.minsi": np.minimum,
                 "arith.select": np.where, "arith.sitofp": lambda v: v.astype(np.float64),
                 "arith.fptosi": lambda v: v.astype(np.int64), "math.roundeven": np.round,
                 "math.absf": np.abs, "math.sqrt": np.sqrt, "math.copysign": np.copysign}[name](*a)
    return _V(r)


def evaluate(fn, *xs):
    """E.`fn` applied to the f64 arrays `xs`, evaluated with numpy."""
    n = len(xs[0])
    const = lambda v, dtype="f64": _V(np.full(n, v, {"f64": np.float64, "i64": np.int64, "i1": bool}[dtype]))  # noqa: E731
    return getattr(E, fn)(E._F(_op, const), *[_V(np.asarray(x, np.float64)) for x in xs]).a


def _mp(fn, *xs):
    mpmath.mp.prec = 200
    out = []
    for v in zip(*xs):
        try:
            r = fn(*map(mpmath.mpf, v))
            out.append(float(r.real) if isinstance(r, mpmath.mpc) and r.imag == 0 else
                       (math.nan if isinstance(r, mpmath.mpc) else float(r)))
        except (ValueError, ZeroDivisionError):
            out.append(math.nan)
    return np.array(out)


def _ulps(got, ref):
    finite = np.isfinite(ref) & np.isfinite(got)
    with np.errstate(invalid="ignore"):
        return np.where(finite, np.abs(got - ref) / np.spacing(np.abs(ref)), 0.0)


RNG = np.random.default_rng(0)
ANY = np.concatenate([np.exp(RNG.uniform(-744, 709, 2500)), RNG.uniform(0.5, 2.0, 1500),
                      1 + RNG.uniform(-1e-8, 1e-8, 300), 2.0 ** np.arange(-1074, 1024, 7),
                      [5e-324, 2.2250738585072014e-308, 1.7976931348623157e308]])
EXPS = np.concatenate([RNG.uniform(-750, 715, 2500), RNG.uniform(-2, 2, 1500), RNG.uniform(-1e-6, 1e-6, 300),
                       [709.78, 709.79, 710.47, -745.13, -745.14, -708.4, 0.5 * math.log(2), math.log(2)]])
# fn -> (mpmath reference, finite inputs, the most ulp measured)
UNARY = {
    "exp": (mpmath.exp, EXPS, 1), "expm1": (mpmath.expm1, EXPS, 2),
    "exp2": (lambda x: mpmath.power(2, x), np.concatenate([RNG.uniform(-1080, 1030, 3000), RNG.uniform(-2, 2, 1000)]), 1),
    "log": (mpmath.log, ANY, 1),
    "log1p": (mpmath.log1p, np.concatenate([ANY, RNG.uniform(-1, 1, 2000), -1 + np.exp(RNG.uniform(-36, 0, 300))]), 2),
    "sinh": (mpmath.sinh, np.concatenate([EXPS, -EXPS]), 2), "cosh": (mpmath.cosh, EXPS, 1),
    "asinh": (mpmath.asinh, np.concatenate([ANY, -ANY, RNG.uniform(-3, 3, 1000)]), 2),
    "acosh": (mpmath.acosh, ANY[ANY >= 1], 2),
    "atanh": (mpmath.atanh, np.concatenate([RNG.uniform(-1, 1, 2000), 1 - np.exp(RNG.uniform(-36, 0, 500)),
                                            RNG.uniform(-1e-6, 1e-6, 300)]), 2),
}
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1.0, -5e-324, 5e-324, 1e308, -1e308, 2.0, -2.0, 0.5])
# C's results at SPECIAL (numpy's, which follow C99 Annex F).
NUMPY = {"exp": np.exp, "expm1": np.expm1, "exp2": np.exp2, "log": np.log, "log1p": np.log1p, "sinh": np.sinh,
         "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh}


@pytest.mark.parametrize("fn", sorted(UNARY))
def test_within_a_few_ulp(fn):
    ref_fn, x, most = UNARY[fn]
    got, ref = evaluate(fn, x), _mp(ref_fn, x)
    u = _ulps(got, ref)
    worst = int(np.argmax(u))
    assert u.max() <= most, (x[worst], got[worst], ref[worst], u.max())
    assert np.array_equal(np.isinf(got), np.isinf(ref)) and np.array_equal(got[np.isinf(ref)], ref[np.isinf(ref)])
    assert not np.isnan(got).any()


@pytest.mark.parametrize("fn", sorted(UNARY))
def test_special_values_are_c_s(fn):
    with np.errstate(all="ignore"):
        ref = NUMPY[fn](SPECIAL)
    got = evaluate(fn, SPECIAL)
    assert np.array_equal(np.isnan(got), np.isnan(ref)), (SPECIAL, got, ref)
    exact = np.isinf(ref) | (ref == 0) | (ref == 1) | (ref == -1)
    assert np.array_equal(got[exact], ref[exact]) and np.array_equal(np.signbit(got[exact]), np.signbit(ref[exact]))
    assert _ulps(got, ref).max() <= UNARY[fn][2]


@pytest.mark.parametrize("bound, most", [(10, 1), (100, 2), (709, 14)])
def test_pow_within_a_few_ulp(bound, most):
    # x ** y = exp(y log x) with log x a double-double: where |y log x| nears 709 a plain f64
    # product would be hundreds of ulp off.
    rng = np.random.default_rng(bound)
    x = np.concatenate([np.exp(rng.uniform(-700, 700, 1500)), rng.uniform(0.01, 4, 1500)])
    y = rng.uniform(-bound, bound, len(x)) / np.log(x)
    got, ref = evaluate("pow", x, y), _mp(mpmath.power, x, y)
    u = np.where(np.abs(ref) > 1e-300, _ulps(got, ref), 0)
    assert u.max() <= most, (x[np.argmax(u)], y[np.argmax(u)], u.max())


def test_pow_edges():
    # math.powf's own edges (libdevice.pow adds C's cases for negative x, y = 0 and x = 1).
    x = np.array([0.0, 0.0, np.inf, np.inf, 2.0, 0.5, 2.0, -2.0, np.nan, 2.0, 1e300, 1e-300])
    y = np.array([2.0, -2.0, 2.0, -2.0, np.inf, np.inf, -np.inf, 2.5, 1.0, np.nan, 2.0, 2.0])
    with np.errstate(all="ignore"):
        want = np.array([0.0, np.inf, np.inf, 0.0, np.inf, 0.0, 0.0, np.nan, np.nan, np.nan, np.inf, 0.0])
    got = evaluate("pow", x, y)
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(got[~np.isnan(want)], want[~np.isnan(want)])


# --- the SPIR-V target's rewrite ----------------------------------------------------------------

@triton.jit
def f64_math_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    r = tl.exp(x) + tl.log(x) + libdevice.expm1(x) + libdevice.log1p(x) + libdevice.exp2(x) + libdevice.pow(x, y)
    r += libdevice.sinh(x) + libdevice.cosh(x) + libdevice.asinh(x) + libdevice.acosh(x) + libdevice.atanh(x)
    r += libdevice.tanh(x) + libdevice.erf(x) + libdevice.cbrt(x) + libdevice.log2(x) + libdevice.log10(x)
    tl.store(out_ptr + offs, r, mask=m)


SIG = "x_ptr=*fp64,y_ptr=*fp64,out_ptr=*fp64,n=i32"
SIG_TYPES = {"x_ptr": "*fp64", "y_ptr": "*fp64", "out_ptr": "*fp64", "n": "i32", "BLOCK": "constexpr"}


def _f64_ops(kernel):
    return {op.opname for op in kernel.walk() if isinstance(op, t.Elementwise) and op.result.dtype == "f64"}


def test_the_vulkan_target_leaves_no_f64_exp_or_log(monkeypatch):
    from triton_iree.backend.compiler import kernel_ttir
    monkeypatch.setenv(targets.UNVALIDATED_TARGETS_VAR, "1")
    ttir = kernel_ttir(f64_math_kernel, SIG_TYPES, {"BLOCK": 64})
    kernel = reader.read_ttir(ttir)
    assert _f64_ops(kernel) & set(E.FUNCTIONS)          # what the reader writes has them
    targets.make_target("vulkan").prepare(kernel)
    assert not _f64_ops(kernel) & set(E.FUNCTIONS)
    kernel = reader.read_ttir(ttir)
    targets.make_target("llvm-cpu").prepare(kernel)     # the CPU keeps IREE's own
    assert _f64_ops(kernel) & set(E.FUNCTIONS)


def test_f64_exp_and_log_compile_for_an_nvidia_vulkan_gpu(monkeypatch):
    from triton_iree import aot
    monkeypatch.setenv(targets.UNVALIDATED_TARGETS_VAR, "1")
    assert aot.compile_kernel(f64_math_kernel, SIG, {"BLOCK": 64}, target="vulkan", arch="ampere").vmfb
