"""Loads: structured slices (row by row, masked, padded), tiles gathered element by element,
the elements of gathers inside linalg bodies, and scalar loads; a snapshot load is bound as a
copy (see `memory_order`). 2-D loads read in place from one slab: `slabs`."""
from __future__ import annotations

from typing import Optional

from .. import tile as t
from ..types import TYPE_NAMES
from ..forms import Box, StructuredAccess
from .memory import MemoryEmitter
from .values import _Body, _Tensor, literal


class LoadEmitter(MemoryEmitter):
    """Loads."""

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
        # nested loops give wrong tiles there, as a 2 x 4 x 8 tile copied in a kernel loop. On
        # Vulkan, 2-D tiles of a dispatch that reduces a tile to a scalar: IREE's SPIR-V
        # SubgroupReduce pipeline, its own choice for tiles of fewer than 512 elements, could not
        # flatten a workgroup-memory tile assembled row by row in a loop and then reshaped to
        # 1-D ('failed to legalize unresolved source materialization': tl.sum of a 2-D tile).)
        if self.gpu_mma or self.gather_loads and len(active) > 1 or self.llvmgpu and len(active) > 2 and not full or \
                self.spirv and (self.gpu_whole_reductions or self.spirv_dot_gathers) and len(active) > 1:
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
        on one thread (`gather_loads`), and on Vulkan those of a dispatch that reduces a tile to
        a scalar (`_structured_load`)."""
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

    def _bind_load(self, v: t.Value, e: _Tensor, snapshot: bool) -> None:
        """Binds a loaded tile; a snapshot is a copy made here (see `memory_order`)."""
        self.snapshotting = False
        self.bind(("t", v.id), _Tensor(self._copy(e.name, e.type), e.dims, e.type) if snapshot else e)

    def _uniform_other(self, op: t.Load, acc: StructuredAccess) -> str:
        if acc.other is not None:
            if acc.other.is_tile:
                return self.const(acc.other.owner.value, op.result.dtype)
            return self.scalar(acc.other)
        return self.const(0, op.result.dtype)

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
                if self.spirv_full_tiles:
                    self.storage_views.add(x)
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
