"""tl.dot_scaled (microscaling formats), mixed into the TTIR reader.

Each operand is decoded to f32 and multiplied by its scales, then the product is a `tl.dot` in
f32, as Triton's GPU emulation upcasts both operands (to bf16, which holds every e2m1, e4m3 and
e5m2 value times a power of two exactly). e2m1 comes as two values in each byte, the first in the
low nibble, along K (or along M / N where not `k_pack`); e4m3 and e5m2 are converted as `tl.dot`'s
fp8 operands are (`FloatCasts`). An e8m0 scale s, one per 32 elements along K, is 2^(s - 127)
((s << 23) as f32 bits, so s = 0 gives 0 as Triton's emulation's bf16 (s << 7) does); s = 255
makes the group NaN unless `fast_math`. e4m3 scales (one per 16) are converted values.
"""
from __future__ import annotations

from iree.compiler import ir

from . import tile as t

# tt.dot_scaled's ScaleDotElemType enum (E2M3 and E3M2 have no frontend format).
_FORMATS = {0: "e4m3", 1: "e5m2", 4: "e2m1", 5: "bf16", 6: "fp16"}


class DotScaled:
    """TTIRReader's tt.dot_scaled."""

    def _op_tt_dot_scaled(self, op, loc: str) -> None:
        seg = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
        operands = list(op.operands)
        a, b, c = (self._val(v, op) for v in operands[:3])
        a_scale = self._val(operands[3], op) if seg[3] else None
        b_scale = self._val(operands[3 + seg[3]], op) if seg[4] else None
        fmts = [_FORMATS.get(ir.IntegerAttr(op.attributes[k]).value) for k in ("a_elem_type", "b_elem_type")]
        if None in fmts or len(a.shape) != 2:
            raise self._unsupported(op, "a format other than e2m1, e4m3, e5m2, bf16 or fp16" if None in fmts
                                    else "a 3-D (batched) dot")
        fast_math = ir.BoolAttr(op.attributes["fastMath"]).value
        packs = [ir.BoolAttr(op.attributes[k]).value for k in ("lhs_k_pack", "rhs_k_pack")]
        # lhs is [M, K] (packed along K = axis 1, else M = axis 0); rhs is [K, N] (along K = axis 0).
        x = self._mx_operand(a, fmts[0], 1 if packs[0] else 0, loc)
        y = self._mx_operand(b, fmts[1], 0 if packs[1] else 1, loc)
        if a_scale is not None:
            x = self._mx_scaled(x, a_scale, fast_math, False, loc)
        if b_scale is not None:
            y = self._mx_scaled(y, b_scale, fast_math, True, loc)
        self._bind(op, self._emit(t.Dot(x, y, c, loc)).result)

    def _mx_operand(self, v: t.Value, fmt: str, packed_axis: int, loc: str) -> t.Value:
        """The f32 values of an operand in format `fmt` (e2m1: two per byte along `packed_axis`)."""
        if fmt != "e2m1":
            return self._float_cast(v, "f32", loc)
        ty8, ty32 = v.type, t.with_dtype(v.type, "i32")

        def ew(name, args, ty, **attrs):
            return self._emit(t.Elementwise(name, args, ty, attrs, loc)).result

        def const(value, ty):
            return self._emit(t.Constant(value, ty, loc)).result

        def nibble_f32(n: t.Value) -> t.Value:
            # e2m1: sign, 2 exponent bits (bias 1), 1 mantissa bit; exponent 0 is 0 or 0.5.
            n = ew("arith.extui", [n], ty32)
            mag = ew("arith.andi", [n, const(7, ty32)], ty32)
            exp = ew("arith.addi", [ew("arith.shrui", [mag, const(1, ty32)], ty32), const(126, ty32)], ty32)
            man = ew("arith.shli", [ew("arith.andi", [mag, const(1, ty32)], ty32), const(22, ty32)], ty32)
            normal = ew("arith.ori", [ew("arith.shli", [exp, const(23, ty32)], ty32), man], ty32)
            i1 = t.with_dtype(ty32, "i1")
            half = ew("arith.select", [ew("arith.cmpi", [mag, const(1, ty32)], i1, predicate="eq"),
                                       const(0x3F000000, ty32), const(0, ty32)], ty32)
            bits = ew("arith.select", [ew("arith.cmpi", [mag, const(2, ty32)], i1, predicate="ult"), half, normal],
                      ty32)
            sign = ew("arith.shli", [ew("arith.shrui", [n, const(3, ty32)], ty32), const(31, ty32)], ty32)
            return ew("arith.bitcast", [ew("arith.ori", [bits, sign], ty32)], t.with_dtype(ty32, "f32"))

        lo = nibble_f32(ew("arith.andi", [v, const(0xF, ty8)], ty8))
        hi = nibble_f32(ew("arith.shrui", [v, const(4, ty8)], ty8))
        r, cols = v.shape
        pair = self._emit(t.Join(lo, hi, t.TileType((r, cols, 2), "f32"), loc)).result
        if packed_axis == 0:
            pair = self._emit(t.Trans(pair, (0, 2, 1), t.TileType((r, 2, cols), "f32"), loc)).result
            shape = (2 * r, cols)
        else:
            shape = (r, 2 * cols)
        return self._emit(t.Reshape(pair, t.TileType(shape, "f32"), loc)).result

    def _mx_scaled(self, x: t.Value, scale: t.Value, fast_math: bool, rhs: bool, loc: str) -> t.Value:
        """x (f32, [M, K], or [K, N] if `rhs`) times its scales ([M or N, K / group])."""
        rows, groups = scale.shape
        k = x.shape[0] if rhs else x.shape[1]
        group = k // groups
        if scale.dtype in ("f8E4M3FN", "f8E5M2"):
            s = self._float_cast(scale, "f32", loc)
            nan = None
        else:
            i32 = t.with_dtype(scale.type, "i32")
            u = self._emit(t.Elementwise("arith.extui", [scale], i32, loc=loc)).result
            bits = self._emit(t.Elementwise("arith.shli", [u, self._emit(t.Constant(23, i32, loc)).result], i32,
                                            loc=loc)).result
            s = self._emit(t.Elementwise("arith.bitcast", [bits], t.with_dtype(i32, "f32"), loc=loc)).result
            nan = None if fast_math else self._emit(t.Elementwise(
                "arith.cmpi", [u, self._emit(t.Constant(255, i32, loc)).result], t.with_dtype(i32, "i1"),
                {"predicate": "eq"}, loc)).result
        # One scale per `group` consecutive elements along K: [rows, groups] -> [rows, K].
        per_k = []
        for v in (s, nan):
            if v is None:
                per_k.append(None)
                continue
            v = self._emit(t.ExpandDims(v, 2, t.TileType((rows, groups, 1), v.dtype), loc)).result
            v = self._emit(t.Broadcast(v, t.TileType((rows, groups, group), v.dtype), loc)).result
            v = self._emit(t.Reshape(v, t.TileType((rows, k), v.dtype), loc)).result
            if rhs:
                v = self._emit(t.Trans(v, (1, 0), t.TileType((k, rows), v.dtype), loc)).result
            per_k.append(v)
        r = self._emit(t.Elementwise("arith.mulf", [x, per_k[0]], x.type, loc=loc)).result
        if per_k[1] is not None:
            qnan = self._emit(t.Constant(float("nan"), x.type, loc)).result
            r = self._emit(t.Elementwise("arith.select", [per_k[1], qnan, r], x.type, loc=loc)).result
        return r
