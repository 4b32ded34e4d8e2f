"""fp64 math that IREE's llvm-cpu code would take from the C math library, which its executables
cannot link (NO_LIBM_F64 in targets/cpu.py lists it), written with the f64 and i64 ops
it lowers inline (log, exp, sqrt, bit casts, integer and float arithmetic), for every op of that
list; each within 1 to 3 ulp of numpy's results, measured over its whole range (fmod exact):

- log2, log10: x = m * 2^e with m in [sqrt(1/2), sqrt(2)) (from the bits; subnormals scaled
  first), then e + log(m) / ln 2 and e * log10(2) + log(m) / ln 10: exact at powers of two (log2),
  and no cancellation near x = 1, log(m) / ln 10 as a double-double product (1 ulp each; log10
  of the correctly rounded value: numpy's own log10 is up to 1.5 ulp off on some CPUs);
- tanh: t / (t + 2) with t = expm1(2 |x|), 1 beyond |x| = 22, the sign of x (3 ulp);
- cbrt: exp(log|x| / 3) and one Newton step, on |x| scaled into the normal range (3 ulp);
- atan: fdlibm's reduction (to |x| < 7/16 around atan(1/2), atan(1), atan(3/2), pi/2) and odd
  polynomial; asin(x) = atan(x / sqrt((1 - x)(1 + x))), acos(x) = 2 atan(sqrt((1 - x) / (1 + x)))
  (1, 2 and 2 ulp);
- atan2: the quotient |y| / |x| from the significands and exponents, scaled in the bits (so
  subnormal arguments and quotients are right), atan of it with fdlibm's quadrant handling
  (pi - (z - pi_lo) for x < 0; pi/2 beyond 2^60) (1 ulp);
- erf: fdlibm's intervals and rational approximations (1 - erfc from 1.25 on, 1 from 6 on), tiny
  arguments on their significand, scaled back in the bits (1 ulp of the C library's erf);
- fmod (arith.remf, Python's % on floats): exact, by long division of the integer significands,
  53 bits of the exponent difference per step (see _fmod); bit for bit numpy's;
- sin, cos, tan: f64_trig.py (Cody-Waite reduction below 2^20, Payne-Hanek in i64 arithmetic
  above, fdlibm's kernels; 1 ulp).

C's results at the edges: log2 / log10 of 0 is -inf, of negative numbers and NaN NaN, of inf inf;
tanh(+-inf) = +-1, erf(+-inf) = +-1, and both keep -0; cbrt keeps 0, -0, +-inf and NaN; atan2
gives C's signed zeros, +-pi, +-pi/2, +-pi/4 and +-3pi/4 for zero and infinite arguments; fmod is
NaN for x infinite or y zero, x for y infinite; NaN gives NaN throughout.

IREE's CPU code flushes subnormal f64 operands and results of arithmetic and comparisons to zero:
subnormal arguments are read from their bits, and subnormal results built in the bits.
"""
from __future__ import annotations

import math
from typing import Callable, Optional

from . import f64_trig, tile as t

FUNCTIONS = ("math.log2", "math.log10", "math.tanh", "math.cbrt", "math.atan", "math.asin", "math.acos",
             "arith.remf", "math.atan2", "math.erf") + f64_trig.FUNCTIONS


def expand(opname: str, args: list[t.Value], loc: str, emit: Callable[[t.Op], t.Value]) -> Optional[t.Value]:
    """`opname` on f64 `args` as inline f64 ops added by `emit`, or None when there is no such
    expansion (the op is not on the list, or not on f64)."""
    if opname not in FUNCTIONS or not args or args[0].dtype != "f64":
        return None
    x = args[0]
    op, const = builders(x, loc, emit)
    if opname in f64_trig.FUNCTIONS:
        return f64_trig.expand(opname, x, op, const)
    if opname == "arith.remf":
        return _fmod(x, args[1], op, const)
    if opname == "math.atan2":
        return _atan2(x, args[1], op, const)
    return {"math.erf": _erf, "math.log2": _log2, "math.log10": _log10, "math.tanh": _tanh, "math.cbrt": _cbrt,
            "math.atan": _atan, "math.asin": _asin, "math.acos": _acos}[opname](x, op, const)


