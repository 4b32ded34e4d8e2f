"""f32 sin, cos and tan (f16 and bf16 computed through f32), accurate over the whole f32 range.

IREE's own f32 math.sin / math.cos / math.tan reduce their argument in f32 with a short
approximation of pi: wrong by 2.8e-3 at |x| of 1e5 and completely at 1e8. Here the argument is
reduced in f64 arithmetic, exactly enough for every f32, in one of two ways; a tile whose |x| are
all below 2^24 (found by a max over the tile's bits) runs only the short one, any other tile the
long one (an scf.if on the tile, each branch yielding the f32 result; on the GPU targets the long
one alone, see `targets.gpu.drop_shortcuts`), a scalar the long one:

- short (|x| < 2^24): Cody-Waite on x. n = round(x / pi) (sin), round(x / pi - 1/2) (cos) or
  round(2x / pi) (tan), by adding and subtracting 1.5 * 2^52 (no C library call for rounding;
  the low bit of the sum is n's parity); k = 2n, 2n + 1 or n, below 2^24; r = x - k pi/2 with
  pi/2 as two pieces of 29 significant bits (k times each exact, x - k p1 exact where they are
  close) and the rest (error below 2^-87, against |r| >= 2^-27 for these x).
- long (every f32): y = |x| K mod 2, K = 1/pi (sin; cos with 1/2 subtracted) or 2/pi (tan): K
  is split into pieces C_i of 29 significant bits, so each |x| C_i is exact in f64 (x has 24); a
  product is reduced mod 2 exactly (p - ((p + 3 2^52) - 3 2^52): the addition rounds p to an
  even integer; a product of 2^53 or more is even, and set to 0); pieces whose products are
  below 1 for every f32 need no reduction, and the last ones are tiny. Each reduced term is
  split at 2^-26; the multiples of 2^-26 sum exactly into hi, the rests and the tiny terms into
  lo, right to about 2^-70, far below what the closest f32 to a multiple of pi/2 needs
  (|2x / pi - n| >= 2^-29.9 for every f32, at x = 16367173 * 2^72). n = round(hi),
  f = (hi - n) + lo, r = f pi or f pi/2 (tan).
- sin x = (-1)^n sin r; cos x = (-1)^(n + 1) sin r (the short way: (-1)^n sin(k pi/2 - x));
  tan x = sin r / cos r for even n, -cos r / sin r for odd n; the long way then gives the sign
  of x to sin and tan. sin r and cos r are f64 polynomials (fitted to sin on [-pi/2, pi/2], sin
  and cos on [-pi/4, pi/4] for tan; relative error below 2^-31), rounded once to f32.

Edges: |x| below 2^-12 gives x for sin and tan (x rounds to itself there; this also keeps -0
and the subnormals, which IREE's CPU code flushes to zero in arithmetic) and 1 for cos; +-inf
and NaN give NaN. Measured within 1 ulp of numpy's f64 results rounded to f32 over random
magnitudes from 2^-149 to 3.4e38, at the f32 nearest to multiples of pi/2 and at the f32
closest to them in several binades (tests/conformance/test_f32_trig.py).
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable, Optional

from . import f64_math, tile as t
from .f64_trig import _PI, _GUARD, _B

FUNCTIONS = ("math.sin", "math.cos", "math.tan")
_NARROW = ("f16", "bf16")

_PIECE_BITS = 29
_PIECES = 7
_F32_MAX = 2.0 ** 128          # above every finite f32


def _pieces(numerator: int) -> list[float]:
    """numerator / pi split into _PIECES floats of _PIECE_BITS significant bits each, most
    significant first."""
    extra = 64 * 6
    k = (numerator << (_GUARD + extra)) // _PI          # numerator / pi * 2^extra
    out, pos = [], k.bit_length()
    for _ in range(_PIECES):
        pos -= _PIECE_BITS
        chunk = (k >> pos) & ((1 << _PIECE_BITS) - 1)
        out.append(float(Fraction(chunk << pos, 1 << extra)))
    return out


_INV_PI = _pieces(1)
_TWO_OVER_PI = _pieces(2)
def _pio2_pieces() -> list[float]:
    """pi/2 as two pieces of 29 significant bits and the rest."""
    rest, out = _PI >> 1, []                                  # pi/2 * 2^_GUARD
    for _ in range(2):
        drop = rest.bit_length() - 29
        out.append(float(Fraction((rest >> drop) << drop, 1 << _GUARD)))
        rest -= (rest >> drop) << drop
    return out + [float(Fraction(rest, 1 << _GUARD))]


_Q = _pio2_pieces()
_MAGIC = 1.5 * 2.0 ** 52       # x + _MAGIC - _MAGIC rounds |x| < 2^51 to an integer
_MAGIC2 = 2 * _MAGIC           # ... and |x| < 2^52 to an even integer
_SPLIT = 1.5 * 2.0 ** 26       # ... and |x| < 2^25 to a multiple of 2^-26

# sin r = r (1 + z P(z)), z = r^2, on [-pi/2, pi/2] (relative error 2^-33).
_SIN = (-0.1666666666388666, 0.008333332769366115, -0.0001984108666735669, 2.753646924777073e-06,
        -2.4080281693129868e-08)
# On [-pi/4, pi/4] (tan): sin r as above (2^-35), cos r = 1 + z Q(z) (2^-31).
_SIN4 = (-0.16666666663855834, 0.008333331874647992, -0.0001984008661414416, 2.7249902508827677e-06)
_COS4 = (-0.4999999996913078, 0.04166665064546161, -0.001388758909286105, 2.4463770325774264e-05)


def expand(opname: str, args: list[t.Value], loc: str, emit: Callable[[t.Op], t.Value]) -> Optional[t.Value]:
    """`opname` (math.sin / math.cos / math.tan) on an f32, f16 or bf16 argument as inline ops
    added by `emit` (f16 / bf16 widened to f32 and the result rounded back); None for anything
    else."""
    if opname not in FUNCTIONS or len(args) != 1 or args[0].dtype not in ("f32",) + _NARROW:
        return None
    x = args[0]
    op, const = f64_math.builders(x, loc, emit)
    narrow = x.dtype
    if narrow in _NARROW:
        x = op("arith.extf", [x], "f32")
    xbits = op("arith.bitcast", [x], "i32")
    bits = op("arith.andi", [xbits, const(0x7FFFFFFF, "i32")], "i32")     # |x|
    if not x.is_tile:
        res = _large(opname, x, xbits, bits, op, const)
    else:
        # Each element's reduction is right in the large one; the short one (a few ops) only
        # below 2^24, which most programs' tiles are entirely: it alone runs there.
        flat = x.type.shape if len(x.shape) == 1 else (x.type.numel,)
        b1 = bits if len(x.shape) == 1 else emit(t.Reshape(bits, t.TileType(flat, "i32"), loc))
        blk = t.Block()
        blk.args = [t.Value(t.ScalarType("i32"), blk) for _ in range(2)]
        blk.ops = [t.Elementwise("arith.maxsi", blk.args, t.ScalarType("i32"), loc=loc)]
        blk.yields = [blk.ops[0].result]
        top = emit(t.Reduce([b1], 0, blk, [t.ScalarType("i32")], loc))
        limit = emit(t.Constant(0x4B800000, t.ScalarType("i32"), loc))          # 2^24
        large = emit(t.Elementwise("arith.cmpi", [top, limit], t.ScalarType("i1"), {"predicate": "sge"}, loc))
        branches = []
        for path in (_large, _small):
            blk = t.Block()
            blk.yields = [path(opname, x, xbits, bits, *f64_math.builders(x, loc, lambda o, blk=blk: blk.add(o).result))]
            branches.append(blk)
        res = emit(t.If(large, branches[0], branches[1], [x.type], loc, shortcut=True))
    return op("arith.truncf", [res], narrow) if narrow in _NARROW else res


def _large(opname: str, x: t.Value, xbits: t.Value, bits: t.Value, op, const) -> t.Value:
    """The result for any f32 x (xbits its bits, bits those of |x|)."""
    r, m = _reduce_large(opname, op("math.absf", [op("arith.extf", [x])]), op, const)
    return _finish(opname, x, xbits, bits, r, m, op, const)


def _small(opname: str, x: t.Value, xbits: t.Value, bits: t.Value, op, const) -> t.Value:
    """The result for |x| < 2^24 (not inf or NaN): the short reduction, on x itself (no sign to
    restore), the sign (-1)^n put in the bits."""
    b = _B(op, const)
    r, m = _reduce_small(opname, op("arith.extf", [x]), op, const)
    if opname == "math.tan":
        return _finish(opname, x, xbits, bits, r, m, op, const, signed=True)
    z = b.mul(r, r)
    res = b.mul(r, b.add(b.c(1.0), b.mul(z, b.horner(z, _SIN))))
    sign = b.i("arith.shli", b.i("arith.bitcast", m), b.ci(63))
    res = op("arith.truncf", [b.f("arith.bitcast", b.i("arith.xori", b.i("arith.bitcast", res), sign))], "f32")
    if opname == "math.cos":
        return res
    tiny = op("arith.cmpi", [bits, const(0x39800000, "i32")], "i1", {"predicate": "slt"})   # 2^-12
    return op("arith.select", [tiny, x, res], "f32")


def _finish(opname: str, x: t.Value, xbits: t.Value, bits: t.Value, r: t.Value, m: t.Value, op,
            const, signed: bool = False) -> t.Value:
    """The f32 result from the reduced r and m (the low bit of m's bits is n's parity; r of |x|
    unless `signed`), and the edges: from the bits of x (xbits, and bits those of |x|)."""
    b = _B(op, const)
    odd = op("arith.trunci", [b.i("arith.andi", b.i("arith.bitcast", m), b.ci(1))], "i1")
    if opname == "math.tan":
        z = b.mul(r, r)
        sn = b.mul(r, b.add(b.c(1.0), b.mul(z, b.horner(z, _SIN4))))
        cs = b.add(b.c(1.0), b.mul(z, b.horner(z, _COS4)))
        num = b.where(odd, b.f("arith.negf", cs), sn)
        den = b.where(odd, sn, cs)
        res = b.f("arith.divf", num, den)
    else:
        z = b.mul(r, r)
        res = b.mul(r, b.add(b.c(1.0), b.mul(z, b.horner(z, _SIN))))
    negative = op("arith.cmpi", [xbits, const(0, "i32")], "i1", {"predicate": "slt"})
    if signed:
        flip = None
    elif opname == "math.tan":    # odd n is in -cos r / sin r
        flip = negative
    elif opname == "math.sin":    # (-1)^n, and the sign of x
        flip = op("arith.xori", [odd, negative], "i1")
    else:                         # (-1)^(n + 1)
        flip = op("arith.xori", [odd, const(True, "i1")], "i1")
    if flip is not None:
        res = b.where(flip, b.f("arith.negf", res), res)
    res = op("arith.truncf", [res], "f32")
    # Edges, from the bits of x.
    tiny = op("arith.cmpi", [bits, const(0x39800000, "i32")], "i1", {"predicate": "slt"})   # 2^-12
    res = op("arith.select", [tiny, const(1.0, "f32") if opname == "math.cos" else x, res], "f32")
    if signed:
        return res
    special = op("arith.cmpi", [bits, const(0x7F800000, "i32")], "i1", {"predicate": "sge"})
    return op("arith.select", [special, const(float("nan"), "f32"), res], "f32")


def _reduce_small(opname: str, xd: t.Value, op, const) -> tuple[t.Value, t.Value]:
    """(r, m) for |xd| < 2^24: Cody-Waite. xd = k pi/2 + r with k = 2n (sin) or n (tan), and
    r = k pi/2 - xd with k = 2n + 1 (cos: cos x = (-1)^n sin r); the low bit of m's bits is n's
    parity."""
    b = _B(op, const)
    if opname == "math.tan":
        m = b.add(b.mul(xd, b.c(2 / math.pi)), b.c(_MAGIC))
    elif opname == "math.sin":
        m = b.add(b.mul(xd, b.c(1 / math.pi)), b.c(_MAGIC))
    else:
        m = b.add(b.sub(b.mul(xd, b.c(1 / math.pi)), b.c(0.5)), b.c(_MAGIC))
    n = b.sub(m, b.c(_MAGIC))
    k = n if opname == "math.tan" else b.add(n, n)
    # |k| < 2^24: k Q1 and k Q2 are exact, xd - k Q1 too (where they are close).
    if opname == "math.cos":
        k = b.add(k, b.c(1.0))
        r = b.sub(b.mul(k, b.c(_Q[0])), xd)
        r = b.add(r, b.mul(k, b.c(_Q[1])))
        return b.add(r, b.mul(k, b.c(_Q[2]))), m
    r = b.sub(xd, b.mul(k, b.c(_Q[0])))
    r = b.sub(r, b.mul(k, b.c(_Q[1])))
    return b.sub(r, b.mul(k, b.c(_Q[2]))), m


def _reduce_large(opname: str, xd: t.Value, op, const) -> tuple[t.Value, t.Value]:
    """(r, m) as _reduce_small's, for every f32 xd >= 0."""
    b = _B(op, const)
    tan = opname == "math.tan"
    hi, lo = _reduce(b, xd, _TWO_OVER_PI if tan else _INV_PI, -0.5 if opname == "math.cos" else None)
    # n = round(hi) (|lo| < 2^-18); its parity is the low bit of hi + _MAGIC.
    m = b.add(hi, b.c(_MAGIC))
    f = b.add(b.sub(hi, b.sub(m, b.c(_MAGIC))), lo)
    return b.mul(f, b.c(math.pi / 2 if tan else math.pi)), m


