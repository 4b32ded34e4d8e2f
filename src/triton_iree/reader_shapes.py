"""Shape ops (splat, broadcast, expand_dims, reshape, trans, join, cat, split, unsplat), mixed
into the TTIR reader: on values, and on pointers (their offsets) alike."""
from __future__ import annotations

from typing import Optional

from iree.compiler import ir

from . import tile as t
from .pointers import Addr, Ptr
from .ttir import _attr_int


def _inserted_unit_dims(src: tuple[int, ...], dst: tuple[int, ...]) -> Optional[list[int]]:
    """The dims of `dst` that a row-major reshape of `src` to `dst` inserts as size 1, or None
    when the reshape does more than insert unit dims."""
    axes, j = [], 0
    for i, d in enumerate(dst):
        if j < len(src) and d == src[j]:
            j += 1
        elif d == 1:
            axes.append(i)
        else:
            return None
    return axes if j == len(src) else None


class ShapeOps:
    """TTIRReader's shape ops."""

    def _shape_op(self, op, loc: str, make) -> None:
        src = self._get(op.operands[0])
        rty = op.results[0].type
        if isinstance(src, Ptr):
            shape = tuple(ir.RankedTensorType(rty).shape)
            new = make(src.offsets, t.TileType(shape, "i64"))
            self._bind(op, src.moved(self._emit(new).result))
        elif isinstance(src, Addr):
            self._bind(op, Addr(src.buffer, self._emit(make(src.value, self._type(rty, op))).result))
        else:
            self._bind(op, self._emit(make(src, self._type(rty, op))).result)

    def _op_tt_splat(self, op, loc: str) -> None:
        self._shape_op(op, loc, lambda v, ty: t.Splat(v, ty, loc))

    def _op_tt_broadcast(self, op, loc: str) -> None:
        self._shape_op(op, loc, lambda v, ty: t.Broadcast(v, ty, loc))

    def _op_tt_expand_dims(self, op, loc: str) -> None:
        axis = _attr_int(op, "axis")
        self._shape_op(op, loc, lambda v, ty: t.ExpandDims(v, axis, ty, loc))

    def _op_tt_reshape(self, op, loc: str) -> None:
        src_shape = tuple(ir.RankedTensorType(op.operands[0].type).shape)
        if src_shape == tuple(ir.RankedTensorType(op.results[0].type).shape):
            # tl.sum / tl.max without an axis reshape a 1-D tile to its own shape: the tile
            # itself. (As an op it made the emitter compute the reduced values as a tile of
            # their own, which IREE fuses into the reduction, dropping its configuration.)
            self._bind(op, self._get(op.operands[0]))
            return
        axes = _inserted_unit_dims(src_shape, tuple(ir.RankedTensorType(op.results[0].type).shape))
        if axes:
            # Triton >= 3.9 rewrites descriptor accesses with reshapes that only add unit dims:
            # expand_dims, which the pointer and mask analyses follow.
            def expand(v: t.Value, ty: t.TileType) -> t.Op:
                shape = list(v.shape)
                for axis in axes[:-1]:
                    shape.insert(axis, 1)
                    v = self._emit(t.ExpandDims(v, axis, t.TileType(tuple(shape), ty.dtype), loc)).result
                return t.ExpandDims(v, axes[-1], ty, loc)
            self._shape_op(op, loc, expand)
            return
        # allow_reorder (a unit attribute) lets the compiler pick any element order; row-major,
        # which Triton's interpreter uses too, is one valid choice.
        self._shape_op(op, loc, lambda v, ty: t.Reshape(v, ty, loc))

    def _op_tt_unsplat(self, op, loc: str) -> None:
        src = self._get(op.operands[0])
        if isinstance(src, Ptr):
            self._bind(op, src.moved(self._emit(t.Unsplat(src.offsets, t.ScalarType("i64"), loc)).result))
        elif isinstance(src, Addr):
            self._bind(op, Addr(src.buffer, self._emit(t.Unsplat(src.value, t.ScalarType("i64"), loc)).result))
        else:
            self._bind(op, self._emit(t.Unsplat(src, self._type(op.results[0].type, op), loc)).result)

    def _op_tt_trans(self, op, loc: str) -> None:
        order = tuple(ir.DenseI32ArrayAttr(op.attributes["order"]))
        self._shape_op(op, loc, lambda v, ty: t.Trans(v, order, ty, loc))

    def _two_operand_shape_op(self, op, loc: str, make) -> None:
        """tt.join / tt.cat: of two values, or of two pointers into one argument."""
        a, b = (self._get(v) for v in op.operands)
        rty = ir.RankedTensorType(op.results[0].type)
        if isinstance(a, Addr) or isinstance(b, Addr):
            raise self._addr_misused(op)
        if isinstance(a, Ptr) or isinstance(b, Ptr):
            if not (isinstance(a, Ptr) and isinstance(b, Ptr) and a.buffer is b.buffer and a.view == b.view):
                raise self._unsupported(op, "pointers into different arguments")
            new = make(a.offsets, b.offsets, t.TileType(tuple(rty.shape), "i64"))
            self._bind(op, a.moved(self._emit(new).result))
        else:
            self._bind(op, self._emit(make(a, b, self._type(rty, op))).result)

    def _op_tt_join(self, op, loc: str) -> None:
        self._two_operand_shape_op(op, loc, lambda a, b, ty: t.Join(a, b, ty, loc))

    def _op_tt_cat(self, op, loc: str) -> None:
        self._two_operand_shape_op(op, loc, lambda a, b, ty: t.Cat(a, b, ty, loc))

    def _op_tt_split(self, op, loc: str) -> None:
        src = self._get(op.operands[0])
        if isinstance(src, Ptr):
            shape = tuple(ir.RankedTensorType(op.results[0].type).shape)
            split = self._emit(t.Split(src.offsets, [t.TileType(shape, "i64")] * 2, loc))
            for r, tv in zip(op.results, split.results):
                self.env[r] = src.moved(tv)
            return
        if isinstance(src, Addr):
            raise self._addr_misused(op)
        split = self._emit(t.Split(src, [self._type(r.type, op) for r in op.results], loc))
        for r, tv in zip(op.results, split.results):
            self.env[r] = tv