def builders(like: t.Value, loc: str, emit: Callable[[t.Op], t.Value]):
    """(op, const): an elementwise op of `like`'s shape (``op(name, operands, dtype="f64",
    attrs=None)``) and a constant of that shape (``const(value, dtype="f64")``), each added by
    `emit` at `loc`; the expansions here, in f64_trig, f64_exp_log and f32_trig build on them."""
    def op(name: str, xs: list[t.Value], dtype: str = "f64", attrs: dict | None = None) -> t.Value:
        return emit(t.Elementwise(name, xs, t.with_dtype(like.type, dtype), attrs, loc))

    def const(value, dtype: str = "f64") -> t.Value:
        return emit(t.Constant(value, t.with_dtype(like.type, dtype), loc))
    return op, const


def _int_ops(op, const):
    """i64 helpers over `op` and `const`: (an i64 op of its operands, an i64 constant, an
    integer comparison)."""
    return (lambda name, *xs: op(name, list(xs), "i64"), lambda v: const(v, "i64"),
            lambda pred, a, b: op("arith.cmpi", [a, b], "i1", {"predicate": pred}))


def _cmp(op, pred: str, a: t.Value, b: t.Value) -> t.Value:
    return op("arith.cmpf", [a, b], "i1", {"predicate": pred})


def _where(op, c: t.Value, a: t.Value, b: t.Value) -> t.Value:
    return op("arith.select", [c, a, b], a.dtype)


def _bits(x: t.Value, op, const) -> tuple[t.Value, t.Value, t.Value]:
    """(|x|'s bits as i64, |x| is 0, |x| is subnormal), from the bits: IREE's CPU code flushes
    subnormal f64 operands of arithmetic and comparisons to zero."""
    bits = op("arith.andi", [op("arith.bitcast", [x], "i64"), const((1 << 63) - 1, "i64")], "i64")
    zero = op("arith.cmpi", [bits, const(0, "i64")], "i1", {"predicate": "eq"})
    sub = op("arith.cmpi", [bits, const(1 << 52, "i64")], "i1", {"predicate": "slt"})
    return bits, zero, sub


def _split(x: t.Value, op, const) -> tuple[t.Value, t.Value]:
    """(m, e) with x = m * 2^e and m in [sqrt(1/2), sqrt(2)), e an f64 integer, for finite x > 0
    (anything for other x). A subnormal x is its bits (an integer, exact as f64) times 2^-1074."""
    bits, _, sub = _bits(x, op, const)
    xs = _where(op, sub, op("arith.sitofp", [bits]), x)
    bits = op("arith.bitcast", [xs], "i64")
    biased = op("arith.andi", [op("arith.shrui", [bits, const(52, "i64")], "i64"), const(0x7FF, "i64")], "i64")
    mbits = op("arith.ori", [op("arith.andi", [bits, const((1 << 52) - 1, "i64")], "i64"),
                             const(0x3FF << 52, "i64")], "i64")
    m = op("arith.bitcast", [mbits])                  # in [1, 2)
    big = _cmp(op, "oge", m, const(math.sqrt(2.0)))
    m = _where(op, big, op("arith.mulf", [m, const(0.5)]), m)
    e = op("arith.sitofp", [op("arith.subi", [biased, const(1023, "i64")], "i64")])
    e = op("arith.addf", [e, _where(op, big, const(1.0), const(0.0))])
    return m, op("arith.subf", [e, _where(op, sub, const(1074.0), const(0.0))])


def _log_edges(x: t.Value, r: t.Value, op, const) -> t.Value:
    """C's log2 / log10 at +-0 (-inf), +inf (inf), negative numbers and NaN (NaN)."""
    _, zero, _ = _bits(x, op, const)
    # Negative: the sign bit (a negative subnormal compares equal to zero here).
    negative = op("arith.cmpi", [op("arith.bitcast", [x], "i64"), const(0, "i64")], "i1", {"predicate": "slt"})
    r = _where(op, _cmp(op, "oeq", x, const(float("inf"))), const(float("inf")), r)
    r = _where(op, op("arith.ori", [negative, _cmp(op, "uno", x, x)], "i1"), const(float("nan")), r)
    return _where(op, zero, const(float("-inf")), r)


