"""fp64 exp and log, and the functions IREE builds on them, as inline f64 and i64 arithmetic
(add, multiply, divide, sqrt, roundeven, comparisons, selects, bit casts and integer ops), for
targets whose code has no f64 exp or log. SPIR-V's GLSL.std.450 instructions Exp, Log, Exp2,
Log2 and Pow take 16- and 32-bit floats only, so IREE's SPIR-V code generation fails on f64
math.exp and math.log ('spirv.GL.Exp' op operand #0 must be 16/32-bit float), and on every op
MLIR expands into them (expm1, log1p, powf, the hyperbolic functions); the f64 functions of
`f64_math` use math.exp and math.log too. A target that needs them calls `expand_kernel` in its
`prepare` (`targets.spirv`); the lowering never does.

- log(x): fdlibm's e_log.c: x = (1 + f) 2^k with 1 + f in [sqrt(1/2), sqrt(2)) (`f64_math._split`,
  subnormals from their bits; f exact), log(1 + f) = f - (f^2/2 - s (f^2/2 + R(s^2))) with
  s = f / (2 + f) (1 ulp). log1p(x) is the same core on f = x where x is in that range, log(1 + x)
  elsewhere (where rounding 1 + x costs at most 0.3 ulp).
- exp(x): fdlibm's e_exp.c (k ln 2 taken off in two parts, its rational approximation on
  |r| <= ln 2 / 2; 1 ulp), scaled by 2^k in two exact powers of two (gradual underflow rounds once,
  at the last). exp2(x) = 2^round(x) exp((x - round(x)) ln 2), the product exact.
- expm1(x): fdlibm's s_expm1.c approximation on |x| <= ln 2 / 2, expm1(2y) = E (E + 2) with
  E = expm1(y) up to |x| = ln 2, exp(x) - 1 beyond (2 ulp).
- pow(x, y) = exp(y log x), log x as a double-double (s = f / (2 + f) with the division's
  remainder, 2 s, and the series of atanh beyond it, summed exactly where it matters), so that
  y log x keeps the bits a plain f64 product would lose where |y log x| nears 709 (a few ulp).
- sinh, cosh: fdlibm's intervals around expm1 and exp; asinh, acosh, atanh: fdlibm's forms around
  log and log1p.

Vulkan drivers may reassociate and contract float arithmetic (SPIR-V without NoContraction):
Mesa folds (1 + x) - 1 to x, which breaks Kahan's expm1 and log1p and Knuth's two-sum. The SPIR-V
targets mark every float op NoContraction (`targets.spirv`), and besides nothing here relies on a
float identity for its extra bits: exact parts are made by clearing low
significand bits in integer arithmetic (opaque to such folding), and each sum whose rounding
error is kept is exact by construction. C's results at the edges: exp(+-inf) = inf / 0,
log(0) = -inf, log of negative numbers NaN, expm1(-inf) = -1, log1p(-1) = -inf, the hyperbolic
functions keep -0 and their signs, acosh(x < 1) and atanh(|x| > 1) NaN; NaN gives NaN.
"""
from __future__ import annotations

import math
from typing import Callable, Optional

from . import f64_math, tile as t

FUNCTIONS = ("math.exp", "math.exp2", "math.expm1", "math.log", "math.log1p", "math.powf", "math.sinh",
             "math.cosh", "math.asinh", "math.acosh", "math.atanh")

# fdlibm's split of ln 2 (ln2_hi has 32 significant bits: k * ln2_hi is exact for |k| < 2^21).
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_LN2 = math.log(2)               # ln 2 rounded to f64, and what it misses
_LN2_TAIL = 2.3190468138462996e-17
_INV_LN2 = 1.44269504088896338700e+00
# fdlibm e_exp.c's rational approximation of exp on [-ln2/2, ln2/2].
_P = (1.66666666666666019037e-01, -2.77777777770155933842e-03, 6.61375632143793436117e-05,
      -1.65339022054652515390e-06, 4.13813679705723846039e-08)
# fdlibm e_log.c's approximation of (log(1 + f) - 2 s + s (f - ...)) / s^2 (Lg1 ... Lg7).
_LG = (6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,
       2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01,
       1.479819860511658591e-01)
