"""fp64 sin, cos and tan without the C math library (see f64_math.py), over the whole f64 range.

The argument is reduced on |x| to r = y0 + y1 (a double-double, |r| <= about pi/4) and n, with
|x| = n pi/2 + r:

- |x| < 2^20: Cody-Waite. n = round(|x| 2/pi); |x| - n p1 is exact (Sterbenz; p1 is pi/2's
  first 33 bits, so n p1 is exact too), then n p2 and n p3 (the next 33 bits each, exact
  products) are subtracted with exact two-sums and n p4 (the rest of pi/2) is added to the tail.
- |x| >= 2^20: Payne-Hanek, in i64 arithmetic on the bits. |x| = X 2^e (X the 53-bit integer
  significand); the 192 bits of 2/pi from bit e - 1 on (bits above contribute multiples of 4 to
  |x| 2/pi, which n mod 4 does not need) are picked from a table of 64-bit words (select chains
  on the word index) and shifted into place; X times them is a 245-bit product computed in
  32-bit limbs, of which the low 192 bits are |x| 2/pi mod 4 in fixed point: its top two bits
  n mod 4, the rest the fraction (rounded to the nearest: a fraction of 1/2 or more adds one to
  n and is complemented). The fraction's limbs are summed exactly into a double-double (all
  terms positive, so no cancellation) and multiplied by pi/2 with Dekker's exact product. The
  bits of 2/pi below the window and the complement's missing unit err by below 2^-135 in the
  fraction, far below its smallest value for any double (about 2^-62).

Then fdlibm's kernels (its polynomials, and its double-double forms taking y1 into account):
sin and cos on [-pi/4, pi/4], tan with its reflection about pi/4 above 0.6744 and its accurate
-1 / tan for odd n. sin / cos of x pick the kernel and sign by n mod 4, and the sign of x.

Edges: |x| below 2^-27 (subnormals included, which arithmetic here flushes to zero) gives x for
sin and tan, 1 for cos; +-0 keep their sign; +-inf and NaN give NaN. Measured within 1 ulp of
numpy over random magnitudes from 2^-1074 to 2^1024, values near multiples of pi/2, and the
doubles nearest the worst cases of the reduction.
"""
from __future__ import annotations

import math
from fractions import Fraction

from . import tile as t

FUNCTIONS = ("math.sin", "math.cos", "math.tan")