def _log2(x: t.Value, op, const) -> t.Value:
    m, e = _split(x, op, const)
    r = op("arith.addf", [e, op("arith.mulf", [op("math.log", [m]), const(1 / math.log(2))])])
    return _log_edges(x, r, op, const)


def _log10(x: t.Value, op, const) -> t.Value:
    m, e = _split(x, op, const)
    # log10(2) as hi + lo: e * hi is exact (hi has 32 significant bits, |e| < 2^11).
    hi = float.fromhex("0x1.34413509f8p-2")
    lo = math.log10(2) - hi
    # log(m) / ln 10 as l * (c_hi + c_lo), with l * c_hi = p + err exactly (Dekker's product):
    # rounding the constant and the product cost up to 2.6 ulp (x = 0.869...).
    c_hi = 0.4342944819032518            # 1 / ln 10, rounded to nearest
    c_lo = 1.098319650216765e-17         # 1 / ln 10 - c_hi
    b = f64_trig._B(op, const)
    l = op("math.log", [m])
    p, err = b.two_product(l, const(c_hi))
    tail = b.add(b.add(b.mul(e, const(lo)), b.mul(l, const(c_lo))), err)
    r = b.add(b.add(b.mul(e, const(hi)), p), tail)
    return _log_edges(x, r, op, const)


def _expm1(y: t.Value, op, const) -> t.Value:
    """e^y - 1 for y >= 0, within a few ulp (Kahan: (u - 1) * y / log(u) with u = e^y). IREE's
    own f64 expm1 loses most digits for small y."""
    u = op("math.exp", [y])
    um1 = op("arith.subf", [u, const(1.0)])
    r = op("arith.divf", [op("arith.mulf", [um1, y]), op("math.log", [u])])
    r = _where(op, _cmp(op, "oeq", u, const(float("inf"))), u, r)
    return _where(op, _cmp(op, "oeq", u, const(1.0)), y, r)


def _tanh(x: t.Value, op, const) -> t.Value:
    a = op("math.absf", [x])
    tt = _expm1(op("arith.mulf", [a, const(2.0)]), op, const)
    r = op("arith.divf", [tt, op("arith.addf", [tt, const(2.0)])])
    r = _where(op, _cmp(op, "oge", a, const(22.0)), const(1.0), r)
    r = op("math.copysign", [r, x])
    # Below 2^-28, tanh(x) = x - x^3 / 3 rounds to x (subnormals included, which arithmetic here
    # would flush to zero).
    _, _, sub = _bits(x, op, const)
    tiny = op("arith.ori", [sub, _cmp(op, "olt", a, const(2.0 ** -28))], "i1")
    return _where(op, tiny, x, r)


