"""Memory: structured slices (rows, slabs, masked boxes), gathers, scatters and scalar
accesses, and the snapshots that keep one program's memory order (see `memory_order`)."""
from __future__ import annotations

import math
from typing import Optional

from .. import tile as t
from ..errors import TYPE_NAMES
from ..analysis import Box, GatherAccess, Poly, StructuredAccess, uniform_scalar
from .values import EmitterBase, _Body, _bytes, _Tensor, literal

class MemoryEmitter(EmitterBase):
    """Loads and stores."""

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

    def _gather_elem(self, body: _Body, op: t.Load, view: tuple) -> str:
        out = body.lines.append
        buf = self._full_buffer(op.buffer)
        off = self._elem(body, op.offsets, view)
        mask = self._elem(body, op.mask, view) if op.mask is not None else None
        if mask is not None:
            z, safe = self.fresh("k"), self.fresh("off")
            out(f"{z} = arith.constant 0 : i64")
            out(f"{safe} = arith.select {mask}, {off}, {z} : i64")
            off = safe
        i, x = self.fresh("ix"), self.fresh("ld")
        out(f"{i} = arith.index_cast {off} : i64 to index")
        out(f"{x} = tensor.extract {buf}[{i}] : tensor<?x{op.buffer.dtype}>")
        if mask is None:
            return x
        if op.other is not None:
            other = self._elem(body, op.other, view)
        else:
            other = self.fresh("k")
            out(f"{other} = arith.constant {literal(0, op.result.dtype)} : {op.result.dtype}")
        r = self.fresh("ld")
        out(f"{r} = arith.select {mask}, {x}, {other} : {op.result.dtype}")
        return r

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

    def _layout(self, acc: StructuredAccess, shape: tuple[int, ...], op: t.Op):
        """(active dims, inner dim) of a structured access."""
        strides = acc.form.strides
        active = [d for d in range(len(shape)) if not strides[d].is_zero()]
        if not active:
            return active, None
        ones = [d for d in active if strides[d].const_value == 1]
        inner = ones[-1] if ones else active[-1]
        return active, inner

    def _structured_load(self, op: t.Load, acc: StructuredAccess) -> None:
        v = op.result
        shape = v.shape
        active, inner = self._layout(acc, shape, op)
        p = op.buffer
        dt = v.dtype
        if dt != p.dtype:
            raise self.err(f"tl.load of {TYPE_NAMES.get(dt, dt)} through a pointer to {TYPE_NAMES.get(p.dtype, p.dtype)} "
                           f"is not supported by triton-iree", op)
        rshape = tuple(shape[d] for d in active)
        rty = t.TileType(rshape, dt) if rshape else None
        box = acc.box
        if box is not None and box.trivially_full:
            box = None
        other = self._uniform_other(op, acc)
        if not active:
            # Every element reads the same address: one scalar load, broadcast.
            s = self._scalar_read(p, self.poly(acc.form.offset), box, other, dt, id(op) in self.snapshots)
            self.bind(("t", v.id), _Tensor(self._fill(s, v.type), tuple(range(len(shape))), v.type.mlir()))
            return
        snapshot = self.snapshotting = id(op) in self.snapshots
        full = box is None or id(op) in self.assume_full
        if full and self.full_version and id(op) in self.slab_ok:
            name, dims, ty = self._slab_load(p, acc, shape, active, inner)
            self._bind_load(v, _Tensor(name, dims, ty), snapshot)
            return
        # (Masked 3-D tiles too on LLVMGPU targets: their valid rows inserted into a fill in two
        # nested loops give wrong tiles there, as a 2 x 4 x 8 tile copied in a kernel loop.)
        if self.gpu_mma or self.gather_loads and len(active) > 1 or self.llvmgpu and len(active) > 2 and not full:
            ranges = None if full else self._masked_ranges(box, shape, active, inner)
            name = self._gather_tile(p, acc, active, rty, ranges, other)
            self._bind_load(v, _Tensor(name, tuple(active), rty.mlir()), snapshot)
            return
        if full:
            name = self._slice_load(p, acc, shape, active, inner, rty, None, other)
        else:
            ranges = self._masked_ranges(box, shape, active, inner)
            checked = self.full_version and id(op) in self.slab_ok
            if id(op) in self.slab_able and (checked or self.slab_able[id(op)] == tuple(active)):
                name, dims, ty = self._masked_slab_load(op, acc, shape, active, inner, rty, ranges,
                                                        other, checked)
                self._bind_load(v, _Tensor(name, dims, ty), snapshot)
                return
            # Not a snapshot: its copy must read the buffer where the program loads, and a pad
            # of the load is pure, so IREE merges it with an identical one from before a store
            # to that buffer and reads the buffer there (a load after a store of the same row
            # would read the row as it was before the store).
            pad = self._gpu_pads() and not snapshot and \
                not all(isinstance(u, t.Store) for u in self._uses.get(v.id, []))
            name = self._slice_load(p, acc, shape, active, inner, rty, ranges, other, pad=pad)
        self._bind_load(v, _Tensor(name, tuple(active), rty.mlir()), snapshot)

    def _gather_tile(self, p: t.Param, acc: StructuredAccess, active: list[int], rty: t.TileType,
                     ranges: Optional[dict], other: str) -> str:
        """The tile read element by element from the whole buffer: element (i, j, ..) from
        offset + i * stride_i + j * stride_j + .., where each index is inside its dim's [lo, hi)
        of `ranges` (None: everywhere), else `other`. Tensor-core programs (`gpu_mma`) read
        every tile this way but the full version's slabs: IREE's vector distribution turns it
        into loads spread over the threads, where a tile of rows (a fill with rows inserted, or
        a pad) ended up in each thread's stack, element by element (13,000 loads a thread in
        the fp16 matmul, and minutes of compile time). So do 2-D loads of programs with a part
        on one thread (`gather_loads`)."""
        buf, dt = self._full_buffer(p), rty.dtype
        e, r, o = self._empty(rty.mlir()), self.fresh("gt"), self.fresh("o")
        dims = ", ".join(f"d{k}" for k in range(len(active)))
        its = ", ".join('"parallel"' for _ in active)
        self.w(f"{r} = linalg.generic {{indexing_maps = [affine_map<({dims}) -> ({dims})>], iterator_types = [{its}]}} "
               f"outs({e} : {rty.mlir()}) {{")
        self.w(f"^bb0({o}: {dt}):")
        self.indent += 1
        self.scopes.append({})
        def index(k: int) -> str:
            i = self.fresh("ix")
            self.w(f"{i} = linalg.index {k} : index")
            return i
        off, ok = self._element_offset(self.poly(acc.form.offset), acc, active, index, ranges)
        if ok is not None:
            off = self._select_index(ok, off, self.idx(0))
        x = self.fresh("x")
        self.w(f"{x} = tensor.extract {buf}[{off}] : tensor<?x{dt}>")
        if ok is not None:
            y = self.fresh("x")
            self.w(f"{y} = arith.select {ok}, {x}, {other} : {dt}")
            x = y
        self.w(f"linalg.yield {x} : {dt}")
        self.scopes.pop()
        self.indent -= 1
        self.w(f"}} -> {rty.mlir()}")
        self.gathered.add(r)
        return r

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

    def _bind_load(self, v: t.Value, e: _Tensor, snapshot: bool) -> None:
        """Binds a loaded tile; a snapshot is a copy made here (see `memory_order`)."""
        self.snapshotting = False
        self.bind(("t", v.id), _Tensor(self._copy(e.name, e.type), e.dims, e.type) if snapshot else e)

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

    def _uniform_other(self, op: t.Load, acc: StructuredAccess) -> str:
        if acc.other is not None:
            if acc.other.is_tile:
                return self.const(acc.other.owner.value, op.result.dtype)
            return self.scalar(acc.other)
        return self.const(0, op.result.dtype)

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

    def _slice_load(self, p: t.Param, acc, shape, active, inner, rty: t.TileType,
                    ranges: Optional[dict], other: str, init: Optional[str] = None, pad: bool = False) -> str:
        """Loads the tile (active dims only). `ranges` None: the whole tile, static sizes.
        `pad`: a masked row as a tensor.pad (see `_gpu_pads`)."""
        outer = [d for d in active if d != inner]
        pos_in_r = {d: i for i, d in enumerate(active)}
        n = shape[inner]
        stride = self._stride(acc.form.strides[inner])
        btype = self.buf_type(p)

        def row(pos: dict[int, str], into: Optional[str]) -> str:
            if ranges is None:
                start = self._row_start(acc, pos)
                size, sty = str(n), f"tensor<{n}x{p.dtype}>"
            else:
                lo, hi = ranges[inner]
                start = self._row_offset(acc, {**pos, inner: lo})
                size = self._binop("arith.subi", hi, lo)
                sty = f"tensor<?x{p.dtype}>"
            x = self.fresh("sl")
            self.w(f"{x} = iree_tensor_ext.dispatch.tensor.load {self.binding[id(p)]}, offsets = [{start}], "
                   f"sizes = [{size}], strides = [{stride}] : {btype} -> {sty}")
            if into is None and ranges is None:
                return x
            if padded:
                return self._pad(x, ranges[inner], n, other, rty)
            offs = [pos[d] if d in pos else "0" for d in active]
            sizes = ["1"] * len(active)
            offs[pos_in_r[inner]] = "0" if ranges is None else ranges[inner][0]
            sizes[pos_in_r[inner]] = str(n) if ranges is None else size
            y = self.fresh("ins")
            self.w(f"{y} = tensor.insert_slice {x} into {into}[{', '.join(offs)}] [{', '.join(sizes)}] "
                   f"[{', '.join('1' for _ in active)}] : {sty} into {rty.mlir()}")
            return y

        padded = pad and ranges is not None and init is None and not outer
        if ranges is None:
            init = None
            if outer:
                init = self._tile_init(other, rty) if self.llvmgpu else self._empty(rty.mlir())
        elif init is None and not padded:
            init = self._tile_init(other, rty)
        if not outer:
            return row({}, init)
        return self._row_loops(outer, shape, ranges, init, rty, row)

    def _tile_init(self, other: str, rty: t.TileType) -> str:
        """The tile of `other` that a load inserts its rows or its valid box into.

        LLVMGPU: in workgroup memory, explicitly. IREE's TileAndFuse pipeline spreads the inserting
        copies over the threads, and places a destination it does not see used by a
        thread-distributed loop in each thread's private memory: each thread then holds only its
        share of the tile, and the ops that read it (a transpose, a reduction, a sum) read the other
        threads' shares uninitialized. Which destinations it keeps in workgroup memory differs with
        the program's shape (a tile loaded in a kernel loop and stored transposed was private)."""
        return self._fill(other, rty, shared=self.llvmgpu)

    def _gpu_pads(self) -> bool:
        """LLVMGPU targets: a masked 1-D row is loaded as a tensor.pad of its valid part, which
        IREE reads with masked vector loads spread over the threads. A fill with the valid part
        inserted is instead copied whole by every thread into its own stack or into workgroup
        memory first: slower (a vector add by about a quarter, softmax by orders of magnitude).
        Not for a tile that is only stored: IREE folds the pad and its
        slice away, and with them the dispatch's configured op. Not in kernel loops, except in
        row programs: elsewhere IREE then gives the dispatch a pipeline that cannot distribute
        the rest ('write affecting operations on global resources are restricted to workgroup
        distributed contexts'). On Vulkan only where IREE configures the dispatch (a reduction
        to a scalar): there the fp16 kernel's masked rows failed to compile as slices
        ('failed to legalize operation memref.subview')."""
        if not self.llvmgpu:
            return self.gpu_whole_reductions and not self.loop_depth
        return not self.loop_depth or self.gpu_row_length is not None

    def _gpu_map_store(self, value: t.Value) -> bool:
        """A masked 1-D store of a tile computed from a reduction to a scalar, on LLVMGPU targets
        (not in kernel loops, except in row programs): see `_map_store`. (Not on Vulkan: not
        tried there.)"""
        return (self.gpu_row_length is not None or self.llvmgpu and self.gpu_whole_reductions and not self.loop_depth) \
            and _after_whole_reduction(value)

    def _pad(self, x: str, valid: tuple[str, str], n: int, other: str, rty: t.TileType) -> str:
        """The n-element tile whose [lo, hi) is `x` (a tensor<?x..>) and whose rest is `other`."""
        lo, hi = valid
        high = self._binop("arith.subi", self.idx(n), hi)
        y, i = self.fresh("pad"), self.fresh("pi")
        self.w(f"{y} = tensor.pad {x} low[{lo}] high[{high}] {{")
        self.w(f"^bb0({i}: index):")
        self.w(f"  tensor.yield {other} : {rty.dtype}")
        self.w(f"}} : tensor<?x{rty.dtype}> to {rty.mlir()}")
        return y

    def _map_store(self, p: t.Param, acc, active: list[int], rty: t.TileType, val: str,
                   ranges: Optional[dict]) -> None:
        """A store as iree_linalg_ext.map_store of the whole tile into the buffer: the element at
        tile index (i, j, ..) goes to offset + i * stride_i + j * stride_j + .. where each index
        is inside its dim's [lo, hi) of `ranges` (None: everywhere). Where IREE distributes the
        tile's ops over threads with layouts (vector distribution: `_gpu_map_store`), a store
        by slices makes it gather the tile into each thread's stack, or shrink the ops producing
        it to the slice's dynamic size and run them serially in every thread. (Other stores keep
        the slices: a map_store of a tile beside a reduction's chain failed to distribute.)"""
        start = self.poly(acc.form.offset)
        buf, btype = self.binding[id(p)], self.buf_type(p)
        whole = self.fresh("buf")
        self.w(f"{whole} = iree_tensor_ext.dispatch.tensor.load {buf}, offsets = [0], "
               f"sizes = [{self.buf_len[id(p)]}], strides = [1] : {btype} -> tensor<?x{p.dtype}>")
        r, ivs = self.fresh("ms"), [self.fresh("mi") for _ in active]
        self.w(f"{r} = iree_linalg_ext.map_store {val} into {whole} {{")
        self.w(f"^bb0({', '.join(f'{i}: index' for i in ivs)}):")
        self.indent += 1
        self.scopes.append({})
        off, ok = self._element_offset(start, acc, active, ivs.__getitem__, ranges)
        self.w(f"iree_linalg_ext.yield {off}, {ok or self.const(True, 'i1')} : index, i1")
        self.scopes.pop()
        self.indent -= 1
        self.w(f"}} : {rty.mlir()} into tensor<?x{p.dtype}> -> tensor<?x{p.dtype}>")
        self.w(f"iree_tensor_ext.dispatch.tensor.store {r}, {buf}, offsets = [0], sizes = [{self.buf_len[id(p)]}], "
               f"strides = [1] : tensor<?x{p.dtype}> -> {btype}")

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

    def _point_cond(self, box: Optional[Box]) -> Optional[str]:
        """For a single-element access, or the dims of size 1 of a tile: an i1 that holds when
        index 0 is inside `box`. Only its conds can say so: the analysis bounds only dims that
        offsets vary along, never one of size 1 (Triton folds a one-element tl.arange)."""
        if box is None:
            return None
        if any(box.lo) or any(box.hi):
            raise AssertionError(f"a bound on a dim of size 1: {box}")
        return self._and([self._cond_value(c) for c in box.conds])

    def _scalar_read(self, p: t.Param, off: str, box: Optional[Box], other: Optional[str], dt: str,
                     snapshot: bool) -> str:
        cond = self._point_cond(box)

        def read() -> str:
            x = self.fresh("sl")
            self.w(f"{x} = iree_tensor_ext.dispatch.tensor.load {self.binding[id(p)]}, offsets = [{off}], "
                   f"sizes = [1], strides = [1] : {self.buf_type(p)} -> tensor<1x{dt}>")
            if snapshot:
                x = self._copy(x, f"tensor<1x{dt}>")
            s = self.fresh("x")
            self.w(f"{s} = tensor.extract {x}[{self.idx(0)}] : tensor<1x{dt}>")
            return s

        if cond is None:
            return read()
        r = self.fresh("x")
        self.w(f"{r} = scf.if {cond} -> ({dt}) {{")
        self.indent += 1
        self.scopes.append({})
        s = read()
        self.w(f"scf.yield {s} : {dt}")
        self.scopes.pop()
        self.indent -= 1
        self.w("} else {")
        self.w(f"  scf.yield {other or self.const(0, dt)} : {dt}")
        self.w("}")
        return r

    def _scalar_load(self, op: t.Load) -> str:
        acc = self.facts.access(op)
        if not isinstance(acc, StructuredAccess):
            raise self.err("tl.load of a scalar through a pointer whose offset triton-iree cannot analyze is not "
                           "supported", op)
        other = self._uniform_other(op, acc) if op.mask is not None else None
        return self._scalar_read(op.buffer, self.poly(acc.form.offset), acc.box, other, op.result.dtype,
                                 id(op) in self.snapshots)

    def _store(self, op: t.Store) -> None:
        acc = self.facts.access(op)
        p = op.buffer
        if op.value.dtype != p.dtype:
            raise self.err(f"tl.store of {TYPE_NAMES.get(op.value.dtype, op.value.dtype)} through a pointer to "
                           f"{TYPE_NAMES.get(p.dtype, p.dtype)} is not supported by triton-iree", op)
        if isinstance(acc, GatherAccess):
            self._scatter(op)
            return
        box = acc.box if acc.box is not None and not acc.box.trivially_full else None
        if not op.value.is_tile:
            self._scalar_write(p, self.poly(acc.form.offset), self.scalar(op.value), box)
            return
        shape = op.value.shape
        active, inner = self._layout(acc, shape, op)
        if not active:
            zeros = ", ".join(self.idx(0) for _ in shape)
            s = self.fresh("x")
            self.w(f"{s} = tensor.extract {self.tensor(op.value)}[{zeros}] : {op.value.type.mlir()}")
            self._scalar_write(p, self.poly(acc.form.offset), s, box)
            return
        val = self.tensor(op.value)
        # Drop broadcast and size-1 dims: they hold one value each (we write index 0).
        rshape = tuple(shape[d] for d in active)
        rty = t.TileType(rshape, p.dtype)
        if len(active) != len(shape):
            red = self.fresh("rs")
            sizes = ", ".join(str(shape[d]) if d in active else "1" for d in range(len(shape)))
            self.w(f"{red} = tensor.extract_slice {val}[{', '.join('0' for _ in shape)}] [{sizes}] "
                   f"[{', '.join('1' for _ in shape)}] : {op.value.type.mlir()} to {rty.mlir()}")
            val = red
        full = box is None or id(op) in self.assume_full
        if self.gpu_mma:
            self._map_store(p, acc, active, rty, val, None if full else self._masked_ranges(box, shape, active, inner))
            return
        if self.options.gpu_tiling is not None and (len(active) > 1 or not full or
                                                    self.llvmgpu and self.tile_stores > 1):
            # (A whole 1-D tile too where the program stores several tiles, on CUDA and HIP: the
            # op computing one that is not the root's was left outside IREE's loop over the
            # workgroups, writing the buffer there, which it refuses.)
            val = self._store_copy(val, rty)
        elif self.snapshots and _loaded(op.value):
            # A dispatch whose stores all store loaded tiles or constants is bufferized by IREE
            # as a copy, where the allocation of a snapshot (`memory_order`) is an error
            # ('unexpected allocation while bufferizing copy only dispatches'): one that computes.
            val = self._store_copy(val, rty)
        elif self.options.gpu_tiling is None and len(active) > 1 and not _loaded(op.value) \
                and not any(isinstance(o, t.Dot) for o in self.k.walk()):
            # A computed tile stored row by row, in a dispatch IREE configures itself (no
            # matmul: `CpuTiling.configures`): IREE moves the elementwise op producing it into the
            # row loop, and where that op also reads a tile another store writes (layer norm's
            # rstd) its tiling pass never finishes. It moves no named op: a copy.
            val = self._store_copy(val, rty)
        if full:
            self._slice_store(p, acc, shape, active, inner, rty, val, None)
        else:
            ranges = self._masked_ranges(box, shape, active, inner)
            if len(active) == 1 and self._gpu_map_store(op.value):
                self._map_store(p, acc, active, rty, val, ranges)
                return
            if self.loop_depth and any(isinstance(o, t.Load) and o.buffer is p for o in self.k.walk()) \
                    and self._from_snapshot(op.value):
                # In a kernel loop that also loads this buffer, IREE shrinks the value's op to
                # the masked size, and with it the snapshot (an allocation) the value is computed
                # from: a dynamic stack allocation per iteration, which it rejects; a copy of the
                # whole tile keeps every allocation static.
                val = self._copy(val, rty.mlir())
            self._slice_store(p, acc, shape, active, inner, rty, val, ranges)

    def _from_snapshot(self, v: t.Value) -> bool:
        """Tile `v` is computed from the tile of a snapshot load (`memory_order`); a tile a loop
        or an `if` yields counts as one."""
        return t.computed_from(v, lambda op: isinstance(op, t.Load) and id(op) in self.snapshots or bool(op.regions()))

    def _store_copy(self, val: str, rty: t.TileType) -> str:
        """The stored tile through a linalg.copy, whose slices the stores take.

        GPUs: without it IREE moves an elementwise op producing the tile into the row loop of
        the store (one copy of the op per row, without its compilation_info), and a tile that is
        only loaded and stored leaves no linalg op at all: either way IREE configures the
        dispatch itself and spreads it over workgroups again, which fails ('workgroup_count_hint'
        op failed to resolve workgroup count hint). IREE moves no named op into the loop. On
        CUDA and HIP a tile from a linalg.fill is copied from a linalg.generic yielding its
        scalar: IREE folds a copy of a fill, and a slice of a fill, into a fill, and the copy's
        configuration with them (a constant tile stored, masked: the same error). (Not where
        IREE configures the dispatch, which drops the copies: `configure`.)"""
        if self.llvmgpu and not self.gpu_whole_reductions and val in self.fills:
            scalar, val, rank = self.fills[val], self.fresh("const"), len(rty.shape)
            self._write_generic(val, _Body(rank), [self._map(rank, [f"d{i}" for i in range(rank)])],
                                ["parallel"] * rank, [self._empty(rty.mlir())], [rty.mlir()], [rty.dtype],
                                [scalar], rty.shape)
        e, c = self._empty(rty.mlir()), self.fresh("cp")
        self._sync()
        # In a runtime `if`, spread over the threads on its own: IREE's loop over the threads
        # around the root leaves a store's copy in the other branch undistributed, and it writes
        # its tile's first element only.
        slot = self._config_slot("copy", rty.shape, ("parallel",) * len(rty.shape), _bytes(rty.dtype),
                                 spread=self.if_depth > 0, store_copy=True)
        self.w(f"{c} = linalg.copy {slot}ins({val} : {rty.mlir()}) outs({e} : {rty.mlir()}) -> {rty.mlir()}")
        return c

    def _slice_store(self, p: t.Param, acc, shape, active, inner, rty: t.TileType, val: str,
                     ranges: Optional[dict]) -> None:
        outer = [d for d in active if d != inner]
        pos_in_r = {d: i for i, d in enumerate(active)}
        n = shape[inner]
        stride = self._stride(acc.form.strides[inner])
        btype = self.buf_type(p)

        def row(pos: dict[int, str], _acc) -> None:
            if ranges is None:
                start = self._row_start(acc, pos)
                lo, size, sty = "0", str(n), f"tensor<{n}x{p.dtype}>"
            else:
                lo, hi = ranges[inner]
                start = self._row_offset(acc, {**pos, inner: lo})
                size = self._binop("arith.subi", hi, lo)
                sty = f"tensor<?x{p.dtype}>"
            x = val
            if outer or ranges is not None:
                offs = [pos[d] if d in pos else "0" for d in active]
                sizes = ["1"] * len(active)
                offs[pos_in_r[inner]] = lo
                sizes[pos_in_r[inner]] = size
                x = self.fresh("sl")
                self.w(f"{x} = tensor.extract_slice {val}[{', '.join(offs)}] [{', '.join(sizes)}] "
                       f"[{', '.join('1' for _ in active)}] : {rty.mlir()} to {sty}")
            self.w(f"iree_tensor_ext.dispatch.tensor.store {x}, {self.binding[id(p)]}, offsets = [{start}], "
                   f"sizes = [{size}], strides = [{stride}] : {sty} -> {btype}")
            return None

        if not outer:
            row({}, None)
            return
        self._row_loops(outer, shape, ranges, None, rty, row)

    def _scalar_write(self, p: t.Param, off: str, value: str, box: Optional[Box]) -> None:
        cond = self._point_cond(box)
        if cond is not None:
            self.w(f"scf.if {cond} {{")
            self.indent += 1
            self.scopes.append({})
        if self.llvmgpu and self.loop_depth and not self.one_thread and \
                any(isinstance(o, t.Load) and o.buffer is p for o in self.k.walk()):
            # In a kernel loop that also loads this buffer, on the first thread: IREE writes a
            # fill into the stored slice hoisted out of the loop, which the loop's loads read,
            # so it copies it into an allocation without a memory space ('failed to bufferize').
            def write(_dests: list[str]) -> list[str]:
                one = self.fresh("one")
                self.w(f"{one} = tensor.from_elements {value} : tensor<1x{p.dtype}>")
                self.w(f"iree_tensor_ext.dispatch.tensor.store {one}, {self.binding[id(p)]}, offsets = [{off}], "
                       f"sizes = [1], strides = [1] : tensor<1x{p.dtype}> -> {self.buf_type(p)}")
                return []
            self._on_one_thread([], [], write)
            x = None
        elif self.options.gpu_tiling is not None or self.snapshots:
            # From a one-element linalg.fill. GPUs: a dispatch without a linalg op keeps its
            # bindings as they are, which IREE's SPIR-V backend cannot lower; on CUDA and HIP
            # each such fill is spread over the threads (`configure`). With snapshots: a stored
            # constant must not make the dispatch a copy (see `_store`).
            x = self._fill(value, t.TileType((1,), p.dtype), stored=True)
        else:
            x = self.fresh("one")
            self.w(f"{x} = tensor.from_elements {value} : tensor<1x{p.dtype}>")
        if x is not None:
            self.w(f"iree_tensor_ext.dispatch.tensor.store {x}, {self.binding[id(p)]}, offsets = [{off}], "
                   f"sizes = [1], strides = [1] : tensor<1x{p.dtype}> -> {self.buf_type(p)}")
        if cond is not None:
            self.scopes.pop()
            self.indent -= 1
            self.w("}")

    def _scatter(self, op: t.Store) -> None:
        """A store through arbitrary offsets: one element at a time, where the mask holds."""
        p = op.buffer
        if not op.value.is_tile:
            raise self.err("tl.store of a scalar through a pointer whose offset triton-iree cannot analyze is not "
                           "supported", op)
        shape = op.value.shape
        val, offs = self.tensor(op.value), self.tensor(op.offsets)
        mask = self.tensor(op.mask) if op.mask is not None else None
        u = uniform_scalar(op.value)
        constant = u is not None and isinstance(u.owner, t.Constant)
        if self.spirv:
            # Vulkan: the workgroup's threads compute these tiles together (into workgroup
            # memory), and then each reads every element: a barrier in between (IREE places none,
            # and the loop read values of an earlier launch).
            tiles = [(val, op.value.type.mlir()), (offs, op.offsets.type.mlir())]
            if mask is not None:
                tiles.append((mask, op.mask.type.mlir()))
            b = self.fresh("sync")
            self.w(f"{b}:{len(tiles)} = iree_gpu.value_barrier {', '.join(n for n, _ in tiles)} : "
                   f"{', '.join(ty for _, ty in tiles)}")
            val, offs = f"{b}#0", f"{b}#1"
            mask = f"{b}#2" if mask is not None else None

        def elements(_dests: list[str]) -> list[str]:
            ivs = []
            for n in shape:
                iv = self.fresh("el")
                self.w(f"scf.for {iv} = {self.idx(0)} to {self.idx(n)} step {self.idx(1)} {{")
                self.indent += 1
                self.scopes.append({})
                ivs.append(iv)
            at = ", ".join(ivs)
            o, x = self.fresh("off"), self.fresh("x")
            self.w(f"{o} = tensor.extract {offs}[{at}] : {op.offsets.type.mlir()}")
            self.w(f"{x} = tensor.extract {val}[{at}] : {op.value.type.mlir()}")
            oi = self.fresh("i")
            self.w(f"{oi} = arith.index_cast {o} : i64 to index")
            if mask is not None:
                m = self.fresh("m")
                self.w(f"{m} = tensor.extract {mask}[{at}] : {op.mask.type.mlir()}")
                self.w(f"scf.if {m} {{")
                self.indent += 1
            if constant:
                # From a one-element linalg.fill: a constant's tensor.from_elements folds to a
                # constant, and a dispatch whose stores all store constants (or loaded tiles) is
                # bufferized by IREE as a copy, where the offsets' and mask's tiles are an
                # allocation, an error ('unexpected allocation while bufferizing copy only dispatches').
                one = self._fill(x, t.TileType((1,), p.dtype), stored=True)
            else:
                one = self.fresh("one")
                self.w(f"{one} = tensor.from_elements {x} : tensor<1x{p.dtype}>")
            self.w(f"iree_tensor_ext.dispatch.tensor.store {one}, {self.binding[id(p)]}, offsets = [{oi}], "
                   f"sizes = [1], strides = [1] : tensor<1x{p.dtype}> -> {self.buf_type(p)}")
            if mask is not None:
                self.indent -= 1
                self.w("}")
            for _ in shape:
                self.scopes.pop()
                self.indent -= 1
                self.w("}")
            return []

        # On CUDA and HIP on one thread, in the order of Triton's interpreter (the last write
        # to an element wins).
        self._on_one_thread([], [], elements)


def _after_whole_reduction(v: t.Value) -> bool:
    """`v` is computed from the scalar result of a reduction (softmax's output, say)."""
    seen, todo = set(), [v]
    while todo:
        op = todo.pop().owner
        if not isinstance(op, t.Op) or id(op) in seen:
            continue
        seen.add(id(op))
        if isinstance(op, t.Reduce) and op.to_scalar:
            return True
        todo.extend(op.operands())
    return False


def _loaded(v: t.Value) -> bool:
    """`v` is a loaded tile, or a reshape of one: IREE counts storing it as a copy."""
    while isinstance(v.owner, (t.Reshape, t.ExpandDims)):
        v = v.owner.src
    return isinstance(v.owner, t.Load)