# fdlibm s_expm1.c's Q1 ... Q5.
_Q = (-3.33333333333331316428e-02, 1.58730158725481460165e-03, -7.93650757867487942473e-05,
      4.00821782732936239552e-06, -2.01099218183624371326e-07)
# atanh(s) / s = 1 + s^2 / 3 + s^4 / 5 + ...: the series beyond 1, for s^2 <= 0.0295 (the terms
# left off are below 2^-70 of the result).
_ATANH = tuple(1.0 / n for n in range(3, 28, 2))
_SQRT_HALF_M1, _SQRT2_M1 = math.sqrt(0.5) - 1, math.sqrt(2.0) - 1


class _F:
    """Op builders over `op` and `const` (`f64_math`'s conventions)."""

    def __init__(self, op, const):
        self.op, self.const = op, const

    def __call__(self, name: str, *xs: t.Value) -> t.Value:
        return self.op(name, list(xs))

    def add(self, a, b):
        return self("arith.addf", a, b)

    def sub(self, a, b):
        return self("arith.subf", a, b)

    def mul(self, a, b):
        return self("arith.mulf", a, b)

    def div(self, a, b):
        return self("arith.divf", a, b)

    def c(self, v: float) -> t.Value:
        return self.const(v)

    def cmp(self, pred: str, a, b) -> t.Value:
        return self.op("arith.cmpf", [a, b], "i1", {"predicate": pred})

    def where(self, c, a, b) -> t.Value:
        return self.op("arith.select", [c, a, b], a.dtype)

    def nan(self, x) -> t.Value:
        return self.cmp("uno", x, x)

    def clamp(self, x, lo: float, hi: float) -> t.Value:
        """x within [lo, hi]; 0 for NaN (its result is chosen separately; a NaN would reach a
        float-to-int conversion)."""
        x = self.where(self.cmp("ogt", x, self.c(hi)), self.c(hi), x)
        x = self.where(self.cmp("olt", x, self.c(lo)), self.c(lo), x)
        return self.where(self.nan(x), self.c(0.0), x)

    def i(self, name: str, *xs: t.Value) -> t.Value:
        return self.op(name, list(xs), "i64")

    def ic(self, v: int) -> t.Value:
        return self.const(v, "i64")


def _split(f: _F, a: t.Value) -> tuple[t.Value, t.Value]:
    """(hi, lo) with a = hi + lo exactly, hi the upper 26 bits of a's significand (cleared in
    integer arithmetic: no float identity a compiler could fold)."""
    hi = f.op("arith.bitcast", [f.i("arith.andi", f.op("arith.bitcast", [a], "i64"), f.ic(~((1 << 27) - 1)))])
    return hi, f.sub(a, hi)


def _poly(f: _F, z: t.Value, coeffs) -> t.Value:
    r = f.c(coeffs[-1])
    for k in reversed(coeffs[:-1]):
        r = f.add(f.c(k), f.mul(z, r))
    return r


def _log_core(f: _F, g: t.Value, k: t.Value) -> t.Value:
    """log(1 + g) + k ln 2 for g in [sqrt(1/2) - 1, sqrt(2) - 1] (fdlibm's e_log.c)."""
    s = f.div(g, f.add(f.c(2.0), g))
    z = f.mul(s, s)
    w = f.mul(z, z)
    r = f.add(f.mul(z, _poly(f, w, _LG[0::2])), f.mul(w, _poly(f, w, _LG[1::2])))
    hfsq = f.mul(f.mul(f.c(0.5), g), g)
    inner = f.add(f.mul(s, f.add(hfsq, r)), f.mul(k, f.c(_LN2_LO)))
    return f.sub(f.mul(k, f.c(_LN2_HI)), f.sub(f.sub(hfsq, inner), g))