def _cbrt(x: t.Value, op, const) -> t.Value:
    """|x| = s * 2^(3q) with s in [1, 8) (from the bits; a subnormal |x| is its bits, an exact
    integer, times 2^-1074); cbrt(s) = exp(log(s) / 3) and one Newton step; times 2^q."""
    bits, zero, sub = _bits(x, op, const)
    a = op("math.absf", [x])

    def i64(name, xs):
        return op(name, xs, "i64")
    xs = _where(op, sub, op("arith.sitofp", [bits]), a)
    b = op("arith.bitcast", [xs], "i64")
    e = i64("arith.subi", [i64("arith.andi", [i64("arith.shrui", [b, const(52, "i64")]), const(0x7FF, "i64")]),
                           const(1023, "i64")])
    e = _where(op, sub, i64("arith.subi", [e, const(1074, "i64")]), e)
    # q = floor(e / 3) as ((e + 1200) * 43691 >> 17) - 400, exact for e + 1200 in [0, 2^17): e is
    # in [-1074, 1024] but for 0, whose result is set apart below. LLVM's NVPTX backend crashed
    # selecting the i16 multiply-high that a division by 3 becomes ('Cannot select: smul_lohi').
    q = i64("arith.subi", [i64("arith.shrsi", [i64("arith.muli", [i64("arith.addi", [e, const(1200, "i64")]),
                                                                  const(43691, "i64")]), const(17, "i64")]),
                           const(400, "i64")])
    r = i64("arith.subi", [e, i64("arith.muli", [q, const(3, "i64")])])      # 0, 1 or 2
    # s = m * 2^r: the mantissa with r as its exponent.
    s = op("arith.bitcast", [i64("arith.ori", [i64("arith.andi", [b, const((1 << 52) - 1, "i64")]),
                                               i64("arith.shli", [i64("arith.addi", [r, const(1023, "i64")]),
                                                                  const(52, "i64")])])])
    y = op("math.exp", [op("arith.mulf", [op("math.log", [s]), const(1 / 3)])])
    # One Newton step for y^3 = s: y - (y^3 - s) / (3 y^2).
    y2 = op("arith.mulf", [y, y])
    num = op("arith.subf", [op("arith.mulf", [y2, y]), s])
    y = op("arith.subf", [y, op("arith.divf", [num, op("arith.mulf", [y2, const(3.0)])])])
    # 2^q is a normal number: q is in [-358, 341].
    scale = op("arith.bitcast", [i64("arith.shli", [i64("arith.addi", [q, const(1023, "i64")]), const(52, "i64")])])
    res = op("arith.mulf", [y, scale])
    # 0, inf and NaN are their own cube roots.
    keep = op("arith.ori", [zero, op("arith.ori", [_cmp(op, "oeq", a, const(float("inf"))), _cmp(op, "uno", a, a)],
                                     "i1")], "i1")
    return op("math.copysign", [_where(op, keep, a, res), x])


# atan: fdlibm's (s_atan.c) reduction to |x| < 7/16 around atan(1/2), atan(1), atan(3/2), atan(inf),
# and its odd polynomial.
_AT = (3.33333333333329318027e-01, -1.99999999998764832476e-01, 1.42857142725034663711e-01,
       -1.11111104054623557880e-01, 9.09088713343650656196e-02, -7.69187620504482999495e-02,
       6.66107313738753120669e-02, -5.83357013379057348645e-02, 4.97687799461593236017e-02,
       -3.65315727442169155270e-02, 1.62858201153657823623e-02)
_ATAN_HI = (4.63647609000806093515e-01, 7.85398163397448278999e-01, 9.82793723247329054082e-01,
            1.57079632679489655800e+00)
_ATAN_LO = (2.26987774529616870924e-17, 3.06161699786838301793e-17, 1.39033110312309984516e-17,
            6.12323399573676603587e-17)


def _atan(x: t.Value, op, const) -> t.Value:
    a = op("math.absf", [x])

    def f(name, *xs):
        return op(name, list(xs))
    one, two = const(1.0), const(2.0)
    # The reduced argument for each interval of |x|, and which interval.
    r0 = f("arith.divf", f("arith.subf", f("arith.mulf", two, a), one), f("arith.addf", two, a))
    r1 = f("arith.divf", f("arith.subf", a, one), f("arith.addf", a, one))
    r2 = f("arith.divf", f("arith.subf", a, const(1.5)), f("arith.addf", one, f("arith.mulf", const(1.5), a)))
    r3 = f("arith.divf", const(-1.0), a)
    lt = [_cmp(op, "olt", a, const(b)) for b in (0.4375, 0.6875, 1.1875, 2.4375)]
    r = _where(op, lt[0], a, _where(op, lt[1], r0, _where(op, lt[2], r1, _where(op, lt[3], r2, r3))))
    hi = _where(op, lt[1], const(_ATAN_HI[0]), _where(op, lt[2], const(_ATAN_HI[1]),
                                                      _where(op, lt[3], const(_ATAN_HI[2]), const(_ATAN_HI[3]))))
    lo = _where(op, lt[1], const(_ATAN_LO[0]), _where(op, lt[2], const(_ATAN_LO[1]),
                                                      _where(op, lt[3], const(_ATAN_LO[2]), const(_ATAN_LO[3]))))
    z = f("arith.mulf", r, r)
    w = f("arith.mulf", z, z)

    def poly(coefs):
        acc = const(coefs[-1])
        for c in reversed(coefs[:-1]):
            acc = f("arith.addf", const(c), f("arith.mulf", w, acc))
        return acc
    s1 = f("arith.mulf", z, poly(_AT[0::2]))
    s2 = f("arith.mulf", w, poly(_AT[1::2]))
    xs = f("arith.mulf", r, f("arith.addf", s1, s2))
    small = f("arith.subf", r, xs)                                                  # |x| < 7/16
    big = f("arith.subf", hi, f("arith.subf", f("arith.subf", xs, lo), r))
    res = _where(op, lt[0], small, big)
    res = _where(op, _cmp(op, "oge", a, const(2.0 ** 66)), const(_ATAN_HI[3] + _ATAN_LO[3]), res)
    res = op("math.copysign", [res, x])
    # Below 2^-27 (subnormals included) atan(x) rounds to x; NaN stays NaN.
    _, _, sub = _bits(x, op, const)
    keep = op("arith.ori", [op("arith.ori", [sub, _cmp(op, "olt", a, const(2.0 ** -27))], "i1"), _cmp(op, "uno", x, x)],
              "i1")
    return _where(op, keep, x, res)


