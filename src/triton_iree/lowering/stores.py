"""Stores: structured slices (row by row, through a copy where IREE needs one), map_stores,
scalar writes, and scatters (one element at a time, on one thread)."""
from __future__ import annotations

from typing import Optional

from .. import tile as t
from ..types import TYPE_NAMES
from ..analysis import uniform_scalar
from ..forms import Box, GatherAccess
from .memory import MemoryEmitter
from .values import _Body, _bytes


class StoreEmitter(MemoryEmitter):
    """Stores and scatters."""

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
        GPUs (CUDA, HIP, Vulkan) a tile from a linalg.fill is copied from a linalg.generic yielding its
        scalar: IREE folds a copy of a fill, and a slice of a fill, into a fill, and the copy's
        configuration with them (a constant tile stored, masked: the same error). On CUDA and
        HIP not where IREE configures the dispatch, which drops the copies (`configure`); on
        Vulkan there too: a masked store's slice of a fill became a fill of the slice's dynamic
        size written straight into the buffer, which IREE's SPIR-V SubgroupReduce pipeline
        leaves unlowered ('failed to legalize operation memref.subview': a reduction's result
        broadcast to a tile and stored masked)."""
        if (self.llvmgpu and not self.gpu_whole_reductions or self.spirv) and val in self.fills:
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

    def _gpu_map_store(self, value: t.Value) -> bool:
        """A masked 1-D store of a tile computed from a reduction to a scalar, on LLVMGPU targets
        (not in kernel loops, except in row programs): see `_map_store`. (Not on Vulkan: not
        tried there; IREE's SPIR-V SubgroupReduce pipeline, which Vulkan's row programs take, fails
        to legalize a map_store.)"""
        return self.llvmgpu and (self.gpu_row_length is not None or self.gpu_whole_reductions and not self.loop_depth) \
            and _after_whole_reduction(value)

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