def _log_dd(f: _F, x: t.Value) -> tuple[t.Value, t.Value]:
    """log(x) as (hi, lo) with hi of 26 significant bits, for finite x > 0 (finite garbage for
    other x); hi + lo within about 2^-58 of log x."""
    m, e = f64_math._split(x, f.op, f.const)
    g = f.sub(m, f.c(1.0))                                   # exact (Sterbenz)
    u_hi, _ = _split(f, f.add(f.c(2.0), g))
    u_lo = f.add(f.sub(f.c(2.0), u_hi), g)                   # u_hi + u_lo = 2 + g, both exact
    s = f.div(g, f.add(u_hi, u_lo))
    sh, sl = _split(f, s)
    # g - s (u_hi + u_lo): sh * u_hi and sl * u_hi are exact, each difference exact (Sterbenz).
    rem = f.sub(f.sub(f.sub(g, f.mul(sh, u_hi)), f.mul(sl, u_hi)), f.mul(s, u_lo))
    s_lo = f.div(rem, f.add(u_hi, u_lo))
    z = f.mul(s, s)
    # 2 s^3 (1/3 + s^2/5 + ...), s^3 to first order in s_lo: 2 s^2 (s + 3 s_lo) (...)
    tail = f.mul(f.mul(f.mul(f.c(2.0), z), f.add(s, f.mul(f.c(3.0), s_lo))), _poly(f, z, _ATANH))
    # log x = a + b + rest, a = e ln2_hi (43 bits), b = 2 sh (26 bits): hi is the sum cut to 26
    # bits; a - hi and then + b are exact (their bits fit in 53), so lo = ((a - hi) + b) + rest
    # rounds once, at 2^-53 of |lo| <= 2^-25 |hi|.
    a = f.mul(e, f.c(_LN2_HI))
    b = f.mul(f.c(2.0), sh)
    rest = f.add(f.add(f.mul(f.c(2.0), sl), f.mul(f.c(2.0), s_lo)), f.add(tail, f.mul(e, f.c(_LN2_LO))))
    hi, _ = _split(f, f.add(f.add(a, b), rest))
    return hi, f.add(f.add(f.sub(a, hi), b), rest)


def _exp_dd(f: _F, hi: t.Value, lo: t.Value, n: Optional[t.Value] = None) -> t.Value:
    """exp(hi + lo) * 2^n (n an i64, 0 when None), for hi within [-800, 800] and |lo| small
    (fdlibm's e_exp.c, its k ln 2 taken off hi and lo)."""
    k = f("math.roundeven", f.mul(hi, f.c(_INV_LN2)))
    rh = f.sub(hi, f.mul(k, f.c(_LN2_HI)))                   # exact
    rl = f.sub(f.mul(k, f.c(_LN2_LO)), lo)
    r = f.sub(rh, rl)
    tt = f.mul(r, r)
    c = f.sub(r, f.mul(tt, _poly(f, tt, _P)))
    y = f.sub(f.c(1.0), f.sub(f.sub(rl, f.div(f.mul(r, c), f.sub(f.c(2.0), c))), rh))
    ki = f.op("arith.fptosi", [k], "i64")
    if n is not None:
        ki = f.i("arith.addi", ki, n)
    # 2^ki as two normal powers of two: y * 2^k1 is exact, the second product rounds once.
    ki = f.i("arith.maxsi", f.i("arith.minsi", ki, f.ic(1100)), f.ic(-1200))
    k1 = f.i("arith.shrsi", ki, f.ic(1))
    k2 = f.i("arith.subi", ki, k1)

    def pow2(k: t.Value) -> t.Value:
        return f.op("arith.bitcast", [f.i("arith.shli", f.i("arith.addi", k, f.ic(1023)), f.ic(52))])

    return f.mul(f.mul(y, pow2(k1)), pow2(k2))


def exp(f: _F, x: t.Value) -> t.Value:
    return f.where(f.nan(x), x, _exp_dd(f, f.clamp(x, -800.0, 800.0), f.c(0.0)))


def exp2(f: _F, x: t.Value) -> t.Value:
    xc = f.clamp(x, -1200.0, 1200.0)
    k = f("math.roundeven", xc)
    r = f.sub(xc, k)                                         # exact, within [-1/2, 1/2]
    rh, rl = _split(f, r)
    lh, ll = _split(f, f.c(_LN2))
    h = f.mul(rh, lh)                                        # exact; the rest is small
    l = f.add(f.add(f.mul(rh, ll), f.mul(rl, f.c(_LN2))), f.mul(r, f.c(_LN2_TAIL)))
    return f.where(f.nan(x), x, _exp_dd(f, h, l, f.op("arith.fptosi", [k], "i64")))