def _asin(x: t.Value, op, const) -> t.Value:
    """atan(x / sqrt((1 - x)(1 + x))): 1 - x and 1 + x are exact where they cancel; x = +-1
    gives atan(+-inf) = +-pi/2, |x| > 1 NaN."""
    d = op("math.sqrt", [op("arith.mulf", [op("arith.subf", [const(1.0), x]), op("arith.addf", [const(1.0), x])])])
    r = _atan(op("arith.divf", [x, d]), op, const)
    # Below 2^-27 (subnormals included) asin(x) rounds to x.
    _, _, sub = _bits(x, op, const)
    return _where(op, op("arith.ori", [sub, _cmp(op, "olt", op("math.absf", [x]), const(2.0 ** -27))], "i1"), x, r)


def _acos(x: t.Value, op, const) -> t.Value:
    """2 atan(sqrt((1 - x) / (1 + x))): acos(-1) = 2 atan(inf) = pi, |x| > 1 NaN."""
    q = op("arith.divf", [op("arith.subf", [const(1.0), x]), op("arith.addf", [const(1.0), x])])
    return op("arith.mulf", [const(2.0), _atan(op("math.sqrt", [q]), op, const)])


def _significand(bits: t.Value, op, const) -> tuple[t.Value, t.Value]:
    """(m, e) with |x| = m 2^e, m an i64 in [2^52, 2^53), for the bits of a finite |x| > 0. A
    subnormal |x| is its bits converted to f64 (an exact integer), then split the same way."""
    def i64(name, *xs):
        return op(name, list(xs), "i64")
    sub = op("arith.cmpi", [bits, const(1 << 52, "i64")], "i1", {"predicate": "slt"})
    b = _where(op, sub, op("arith.bitcast", [op("arith.sitofp", [bits])], "i64"), bits)
    m = i64("arith.ori", i64("arith.andi", b, const((1 << 52) - 1, "i64")), const(1 << 52, "i64"))
    e = i64("arith.subi", i64("arith.shrui", b, const(52, "i64")), const(1075, "i64"))
    return m, _where(op, sub, i64("arith.subi", e, const(1074, "i64")), e)