def _pi_fixed(bits: int) -> int:
    """floor-ish of pi * 2^bits (within a few units), by Machin's formula on integers."""
    def atan_inv(k: int, one: int) -> int:
        total, term, n, sign = 0, one // k, 1, 1
        while term:
            total += sign * (term // n)
            term //= k * k
            n += 2
            sign = -sign
        return total
    one = 1 << bits
    return 16 * atan_inv(5, one) - 4 * atan_inv(239, one)


_GUARD = 1500
_PI = _pi_fixed(_GUARD)
_WORDS = 21
# 2/pi in 64-bit words: word w holds the bits of weight 2^-(64(w-1)+1) .. 2^-64w (word 0 is the
# integer part, 0). Bit k of 2/pi (weight 2^-k) is bit 63 - ((k + 63) & 63) of word (k + 63) >> 6.
_TWO_OVER_PI = (1 << (64 * (_WORDS - 1) + 1 + _GUARD)) // _PI
_TABLE = [(_TWO_OVER_PI >> (64 * (_WORDS - 1 - w))) & ((1 << 64) - 1) for w in range(_WORDS)]


def _pio2_parts() -> tuple[float, float, float, float, float]:
    """pi/2 as p1 + p2 + p3 (33 significant bits each) + p4 (the rest, rounded), and the low
    part of pi/2 - float(pi/2)."""
    rest = _PI >> 1                       # pi/2 * 2^_GUARD
    parts = []
    for _ in range(3):
        drop = rest.bit_length() - 33
        chunk = (rest >> drop) << drop
        parts.append(float(Fraction(chunk, 1 << _GUARD)))
        rest -= chunk
    parts.append(float(Fraction(rest, 1 << _GUARD)))
    parts.append(float(Fraction(_PI >> 1, 1 << _GUARD) - Fraction(math.pi / 2)))
    return tuple(parts)


_P1, _P2, _P3, _P4, _PIO2_LO = _pio2_parts()
_PIO2_HI = math.pi / 2

# fdlibm's kernel polynomials.
_S = (-1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04,
      2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10)
_C = (4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05,
      -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11)
_T = (3.33333333333334091986e-01, 1.33333333333201242699e-01, 5.39682539762260521377e-02,
      2.18694882948595424599e-02, 8.86323982359930005737e-03, 3.59207910759131235356e-03,
      1.45620945432529025516e-03, 5.88041240820264096874e-04, 2.46463134818469906812e-04,
      7.81794442939557092300e-05, 7.14072491382608190305e-05, -1.85586374855275456654e-05,
      2.59073051863633712884e-05)
_PIO4_HI = 7.85398163397448278999e-01
_PIO4_LO = 3.06161699786838301793e-17

_M32 = (1 << 32) - 1


def _signed(v: int) -> int:
    """A 64-bit pattern as the signed value an i64 constant takes."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


class _B:
    """Op builders over one element shape."""

    def __init__(self, op, const):
        self.op, self.c = op, const

    def f(self, name: str, *xs: t.Value) -> t.Value:
        return self.op(name, list(xs))

    def i(self, name: str, *xs: t.Value) -> t.Value:
        return self.op(name, list(xs), "i64")

    def ci(self, v: int) -> t.Value:
        return self.c(_signed(v), "i64")

    def cmpf(self, pred: str, a: t.Value, b: t.Value) -> t.Value:
        return self.op("arith.cmpf", [a, b], "i1", {"predicate": pred})

    def cmpi(self, pred: str, a: t.Value, b: t.Value) -> t.Value:
        return self.op("arith.cmpi", [a, b], "i1", {"predicate": pred})

    def where(self, c: t.Value, a: t.Value, b: t.Value) -> t.Value:
        return self.op("arith.select", [c, a, b], a.dtype)

    def add(self, a, b): return self.f("arith.addf", a, b)
    def sub(self, a, b): return self.f("arith.subf", a, b)
    def mul(self, a, b): return self.f("arith.mulf", a, b)

    def two_sum(self, a: t.Value, b: t.Value) -> tuple[t.Value, t.Value]:
        s = self.add(a, b)
        bb = self.sub(s, a)
        err = self.add(self.sub(a, self.sub(s, bb)), self.sub(b, bb))
        return s, err

    def split(self, a: t.Value) -> tuple[t.Value, t.Value]:
        c = self.mul(a, self.c(134217729.0))
        hi = self.sub(c, self.sub(c, a))
        return hi, self.sub(a, hi)

    def two_product(self, a: t.Value, b: t.Value) -> tuple[t.Value, t.Value]:
        """(p, err): a * b rounded, and its rounding error exactly (Dekker, on the 26-bit halves
        `split` gives)."""
        p = self.mul(a, b)
        ah, al = self.split(a)
        bh, bl = self.split(b)
        err = self.add(self.add(self.add(self.sub(self.mul(ah, bh), p), self.mul(ah, bl)), self.mul(al, bh)),
                       self.mul(al, bl))
        return p, err

    def horner(self, z: t.Value, coefs) -> t.Value:
        acc = self.c(coefs[-1])
        for k in reversed(coefs[:-1]):
            acc = self.add(self.c(k), self.mul(z, acc))
        return acc


def expand(opname: str, x: t.Value, op, const) -> t.Value:
    b = _B(op, const)
    bits = b.i("arith.andi", b.i("arith.bitcast", x), b.ci((1 << 63) - 1))
    a = b.f("arith.bitcast", bits)                                    # |x|
    nan_or_inf = b.cmpi("sge", bits, b.ci(0x7FF << 52))
    large = b.cmpi("sge", bits, b.ci((1023 + 20) << 52))             # |x| >= 2^20
    y0, y1, n = _reduce_medium(b, b.where(large, b.c(1.0), a))
    z0, z1, m = _reduce_large(b, b.where(large, bits, b.ci((1023 + 20) << 52)))
    y0, y1, n = b.where(large, z0, y0), b.where(large, z1, y1), b.where(large, m, n)
    odd = b.cmpi("ne", b.i("arith.andi", n, b.ci(1)), b.ci(0))
    if opname == "math.tan":
        r = _kernel_tan(b, y0, y1, odd)
        sign_flip = None
    else:
        s, c = _kernel_sin(b, y0, y1), _kernel_cos(b, y0, y1)
        if opname == "math.sin":
            r = b.where(odd, c, s)
            sign_flip = b.cmpi("ne", b.i("arith.andi", n, b.ci(2)), b.ci(0))                   # n = 2, 3
        else:
            r = b.where(odd, s, c)
            sign_flip = b.cmpi("ne", b.i("arith.andi", b.i("arith.addi", n, b.ci(1)), b.ci(2)), b.ci(0))  # 1, 2
        r = b.where(sign_flip, b.f("arith.negf", r), r)
    negative = b.cmpi("slt", b.i("arith.bitcast", x), b.ci(0))
    if opname != "math.cos":
        r = b.where(negative, b.f("arith.negf", r), r)
    # Below 2^-27 (subnormals included), sin and tan round to x and cos to 1.
    tiny = b.cmpi("slt", bits, b.ci((1023 - 27) << 52))
    r = b.where(tiny, b.c(1.0) if opname == "math.cos" else x, r)
    return b.where(nan_or_inf, b.c(float("nan")), r)


def _reduce_medium(b: _B, a: t.Value) -> tuple[t.Value, t.Value, t.Value]:
    """Cody-Waite for 0 <= a < 2^20: (y0, y1, n as i64)."""
    # n = round(a 2/pi) by truncation of a 2/pi + 1/2 (a >= 0; conversions are inline code on
    # every CPU, where floor / roundeven may be C library calls without SSE4.1).
    n = b.op("arith.fptosi", [b.add(b.mul(a, b.c(2 / math.pi)), b.c(0.5))], "i64")
    nf = b.op("arith.sitofp", [n])
    r = b.sub(a, b.mul(nf, b.c(_P1)))                                 # exact
    s, e1 = b.two_sum(r, b.f("arith.negf", b.mul(nf, b.c(_P2))))
    s, e2 = b.two_sum(s, b.f("arith.negf", b.mul(nf, b.c(_P3))))
    tail = b.sub(b.add(e1, e2), b.mul(nf, b.c(_P4)))
    y0 = b.add(s, tail)
    y1 = b.sub(tail, b.sub(y0, s))
    return y0, y1, n


def _reduce_large(b: _B, bits: t.Value) -> tuple[t.Value, t.Value, t.Value]:
    """Payne-Hanek for the finite |x| >= 2^20 whose bits are `bits`: (y0, y1, n mod 4 as i64)."""
    i = b.i
    sig = i("arith.ori", i("arith.andi", bits, b.ci((1 << 52) - 1)), b.ci(1 << 52))
    e = i("arith.subi", i("arith.shrui", bits, b.ci(52)), b.ci(1075))  # |x| = sig 2^e, e >= -32
    # The window starts at bit k = e - 1 of 2/pi: table bit index k + 63.
    start = i("arith.addi", e, b.ci(62))
    word = i("arith.shrui", start, b.ci(6))
    off = i("arith.andi", start, b.ci(63))
    first = (1023 + 20 - 1075 + 62) >> 6
    last = (2046 - 1075 + 62) >> 6
    hits = {w: b.cmpi("eq", word, b.ci(w)) for w in range(first + 1, last + 1)}
    words = []
    for j in range(4):
        acc = b.ci(_TABLE[first + j])
        for w in range(first + 1, last + 1):
            acc = b.where(hits[w], b.ci(_TABLE[w + j]), acc)
        words.append(acc)
    # 192 bits from `off` on, as three 64-bit words (the second shift is split in two: a shift
    # by 64 is undefined).
    back = i("arith.subi", b.ci(63), off)
    v = [i("arith.ori", i("arith.shli", words[j], off),
           i("arith.shrui", i("arith.shrui", words[j + 1], b.ci(1)), back)) for j in range(3)]
    w = []                                                   # 32-bit limbs, least significant first
    for vj in reversed(v):
        w += [i("arith.andi", vj, b.ci(_M32)), i("arith.shrui", vj, b.ci(32))]
    x0, x1 = i("arith.andi", sig, b.ci(_M32)), i("arith.shrui", sig, b.ci(32))
    lo = lambda p: i("arith.andi", p, b.ci(_M32))
    hi = lambda p: i("arith.shrui", p, b.ci(32))
    p0 = [i("arith.muli", x0, wc) for wc in w]              # < 2^64 (unsigned)
    p1 = [i("arith.muli", x1, wc) for wc in w]              # < 2^53
    limbs, carry = [], b.ci(0)
    for c in range(6):
        terms = [lo(p0[c])]
        if c >= 1:
            terms += [hi(p0[c - 1]), lo(p1[c - 1])]
        if c >= 2:
            terms.append(hi(p1[c - 2]))
        total = carry
        for tm in terms:
            total = i("arith.addi", total, tm)
        limbs.append(lo(total))
        carry = hi(total)
    # limbs[5] bits 31, 30: n mod 4; bit 29: the fraction is 1/2 or more.
    n = i("arith.shrui", limbs[5], b.ci(30))
    up = b.cmpi("ne", i("arith.andi", limbs[5], b.ci(1 << 29)), b.ci(0))
    n = i("arith.andi", i("arith.addi", n, b.where(up, b.ci(1), b.ci(0))), b.ci(3))
    limbs[5] = i("arith.andi", limbs[5], b.ci((1 << 30) - 1))
    flip = [b.where(up, b.ci(m), b.ci(0)) for m in (_M32, (1 << 30) - 1)]
    limbs = [i("arith.xori", limb, flip[1] if c == 5 else flip[0]) for c, limb in enumerate(limbs)]
    # The fraction (< 1/2) as a double-double: sum of the exact, positive terms limb * 2^(32c - 190).
    terms = [b.mul(b.op("arith.sitofp", [limb]), b.c(2.0 ** (32 * c - 190))) for c, limb in enumerate(limbs)]
    s, err = terms[5], b.c(0.0)
    for c in range(4, -1, -1):
        s, e_ = b.two_sum(s, terms[c])
        err = b.add(err, e_)
    fh = b.add(s, err)
    fl = b.sub(err, b.sub(fh, s))
    # times pi/2 (double-double), with Dekker's exact product of the high parts.
    p, perr = b.two_product(fh, b.c(_PIO2_HI))
    tail = b.add(perr, b.add(b.mul(fh, b.c(_PIO2_LO)), b.mul(fl, b.c(_PIO2_HI))))
    y0 = b.add(p, tail)
    y1 = b.sub(tail, b.sub(y0, p))
    return b.where(up, b.f("arith.negf", y0), y0), b.where(up, b.f("arith.negf", y1), y1), n


def _kernel_sin(b: _B, x: t.Value, y: t.Value) -> t.Value:
    z = b.mul(x, x)
    v = b.mul(z, x)
    r = b.horner(z, _S[1:])
    inner = b.sub(b.mul(z, b.sub(b.mul(b.c(0.5), y), b.mul(v, r))), y)
    return b.sub(x, b.sub(inner, b.mul(v, b.c(_S[0]))))


def _kernel_cos(b: _B, x: t.Value, y: t.Value) -> t.Value:
    z = b.mul(x, x)
    w = b.mul(z, z)
    r = b.add(b.mul(z, b.horner(z, _C[:3])), b.mul(b.mul(w, w), b.horner(z, _C[3:])))
    hz = b.mul(b.c(0.5), z)
    one = b.c(1.0)
    w = b.sub(one, hz)
    return b.add(w, b.add(b.sub(b.sub(one, w), hz), b.sub(b.mul(z, r), b.mul(x, y))))


def _kernel_tan(b: _B, x: t.Value, y: t.Value, odd: t.Value) -> t.Value:
    """tan(x + y) for even n, -1 / tan(x + y) for odd n (fdlibm's __kernel_tan)."""
    big = b.cmpf("oge", b.f("math.absf", x), b.c(float.fromhex("0x1.59428p-1")))
    neg = b.cmpf("olt", x, b.c(0.0))
    xs = b.where(neg, b.f("arith.negf", x), x)
    ys = b.where(neg, b.f("arith.negf", y), y)
    refl = b.add(b.sub(b.c(_PIO4_HI), xs), b.sub(b.c(_PIO4_LO), ys))   # pi/4 - |x + y|
    x = b.where(big, refl, x)
    y = b.where(big, b.c(0.0), y)
    z = b.mul(x, x)
    w = b.mul(z, z)
    r = b.horner(w, _T[1::2])
    v = b.mul(z, b.horner(w, _T[2::2]))
    s = b.mul(z, x)
    r = b.add(y, b.mul(z, b.add(b.mul(s, b.add(r, v)), y)))
    r = b.add(r, b.mul(b.c(_T[0]), s))
    w = b.add(x, r)
    iy = b.where(odd, b.c(-1.0), b.c(1.0))
    # Reflected: (1 - 2 sign) (iy - 2 (x - (w^2 / (w + iy) - r))).
    refl_r = b.sub(iy, b.mul(b.c(2.0), b.sub(x, b.sub(b.f("arith.divf", b.mul(w, w), b.add(w, iy)), r))))
    refl_r = b.where(neg, b.f("arith.negf", refl_r), refl_r)
    # -1 / (x + r), accurately: z = w and t = -1 / w with their low 32 bits cleared.
    high = b.ci(-(1 << 32))

    def chop(u):
        return b.f("arith.bitcast", b.i("arith.andi", b.i("arith.bitcast", u), high))
    zc = chop(w)
    v = b.sub(r, b.sub(zc, x))
    a = b.f("arith.divf", b.c(-1.0), w)
    tc = chop(a)
    s = b.add(b.c(1.0), b.mul(tc, zc))
    inv = b.add(tc, b.mul(a, b.add(s, b.mul(tc, v))))
    return b.where(big, refl_r, b.where(odd, inv, w))
