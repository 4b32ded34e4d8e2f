"""Memory: what loads and stores share. The geometry of structured accesses (layout, valid
ranges, row offsets, row loops), the condition of a single-element access, whole-buffer views,
and the copies that snapshots are (see `memory_order`). Loads are in `loads` and `slabs`; stores
and scatters in `stores`."""
from __future__ import annotations

import math
from typing import Optional

from .. import tile as t
from ..forms import Box, Poly, StructuredAccess
from .values import EmitterBase


class MemoryEmitter(EmitterBase):
    """What loads and stores share."""

    def _copy(self, name: str, ty: str) -> str:
        c = self.fresh("snap")
        self.w(f"{c} = bufferization.alloc_tensor() copy({name}){self.alloc_space} : {ty}")
        return c

    def _full_buffer(self, p: t.Param) -> str:
        """The whole buffer as a tensor (a view of the binding, not a copy).

        Read-only buffers are loaded once at the top of the dispatch. Buffers the kernel also
        writes are loaded again at each gather, so that the gather sees earlier stores.
        """
        if id(p) in self.full_buffer:
            return self.full_buffer[id(p)]
        n = self.fresh("buf")
        self.w(f"{n} = iree_tensor_ext.dispatch.tensor.load {self.binding[id(p)]}, offsets = [0], "
               f"sizes = [{self.buf_len[id(p)]}], strides = [1] : {self.buf_type(p)} -> tensor<?x{p.dtype}>")
        return n

    def _layout(self, acc: StructuredAccess, shape: tuple[int, ...], op: t.Op):
        """(active dims, inner dim) of a structured access."""
        strides = acc.form.strides
        active = [d for d in range(len(shape)) if not strides[d].is_zero()]
        if not active:
            return active, None
        ones = [d for d in active if strides[d].const_value == 1]
        inner = ones[-1] if ones else active[-1]
        return active, inner

    def _valid_range(self, box: Optional[Box], d: int, size: int) -> tuple[str, str]:
        """Clamped [lo, hi) of dim d as index values (static when unbounded)."""
        if box is None or (not box.lo[d] and not box.hi[d]):
            return self.idx(0), self.idx(size)
        lo = self.idx(0)
        for p in box.lo[d]:
            lo = self._binop("arith.maxsi", lo, self.poly(p))
        lo = self._binop("arith.minsi", lo, self.idx(size))
        hi = self.idx(size)
        for p in box.hi[d]:
            hi = self._binop("arith.minsi", hi, self.poly(p))
        hi = self._binop("arith.maxsi", hi, lo)
        return lo, hi

    def _masked_ranges(self, box: Box, shape, active: list[int], inner: int) -> dict:
        """Clamped [lo, hi) per active dim. The rest of the mask (scalar conditions, bounds on
        size-1 dims) holds for the whole tile or for none of it: where it fails, the inner
        range is emptied, so nothing is read or written."""
        ranges = {d: self._valid_range(box, d, shape[d]) for d in active}
        rest = Box(tuple(() if d in active else box.lo[d] for d in range(len(shape))),
                   tuple(() if d in active else box.hi[d] for d in range(len(shape))), box.conds)
        pred = self._point_cond(rest)
        if pred is not None:
            lo, hi = ranges[inner]
            ranges[inner] = (lo, self._select_index(pred, hi, lo))
        return ranges

    def _point_cond(self, box: Optional[Box]) -> Optional[str]:
        """For a single-element access, or the dims of size 1 of a tile: an i1 that holds when
        index 0 is inside `box`. Only its conds can say so: the analysis bounds only dims that
        offsets vary along, never one of size 1 (Triton folds a one-element tl.arange)."""
        if box is None:
            return None
        if any(box.lo) or any(box.hi):
            raise AssertionError(f"a bound on a dim of size 1: {box}")
        return self._and([self._cond_value(c) for c in box.conds])

    def _element_offset(self, start: str, acc: StructuredAccess, active: list[int], index,
                        ranges: Optional[dict]) -> tuple[str, Optional[str]]:
        """The buffer offset of the tile element whose index along active dim k is `index(k)`,
        from the tile's `start`, and whether every index is inside its dim's [lo, hi) of
        `ranges` (None: no condition)."""
        off, conds = start, []
        for k, d in enumerate(active):
            i = index(k)
            off = self._binop("arith.addi", off, self._binop("arith.muli", i, self.poly(acc.form.strides[d])))
            if ranges is not None:
                lo, hi = ranges[d]
                conds += [self._cmp("sge", i, lo), self._cmp("slt", i, hi)]
        return off, self._and(conds)

    def _row_start(self, acc: StructuredAccess, pos: dict[int, str]) -> str:
        """`_row_offset` of a whole row, with its divisibility written into it (`aligned`)."""
        d = self.divisor(acc.form.offset)
        for k in pos:
            d = math.gcd(d, self.divisor(acc.form.strides[k]))
        return self.aligned(self._row_offset(acc, pos), d)

    def _row_offset(self, acc: StructuredAccess, pos: dict[int, str]) -> str:
        """offset + sum over dims in `pos` of pos[d] * stride[d]."""
        off = self.poly(acc.form.offset)
        for d, i in pos.items():
            s = acc.form.strides[d]
            term = i if s.const_value == 1 else self._binop("arith.muli", i, self.poly(s))
            off = self._binop("arith.addi", off, term)
        return off

    def _stride(self, p: Poly) -> str:
        c = p.const_value
        return str(c) if c is not None else self.poly(p)

    def _row_loops(self, outer: list[int], shape, ranges, init: Optional[str], rty, row) -> str:
        """Nested scf.for over the outer dims; `row(pos, acc)` emits one row, returns the new acc."""
        carried = init is not None
        pos: dict[int, str] = {}
        accs = [init]
        ends = []
        for d in outer:
            lo, hi = (self.idx(0), self.idx(shape[d])) if ranges is None else ranges[d]
            iv = self.fresh("row")
            if carried:
                a = self.fresh("acc")
                r = self.fresh("rows")
                self.w(f"{r} = scf.for {iv} = {lo} to {hi} step {self.idx(1)} iter_args({a} = {accs[-1]}) "
                       f"-> ({rty.mlir()}) {{")
                accs.append(a)
                ends.append(r)
            else:
                self.w(f"scf.for {iv} = {lo} to {hi} step {self.idx(1)} {{")
            self.indent += 1
            self.scopes.append({})
            pos[d] = iv
        res = row(dict(pos), accs[-1] if carried else None)
        for _ in outer:
            if carried:
                self.w(f"scf.yield {res} : {rty.mlir()}")
            self.scopes.pop()
            self.indent -= 1
            self.w("}")
            if carried:
                res = ends.pop()
        return res