def _fmod(x: t.Value, y: t.Value, op, const) -> t.Value:
    """Exact: |x| = mx 2^ex, |y| = my 2^ey with integer significands mx, my in [2^52, 2^53);
    fmod(|x|, |y|) = (mx 2^(ex - ey) mod my) 2^ey, computed as r = mx mod my and then
    r = (r 2^k) mod my for k = 53 bits of ex - ey at a time (at most 40 steps for any pair of
    doubles): q = trunc(r 2^k / my) in f64 is the true quotient or one more (the rounded quotient
    is below 2^53, where rounding keeps integers in order), so r 2^k - q my, computed in wrapping
    i64 arithmetic, is the exact remainder or that minus my, which adding my back fixes. The
    result is built from r and ey in the bits (it may be subnormal, which arithmetic here would
    flush to zero), with the sign of x."""
    i64, ci, cmpi = _int_ops(op, const)
    mask = ci((1 << 63) - 1)
    xb, yb = op("arith.bitcast", [x], "i64"), op("arith.bitcast", [y], "i64")
    ax, ay = i64("arith.andi", xb, mask), i64("arith.andi", yb, mask)
    finite = ci(0x7FF << 52)
    # Arguments the loop never sees: (x or y) NaN, x infinite, y zero or infinite, x zero.
    xs = _where(op, cmpi("slt", ax, finite), ax, ci(1 << 52))
    ys = _where(op, op("arith.andi", [cmpi("slt", ay, finite), cmpi("ne", ay, ci(0))], "i1"), ay, ci(1 << 52))
    xs = _where(op, cmpi("eq", xs, ci(0)), ci(1 << 52), xs)
    mx, ex = _significand(xs, op, const)
    my, ey = _significand(ys, op, const)
    d = i64("arith.subi", ex, ey)
    yf = op("arith.sitofp", [my])
    r = _where(op, cmpi("sge", mx, my), i64("arith.subi", mx, my), mx)
    for step in range(40):
        k = i64("arith.minsi", i64("arith.maxsi", i64("arith.subi", d, ci(53 * step)), ci(0)), ci(53))
        scale = op("arith.bitcast", [i64("arith.shli", i64("arith.addi", k, ci(1023)), ci(52))])    # 2^k
        q = op("arith.fptosi", [op("arith.divf", [op("arith.mulf", [op("arith.sitofp", [r]), scale]), yf])], "i64")
        r = i64("arith.subi", i64("arith.shli", r, k), i64("arith.muli", q, my))
        r = _where(op, cmpi("slt", r, ci(0)), i64("arith.addi", r, my), r)
    # r 2^ey as bits: normal where its exponent is at least -1022, else r shifted to 2^-1074 units.
    rb = op("arith.bitcast", [op("arith.sitofp", [r])], "i64")
    p = i64("arith.subi", i64("arith.shrui", rb, ci(52)), ci(1023))
    big_e = i64("arith.addi", p, ey)
    normal = i64("arith.ori", i64("arith.andi", rb, ci((1 << 52) - 1)),
                 i64("arith.shli", i64("arith.addi", big_e, ci(1023)), ci(52)))
    u = i64("arith.addi", ey, ci(1074))
    zero = ci(0)
    c63 = ci(63)      # (shift amounts kept below 64 where this value is not used)
    subnormal = i64("arith.shrui", i64("arith.shli", r, i64("arith.minsi", i64("arith.maxsi", u, zero), c63)),
                    i64("arith.minsi", i64("arith.maxsi", i64("arith.subi", zero, u), zero), c63))
    res = _where(op, cmpi("sge", big_e, ci(-1022)), normal, subnormal)
    res = _where(op, cmpi("eq", r, zero), zero, res)
    # |x| < |y| (also y infinite, x zero): x itself.
    res = _where(op, op("arith.ori", [cmpi("slt", d, zero), cmpi("slt", ax, ay)], "i1"), ax, res)
    res = op("arith.bitcast", [i64("arith.ori", res, i64("arith.andi", xb, ci(-(1 << 63))))])
    nan = op("arith.ori", [op("arith.ori", [cmpi("sge", ax, finite), cmpi("eq", ay, zero)], "i1"),
                           cmpi("sgt", ay, finite)], "i1")
    return _where(op, nan, const(float("nan")), res)


def _ldexp(v: t.Value, e: t.Value, op, const) -> t.Value:
    """v 2^e for a positive normal f64 v and an i64 e, in the bits: inf above the range, and a
    subnormal result rounded to nearest even from v (arithmetic here would flush it to zero)."""
    i64, ci, cmpi = _int_ops(op, const)
    vb = op("arith.bitcast", [v], "i64")
    biased = i64("arith.addi", i64("arith.shrui", vb, ci(52)), e)
    normal = i64("arith.addi", vb, i64("arith.shli", e, ci(52)))
    m = i64("arith.ori", i64("arith.andi", vb, ci((1 << 52) - 1)), ci(1 << 52))
    s = i64("arith.minsi", i64("arith.subi", ci(1), biased), ci(60))     # >= 1 where used
    s = i64("arith.maxsi", s, ci(1))
    q = i64("arith.shrui", m, s)
    rem = i64("arith.andi", m, i64("arith.subi", i64("arith.shli", ci(1), s), ci(1)))
    half = i64("arith.shli", ci(1), i64("arith.subi", s, ci(1)))
    up = op("arith.ori", [cmpi("sgt", rem, half),
                          op("arith.andi", [cmpi("eq", rem, half), cmpi("ne", i64("arith.andi", q, ci(1)), ci(0))],
                             "i1")], "i1")
    sub = i64("arith.addi", q, _where(op, up, ci(1), ci(0)))
    r = _where(op, cmpi("sge", biased, ci(1)), normal, sub)
    r = _where(op, cmpi("sge", biased, ci(2047)), ci(0x7FF << 52), r)
    return op("arith.bitcast", [r])


