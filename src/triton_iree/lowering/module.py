"""The module and dispatch skeleton: the host function and its ABI, one
`flow.dispatch.workgroups` per kernel, programs per workgroup, the full-tile version of a
program, and the walk over the tile program's ops."""
from __future__ import annotations

from typing import Optional

from .. import tile as t
from ..abi import BUFFER, GRID, WRITTEN_KEY, Abi, Slot
from ..forms import GatherAccess, StructuredAccess
from .configure import COPY_MARK, OP_MARK
from .values import _CHEAP_OPS, EmitterBase, _LinalgOp, _Tensor

class ModuleEmitter(EmitterBase):
    """The host function, the dispatch, and the program body."""

    def module(self) -> str:
        k = self.k
        abi = Abi.of_kernel(k, self.written_ids)
        args = abi.arguments(_ssa)
        results = abi.results()
        reflection = {**k.reflection, WRITTEN_KEY: ",".join(str(s.number) for s in abi.written)}
        attrs = " attributes {iree.reflection = {" + ", ".join(
            f"{key} = {_mlir_string(v)}" for key, v in reflection.items()) + "}}"
        self.w(f"func.func @{k.name}({', '.join(args)}) -> ({', '.join(results)}){attrs} {{")
        self.indent += 1
        c0 = self.fresh("c")
        self.w(f"{c0} = arith.constant 0 : index")
        dims = {}
        for s in abi.buffers:
            d = self.fresh("len")
            self.w(f"{d} = tensor.dim {_ssa(s)}, {c0} : {s.mlir_type}")
            dims[id(s.param)] = d
        wl = []
        for s in abi.grid:
            g = self.fresh("wg")
            self.w(f"{g} = arith.index_castui {_ssa(s)} : i32 to index")
            wl.append(g)
        if self.serial:
            wl = [self.idx(1)] * 3
        elif self.options.max_workgroups:
            per = self._programs_per_workgroup(*wl)
            n = self.fresh("wg")
            self.w(f"{n} = arith.ceildivui {wl[0]}, {per} : index")
            wl[0] = n
        # The dispatch takes the function's arguments in their order, then each buffer's length.
        host_operands, host_types, region_args = [], [], []
        for s in abi.slots:
            host_operands.append(_ssa(s))
            p = s.param
            if s.kind == BUFFER:
                host_types.append(f"{s.mlir_type}{{{dims[id(p)]}}}")
                mode = "readwrite" if s.written else "readonly"
                region_args.append(f"%b{p.index}: !iree_tensor_ext.dispatch.tensor<{mode}:{s.mlir_type}>")
                self.binding[id(p)] = f"%b{p.index}"
            elif s.kind == GRID:
                host_types.append(s.dtype)
                region_args.append(f"%n{'xyz'[s.number]}: {s.dtype}")
            else:
                host_types.append(s.dtype)
                region_args.append(f"%s{p.index}: {s.dtype}")
        for s in abi.buffers:
            host_operands.append(dims[id(s.param)])
            host_types.append("index")
            region_args.append(f"%l{s.param.index}: index")
            self.buf_len[id(s.param)] = f"%l{s.param.index}"
        current = {id(p): f"%{p.name}_{p.index}" for p in self.written}
        rets = ""
        parts = self._parts()
        full = self._host_full_condition(abi) if self.spirv_rows and len(parts) == 2 else None
        for self.part_index, self.part in enumerate(parts):
            # The same grid again for each part; a later part takes what the earlier wrote.
            operands = [current.get(id(s.param), o) if s.kind == BUFFER else o
                        for s, o in zip(abi.slots, host_operands)] + host_operands[len(abi.slots):]
            if full is not None:
                # A Vulkan row program's parts: the grid for the one its tiles are for, none
                # for the other.
                none = self.idx(0)
                count = self.fresh("wg")
                pick = (wl[0], none) if self.part == "fast" else (none, wl[0])
                self.w(f"{count} = arith.select {full}, {pick[0]}, {pick[1]} : index")
                wl_part = [count] + wl[1:]
            else:
                wl_part = wl
            tied = [f"{current[id(p)]}{{{dims[id(p)]}}}" for p in self.written]
            res = self.fresh("r") if self.written else None
            lhs = f"{res}:{len(self.written)} = " if len(self.written) > 1 else (f"{res} = " if res else "")
            self.w(f"{lhs}flow.dispatch.workgroups[{', '.join(wl_part)}]({', '.join(operands)}) : "
                   f"({', '.join(host_types)}) -> ({', '.join(tied)}) =")
            self.w(f"    ({', '.join(region_args)}) {{")
            self.indent += 2
            self.scopes.append({"__isolated__": True})   # the dispatch region sees nothing above
            self._dispatch_body()
            self.scopes.pop()
            self.w("flow.return")
            self.indent -= 2
            self.w("} count(%cx: index, %cy: index, %cz: index) -> (index, index, index) {")
            self.w("  flow.return %cx, %cy, %cz : index, index, index")
            self.w("}")
            outs = [f"{res}#{i}" for i in range(len(self.written))] if len(self.written) > 1 else [res]
            current = {id(p): o for p, o in zip(self.written, outs)}
            rets = ", ".join(outs) if self.written else ""
        self.w(f"return {rets} : {', '.join(results)}" if self.written else "return")
        self.indent -= 1
        self.w("}")
        return "\n".join(self.lines) + "\n"

    def _config_slot(self, kind: str, loops: tuple[int, ...], iterators: tuple[str, ...],
                     elt_bytes: int, math: bool = False, mma: Optional[tuple] = None,
                     spread: bool = False, store_copy: bool = False) -> str:
        """The attribute dictionary that marks a linalg op for `configure` (with its index in
        `linalg_ops`; `store_copy`: a store's copy, which it may drop), or "". No index for an
        op on one thread (`_on_one_thread`): IREE must not spread it over the threads."""
        marks = [f"{OP_MARK} = {len(self.linalg_ops)} : i64"] if not self.one_thread else []
        if marks:
            self.linalg_ops.append(_LinalgOp(kind, tuple(loops), tuple(iterators), elt_bytes,
                                             self.loop_depth, self.full_version, math, mma, self.part_index,
                                             spread))
        if store_copy:
            marks.append(COPY_MARK)
        return f"{{{', '.join(marks)}}} " if marks else ""

    def _programs_per_workgroup(self, gx: str, gy: str, gz: str) -> str:
        """max(1, ceil(gx / max(1, MAX / (gy * gz)))): programs along axis 0 per workgroup."""
        yz = self._binop("arith.muli", gy, gz)
        yz = self._binop("arith.maxui", yz, self.idx(1))
        along_x = self._binop("arith.divui", self.idx(self.options.max_workgroups), yz)
        along_x = self._binop("arith.maxui", along_x, self.idx(1))
        per = self._binop("arith.ceildivui", gx, along_x)
        return self._binop("arith.maxui", per, self.idx(1))

    def _dispatch_body(self) -> None:
        for p in self.k.scalars + self.k.base_offsets:
            self.bind(("s", p.value.id), f"%s{p.index}")
        gathered = {id(op.buffer): op.buffer for op in self.k.walk()
                    if isinstance(op, t.Load) and isinstance(self.facts.access(op), GatherAccess)}
        for p in gathered.values():
            if id(p) not in self.written_ids:
                self.full_buffer[id(p)] = self._full_buffer(p)
        if self.serial:
            self._serial_programs()
            return
        if not self.options.max_workgroups:
            self._program()
            return
        # This workgroup runs programs [wid * per, min((wid + 1) * per, gx)) along axis 0.
        grid = []
        for axis in "xyz":
            g = self.fresh("n")
            self.w(f"{g} = arith.index_castui %n{axis} : i32 to index")
            grid.append(g)
        per = self._programs_per_workgroup(*grid)
        wid = self.fresh("wid")
        self.w(f"{wid} = flow.dispatch.workgroup.id[0] : index")
        lo = self._binop("arith.muli", wid, per)
        hi = self._binop("arith.minui", self._binop("arith.addi", lo, per), grid[0])
        iv = self.fresh("prog")
        self.w(f"scf.for {iv} = {lo} to {hi} step {self.idx(1)} {{")
        self.indent += 1
        self.scopes.append({})
        self.program_x = iv
        self._program()
        self.scopes.pop()
        self.indent -= 1
        self.w("}")

    def _serial_programs(self) -> None:
        """Every program of the grid, one after another, in the order of Triton's interpreter
        (axis 2 innermost)."""
        loops = []
        for axis in range(3):
            n, iv = self.fresh("n"), self.fresh("prog")
            self.w(f"{n} = arith.index_castui %n{'xyz'[axis]} : i32 to index")
            self.w(f"scf.for {iv} = {self.idx(0)} to {n} step {self.idx(1)} {{")
            self.indent += 1
            self.scopes.append({})
            self.program_ids[axis] = iv
            loops.append(iv)
        self._program()
        for _ in loops:
            self.scopes.pop()
            self.indent -= 1
            self.w("}")

    def _program(self) -> None:
        """The body of one Triton program.

        Full-tile version: where every masked access the version plan covers is wholly in
        bounds (conditions at program entry), a copy of the body with static, unmasked slices
        runs; otherwise the masked one. Masked vector loads and stores are several times slower
        on some CPUs. Inside the full version, loops whose masks move with the induction
        variable run their full iterations unmasked, then the rest masked; and 2-D loads whose
        slab fits the buffer read it in place (`_slab_load`). On GPUs only tensor-core programs
        (`GpuTiling.mma_program`) and row programs (`GpuTiling.row_length`) have one: there
        unmasked tiles are read and written 16 bytes at a time, masked ones element by element
        (LLVM's NVPTX backend splits a masked vector load into element loads). Vulkan's row
        programs have theirs in a dispatch of its own (`_parts`): IREE's SPIR-V SubgroupReduce
        pipeline failed on the two versions in one ('memref.alloc' op unexpected allocation
        without upper bound shapes, for the masked store's slice). Vulkan's programs of 1-D
        tiles (`spirv_full_tiles`: vector add, layer norm) have one: BaseDistribute assembles a
        masked tile in workgroup memory, between barriers, where the full version reads and
        writes the bindings directly.
        """
        plan = self.facts.plan
        gpu = self.options.gpu_tiling
        # IREE's SPIR-V backend cannot lower a slab's 2-D view once the slab is in workgroup
        # memory ('failed to legalize unresolved target materialization'): rows instead.
        self.slab_able = {} if gpu is not None and gpu.narrow_vectors else \
            {id(op): (outer, inner) for op, _, outer, inner in self._slab_candidates(False)}
        slabs = self._slab_candidates(True)
        if self.spirv_rows and self.part is not None:
            # One version a dispatch: the host function picks the dispatch (`_host_full_condition`).
            self.full_version = self.part == "fast"
            self.assume_full = set(plan.full) if self.full_version else set()
            self._block(self.k.body)
            self.full_version, self.assume_full = False, set()
            return
        full = self.options.full_tiles or self.gpu_mma or self.spirv_full_tiles or \
            self.gpu_row_length is not None and not self.spirv_rows
        if not plan and not slabs or not full:
            self._block(self.k.body)
            return
        for op in self.k.body.ops:
            if op.results and not op.results[0].is_tile and op.results[0].id in self.facts.entry \
                    and self._needed(op):
                self._op(op)
        conds = [self._bound_value(b) for b in plan.top]
        for op, acc, outer, inner in slabs:
            conds += self._slab_conditions(op, acc, outer, inner)
        self.slab_ok = {id(s[0]) for s in slabs}
        pred = self._and(conds)
        branches = (True, False) if pred is not None else (True,)
        if self.part is not None:
            # The full version with no masked iterations in its peeled loops in the first
            # dispatch, every other program in the second (see `_parts`).
            tails = [self._cmp("eq", self._peel_point(pl.loop, pl), self.scalar(pl.loop.ub), pl.loop.lb.dtype)
                     for pl in plan.peels.values()]
            fast = self._and(conds + tails)
            if self.part == "fast":
                pred, branches, self.skip_tails = fast, (True,), True
            else:
                true = self.fresh("true")
                self.w(f"{true} = arith.constant true")
                self.w(f"scf.if {self._binop('arith.xori', fast, true, 'i1')} {{")
                self.indent += 1
        for branch in branches:
            if pred is not None:
                self.w(f"scf.if {pred} {{" if branch else "} else {")
                self.indent += 1
            self.scopes.append({})
            self.full_version = branch
            self.assume_full = set(plan.full) if branch else set()
            self._block(self.k.body)
            self.scopes.pop()
            if pred is not None:
                self.indent -= 1
        if pred is not None:
            self.w("}")
        if self.part == "rest":
            self.indent -= 1
            self.w("}")
        self.skip_tails = False
        self.full_version = False
        self.assume_full = set()

    def _full_on_scalars(self) -> bool:
        """Whether the full-tile conditions depend on the kernel's scalar arguments only
        (softmax's `cols < n_cols`), so that the host function can compute them."""
        scalars = {id(p.value) for p in self.k.scalars if p.value is not None}
        for b in self.facts.plan.top:
            atoms = [b.value] if b.value is not None else list(b.poly.atoms.values())
            if not all(isinstance(a, t.Value) and id(a) in scalars for a in atoms):
                return False
        return not self._slab_candidates(True)

    def _host_full_condition(self, abi: Abi) -> str:
        """The condition, computed in the host function, that every program's tiles are full
        (`_full_on_scalars`), for a Vulkan row program's two dispatches: neither has an `scf.if`
        around its version, inside which the SubgroupReduce pipeline put the whole row in
        workgroup memory, beyond its limit."""
        self.scopes.append({})
        for s in abi.slots:
            if s.param is not None and s.param.value is not None:
                self.bind(("s", s.param.value.id), _ssa(s))
        full = self._and([self._bound_value(b) for b in self.facts.plan.top])
        self.scopes.pop()
        return full

    def _parts(self) -> list[Optional[str]]:
        """The kernel's dispatches, each over the whole grid: one ([None]), or two for a
        tensor-core program on CUDA whose full-tile version has conditions and whose peeled
        loops are at its top level with bounds known at entry: "fast" runs the programs whose
        tiles are all full and whose peeled loops have no masked iterations, "rest" the other
        programs. A GPU kernel gets the registers of its most demanding path: the masked tiles,
        gathered element by element into the tensor-core operands, take 255 registers a thread
        and spill (one workgroup of 256 threads per SM), the full-tile path alone 128, so the
        full programs run faster in a dispatch of their own. Two also for a Vulkan row program
        with masks the host can check (`_full_on_scalars`) and no peeled loop: the masked
        version reads its row into workgroup memory, each thread n / threads consecutive
        elements (the pad's copy), where the full version's threads read ROW_VECTOR consecutive
        elements of each step of ROW_VECTOR x threads (coalesced)."""
        plan = self.facts.plan
        if self.spirv_rows:
            two = plan.top and not plan.peels and not self.options.max_workgroups and not self.serial
            return ["fast", "rest"] if two and self._full_on_scalars() else [None]
        if not self.gpu_mma or self.serial or self.options.max_workgroups or not (plan.top or plan.peels):
            return [None]
        for peel in plan.peels.values():
            loop = peel.loop
            if loop not in self.k.body.ops or not all(v.id in self.facts.entry for v in (loop.lb, loop.ub, loop.step)):
                return [None]
        return ["fast", "rest"]

    def _bound_value(self, b) -> str:
        if b.value is not None:
            return self.scalar(b.value)
        return self._cmp("sle", self.poly(b.poly), self.idx(0))

    def _count_uses(self) -> dict[int, int]:
        counts: dict[int, int] = {}
        live = self.facts.live
        for op in self.k.walk():
            if isinstance(op, (t.Load, t.Store)):
                acc = self.facts.access(op)
                needed = [op.value] if isinstance(op, t.Store) else []
                if isinstance(acc, GatherAccess):
                    needed += [v for v in (op.offsets, op.mask, getattr(op, "other", None)) if v is not None]
                if isinstance(op, t.Load) and op.result.id not in live:
                    needed = []
            elif any(r.id in live for r in op.results) or id(op) in self.facts.live_ops:
                needed = op.operands()
            else:
                needed = []
            for v in {v.id: v for v in needed}.values():   # x * x is one use of x
                counts[v.id] = counts.get(v.id, 0) + 1
            for r in op.regions():
                for y in r.yields:
                    counts[y.id] = counts.get(y.id, 0) + 1
        return counts

    def _is_leaf(self, v: t.Value) -> bool:
        op = v.owner
        if not isinstance(op, t.Op):
            return True
        if isinstance(op, t.Load):
            if isinstance(self.facts.access(op), StructuredAccess):
                return True
            return self._use_counts.get(v.id, 0) > 1 or id(op.buffer) in self.written_ids
        if isinstance(op, _CHEAP_OPS) or (isinstance(op, t.Join) and self.spirv):
            return False   # (a join on Vulkan: `ShapeEmitter._join`)
        if isinstance(op, t.Elementwise):
            # (CUDA and HIP modules keep a tile per such value: their lowering was validated on
            # the device. On the SPIR-V targets every tile is a buffer in workgroup memory, and
            # as tiles the values of f32 sin's and the f64 functions' expansions took 40 to 330
            # KiB, beyond lavapipe's 32 KiB.)
            return self._use_counts.get(v.id, 0) > 1 and t.is_float(v.dtype) and \
                (self.llvmgpu or len(self._consumers(v)) > 1)
        return True

    def _consumers(self, v: t.Value) -> frozenset[int]:
        """ids of the ops whose linalg op reads tile `v`, through elementwise ops inlined into it.
        A value read by one such op (`where(c, g - 1, g)`) is computed once in that op's body: as
        a tile of its own, IREE fuses it into its consumer, and the fused op has neither's
        lowering_config and is vectorized whole (minutes of compile time for 32768-wide tiles)."""
        memo = self._consumer_memo
        if v.id not in memo:
            out: set[int] = set()
            for u in self._uses.get(v.id, []):
                r = u.results[0] if isinstance(u, t.Elementwise) and u.results else None
                if r is not None and r.is_tile and not self._is_leaf(r):
                    out |= self._consumers(r)
                else:
                    out.add(id(u))
            memo[v.id] = frozenset(out)
        return memo[v.id]

    def _block(self, block: t.Block) -> None:
        for op in block.ops:
            if self._needed(op):
                self._op(op)

    def _needed(self, op: t.Op) -> bool:
        if isinstance(op, (t.Store, t.Atomic)):
            return True
        if isinstance(op, (t.For, t.If, t.While)):
            return id(op) in self.facts.live_ops
        return any(r.id in self.facts.live for r in op.results)

    def _op(self, op: t.Op) -> None:
        structural = {t.Store: self._store, t.For: self._for, t.If: self._if, t.Reduce: self._reduce,
                      t.Dot: self._dot, t.While: self._while, t.Join: self._join, t.Split: self._split,
                      t.Cat: self._cat, t.Gather: self._gather, t.Scan: self._scan,
                      t.Histogram: self._histogram, t.Atomic: self._atomic,
                      t.MapElementwise: self._map_elementwise}.get(type(op))
        if structural is not None:
            structural(op)
            if id(op) in self.barrier_stores and not self.one_thread:
                # Other threads of the program may next read or write what this store wrote.
                self.w("gpu.barrier")
            return
        v = op.results[0]
        if not v.is_tile:
            if self.lookup(("s", v.id)) is None:
                self.bind(("s", v.id), self._scalar_op(op))
            return
        if isinstance(op, t.Load) and isinstance(self.facts.access(op), StructuredAccess):
            self._structured_load(op, self.facts.access(op))
            return
        if isinstance(op, t.Load) and id(op) in self.snapshots:    # a gather
            self.snapshotting = True
            self._bind_load(v, _Tensor(self.tensor(v), tuple(range(len(v.shape))), v.type.mlir()), True)
            return
        if isinstance(op, t.Reshape):
            self._reshape(op)
            return
        if self._is_leaf(v):
            self.tensor(v)

    def _scalar_op(self, op: t.Op) -> str:
        v = op.result
        if isinstance(op, t.Constant):
            return self.const(op.value, v.dtype)
        if isinstance(op, t.ProgramId):
            if op.axis in self.program_ids:
                i = self.program_ids[op.axis]
            elif op.axis == 0 and self.program_x is not None:
                i = self.program_x
            else:
                i = self.fresh("wid")
                self.w(f"{i} = flow.dispatch.workgroup.id[{op.axis}] : index")
            r = self.fresh("pid")
            self.w(f"{r} = arith.index_castui {i} : index to i32")
            return r
        if isinstance(op, t.NumPrograms):
            return f"%n{'xyz'[op.axis]}"
        if isinstance(op, t.Elementwise):
            return self._elementwise(op, [self.scalar(a) for a in op.args], self.w)
        if isinstance(op, t.Load):
            return self._scalar_load(op)
        if isinstance(op, t.Unsplat):
            return self._unsplat(op)
        raise self.err(f"unsupported scalar op {op.name}", op)


def _ssa(s: Slot) -> str:
    """The host function's value of argument `s`."""
    return f"%{s.name}" if s.param is None else f"%{s.param.name}_{s.param.index}"


def _mlir_string(text: str) -> str:
    """`text` as an MLIR string attribute: quotes, backslashes and non-printable bytes escaped."""
    out = "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else "".join(f"\\{b:02X}" for b in c.encode())
                  for c in text)
    return f'"{out}"'
