"""Slab loads: a 2-D tile read in place from one 1-D slice of its buffer that holds its rows
(a "slab", viewed as rows x stride), full or masked, and which loads can be read so."""
from __future__ import annotations

import math

from .. import tile as t
from ..forms import StructuredAccess
from .memory import MemoryEmitter


class SlabEmitter(MemoryEmitter):
    """2-D loads as slices of one slab."""

    def _masked_slab_load(self, op: t.Load, acc: StructuredAccess, shape, active, inner, rty: t.TileType,
                          ranges: dict, other: str, checked: bool) -> tuple[str, tuple, str]:
        """A masked R x C tile: its valid nr x nc box as a slice of one slab, inserted into a tile
        of `other`. The slab holds the nr rows of stride s from the box's first element e (from
        o = e - min(e, s - nc), like `_slab_load`); it is inside the buffer when C <= s and
        R*s <= len. Unless the version checked that (`checked`), the slab conditions pick
        between this and the row loop at run time; both write into the same tile."""
        p = op.buffer
        outer = self.slab_able[id(op)][0]
        rows, cols = shape[outer], shape[inner]
        dt = p.dtype
        tile_ty = t.TileType((rows, cols), dt)
        init = self._tile_init(other, tile_ty)
        cond = None if checked else self._and(self._slab_conditions(op, acc, outer, inner))
        if cond is not None:
            res = self.fresh("ld")
            self.w(f"{res} = scf.if {cond} -> ({tile_ty.mlir()}) {{")
            self.indent += 1
            self.scopes.append({})
        (lo_r, hi_r), (lo_c, hi_c) = ranges[outer], ranges[inner]
        stride = acc.form.strides[outer]
        s0 = self.poly(stride)
        nr = self._binop("arith.subi", hi_r, lo_r)
        nc = self._binop("arith.subi", hi_c, lo_c)
        e = self._row_offset(acc, {outer: lo_r, inner: lo_c})
        col = self._binop("arith.minsi", e, self._binop("arith.subi", s0, nc))
        # An empty box reads nothing, from offset 0 (its first element may be out of bounds).
        zero = self.idx(0)
        empty = self._binop("arith.ori", self._cmp("eq", nr, zero), self._cmp("eq", nc, zero), "i1")
        nr = self._select_index(empty, zero, nr)
        col = self._select_index(empty, zero, col)
        start = self._select_index(empty, zero, self._binop("arith.subi", e, col))
        size = self._binop("arith.muli", nr, s0)
        sc = stride.const_value
        vty = f"tensor<?x{'?' if sc is None else sc}x{dt}>"
        x, y, z, r = self.fresh("slab"), self.fresh("view"), self.fresh("box"), self.fresh("tile")
        self.w(f"{x} = iree_tensor_ext.dispatch.tensor.load {self.binding[id(p)]}, offsets = [{start}], "
               f"sizes = [{size}], strides = [1] : {self.buf_type(p)} -> tensor<?x{dt}>")
        self.w(f"{y} = tensor.expand_shape {x} [[0, 1]] output_shape [{nr}, {s0 if sc is None else sc}] "
               f": tensor<?x{dt}> into {vty}")
        self.w(f"{z} = tensor.extract_slice {y}[0, {col}] [{nr}, {nc}] [1, 1] : {vty} to tensor<?x?x{dt}>")
        self.w(f"{r} = tensor.insert_slice {z} into {init}[{lo_r}, {lo_c}] [{nr}, {nc}] [1, 1] : "
               f"tensor<?x?x{dt}> into {tile_ty.mlir()}")
        if cond is None:
            return r, (outer, inner), tile_ty.mlir()
        self.w(f"scf.yield {r} : {tile_ty.mlir()}")
        self.scopes.pop()
        self.indent -= 1
        self.w("} else {")
        self.indent += 1
        self.scopes.append({})
        rowwise = self._slice_load(p, acc, shape, active, inner, rty, ranges, other, init=init)
        self.w(f"scf.yield {rowwise} : {tile_ty.mlir()}")
        self.scopes.pop()
        self.indent -= 1
        self.w("}")
        return res, (outer, inner), tile_ty.mlir()

    def _slab_load(self, p: t.Param, acc: StructuredAccess, shape, active, inner) -> tuple[str, tuple, str]:
        """A full R x C tile (outer stride s, inner stride 1) as a slice of one 1-D load.

        The slab is the R*s elements from o = off - min(off, s - C), viewed as R x s; the tile is
        columns [off - o, off - o + C) of it. The version checks C <= s and R*s <= len, so the
        slab is inside the buffer: it ends at the tile's last element, or at R*s when o = 0."""
        outer = active[0] if active[1] == inner else active[1]
        rows, cols = shape[outer], shape[inner]
        dt = p.dtype
        stride = acc.form.strides[outer]
        s0 = self.aligned(self.poly(stride), self.divisor(stride))
        off = self.poly(acc.form.offset)
        d = math.gcd(self.divisor(acc.form.offset), self.divisor(stride), cols)
        col = self.aligned(self._binop("arith.minsi", off, self._binop("arith.subi", s0, self.idx(cols))), d)
        start = self.aligned(self._binop("arith.subi", off, col), d)
        if stride.const_value is not None:
            n = rows * stride.const_value
            size, sty = str(n), f"tensor<{n}x{dt}>"
            vty = f"tensor<{rows}x{stride.const_value}x{dt}>"
        else:
            size = self._binop("arith.muli", s0, self.idx(rows))
            sty, vty = f"tensor<?x{dt}>", f"tensor<{rows}x?x{dt}>"
        x, y, z = self.fresh("slab"), self.fresh("view"), self.fresh("tile")
        self.w(f"{x} = iree_tensor_ext.dispatch.tensor.load {self.binding[id(p)]}, offsets = [{start}], "
               f"sizes = [{size}], strides = [1] : {self.buf_type(p)} -> {sty}")
        self.w(f"{y} = tensor.expand_shape {x} [[0, 1]] output_shape [{rows}, {s0 if stride.const_value is None else stride.const_value}] "
               f": {sty} into {vty}")
        ty = f"tensor<{rows}x{cols}x{dt}>"
        self.w(f"{z} = tensor.extract_slice {y}[0, {col}] [{rows}, {cols}] [1, 1] : {vty} to {ty}")
        return z, (outer, inner), ty

    def _slab_candidates(self, full_only: bool) -> list:
        """2-D loads that can be read as one slab: (op, access, outer, inner); with `full_only`,
        those that are full somewhere in the full version (whose conditions it checks).

        A tile of R rows (outer dim, runtime stride s >= C) of C contiguous elements (inner
        dim) lies inside the R*s elements from its first one; so one 1-D slice, viewed as R x s,
        holds it, and the tile is a slice of that view: no copy into a stack tile."""
        plan = self.facts.plan
        peeled = set().union(*(pl.accesses for pl in plan.peels.values())) if plan.peels else set()
        out = []
        for op in self.k.walk():
            if not isinstance(op, t.Load) or op.result.id not in self.facts.live or not op.result.is_tile:
                continue
            acc = self.facts.access(op)
            if not isinstance(acc, StructuredAccess) or id(op.buffer) in self.written_ids:
                continue
            if op.result.dtype != op.buffer.dtype:
                continue
            unmasked = acc.box is None or acc.box.trivially_full
            if full_only and not (unmasked or id(op) in plan.full or id(op) in peeled):
                continue
            shape = op.result.shape
            active = [d for d in range(len(shape)) if not acc.form.strides[d].is_zero()]
            if len(active) != 2:
                continue
            ones = [d for d in active if acc.form.strides[d].const_value == 1]
            if not ones:
                continue
            inner = ones[-1]
            outer = active[0] if active[1] == inner else active[1]
            s0 = acc.form.strides[outer]
            if not self.facts.at_entry(s0):
                continue
            if s0.const_value is not None and s0.const_value < shape[inner]:
                continue
            if acc.box is not None and not acc.box.trivially_full and any(
                    d not in active and shape[d] != 1 and (acc.box.lo[d] or acc.box.hi[d])
                    for d in range(len(shape))):
                continue
            out.append((op, acc, outer, inner))
        return out

    def _slab_conditions(self, op: t.Load, acc: StructuredAccess, outer: int, inner: int) -> list[str]:
        """C <= s and R * s <= len: then the slab of every valid tile is inside the buffer."""
        shape = op.result.shape
        s0 = self.poly(acc.form.strides[outer])
        conds = []
        if acc.form.strides[outer].const_value is None:
            conds.append(self._cmp("sle", self.idx(shape[inner]), s0))
        span = self._binop("arith.muli", s0, self.idx(shape[outer]))
        conds.append(self._cmp("sle", span, self.buf_len[id(op.buffer)]))
        return conds