def _atan2(y: t.Value, x: t.Value, op, const) -> t.Value:
    """|y| / |x| = (my / mx) 2^e from the significands in [1, 2) and exponents (subnormals
    normalized from their bits), scaled in the bits (_ldexp: the quotient may be subnormal), then
    atan of it; x < 0 gives pi - (z - pi_lo), and the sign of y. C's cases for zeros (by their
    signs), infinities and NaN are selected at the end."""
    i64, ci, cmpi = _int_ops(op, const)
    mask, inf_bits = ci((1 << 63) - 1), ci(0x7FF << 52)
    yb, xb = op("arith.bitcast", [y], "i64"), op("arith.bitcast", [x], "i64")
    ay, ax = i64("arith.andi", yb, mask), i64("arith.andi", xb, mask)
    one_bits = ci(1023 << 52)
    # Zero, infinite and NaN arguments: 1 in the quotient (their results are selected below).
    ordinary = [op("arith.andi", [cmpi("ne", b, ci(0)), cmpi("slt", b, inf_bits)], "i1") for b in (ay, ax)]
    my, ey = _significand(_where(op, ordinary[0], ay, one_bits), op, const)
    mx, ex = _significand(_where(op, ordinary[1], ax, one_bits), op, const)
    q = op("arith.divf", [op("arith.sitofp", [my]), op("arith.sitofp", [mx])])       # in (1/2, 2)
    ratio = _ldexp(q, i64("arith.subi", ey, ex), op, const)
    z = _atan(ratio, op, const)
    pi, pi_lo = const(math.pi), const(1.2246467991473532e-16)
    x_neg = cmpi("slt", xb, ci(0))
    r = _where(op, x_neg, op("arith.subf", [pi, op("arith.subf", [z, pi_lo])]), z)
    # Beyond 2^60, pi/2 for either sign of x (pi - z would round it up).
    r = _where(op, _cmp(op, "oge", ratio, const(2.0 ** 60)), const(math.pi / 2), r)
    # Special cases (on |y|; the sign of y is applied last).
    y_zero, x_zero = cmpi("eq", ay, ci(0)), cmpi("eq", ax, ci(0))
    y_inf, x_inf = cmpi("eq", ay, inf_bits), cmpi("eq", ax, inf_bits)
    half_pi = const(math.pi / 2)
    r = _where(op, x_inf, _where(op, x_neg, pi, const(0.0)), r)
    r = _where(op, y_inf, _where(op, x_inf, _where(op, x_neg, const(3 * math.pi / 4), const(math.pi / 4)), half_pi),
               r)
    r = _where(op, x_zero, half_pi, r)
    r = _where(op, y_zero, _where(op, x_neg, pi, const(0.0)), r)
    r = op("math.copysign", [r, y])
    nan = op("arith.ori", [cmpi("sgt", ay, inf_bits), cmpi("sgt", ax, inf_bits)], "i1")
    return _where(op, nan, const(float("nan")), r)


# erf: fdlibm's (s_erf.c) intervals and rational approximations.
_ERX = 8.45062911510467529297e-01                   # erf(1) to 32 bits
_EFX = 1.28379167095512586316e-01                   # 2 / sqrt(pi) - 1
_ERF_PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
           -5.77027029648944159157e-03, -2.37630166566501626084e-05)
_ERF_QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
           1.32494738004321644526e-04, -3.96022827877536812320e-06)
