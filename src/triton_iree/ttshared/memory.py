"""Memrefs and tensors: pointer views (reinterpret_cast, subview), allocs, copies between
buffers and tiles (loads and stores), scalar element access, tensor slices and reshapes."""
from __future__ import annotations

from typing import Optional

from iree.compiler import ir

from .. import tile as t
from ..analysis import uniform_scalar
from ..errors import InputError
from .values import Alloc, BufView, Scalar, TTSharedBase, Undef, Window, _same, _shape


class MemoryReader(TTSharedBase):
    # -- memref views -----------------------------------------------------------------------
    def _op_memref_reinterpret_cast(self, op, loc: str) -> None:
        src = self.get(op.source, op)
        if not isinstance(src, BufView):
            raise self._unsupported(op, "reinterpret_cast of something other than a pointer argument")
        offs = self.mixed(op.static_offsets, op.offsets, op)
        sizes = self.mixed(op.static_sizes, op.sizes, op)
        strides = self.mixed(op.static_strides, op.strides, op)
        if not all(isinstance(s, int) for s in sizes):
            raise self._unsupported(op, "dynamic sizes (a tile needs a static shape)")
        self.bind(op, BufView(src.param, offs[0], sizes, strides))

    def _dropped_dims(self, op, sizes: list[Scalar], result_rank: int) -> set[int]:
        if result_rank == len(sizes):
            return set()
        ones = {d for d, s in enumerate(sizes) if isinstance(s, int) and s == 1}
        if len(sizes) - result_rank != len(ones):
            raise self._unsupported(op, "an ambiguous rank-reducing slice")
        return ones

    def _op_memref_subview(self, op, loc: str) -> None:
        src = self.get(op.source, op)
        offs = self.mixed(op.static_offsets, op.offsets, op)
        sizes = self.mixed(op.static_sizes, op.sizes, op)
        strides = self.mixed(op.static_strides, op.strides, op)
        dropped = self._dropped_dims(op, sizes, op.result.type.rank)
        if isinstance(src, BufView):
            if len(src.sizes) != len(sizes):
                raise self._unsupported(op, "a subview of a pointer argument that was not reinterpret_cast")
            offset = src.offset
            for o, s in zip(offs, src.strides):
                offset = self.add(offset, self.mul(o, s, loc), loc)
            keep = [d for d in range(len(sizes)) if d not in dropped]
            self.bind(op, BufView(src.param, offset, [sizes[d] for d in keep],
                                  [self.mul(src.strides[d], strides[d], loc) for d in keep]))
            return
        if isinstance(src, Alloc):
            src = Window.whole(src)
        if not isinstance(src, Window):
            raise self._unsupported(op, "a subview of this memref")
        self.bind(op, self._subwindow(op, src, offs, sizes, strides, dropped, loc))

    def _subwindow(self, op, src: Window, offs, sizes, strides, dropped, loc: str) -> Window:
        if not all(isinstance(s, int) and s == 1 for s in strides):
            raise self._unsupported(op, "a strided slice of a tile")
        dims, fixed = [], dict(src.fixed)
        for k, (e, a, _) in enumerate(src.dims):
            origin = self.add(a, offs[k], loc)
            if k in dropped:
                fixed[e] = origin
            else:
                dims.append((e, origin, sizes[k]))
        return Window(src.root, dims, fixed)

    def _alias(self, op, loc: str) -> None:
        self.bind(op, self.get(op.operation.operands[0], op))

    _op_memref_cast = _alias
    _op_memref_assume_alignment = _alias
    _op_tensor_cast = _alias

    def _op_memref_alloc(self, op, loc: str) -> None:
        ty = op.result.type
        if len(op.operation.operands):
            raise self._unsupported(op, "an alloc with dynamic sizes")
        shape = self._static_shape(ty, op)
        dtype = self._dtype(ty.element_type, op)
        self.bind(op, Alloc(shape, dtype, Undef(shape, dtype)))

    _op_memref_alloca = _op_memref_alloc

    def _op_memref_dealloc(self, op, loc: str) -> None:
        pass

    # -- loads and stores ---------------------------------------------------------------------
    def _bounds(self, shape, win: Window, sizes: list[Scalar]) -> dict[int, tuple[Scalar, Scalar, bool]]:
        """Per root dim that needs a mask: (origin, size, needs a lower bound)."""
        out = {}
        for (e, a, _), n in zip(win.dims, sizes):
            whole = isinstance(a, int) and a == 0 and isinstance(n, int) and n >= shape[e]
            if not whole:
                out[e] = (a, n, not (isinstance(a, int) and a <= 0))
        for e, a in win.fixed.items():
            if not (isinstance(a, int) and a == 0 and shape[e] == 1):
                out[e] = (a, 1, True)
        return out

    def _mask(self, shape, bounds: dict, loc: str) -> Optional[t.Value]:
        """The i1 tile `origin_d <= range_d < origin_d + size_d` over the bounded dims."""
        mask = None
        for e, (a, n, lower) in sorted(bounds.items()):
            idx = self.index_range(shape[e], a, loc)
            n1 = self.splat(self.i64(n, loc), (shape[e],), loc)
            m = self.ew("arith.cmpi", [idx, n1], "i1", loc, {"predicate": "slt"})
            if lower:
                z = self.zeros((shape[e],), "i64", loc)
                m = self._and(self.ew("arith.cmpi", [idx, z], "i1", loc, {"predicate": "sge"}), m, loc)
            mask = self._and(mask, self.place(m, e, shape, loc) if len(shape) > 1 else m, loc)
        return mask

    def _access(self, win: Window, buf: BufView, op, loc: str) -> tuple[t.Value, Optional[t.Value]]:
        """Offsets (i64) and mask, at the shape of `win`'s root, for moving the window's elements
        to or from the buffer view `buf` (same shape as the window)."""
        shape = _shape(win.root)
        if len(win.dims) != len(buf.sizes):
            raise self._unsupported(op, "a copy between views of different ranks")
        sizes = []
        for (_, _, n), m in zip(win.dims, buf.sizes):
            if isinstance(n, int) and isinstance(m, int) and m >= 0 and n != m:
                raise InputError(f"copy between views of different sizes ({n} and {m})",
                                 kernel=self.kernel_name, loc=loc or None)
            sizes.append(n if isinstance(n, int) or not isinstance(m, int) or m < 0 else m)
        if not shape:
            return self.i64(buf.offset, loc), None
        offsets = self.splat(self.i64(buf.offset, loc), shape, loc)
        for (e, a, _), st in zip(win.dims, buf.strides):
            if isinstance(st, int) and st == 0:
                continue
            idx = self.index_range(shape[e], a, loc)
            if not (isinstance(st, int) and st == 1):
                idx = self.ew("arith.muli", [idx, self.splat(self.i64(st, loc), (shape[e],), loc)], "i64", loc)
            offsets = self.ew("arith.addi", [offsets, self.place(idx, e, shape, loc)], "i64", loc)
        bounds = self._bounds(shape, win, sizes)
        # A bound on a size-1 dim becomes a condition folded into a bound of a longer dim (it
        # makes that dim's valid range empty), so that the access stays one structured slice.
        wide = [e for e in range(len(shape)) if shape[e] > 1]
        narrow = [e for e in bounds if shape[e] == 1]
        if wide and narrow:
            guard = None
            for e in narrow:
                a, n, lower = bounds.pop(e)
                neg = self.i64(self.sub(0, a, loc), loc)
                g = self.ew("arith.cmpi", [neg, self.i64(n, loc)], "i1", loc, {"predicate": "slt"})
                if lower:
                    g = self._and(g, self.ew("arith.cmpi", [neg, self.i64(0, loc)], "i1", loc,
                                             {"predicate": "sge"}), loc)
                guard = self._and(guard, g, loc)
            e = next((d for d in reversed(wide) if d in bounds), wide[-1])
            a, n, lower = bounds.get(e, (0, shape[e], False))
            n = self.select(guard, self.i64(n, loc), self.i64(0, loc), loc)
            bounds[e] = (a, n, lower)
        return offsets, self._mask(shape, bounds, loc)

    def _load_into(self, win: Window, buf: BufView, op, loc: str) -> None:
        alloc = win.root
        if buf.param.dtype != alloc.dtype:
            raise self._unsupported(op, f"a copy from {buf.param.dtype} into {alloc.dtype}")
        offsets, mask = self._access(win, buf, op, loc)
        ty = t.TileType(alloc.shape, alloc.dtype) if alloc.shape else t.ScalarType(alloc.dtype)
        prev = alloc.value
        if mask is None or isinstance(prev, Undef):
            new = self.emit(t.Load(buf.param, offsets, mask, None, ty, loc)).result
        elif uniform_scalar(prev) is not None:
            new = self.emit(t.Load(buf.param, offsets, mask, prev, ty, loc)).result
        else:
            ld = self.emit(t.Load(buf.param, offsets, mask, None, ty, loc)).result
            new = self.select(mask, ld, prev, loc)
        alloc.value = new

    def _store_from(self, win: Window, buf: BufView, op, loc: str) -> None:
        value = self.tile(win.root, op)
        if buf.param.dtype != value.dtype:
            raise self._unsupported(op, f"a store of {value.dtype} into {buf.param.dtype}")
        offsets, mask = self._access(win, buf, op, loc)
        self.emit(t.Store(buf.param, offsets, value, mask, loc))

    def _assign(self, src: Window, dst: Window, op, loc: str) -> None:
        """Copies window `src` of a tile into window `dst` of an alloc."""
        if _shape(src.root) != dst.root.shape or src.root.dtype != dst.root.dtype or \
                len(src.dims) != len(dst.dims) or src.fixed or dst.fixed or \
                not all(e1 == e2 and _same(a1, a2) for (e1, a1, _), (e2, a2, _) in zip(src.dims, dst.dims)):
            raise self._unsupported(op, "a copy between differently placed parts of tiles")
        value = self.tile(src.root, op)
        shape = dst.root.shape
        mask = self._mask(shape, self._bounds(shape, dst, [n for _, _, n in dst.dims]), loc) if shape else None
        if mask is not None and not isinstance(dst.root.value, Undef):
            value = self.select(mask, value, dst.root.value, loc)
        dst.root.value = value

    def _copy(self, src, dst, op, loc: str) -> None:
        src = Window.whole(src) if isinstance(src, (Alloc, t.Value, Undef)) else src
        dst = Window.whole(dst) if isinstance(dst, Alloc) else dst
        if isinstance(dst, Window) and not isinstance(dst.root, Alloc):
            raise self._unsupported(op, "a copy into a tensor")
        if isinstance(src, BufView) and isinstance(dst, Window):
            self._load_into(dst, src, op, loc)
        elif isinstance(src, Window) and isinstance(dst, BufView):
            if isinstance(src.root, Alloc):
                src = Window(src.root.value, src.dims, src.fixed)
            self._store_from(src, dst, op, loc)
        elif isinstance(src, Window) and isinstance(dst, Window):
            if isinstance(src.root, Alloc):
                src = Window(src.root.value, src.dims, src.fixed)
            self._assign(src, dst, op, loc)
        else:
            raise self._unsupported(op, "a copy from one pointer argument to another")

    def _op_memref_copy(self, op, loc: str) -> None:
        self._copy(self.get(op.source, op), self.get(op.target, op), op, loc)

    def _op_bufferization_materialize_in_destination(self, op, loc: str) -> None:
        if op.operation.results:
            raise self._unsupported(op, "a tensor destination")
        self._copy(self.get(op.operation.operands[0], op), self.get(op.operation.operands[1], op), op, loc)

    def _op_bufferization_to_tensor(self, op, loc: str) -> None:
        src = self.get(op.operation.operands[0], op)
        if isinstance(src, Alloc):
            self.bind(op, src.value)
        elif isinstance(src, Window) and isinstance(src.root, Alloc):
            self.bind(op, Window(src.root.value, src.dims, src.fixed))
        elif isinstance(src, BufView) and all(isinstance(s, int) and s >= 0 for s in src.sizes):
            tmp = Alloc(tuple(src.sizes), src.param.dtype, Undef(tuple(src.sizes), src.param.dtype))
            self._load_into(Window.whole(tmp), src, op, loc)
            self.bind(op, tmp.value)
        else:
            raise self._unsupported(op, "to_tensor of this memref")

    def _op_bufferization_to_buffer(self, op, loc: str) -> None:
        x = self.get(op.operation.operands[0], op)
        if isinstance(x, Window):
            raise self._unsupported(op, "to_buffer of a part of a tile")
        self.bind(op, Alloc(_shape(x), x.dtype, x))

    _op_bufferization_to_memref = _op_bufferization_to_buffer

    def _op_bufferization_alloc_tensor(self, op, loc: str) -> None:
        if len(op.operation.operands):
            raise self._unsupported(op, "an alloc_tensor with operands")
        ty = self._type(op.result.type, op)
        self.bind(op, Undef(ty.shape, ty.dtype))

    # -- scalar element access -------------------------------------------------------------------
    def _indices(self, op, values) -> list[t.Value]:
        return [self.i64(self.scalar(v, op), self.loc(op)) for v in values]

    def _point(self, x, idx: list[t.Value], op, loc: str):
        """(root, root indices) of element `idx` of an alloc or tile window."""
        win = Window.whole(x) if not isinstance(x, Window) else x
        full: dict[int, Scalar] = dict(win.fixed)
        for (e, a, _), i in zip(win.dims, idx):
            full[e] = self.add(a, i, loc)
        return win.root, [full[e] for e in range(len(_shape(win.root)))]

    def _point_mask(self, shape, at: list[Scalar], loc: str) -> t.Value:
        mask = None
        for e, i in enumerate(at):
            m = self.ew("arith.cmpi", [self.index_range(shape[e], 0, loc),
                                       self.splat(self.i64(i, loc), (shape[e],), loc)], "i1", loc,
                        {"predicate": "eq"})
            mask = self._and(mask, self.place(m, e, shape, loc) if len(shape) > 1 else m, loc)
        return mask

    def _extract(self, tile_v: t.Value, at: list[Scalar], loc: str) -> t.Value:
        """One element of a tile: select it, then sum the tile (the others add nothing)."""
        if not tile_v.is_tile:
            return tile_v
        shape, dtype = tile_v.shape, tile_v.dtype
        if dtype == "i1":
            name, ident = "arith.ori", False
        elif t.is_float(dtype):
            name, ident = "arith.addf", -0.0   # x + -0.0 == x for every x
        else:
            name, ident = "arith.addi", 0
        x = self.select(self._point_mask(shape, at, loc), tile_v, self.const(ident, dtype, shape, loc), loc)
        for axis in reversed(range(len(shape))):
            blk = t.Block()
            lhs, rhs = t.Value(t.ScalarType(dtype), blk), t.Value(t.ScalarType(dtype), blk)
            blk.args = [lhs, rhs]
            y = t.Elementwise(name, [lhs, rhs], t.ScalarType(dtype), loc=loc)
            blk.ops.append(y)
            blk.yields = [y.result]
            rshape = shape[:axis]
            ty = t.TileType(rshape, dtype) if rshape else t.ScalarType(dtype)
            x = self.emit(t.Reduce([x], axis, blk, [ty], loc)).result
            shape = rshape
        return x

    def _element_load(self, op, m, idx: list[t.Value], loc: str) -> None:
        if isinstance(m, BufView):
            ty = t.ScalarType(m.param.dtype)
            off = self.i64(self._element_offset(m, idx, loc), loc)
            self.bind(op, self.emit(t.Load(m.param, off, None, None, ty, loc)).result)
            return
        root, at = self._point(m, idx, op, loc)
        self.bind(op, self._extract(self.tile(root, op), at, loc))

    def _element_store(self, op, v: t.Value, m, idx: list[t.Value], loc: str) -> None:
        if isinstance(m, BufView):
            if v.dtype != m.param.dtype:
                raise self._unsupported(op, f"a store of {v.dtype} into {m.param.dtype}")
            self.emit(t.Store(m.param, self.i64(self._element_offset(m, idx, loc), loc), v, None, loc))
            return
        root, at = self._point(m, idx, op, loc)
        if not isinstance(root, Alloc):
            raise self._unsupported(op, "a store into this memref")
        root.value = self._insert(root.value, v, at, root.shape, loc)

    def _element_offset(self, m: BufView, idx: list[Scalar], loc: str) -> Scalar:
        off = m.offset
        for i, st in zip(idx, m.strides):
            off = self.add(off, self.mul(i, st, loc), loc)
        return off

    def _op_memref_load(self, op, loc: str) -> None:
        ops = list(op.operation.operands)
        self._element_load(op, self.get(ops[0], op), self._indices(op, ops[1:]), loc)

    def _op_memref_store(self, op, loc: str) -> None:
        ops = list(op.operation.operands)
        self._element_store(op, self.scalar(ops[0], op), self.get(ops[1], op), self._indices(op, ops[2:]), loc)

    def _affine_indices(self, op, operands) -> list[Scalar]:
        """The indices of affine.load/store: sums and products of dims, symbols and constants."""
        amap = ir.AffineMapAttr(op.attributes["map"]).value
        vals = self._indices(op, operands)
        loc = self.loc(op)

        def value(e) -> Scalar:
            if isinstance(e, ir.AffineDimExpr):
                return vals[e.position]
            if isinstance(e, ir.AffineSymbolExpr):
                return vals[amap.n_dims + e.position]
            if isinstance(e, ir.AffineConstantExpr):
                return int(e.value)
            if isinstance(e, ir.AffineAddExpr):
                return self.add(value(e.lhs), value(e.rhs), loc)
            if isinstance(e, ir.AffineMulExpr):
                return self.mul(value(e.lhs), value(e.rhs), loc)
            raise self._unsupported(op, f"affine map {amap}")

        return [value(e) for e in amap.results]

    def _op_affine_load(self, op, loc: str) -> None:
        ops = list(op.operation.operands)
        self._element_load(op, self.get(ops[0], op), self._affine_indices(op, ops[1:]), loc)

    def _op_affine_store(self, op, loc: str) -> None:
        ops = list(op.operation.operands)
        self._element_store(op, self.scalar(ops[0], op), self.get(ops[1], op),
                            self._affine_indices(op, ops[2:]), loc)

    def _insert(self, prev, v: t.Value, at, shape, loc: str) -> t.Value:
        if not shape:
            return v
        new = self.splat(v, shape, loc)
        if isinstance(prev, Undef):
            return new
        return self.select(self._point_mask(shape, at, loc), new, prev, loc)

    def _op_tensor_extract(self, op, loc: str) -> None:
        ops = list(op.operation.operands)
        x = self.get(ops[0], op)
        idx = self._indices(op, ops[1:])
        root, at = self._point(x, idx, op, loc)
        self.bind(op, self._extract(self.tile(root, op), at, loc))

    def _op_tensor_insert(self, op, loc: str) -> None:
        ops = list(op.operation.operands)
        v = self.scalar(ops[0], op)
        x = self.get(ops[1], op)
        if isinstance(x, Window):
            raise self._unsupported(op, "an insert into a part of a tile")
        idx = self._indices(op, ops[2:])
        self.bind(op, self._insert(x, v, idx, _shape(x), loc))

    # -- tensors ------------------------------------------------------------------------------
    def _op_tensor_empty(self, op, loc: str) -> None:
        if len(op.operation.operands):
            raise self._unsupported(op, "dynamic sizes")
        ty = self._type(op.result.type, op)
        self.bind(op, Undef(ty.shape, ty.dtype))

    def _op_tensor_splat(self, op, loc: str) -> None:
        ty = self._type(op.result.type, op)
        self.bind(op, self.splat(self.scalar(op.operation.operands[0], op), ty.shape, loc))

    def _op_tensor_extract_slice(self, op, loc: str) -> None:
        src = self.get(op.source, op)
        if isinstance(src, (t.Value, Undef)):
            src = Window.whole(src)
        if not isinstance(src, Window) or isinstance(src.root, Alloc):
            raise self._unsupported(op, "a slice of this value")
        offs = self.mixed(op.static_offsets, op.offsets, op)
        sizes = self.mixed(op.static_sizes, op.sizes, op)
        strides = self.mixed(op.static_strides, op.strides, op)
        dropped = self._dropped_dims(op, sizes, op.result.type.rank)
        self.bind(op, self._subwindow(op, src, offs, sizes, strides, dropped, loc))

    def _reshape(self, op, loc: str) -> None:
        x = self.value(op.operation.operands[0], op)
        ty = self._type(op.result.type, op)
        if not isinstance(ty, t.TileType) or not x.is_tile:
            raise self._unsupported(op, "a reshape to or from a 0-d tensor")
        self.bind(op, self.emit(t.Reshape(x, ty, loc)).result)

    _op_tensor_expand_shape = _reshape
    _op_tensor_collapse_shape = _reshape