def log(f: _F, x: t.Value) -> t.Value:
    m, e = f64_math._split(x, f.op, f.const)
    return f64_math._log_edges(x, _log_core(f, f.sub(m, f.c(1.0)), e), f.op, f.const)


def log1p(f: _F, x: t.Value) -> t.Value:
    inside = f.op("arith.andi", [f.cmp("ogt", x, f.c(_SQRT_HALF_M1)), f.cmp("olt", x, f.c(_SQRT2_M1))], "i1")
    r = f.where(inside, _log_core(f, x, f.c(0.0)), log(f, f.add(f.c(1.0), x)))
    return f.where(f.cmp("oeq", x, f.c(0.0)), x, r)          # keeps -0


def pow(f: _F, x: t.Value, y: t.Value) -> t.Value:
    """x ** y as exp(y log x): NaN for negative x (math.powf's callers add C's other cases)."""
    lh, ll = _log_dd(f, x)
    lh = f64_math._log_edges(x, lh, f.op, f.const)           # -inf, inf, NaN at the edges
    yh, yl = _split(f, y)
    ph = f.mul(yh, lh)                                       # exact: 26 by 26 bits
    pl = f.add(f.mul(yl, lh), f.mul(y, ll))
    p = f.mul(y, lh)                                         # +-inf and NaN where they belong
    inside = f.cmp("olt", f("math.absf", p), f.c(800.0))    # else the result is 0 or inf
    r = _exp_dd(f, f.where(inside, ph, f.clamp(p, -800.0, 800.0)), f.where(inside, pl, f.c(0.0)))
    return f.where(f.nan(p), p, r)


def _expm1_core(f: _F, x: t.Value) -> t.Value:
    """expm1(x) for |x| <= ln 2 / 2 (fdlibm's s_expm1.c with k = 0)."""
    hfx = f.mul(f.c(0.5), x)
    hxs = f.mul(x, hfx)
    r1 = f.add(f.c(1.0), f.mul(hxs, _poly(f, hxs, _Q)))
    tt = f.sub(f.c(3.0), f.mul(r1, hfx))
    e = f.mul(hxs, f.div(f.sub(r1, tt), f.sub(f.c(6.0), f.mul(x, tt))))
    return f.sub(x, f.sub(f.mul(x, e), hxs))


def expm1(f: _F, x: t.Value) -> t.Value:
    a = f("math.absf", x)
    half = _expm1_core(f, f.mul(f.c(0.5), x))
    r = f.where(f.cmp("ole", a, f.c(_LN2)), f.mul(half, f.add(half, f.c(2.0))), f.sub(exp(f, x), f.c(1.0)))
    r = f.where(f.cmp("ole", a, f.c(0.5 * _LN2)), _expm1_core(f, x), r)
    return f.where(f.cmp("oeq", x, f.c(0.0)), x, r)          # keeps -0


def _big_exp(f: _F, a: t.Value) -> t.Value:
    """exp(a) / 2 for a up to 710.5 (exp(a) alone overflows above 709.78)."""
    w = exp(f, f.mul(f.c(0.5), a))
    return f.mul(f.mul(f.c(0.5), w), w)


def sinh(f: _F, x: t.Value) -> t.Value:
    a = f("math.absf", x)
    e = expm1(f, a)
    q = f.div(e, f.add(e, f.c(1.0)))
    small = f.mul(f.c(0.5), f.sub(f.mul(f.c(2.0), e), f.mul(e, q)))   # a < 1
    mid = f.mul(f.c(0.5), f.add(e, q))                                  # a < 22
    r = f.where(f.cmp("olt", a, f.c(709.0)), f.mul(f.c(0.5), exp(f, a)), _big_exp(f, a))
    r = f.where(f.cmp("olt", a, f.c(22.0)), mid, r)
    r = f.where(f.cmp("olt", a, f.c(1.0)), small, r)
    return f("math.copysign", r, x)