def _reduce(b: _B, xd: t.Value, pieces: list[float], offset: Optional[float]) -> tuple[t.Value, t.Value]:
    """xd * sum(pieces) (+ offset) mod 2 as hi + lo, for every f32 xd: each reduced term (|q| <= 2)
    is split at 2^-26 (adding and subtracting 1.5 * 2^26 rounds it to a multiple of 2^-26,
    exactly): hi sums the multiples of 2^-26 exactly (below 16: 30 bits), lo the rests (each
    below 2^-27) and the tiny terms, with rounding errors below 2^-70."""
    hi, lo = [], []
    for c in pieces:
        p = b.mul(xd, b.c(c))                                    # exact
        top = _F32_MAX * c
        if top >= 2.0 ** 52:                                     # 2^53 and more: even (0 mod 2)
            huge = b.cmpf("oge", p, b.c(2.0 ** 53))
            p = b.where(huge, b.c(0.0), p)
        if top >= 0.5:                                           # p mod 2, exact
            p = b.sub(p, b.sub(b.add(p, b.c(_MAGIC2)), b.c(_MAGIC2)))
        if top >= 2.0 ** -12:
            h = b.sub(b.add(p, b.c(_SPLIT)), b.c(_SPLIT))
            hi.append(h)
            lo.append(b.sub(p, h))
        else:
            lo.append(p)
    if offset is not None:
        hi.insert(0, b.c(offset))
    total = []
    for terms in (hi, lo):
        acc = terms[0]
        for q in terms[1:]:
            acc = b.add(acc, q)
        total.append(acc)
    return total[0], total[1]