_ERF_PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
           3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
           -2.16637559486879084300e-03)
_ERF_QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
           1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02)
_ERF_RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
           -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
           -8.12874355063065934246e+01, -9.81432934416914548592e+00)
_ERF_SA = (1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
           6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
           6.57024977031928170135e+00, -6.04244152148580987438e-02)
_ERF_RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
           -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
           -4.83519191608651397019e+02)
_ERF_SB = (1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
           3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
           -2.24409524465858183362e+01)


def _erf(x: t.Value, op, const) -> t.Value:
    """fdlibm's erf on |x|, with the sign of x:
    - below 2^-28: |x| + efx |x| (on the significand, scaled back in the bits: it may be subnormal);
    - below 0.84375: |x| + |x| P(x^2) / Q(x^2);
    - below 1.25: erx + P(s) / Q(s), s = |x| - 1 (erf(1) = erx + its correction);
    - below 6: 1 - erfc, erfc(|x|) = exp(-z^2 - 0.5625) exp((z - |x|)(z + |x|) + R(1/x^2) / S(1/x^2)) / |x|
      with z = |x| cut to its high 32 bits (z^2 exact), R / S fitted below and above 1 / 0.35;
    - from 6 on (inf included): 1."""
    def f(name, *xs):
        return op(name, list(xs))

    def poly(v, coefs):
        acc = const(coefs[-1])
        for c in reversed(coefs[:-1]):
            acc = f("arith.addf", const(c), f("arith.mulf", v, acc))
        return acc
    bits, zero, sub = _bits(x, op, const)
    a = op("arith.bitcast", [bits])
    z2 = f("arith.mulf", a, a)
    small = f("arith.addf", a, f("arith.mulf", a, f("arith.divf", poly(z2, _ERF_PP), poly(z2, _ERF_QQ))))
    s = f("arith.subf", a, const(1.0))
    near1 = f("arith.addf", const(_ERX), f("arith.divf", poly(s, _ERF_PA), poly(s, _ERF_QA)))
    am = _where(op, _cmp(op, "olt", a, const(1.25)), const(1.25), a)       # the tail's argument, in [1.25, 6]
    am = _where(op, _cmp(op, "ogt", am, const(6.0)), const(6.0), am)
    w = f("arith.divf", const(1.0), f("arith.mulf", am, am))
    lo_tail = _cmp(op, "olt", am, const(1 / 0.35))
    ratio = _where(op, lo_tail, f("arith.divf", poly(w, _ERF_RA), poly(w, _ERF_SA)),
                   f("arith.divf", poly(w, _ERF_RB), poly(w, _ERF_SB)))
    zc = op("arith.bitcast", [op("arith.andi", [op("arith.bitcast", [am], "i64"), const(-(1 << 32), "i64")], "i64")])
    e1 = f("math.exp", f("arith.subf", f("arith.negf", f("arith.mulf", zc, zc)), const(0.5625)))
    e2 = f("math.exp", f("arith.addf", f("arith.mulf", f("arith.subf", zc, am), f("arith.addf", zc, am)), ratio))
    tail = f("arith.subf", const(1.0), f("arith.divf", f("arith.mulf", e1, e2), am))
    r = _where(op, _cmp(op, "olt", a, const(0.84375)), small,
               _where(op, _cmp(op, "olt", a, const(1.25)), near1,
                      _where(op, _cmp(op, "olt", a, const(6.0)), tail, const(1.0))))
    # Below 2^-28: (m + efx m) 2^e for |x| = m 2^e, m the integer significand.
    m, e = _significand(_where(op, zero, const(1 << 52, "i64"), bits), op, const)
    mf = op("arith.sitofp", [m])
    tiny = _ldexp(f("arith.addf", mf, f("arith.mulf", const(_EFX), mf)), e, op, const)
    r = _where(op, op("arith.cmpi", [bits, const((1023 - 28) << 52, "i64")], "i1", {"predicate": "slt"}), tiny, r)
    r = _where(op, zero, const(0.0), r)
    r = op("math.copysign", [r, x])
    return _where(op, _cmp(op, "uno", x, x), x, r)