def cosh(f: _F, x: t.Value) -> t.Value:
    a = f("math.absf", x)
    e = expm1(f, a)
    w = f.add(f.c(1.0), e)
    small = f.add(f.c(1.0), f.div(f.mul(e, e), f.add(w, w)))           # a < ln2 / 2
    ea = exp(f, a)
    mid = f.add(f.mul(f.c(0.5), ea), f.div(f.c(0.5), ea))               # a < 22
    r = f.where(f.cmp("olt", a, f.c(709.0)), f.mul(f.c(0.5), ea), _big_exp(f, a))
    r = f.where(f.cmp("olt", a, f.c(22.0)), mid, r)
    return f.where(f.cmp("olt", a, f.c(0.5 * _LN2)), small, r)


def asinh(f: _F, x: t.Value) -> t.Value:
    a = f("math.absf", x)
    one = f.c(1.0)
    big = f.add(log(f, a), f.c(_LN2))                                   # a > 2^28
    mid = log(f, f.add(f.mul(f.c(2.0), a), f.div(one, f.add(f("math.sqrt", f.add(f.mul(a, a), one)), a))))
    t2 = f.mul(a, a)
    small = log1p(f, f.add(a, f.div(t2, f.add(one, f("math.sqrt", f.add(one, t2))))))
    r = f.where(f.cmp("ogt", a, f.c(2.0 ** 28)), big, f.where(f.cmp("ogt", a, f.c(2.0)), mid, small))
    return f("math.copysign", r, x)


def acosh(f: _F, x: t.Value) -> t.Value:
    one = f.c(1.0)
    big = f.add(log(f, x), f.c(_LN2))                                   # x >= 2^28
    mid = log(f, f.sub(f.mul(f.c(2.0), x), f.div(one, f.add(x, f("math.sqrt", f.sub(f.mul(x, x), one))))))
    tt = f.sub(x, one)
    small = log1p(f, f.add(tt, f("math.sqrt", f.add(f.mul(f.c(2.0), tt), f.mul(tt, tt)))))
    r = f.where(f.cmp("oge", x, f.c(2.0 ** 28)), big, f.where(f.cmp("ogt", x, f.c(2.0)), mid, small))
    return f.where(f.cmp("olt", x, one), f.c(float("nan")), r)


def atanh(f: _F, x: t.Value) -> t.Value:
    a = f("math.absf", x)
    one, half = f.c(1.0), f.c(0.5)
    a2 = f.add(a, a)
    small = f.mul(half, log1p(f, f.add(a2, f.div(f.mul(a2, a), f.sub(one, a)))))   # a < 1/2
    large = f.mul(half, log1p(f, f.div(a2, f.sub(one, a))))
    r = f.where(f.cmp("olt", a, half), small, large)
    r = f.where(f.cmp("ogt", a, one), f.c(float("nan")), r)
    return f("math.copysign", r, x)


_UNARY = {"math.exp": exp, "math.exp2": exp2, "math.expm1": expm1, "math.log": log, "math.log1p": log1p,
          "math.sinh": sinh, "math.cosh": cosh, "math.asinh": asinh, "math.acosh": acosh, "math.atanh": atanh}


def expand(opname: str, args: list[t.Value], loc: str, emit: Callable[[t.Op], t.Value]) -> Optional[t.Value]:
    """`opname` on f64 `args` as inline f64 and i64 ops added by `emit`; None where `opname` is
    not one of FUNCTIONS or not on f64."""
    if opname not in FUNCTIONS or not args or args[0].dtype != "f64":
        return None
    x = args[0]
    f = _F(*f64_math.builders(x, loc, emit))
    if opname == "math.powf":
        return pow(f, x, args[1])
    return _UNARY[opname](f, x)


def expand_kernel(kernel: t.Kernel) -> None:
    """Every f64 op of FUNCTIONS in `kernel` (in any block) replaced by its inline expansion, as
    ops of the op's own shape. On the SPIR-V targets the lowering computes a value that one
    linalg op alone reads in that op's body (`ModuleEmitter._is_leaf`), so a tile's expansion is
    part of the one linalg op that reads its result, its intermediate values scalars. (As the
    body of a `t.MapElementwise` of its own, the expansion's argument and result were tiles
    beside those of the expressions around it: f64 tanh and erf of 1024 elements took 40 and 49
    KiB of workgroup memory, more than lavapipe's 32 KiB.)"""
    t.expand_elementwise(kernel, lambda o, emit: expand(o.opname, o.args, o.loc, emit)
                         if o.opname in FUNCTIONS and o.result.dtype == "f64" else None)
