"""Float casts for the TTIR reader: fp8 through f32 with Triton's rounding and saturation, and
corrections for IREE llvm-cpu's fp8 conversions."""
from __future__ import annotations

import math

from iree.compiler import ir

from . import tile as t
from .errors import UnsupportedError
from .float_bits import FORMATS, bias

FP8_MAX = {"f8E4M3FN": 448.0, "f8E5M2": 57344.0}
ROUNDING_RTZ = 0


def _largest_finite_bits(dtype: str, src: str) -> int:
    """The bits, in format `src`, of the largest finite value of format `dtype`."""
    top = FP8_MAX.get(dtype, (2 - 2.0 ** -FORMATS[dtype][0]) * 2.0 ** bias(dtype))
    frac, exp = math.frexp(top)   # top = frac 2^exp, frac in [0.5, 1)
    ms = FORMATS[src][0]
    return ((exp - 1 + bias(src)) << ms) | int((2 * frac - 1) * 2 ** ms)


class FloatCasts:
    """TTIRReader's float casts (`tt.fp_to_fp`, `arith` float casts, fp8 dot operands)."""

    def _float_cast(self, v: t.Value, dtype: str, loc: str) -> t.Value:
        """extf / truncf (round to nearest even). IREE's CPU code converts fp8 only from and to
        f32, so other types go through f32 (exactly: f16 and bf16 hold every fp8 value); and it
        reads the negative NaN of f8E4M3FN (0xFF) as -480, so that one is made NaN here."""
        if v.dtype == dtype:
            return v
        if (v.dtype in FP8_MAX or dtype in FP8_MAX) and "f32" not in (v.dtype, dtype):
            v = self._float_cast(v, "f32", loc)
        if dtype in FP8_MAX:
            v = self._fp8_round_up_to_normal(v, dtype, loc)
        op = "arith.extf" if t.bitwidth(dtype) > t.bitwidth(v.dtype) else "arith.truncf"
        r = self._emit(t.Elementwise(op, [v], t.with_dtype(v.type, dtype), loc=loc)).result
        if v.dtype != "f8E4M3FN":
            return r
        i8 = t.with_dtype(v.type, "i8")
        bits = self._emit(t.Elementwise("arith.bitcast", [v], i8, loc=loc)).result
        c127 = self._emit(t.Constant(127, i8, loc)).result
        low = self._emit(t.Elementwise("arith.andi", [bits, c127], i8, loc=loc)).result
        nan = self._emit(t.Elementwise("arith.cmpi", [low, c127], t.with_dtype(v.type, "i1"), {"predicate": "eq"},
                                       loc)).result
        qnan = self._emit(t.Constant(float("nan"), r.type, loc)).result
        return self._emit(t.Elementwise("arith.select", [nan, qnan, r], r.type, loc=loc)).result

    def _fp8_round_up_to_normal(self, v: t.Value, dtype: str, loc: str) -> t.Value:
        """IREE's truncf to fp8 gives zero for the values that round up to the smallest normal
        number (from halfway between it and the largest subnormal): those become that number
        (with their sign) before the truncf."""
        def ew(name, args, ty=v.type, **attrs):
            return self._emit(t.Elementwise(name, args, ty, attrs, loc)).result

        def const(x):
            return self._emit(t.Constant(x, v.type, loc)).result

        normal = 2.0 ** (1 - bias(dtype))
        halfway = (normal + normal * (1 - 2.0 ** -FORMATS[dtype][0])) / 2
        a, i1 = ew("math.absf", [v]), t.with_dtype(v.type, "i1")
        up = ew("arith.andi", [ew("arith.cmpf", [a, const(halfway)], i1, predicate="oge"),
                               ew("arith.cmpf", [a, const(normal)], i1, predicate="olt")], i1)
        return ew("arith.select", [up, ew("math.copysign", [const(normal), v]), v])

    def _op_tt_fp_to_fp(self, op, loc: str) -> None:
        """Float casts from and to fp8, and downcasts rounding toward zero. Upcasts are exact.
        Downcasts round to nearest even (or toward zero); to fp8 they saturate as Triton does on
        GPUs (`satfinite`): out-of-range values and infinities become the largest finite value
        of their sign. NaN stays NaN."""
        x = self._val(op.operands[0], op)
        ty = self._type(op.results[0].type, op)

        def ew(name, args, dtype, **attrs):
            return self._emit(t.Elementwise(name, args, t.with_dtype(x.type, dtype), attrs, loc)).result

        def const(value, dtype):
            return self._emit(t.Constant(value, t.with_dtype(x.type, dtype), loc)).result

        if t.bitwidth(ty.dtype) >= t.bitwidth(x.dtype):
            self._bind(op, self._float_cast(x, ty.dtype, loc))
            return
        if ty.dtype in FP8_MAX:
            if x.dtype == "f64":    # through f32 it would round twice
                raise UnsupportedError("casting fp64 to fp8 (.to(tl.float8...)) is not supported by triton-iree",
                                       kernel=self.kernel_name, loc=loc)
            top = FP8_MAX[ty.dtype]
            x = ew("arith.maximumf", [ew("arith.minimumf", [x, const(top, x.dtype)], x.dtype), const(-top, x.dtype)],
                   x.dtype)
        if ir.IntegerAttr(op.attributes["rounding"]).value == ROUNDING_RTZ:
            x = self._toward_zero(x, ty.dtype, loc)
        y = self._float_cast(x, ty.dtype, loc)
        self._bind(op, y)

    def _toward_zero(self, x: t.Value, dtype: str, loc: str) -> t.Value:
        """x with the significand bits that format `dtype` cannot hold at x's magnitude cleared,
        and finite values beyond its range made its largest finite value (with their sign): x
        truncated toward zero, exactly representable in `dtype`, so that rounding it to nearest
        gives the cast toward zero. In integer arithmetic on x's bits: comparing x with its
        rounded value converted back is folded away by GPU drivers (NVIDIA's Vulkan driver reads
        extf(truncf(x)) as x). NaN and infinities keep their bits."""
        ms, es = FORMATS[x.dtype]
        md = FORMATS[dtype][0]
        ity = t.with_dtype(x.type, f"i{t.bitwidth(x.dtype)}")
        i1 = t.with_dtype(x.type, "i1")

        def ew(name, args, ty=ity, **attrs):
            return self._emit(t.Elementwise(name, args, ty, attrs, loc)).result

        def const(value):
            return self._emit(t.Constant(value, ity, loc)).result

        bits = ew("arith.bitcast", [x])
        magnitude = ew("arith.andi", [bits, const(2 ** (t.bitwidth(x.dtype) - 1) - 1)])
        special = ew("arith.cmpi", [magnitude, const((2 ** es - 1) << ms)], i1, predicate="uge")   # inf, NaN
        # x's exponent (subnormals: the smallest normal one, whose spacing they share) and how far
        # it lies below `dtype`'s smallest normal exponent, where `dtype`'s spacing grows.
        biased = ew("arith.maxsi", [ew("arith.shrui", [magnitude, const(ms)]), const(1)])
        below = ew("arith.maxsi", [ew("arith.subi", [const(1 - bias(dtype) + bias(x.dtype)), biased]),
                                   const(0)])
        cleared = ew("arith.minsi", [ew("arith.addi", [below, const(ms - md)]), const(ms)])
        kept = ew("arith.andi", [bits, ew("arith.shli", [const(-1), cleared])])
        top = const(_largest_finite_bits(dtype, x.dtype))
        over = ew("arith.cmpi", [magnitude, top], i1, predicate="ugt")
        sign = ew("arith.xori", [bits, magnitude])
        kept = ew("arith.select", [over, ew("arith.ori", [sign, top]), kept])
        return ew("arith.bitcast", [ew("arith.select", [special, bits, kept])], x.type)
