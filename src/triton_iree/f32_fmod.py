"""f32, f16 and bf16 fmod (arith.remf: `%` on floats, libdevice fmod) exact, in integer arithmetic,
for the SPIR-V targets (`targets.spirv`).

fmod(x, y) is always exactly representable, and C, numpy and CUDA's libdevice give it exactly;
SPIR-V's OpFRem only has the precision of x - y * trunc(x / y) in Vulkan's precision rules (its
rounded quotient errs by many ulp of the result when x / y is large; on lavapipe 73 of 187
libdevice.fmod results of f32 arguments in [-20, 20] and [0.5, 4] were off). Here |x| = mx 2^ex
and |y| = my 2^ey with integer significands below 2^24 (subnormals unnormalized, ex = -149), and
fmod(|x|, |y|) = (mx 2^(ex - ey) mod my) 2^ey by long division in i64: r = mx mod my, then
r = (r 2^k) mod my for 40 bits of ex - ey at a time (r 2^40 < 2^64; ex - ey <= 253, so 7 steps).
The result's bits are r 2^ey built in integers (r < 2^24 converts to f32 exactly; a subnormal
result is r shifted into 2^-149 units), with the sign of x. C's special cases: NaN for x infinite
or NaN, y zero or NaN; x itself for |x| < |y| (y infinite, x zero). f16 and bf16 go through f32,
where their remainder is exact too.
"""
from __future__ import annotations

from typing import Optional

from . import f64_math, tile as t

_NARROW = ("f16", "bf16")
_STEP = 40        # bits of the exponent difference per division step
_STEPS = 7        # ceil(253 / _STEP): ex - ey <= 104 + 149


def expand_kernel(kernel: t.Kernel) -> None:
    """Every f32, f16 and bf16 arith.remf in `kernel` (in any block) replaced by `expand`'s ops."""
    t.expand_elementwise(kernel, lambda o, emit: expand(o.args[0], o.args[1], o.loc, emit)
                         if o.opname == "arith.remf" and o.result.dtype in ("f32",) + _NARROW else None)


def expand(x: t.Value, y: t.Value, loc: str, emit) -> Optional[t.Value]:
    """fmod(x, y) of f32, f16 or bf16 `x` and `y` as ops added by `emit`."""
    narrow = x.dtype if x.dtype in _NARROW else None
    op, const = f64_math.builders(x, loc, emit)
    if narrow:
        x, y = op("arith.extf", [x], "f32"), op("arith.extf", [y], "f32")

    def i(name: str, *xs: t.Value) -> t.Value:
        return op(name, list(xs), "i64")

    def c(v: int) -> t.Value:
        return const(v, "i64")

    def cmp(pred: str, a: t.Value, b: t.Value) -> t.Value:
        return op("arith.cmpi", [a, b], "i1", {"predicate": pred})

    def where(cond: t.Value, a: t.Value, b: t.Value) -> t.Value:
        return op("arith.select", [cond, a, b], a.dtype)

    def bits(v: t.Value) -> t.Value:
        return op("arith.extui", [op("arith.bitcast", [v], "i32")], "i64")

    xb, yb = bits(x), bits(y)
    ax, ay = i("arith.andi", xb, c(0x7FFFFFFF)), i("arith.andi", yb, c(0x7FFFFFFF))
    inf = c(0x7F800000)
    # Arguments the division never sees (NaN, x infinite, y zero or infinite) become 1.0.
    xs = where(cmp("slt", ax, inf), ax, c(0x3F800000))
    ys = where(op("arith.andi", [cmp("slt", ay, inf), cmp("ne", ay, c(0))], "i1"), ay, c(0x3F800000))

    def significand(a: t.Value) -> tuple[t.Value, t.Value]:
        sub = cmp("slt", a, c(0x800000))
        m = where(sub, a, i("arith.ori", i("arith.andi", a, c(0x7FFFFF)), c(0x800000)))
        e = where(sub, c(-149), i("arith.subi", i("arith.shrui", a, c(23)), c(150)))
        return m, e

    mx, ex = significand(xs)
    my, ey = significand(ys)
    d = i("arith.subi", ex, ey)
    r = i("arith.remui", mx, my)
    for step in range(_STEPS):
        k = i("arith.minsi", i("arith.maxsi", i("arith.subi", d, c(_STEP * step)), c(0)), c(_STEP))
        r = i("arith.remui", i("arith.shli", r, k), my)
    # r 2^ey as f32 bits: r's own (exact: r < 2^24) with ey added to the exponent where that
    # stays normal, else r in units of 2^-149 (ey + 149 >= 0).
    rb = bits(op("arith.uitofp", [r], "f32"))
    biased = i("arith.addi", i("arith.shrui", rb, c(23)), ey)
    normal = i("arith.addi", rb, i("arith.shli", ey, c(23)))
    shift = i("arith.minsi", i("arith.addi", ey, c(149)), c(63))
    res = where(cmp("sge", biased, c(1)), normal, i("arith.shli", r, shift))
    res = where(cmp("eq", r, c(0)), c(0), res)
    res = where(op("arith.ori", [cmp("slt", d, c(0)), cmp("slt", ax, ay)], "i1"), ax, res)
    res = i("arith.ori", res, i("arith.andi", xb, c(0x80000000)))
    out = op("arith.bitcast", [op("arith.trunci", [res], "i32")], "f32")
    nan = op("arith.ori", [op("arith.ori", [cmp("sge", ax, inf), cmp("eq", ay, c(0))], "i1"),
                           cmp("sgt", ay, inf)], "i1")
    out = where(nan, const(float("nan"), "f32"), out)
    return op("arith.truncf", [out], narrow) if narrow else out
