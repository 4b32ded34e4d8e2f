"""Emit: the tile program as an IREE input module (MLIR text).

The module has one public function, named after the kernel. Its ABI:

- each buffer as a flat ``tensor<?xT>`` (the whole buffer), in parameter order;
- each scalar parameter as its own type;
- the grid as three ``i32`` (gx, gy, gz).

It returns every buffer the kernel stores to, tied to its argument (``iree.abi.output``), so
callers that pass device buffers get in-place writes.

The body is one ``flow.dispatch.workgroups[gx, gy, gz]``: one Triton program instance per
IREE workgroup, ``tl.program_id`` = ``flow.dispatch.workgroup.id``. Inside it:

- structured loads and stores are ``iree_tensor_ext.dispatch.tensor.load/store`` of slices
  (a row loop for 2-D and higher tiles), with a static full-tile path beside the masked one
  (see `Emitter._program`: peeled loops, slab loads);
- gathers are ``tensor.extract`` inside ``linalg.generic``; scatters a per-element loop;
- elementwise expressions fuse into one ``linalg.generic`` (broadcasts become indexing
  maps); reductions are reduction generics; ``tl.dot`` is ``linalg.matmul``.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Optional

from . import tile as t
from .analysis import (Affine, Box, Carried, Cond, Facts, GatherAccess, Poly, StructuredAccess,
                       uniform_scalar)
from .errors import UnsupportedError
from .memory_order import snapshot_loads

_INT_DIVS = {"arith.divsi", "arith.divui", "arith.remsi", "arith.remui", "arith.ceildivsi",
             "arith.floordivsi"}
# Ops recomputed inside each consumer rather than read from a materialized tensor.
_CHEAP_OPS = (t.Constant, t.Splat, t.MakeRange, t.Broadcast, t.ExpandDims, t.Trans)
# bf16 ops that IREE's bf16-as-f32 emulation gets right: no rounding involved.
_BF16_EXACT = {"arith.select", "arith.bitcast", "arith.extf"}
_CASTS = {"arith.extsi", "arith.extui", "arith.trunci", "arith.extf", "arith.truncf",
          "arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui", "arith.bitcast"}


def _float_literal(x: float, dtype: str) -> str:
    if math.isnan(x) or math.isinf(x):
        if dtype == "f64":
            return "0x%016X" % struct.unpack("<Q", struct.pack("<d", x))[0]
        bits = struct.unpack("<I", struct.pack("<f", x))[0]
        if dtype == "f32":
            return "0x%08X" % bits
        if dtype == "bf16":
            return "0x%04X" % (bits >> 16)
        if dtype == "f16":
            return {"inf": "0x7C00", "-inf": "0xFC00"}.get(repr(x), "0x7E00")
        raise UnsupportedError(f"non-finite constant of type {dtype}")
    return repr(float(x))


def literal(value, dtype: str) -> str:
    if dtype == "i1":
        return "true" if value else "false"
    if t.is_float(dtype):
        return _float_literal(float(value), dtype)
    return str(int(value))


def _combiner_identity(block: t.Block) -> Optional[tuple[str, object]]:
    """(opname, identity) when the combiner is a single op on (lhs, rhs) with a known identity."""
    if len(block.args) != 2 or len(block.ops) != 1 or len(block.yields) != 1:
        return None
    op = block.ops[0]
    if not isinstance(op, t.Elementwise) or block.yields[0] is not op.result:
        return None
    if set(map(id, op.args)) != set(map(id, block.args)) or len(op.args) != 2:
        return None
    dtype = op.result.dtype
    bits = t.bitwidth(dtype)
    identities = {
        "arith.addf": -0.0, "arith.mulf": 1.0, "arith.maximumf": -math.inf,
        "arith.minimumf": math.inf, "arith.maxnumf": math.nan, "arith.minnumf": math.nan,
        "arith.addi": 0, "arith.muli": 1, "arith.ori": 0, "arith.xori": 0, "arith.andi": -1,
        "arith.maxsi": -(1 << (bits - 1)), "arith.minsi": (1 << (bits - 1)) - 1,
        "arith.maxui": 0, "arith.minui": -1,
    }
    if op.opname not in identities:
        return None
    ident = identities[op.opname]
    if dtype == "i1" and isinstance(ident, int):
        ident = bool(ident & 1)
    return op.opname, ident


def _bytes(dtype: str) -> int:
    return max(1, t.bitwidth(dtype) // 8) if dtype in t.INT_TYPES + t.FLOAT_TYPES else 8


@dataclass
class _Tensor:
    """A materialized tile: an SSA tensor over some of the value's dims (the others are size 1
    or broadcast, and are implied)."""
    name: str
    dims: tuple[int, ...]
    type: str


def _fit(n: int, want: int) -> int:
    """The largest power of two that divides `n` and is at most `want` (at least 1)."""
    t = 1
    while t * 2 <= want and n % (t * 2) == 0:
        t *= 2
    return t


@dataclass(frozen=True)
class CpuTiling:
    """Vector tile sizes for IREE's llvm-cpu codegen, set per linalg op.

    Left to itself, IREE configures one root op per dispatch (and what it can fuse with it);
    every other linalg op is vectorized whole: a 64x64x64 matmul becomes one huge vector
    contraction (slow code, seconds of compile time, large stacks). So the emitter gives every
    linalg op a `lowering_config` and exactly one of them (the root, see `_LinalgOp.heat`) the
    `compilation_info` that carries the dispatch's translation_info. Two compilation_infos in a
    dispatch are an error; bare lowering_configs whose root was folded away are too.

    vector_bytes: the native vector register width (matmul accumulators, reductions).
    elementwise_bytes: the vector width of elementwise ops and fills.
    matmul_rows, matmul_vectors: the matmul micro-tile: rows x (vectors x native vector) of the
      accumulator, the K loop one step at a time.

    Only dispatches with a matmul are configured, and the root is a matmul. IREE rewrites
    linalg.generic ops of a dispatch (collapsing dimensions, fusing producers into consumers)
    and the rewritten ops lose their attributes; when the root's compilation_info is lost and
    other lowering_configs remain, configuration fails. Named matmuls keep theirs. Dispatches
    without a matmul are left to IREE's own heuristics: per-op configs measured no better on
    softmax and layer norm; vector add gained a little (8-wide f32), not worth failed compiles.
    """
    vector_bytes: int = 64
    elementwise_bytes: int = 32
    matmul_rows: int = 8
    matmul_vectors: int = 2

    def tile_sizes(self, kind: str, loops: tuple[int, ...], iterators: tuple[str, ...],
                   elt_bytes: int, math: bool = False) -> tuple[list[int], list[int]]:
        """(vector_common_parallel, vector_reduction) tile sizes of one op. Elementwise ops
        that call math functions (or divide) use native vectors, others `elementwise_bytes`."""
        rank = len(loops)
        if kind == "matmul":
            m, n, _ = loops
            vec = max(1, self.vector_bytes // elt_bytes)
            return ([_fit(m, self.matmul_rows), _fit(n, self.matmul_vectors * vec), 0], [0, 0, 1])
        if "reduction" not in iterators:
            par = [1] * rank
            width = self.vector_bytes if math else self.elementwise_bytes
            par[-1] = _fit(loops[-1], max(1, width // elt_bytes))
            return par, []
        par = [1 if it == "parallel" else 0 for it in iterators]
        red = [1 if it == "reduction" else 0 for it in iterators]
        last = _fit(loops[-1], max(1, self.vector_bytes // elt_bytes))
        (red if iterators[-1] == "reduction" else par)[-1] = last
        return par, red

    def lowering_config(self, kind: str, loops: tuple[int, ...], iterators: tuple[str, ...],
                        elt_bytes: int, math: bool = False) -> str:
        par, red = self.tile_sizes(kind, loops, iterators, elt_bytes, math)
        fields = [f"distribution = [{', '.join('0' for _ in loops)}]",
                  f"vector_common_parallel = [{', '.join(map(str, par))}]"]
        if red:
            fields.append(f"vector_reduction = [{', '.join(map(str, red))}]")
        return f"#iree_cpu.lowering_config<{', '.join(fields)}>"

    @staticmethod
    def compilation_info(lowering_config: str) -> str:
        return (f"#iree_codegen.compilation_info<lowering_config = {lowering_config}, translation_info = "
                f"#iree_codegen.translation_info<pipeline = #iree_cpu.pipeline<DoubleTilingExpert>>>")


@dataclass(frozen=True)
class EmitOptions:
    """Per-target choices of the emitter.

    max_workgroups: run several Triton programs (consecutive along axis 0) in one IREE
    workgroup so that there are at most about this many workgroups. Each workgroup costs the
    CPU executor a task; one program per task is too fine for small blocks. None (GPUs): one
    program per workgroup.
    cpu_tiling: per-op lowering configs for llvm-cpu (None: IREE's defaults).
    may_alias: pointer arguments may share memory (see `memory_order`).
    """
    max_workgroups: Optional[int] = None
    cpu_tiling: Optional[CpuTiling] = None
    may_alias: bool = False


@dataclass
class _LinalgOp:
    """A linalg op of the dispatch, for choosing its lowering config."""
    kind: str                      # matmul | generic | fill
    loops: tuple[int, ...]         # static loop ranges
    iterators: tuple[str, ...]
    elt_bytes: int                 # widest element (the accumulator for a matmul)
    depth: int                     # kernel loops around it
    full: bool                     # in the full-tile version of the program
    math: bool = False             # its body calls math functions or divides

    def heat(self) -> tuple:
        n = 1
        for x in self.loops:
            n *= x
        # Outside the full-tile version first: IREE may fold that version away (its predicate
        # can be false for every program), and the root must survive. Tiling does not depend
        # on which op is the root: every op follows its own lowering_config.
        return (self.kind == "matmul", self.depth, not self.full, "reduction" in self.iterators, n)


@dataclass
class _Body:
    """A linalg region under construction: ops are buffered until the inputs are known."""
    nloops: int
    lines: list[str] = field(default_factory=list)
    ins: list[tuple[str, str, str, str, str]] = field(default_factory=list)  # name, type, map, arg, elt
    memo: dict = field(default_factory=dict)


class Emitter:
    def __init__(self, kernel: t.Kernel, facts: Facts, options: EmitOptions = EmitOptions()):
        self.k = kernel
        self.facts = facts
        self.options = options
        self.lines: list[str] = []
        self.indent = 0
        self.counter = 0
        self.scopes: list[dict] = [{}]
        self.written = kernel.stored_buffers()
        self.written_ids = {id(p) for p in self.written}
        self.binding: dict[int, str] = {}
        self.buf_len: dict[int, str] = {}
        self.full_buffer: dict[int, str] = {}
        self._use_counts = self._count_uses()
        self._uses = t.uses(kernel)
        self.assume_full: set[int] = set()      # accesses emitted unmasked here
        self.full_version = False               # emitting the full-tile version of the program
        self.slab_ok: set[int] = set()          # loads whose slab conditions the version checks
        self.slab_able: dict[int, tuple[int, int]] = {}   # id(load) -> (outer, inner) dims
        self.loop_depth = 0
        self.linalg_ops: list[_LinalgOp] = []
        self.program_x: Optional[str] = None   # program id along axis 0, when coarsened
        self.snapshots = snapshot_loads(kernel, facts, options.may_alias)
        self.snapshotting = False               # emitting a load in `snapshots`

    # -- text helpers -------------------------------------------------------------------
    def fresh(self, hint: str = "v") -> str:
        self.counter += 1
        return f"%{hint}{self.counter}"

    def w(self, line: str) -> None:
        self.lines.append("  " * self.indent + line)

    def lookup(self, key):
        for s in reversed(self.scopes):
            if key in s:
                return s[key]
            if "__isolated__" in s:
                break
        return None

    def bind(self, key, val) -> None:
        self.scopes[-1][key] = val

    def err(self, msg: str, op: t.Op | None = None) -> UnsupportedError:
        return UnsupportedError(msg, kernel=self.k.name, loc=getattr(op, "loc", "") or None)

    def const(self, value, dtype: str) -> str:
        key = ("const", dtype, repr(value))
        name = self.lookup(key)
        if name is None:
            name = self.fresh("c")
            self.w(f"{name} = arith.constant {literal(value, dtype)} : {dtype}")
            self.bind(key, name)
        return name

    def idx(self, n: int) -> str:
        return self.const(n, "index")

    def buf_type(self, p: t.Param) -> str:
        mode = "readwrite" if id(p) in self.written_ids else "readonly"
        return f"!iree_tensor_ext.dispatch.tensor<{mode}:tensor<?x{p.dtype}>>{{{self.buf_len[id(p)]}}}"

    # -- module -------------------------------------------------------------------------
    def module(self) -> str:
        k = self.k
        args, host_operands, host_types, region_args = [], [], [], []
        out_index = {id(p): i for i, p in enumerate(self.written)}
        for p in k.params:
            if p.is_buffer:
                attr = f" {{iree.abi.output = {out_index[id(p)]} : index}}" if id(p) in out_index else ""
                args.append(f"%{p.name}_{p.index}: tensor<?x{p.dtype}>{attr}")
            else:
                args.append(f"%{p.name}_{p.index}: {p.dtype}")
        args += ["%grid_x: i32", "%grid_y: i32", "%grid_z: i32"]
        args += [f"%{b.name}_{b.index}: i64" for b in k.base_offsets]
        results = [f"tensor<?x{p.dtype}>" for p in self.written]
        self.w(f"func.func @{k.name}({', '.join(args)}) -> ({', '.join(results)}) {{")
        self.indent += 1
        c0 = self.fresh("c")
        self.w(f"{c0} = arith.constant 0 : index")
        dims = {}
        for p in k.buffers:
            d = self.fresh("len")
            self.w(f"{d} = tensor.dim %{p.name}_{p.index}, {c0} : tensor<?x{p.dtype}>")
            dims[id(p)] = d
        wl = []
        for axis in "xyz":
            g = self.fresh("wg")
            self.w(f"{g} = arith.index_castui %grid_{axis} : i32 to index")
            wl.append(g)
        if self.options.max_workgroups:
            per = self._programs_per_workgroup(*wl)
            n = self.fresh("wg")
            self.w(f"{n} = arith.ceildivui {wl[0]}, {per} : index")
            wl[0] = n
        for p in k.params:
            host_operands.append(f"%{p.name}_{p.index}")
            if p.is_buffer:
                host_types.append(f"tensor<?x{p.dtype}>{{{dims[id(p)]}}}")
                mode = "readwrite" if id(p) in self.written_ids else "readonly"
                region_args.append(f"%b{p.index}: !iree_tensor_ext.dispatch.tensor<{mode}:tensor<?x{p.dtype}>>")
                self.binding[id(p)] = f"%b{p.index}"
            else:
                host_types.append(p.dtype)
                region_args.append(f"%s{p.index}: {p.dtype}")
        for axis in "xyz":
            host_operands.append(f"%grid_{axis}")
            host_types.append("i32")
            region_args.append(f"%n{axis}: i32")
        for b in k.base_offsets:
            host_operands.append(f"%{b.name}_{b.index}")
            host_types.append("i64")
            region_args.append(f"%s{b.index}: i64")
        for p in k.buffers:
            host_operands.append(dims[id(p)])
            host_types.append("index")
            region_args.append(f"%l{p.index}: index")
            self.buf_len[id(p)] = f"%l{p.index}"
        tied = [f"%{p.name}_{p.index}{{{dims[id(p)]}}}" for p in self.written]
        res = self.fresh("r") if self.written else None
        lhs = f"{res}:{len(self.written)} = " if len(self.written) > 1 else (f"{res} = " if res else "")
        self.w(f"{lhs}flow.dispatch.workgroups[{', '.join(wl)}]({', '.join(host_operands)}) : "
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
        if len(self.written) > 1:
            rets = ", ".join(f"{res}#{i}" for i in range(len(self.written)))
        else:
            rets = res or ""
        self.w(f"return {rets} : {', '.join(results)}" if self.written else "return")
        self.indent -= 1
        self.w("}")
        return self._configure("\n".join(self.lines) + "\n")

    # -- lowering configs ------------------------------------------------------------------
    def _config_slot(self, kind: str, loops: tuple[int, ...], iterators: tuple[str, ...],
                     elt_bytes: int, math: bool = False) -> str:
        """A placeholder for the attributes of a linalg op, filled in by `_configure`."""
        self.linalg_ops.append(_LinalgOp(kind, tuple(loops), tuple(iterators), elt_bytes,
                                         self.loop_depth, self.full_version, math))
        return f"\u00a7{len(self.linalg_ops) - 1}\u00a7"

    def _configure(self, text: str) -> str:
        import re
        tiling = self.options.cpu_tiling
        ops = self.linalg_ops
        attrs = [""] * len(ops)
        candidates = [i for i, o in enumerate(ops) if o.loops]
        if tiling is not None and any(o.kind == "matmul" for o in ops):
            root = max(candidates, key=lambda i: (ops[i].heat(), -i))
            for i in candidates:
                o = ops[i]
                cfg = tiling.lowering_config(o.kind, o.loops, o.iterators, o.elt_bytes, o.math)
                attrs[i] = (f"compilation_info = {tiling.compilation_info(cfg)}" if i == root
                            else f"lowering_config = {cfg}")

        def sub(m) -> str:
            a = attrs[int(m.group(2))]
            if m.group(1):      # inside an attribute dictionary that continues
                return f"{a}, " if a else ""
            return f"{{{a}}} " if a else ""

        return re.sub("(\\{)?\u00a7(\\d+)\u00a7", lambda m: (m.group(1) or "") + sub(m), text)

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

    def _program(self) -> None:
        """The body of one Triton program.

        Full-tile version: where every masked access the version plan covers is wholly in
        bounds (conditions at program entry), a copy of the body with static, unmasked slices
        runs; otherwise the masked one. Masked vector loads and stores are several times slower
        on some CPUs. Inside the full version, loops whose masks move with the induction
        variable run their full iterations unmasked, then the rest masked; and 2-D loads whose
        slab fits the buffer read it in place (`_slab_load`).
        """
        plan = self.facts.plan
        self.slab_able = {id(op): (outer, inner) for op, _, outer, inner in self._slab_candidates(False)}
        slabs = self._slab_candidates(True)
        if not plan and not slabs:
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
        for branch in ((True, False) if pred is not None else (True,)):
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
        self.full_version = False
        self.assume_full = set()

    def _bound_value(self, b) -> str:
        if b.value is not None:
            return self.scalar(b.value)
        return self._cmp("sle", self.poly(b.poly), self.idx(0))

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

    # -- uses and materialization decisions ------------------------------------------------
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
        if isinstance(op, _CHEAP_OPS):
            return False
        if isinstance(op, t.Elementwise):
            return self._use_counts.get(v.id, 0) > 1 and t.is_float(v.dtype)
        return True

    # -- blocks and ops -----------------------------------------------------------------
    def _block(self, block: t.Block) -> None:
        for op in block.ops:
            if self._needed(op):
                self._op(op)

    def _needed(self, op: t.Op) -> bool:
        if isinstance(op, t.Store):
            return True
        if isinstance(op, (t.For, t.If)):
            return id(op) in self.facts.live_ops
        return any(r.id in self.facts.live for r in op.results)

    def _op(self, op: t.Op) -> None:
        structural = {t.Store: self._store, t.For: self._for, t.If: self._if, t.Reduce: self._reduce,
                      t.Dot: self._dot}.get(type(op))
        if structural is not None:
            structural(op)
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

    def _copy(self, name: str, ty: str) -> str:
        c = self.fresh("snap")
        self.w(f"{c} = bufferization.alloc_tensor() copy({name}) : {ty}")
        return c

    # -- scalars ------------------------------------------------------------------------
    def scalar(self, v: t.Value) -> str:
        name = self.lookup(("s", v.id))
        if name is None:
            op = v.owner
            if isinstance(op, t.Constant) and not v.is_tile:
                return self.const(op.value, v.dtype)
            raise AssertionError(f"scalar {v} used before it was emitted")
        return name

    def _scalar_op(self, op: t.Op) -> str:
        v = op.result
        if isinstance(op, t.Constant):
            return self.const(op.value, v.dtype)
        if isinstance(op, t.ProgramId):
            if op.axis == 0 and self.program_x is not None:
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
        raise self.err(f"unsupported scalar op {op.name}", op)

    def _elementwise(self, op: t.Elementwise, args: list[str], out) -> str:
        dtypes = [a.dtype for a in op.args]
        rdtype = op.result.dtype
        if "bf16" in dtypes + [rdtype] and op.opname not in _BF16_EXACT:
            return self._bf16_elementwise(op, args, dtypes, out)
        return self._arith(op.opname, op.attrs, args, dtypes, rdtype, out)

    def _arith(self, name: str, attrs: dict, args: list[str], dtypes: list[str], rdtype: str, out) -> str:
        r = self.fresh()
        at = dtypes[0]
        if name in ("arith.cmpi", "arith.cmpf"):
            out(f"{r} = {name} {attrs['predicate']}, {args[0]}, {args[1]} : {at}")
        elif name == "arith.select":
            out(f"{r} = arith.select {args[0]}, {args[1]}, {args[2]} : {rdtype}")
        elif name in _CASTS:
            if at == rdtype:
                return args[0]
            out(f"{r} = {name} {args[0]} : {at} to {rdtype}")
        elif name in _INT_DIVS:
            # Division by zero is undefined in Triton but traps on a CPU; masked-off lanes
            # compute too, so guard the divisor.
            zero, one = self.fresh(), self.fresh()
            out(f"{zero} = arith.constant 0 : {rdtype}")
            out(f"{one} = arith.constant 1 : {rdtype}")
            isz, safe = self.fresh(), self.fresh()
            out(f"{isz} = arith.cmpi eq, {args[1]}, {zero} : {rdtype}")
            out(f"{safe} = arith.select {isz}, {one}, {args[1]} : {rdtype}")
            out(f"{r} = {name} {args[0]}, {safe} : {rdtype}")
        else:
            out(f"{r} = {name} {', '.join(args)} : {rdtype}")
        return r

    def _bf16_elementwise(self, op: t.Elementwise, args: list[str], dtypes: list[str], out) -> str:
        """bf16 arithmetic, computed in f32 and rounded to bf16 explicitly (round to nearest
        even). IREE's CPU codegen computes bf16 in f32 and drops the rounding, even that of an
        explicit f32 -> bf16 cast, which would give results Triton never computes."""
        wide = []
        for a, d in zip(args, dtypes):
            if d == "bf16":
                w = self.fresh()
                out(f"{w} = arith.extf {a} : bf16 to f32")
                a = w
            wide.append(a)
        wdtypes = ["f32" if d == "bf16" else d for d in dtypes]
        rdtype = op.result.dtype
        if rdtype != "bf16":
            return self._arith(op.opname, op.attrs, wide, wdtypes, rdtype, out)
        name = op.opname
        if name == "arith.truncf":
            name = "arith.truncf" if wdtypes[0] == "f64" else "arith.extf"   # to f32 (no-op for f32)
        x = self._arith(name, op.attrs, wide, wdtypes, "f32", out)
        # Round x (f32) to the nearest bf16, ties to even; NaNs stay (quiet) NaNs.
        b, lsb, r1, r2, keep, nan, qn, pick, y, res = (self.fresh() for _ in range(10))
        c16, c1, c7fff, cmask, cq = (self.fresh() for _ in range(5))
        out(f"{c16} = arith.constant 16 : i32")
        out(f"{c1} = arith.constant 1 : i32")
        out(f"{c7fff} = arith.constant 32767 : i32")
        out(f"{cmask} = arith.constant -65536 : i32")
        out(f"{cq} = arith.constant 4194304 : i32")
        out(f"{b} = arith.bitcast {x} : f32 to i32")
        out(f"{lsb} = arith.shrui {b}, {c16} : i32")
        out(f"{r1} = arith.andi {lsb}, {c1} : i32")
        out(f"{r2} = arith.addi {b}, {c7fff} : i32")
        out(f"{keep} = arith.addi {r2}, {r1} : i32")
        out(f"{qn} = arith.ori {b}, {cq} : i32")
        out(f"{nan} = arith.cmpf uno, {x}, {x} : f32")
        out(f"{pick} = arith.select {nan}, {qn}, {keep} : i32")
        out(f"{y} = arith.andi {pick}, {cmask} : i32")
        rounded = self.fresh()
        out(f"{rounded} = arith.bitcast {y} : i32 to f32")
        out(f"{res} = arith.truncf {rounded} : f32 to bf16")
        return res

    # -- polynomials -> index values ------------------------------------------------------
    def atom_index(self, a) -> str:
        if isinstance(a, Carried):
            name = self.lookup(a.key())
            assert name is not None, f"carried offset {a} not in scope"
            return name
        key = ("idx", a.id)
        name = self.lookup(key)
        if name is None:
            s = self.scalar(a)
            if a.dtype == "index":
                return s
            name = self.fresh("i")
            self.w(f"{name} = arith.index_cast {s} : {a.dtype} to index")
            self.bind(key, name)
        return name

    def poly(self, p: Poly) -> str:
        if p.is_const:
            return self.idx(p.const_value)
        key = ("poly", tuple(sorted(p.terms.items())))
        name = self.lookup(key)
        if name is None:
            name = self._poly(p)
            self.bind(key, name)
        return name

    def _poly(self, p: Poly) -> str:
        acc = None
        for mono, c in sorted(p.terms.items(), key=repr):
            term = None
            for k in mono:
                a = self.atom_index(p.atoms[k])
                if term is None:
                    term = a
                else:
                    n = self.fresh("i")
                    self.w(f"{n} = arith.muli {term}, {a} : index")
                    term = n
            if term is None:
                term = self.idx(c)
            elif c != 1:
                n = self.fresh("i")
                self.w(f"{n} = arith.muli {term}, {self.idx(c)} : index")
                term = n
            if acc is None:
                acc = term
            else:
                n = self.fresh("i")
                self.w(f"{n} = arith.addi {acc}, {term} : index")
                acc = n
        return acc

    def _binop(self, op: str, a: str, b: str, ty: str = "index") -> str:
        r = self.fresh("i")
        self.w(f"{r} = {op} {a}, {b} : {ty}")
        return r

    def _and(self, conds: list[str]) -> Optional[str]:
        acc = None
        for c in dict.fromkeys(conds):
            acc = c if acc is None else self._binop("arith.andi", acc, c, "i1")
        return acc

    # -- tensors: materialization and fused element evaluation -----------------------------
    def tensor_entry(self, v: t.Value) -> _Tensor:
        e = self.lookup(("t", v.id))
        if e is None:
            name = self._materialize(v)
            e = _Tensor(name, tuple(range(len(v.shape))), v.type.mlir())
            self.bind(("t", v.id), e)
        return e

    def tensor(self, v: t.Value) -> str:
        """`v` as a tensor of its full shape."""
        e = self.tensor_entry(v)
        if e.dims == tuple(range(len(v.shape))):
            return e.name
        name = self._generic_map(v, root=False)
        self.bind(("t", v.id), _Tensor(name, tuple(range(len(v.shape))), v.type.mlir()))
        return name

    def _empty(self, ty: str) -> str:
        """A new tile to write into. While a snapshot load is emitted, a fresh allocation: then
        IREE cannot merge the load's ops with identical ones from before a store."""
        e = self.fresh("e")
        self.w(f"{e} = bufferization.alloc_tensor() : {ty}" if self.snapshotting else f"{e} = tensor.empty() : {ty}")
        return e

    def _fill(self, scalar: str, ty: t.TileType) -> str:
        e, f = self._empty(ty.mlir()), self.fresh("fill")
        slot = self._config_slot("fill", ty.shape, ("parallel",) * len(ty.shape), _bytes(ty.dtype))
        self.w(f"{f} = linalg.fill {slot}ins({scalar} : {ty.dtype}) outs({e} : {ty.mlir()}) -> {ty.mlir()}")
        return f

    def _uniform_scalar_name(self, v: t.Value) -> Optional[str]:
        u = uniform_scalar(v)
        if u is None:
            return None
        if u.is_tile:   # a constant tile
            return self.const(u.owner.value, v.dtype)
        return self.scalar(u)

    def _materialize(self, v: t.Value) -> str:
        op = v.owner
        u = self._uniform_scalar_name(v) if isinstance(op, (t.Constant, t.Splat)) else None
        if u is not None:
            return self._fill(u, v.type)
        return self._generic_map(v, root=True)

    def _generic_map(self, v: t.Value, root: bool) -> str:
        """A linalg.generic computing all of `v`: its own op if `root`, else from its tensor."""
        rank = len(v.shape)
        body = _Body(rank)
        res = self._elem(body, v, tuple(range(rank)), root=root)
        e = self._empty(v.type.mlir())
        out = self.fresh("g")
        ident = self._map(rank, [f"d{i}" for i in range(rank)])
        self._write_generic(out, body, [ident], ["parallel"] * rank, [e], [v.type.mlir()], [v.dtype],
                            [res], v.shape)
        return out

    @staticmethod
    def _map(nloops: int, results: list[str]) -> str:
        dims = ", ".join(f"d{i}" for i in range(nloops))
        return f"affine_map<({dims}) -> ({', '.join(results)})>"

    def _write_generic(self, out: str, body: _Body, out_maps: list[str], iterators: list[str],
                       inits: list[str], init_types: list[str], out_elts: list[str],
                       yields: list[str], shape: tuple[int, ...]) -> None:
        """A linalg.generic over the static loop ranges `shape`."""
        if not body.ins and any(x == "reduction" for x in iterators):
            # The iteration space must be readable from some operand: add an unused input.
            ty = t.TileType(shape, out_elts[0]).mlir()
            e = self.fresh("dom")
            self.w(f"{e} = tensor.empty() : {ty}")
            body.ins.append((e, ty, self._map(len(shape), [f"d{i}" for i in range(len(shape))]),
                             self.fresh("in"), out_elts[0]))
        maps = [i[2] for i in body.ins] + out_maps
        its = ", ".join(f'"{x}"' for x in iterators)
        lhs = out if len(inits) == 1 else f"{out}:{len(inits)}"
        ins = ""
        if body.ins:
            ins = f" ins({', '.join(i[0] for i in body.ins)} : {', '.join(i[1] for i in body.ins)})"
        elt = max(_bytes(x[4]) for x in body.ins + [("", "", "", "", e) for e in out_elts])
        math = any(" = math." in ln or " = arith.div" in ln or " = arith.rem" in ln for ln in body.lines)
        slot = self._config_slot("generic", tuple(shape), tuple(iterators), elt, math)
        self.w(f"{lhs} = linalg.generic {{{slot}indexing_maps = [{', '.join(maps)}], iterator_types = [{its}]}}"
               f"{ins} outs({', '.join(inits)} : {', '.join(init_types)}) {{")
        outs_args = body.memo.get("__outs__", [self.fresh("o") for _ in inits])
        bargs = [f"{i[3]}: {i[4]}" for i in body.ins] + [f"{a}: {e}" for a, e in zip(outs_args, out_elts)]
        self.w(f"^bb0({', '.join(bargs)}):")
        self.indent += 1
        for line in body.lines:
            self.w(line)
        self.w(f"linalg.yield {', '.join(yields)} : {', '.join(out_elts)}")
        self.indent -= 1
        self.w(f"}} -> ({', '.join(init_types)})" if len(inits) > 1 else f"}} -> {init_types[0]}")

    def _leaf_arg(self, body: _Body, v: t.Value, view: tuple) -> str:
        """A block argument of `body` reading materialized `v` at `view`."""
        key = ("leaf", v.id, view)
        if key in body.memo:
            return body.memo[key]
        e = self.tensor_entry(v)
        keep = [d for d in e.dims if v.shape[d] != 1]
        if not keep:
            # Every dim is size 1: read the one element outside the region.
            zeros = ", ".join([self.idx(0)] * len(e.dims))
            s = self.fresh("x")
            self.w(f"{s} = tensor.extract {e.name}[{zeros}] : {e.type}")
            body.memo[key] = s
            return s
        name, ttype = e.name, e.type
        if len(keep) != len(e.dims):
            # Drop the size-1 dims (rank-reducing slice) so the indexing map is a projection.
            full_shape = [v.shape[d] for d in e.dims]
            red = t.TileType(tuple(v.shape[d] for d in keep), v.dtype).mlir()
            n = self.fresh("rs")
            offs = ", ".join("0" for _ in e.dims)
            strides = ", ".join("1" for _ in e.dims)
            self.w(f"{n} = tensor.extract_slice {e.name}[{offs}] [{', '.join(map(str, full_shape))}] "
                   f"[{strides}] : {e.type} to {red}")
            name, ttype = n, red
        results = []
        for d in keep:
            assert view[d] is not None, (v, view)
            results.append(f"d{view[d]}")
        arg = self.fresh("in")
        body.ins.append((name, ttype, self._map(body.nloops, results), arg, v.dtype))
        body.memo[key] = arg
        return arg

    def _linalg_index(self, body: _Body, dim: int) -> str:
        key = ("index", dim)
        if key not in body.memo:
            n = self.fresh("ix")
            body.lines.append(f"{n} = linalg.index {dim} : index")
            body.memo[key] = n
        return body.memo[key]

    def _elem(self, body: _Body, v: t.Value, view: tuple, root: bool = False) -> str:
        """The element of `v` at `view` (per dim of v: a loop dim, or None for index 0)."""
        if not v.is_tile:
            return self.scalar(v)
        key = ("elem", v.id, view)
        if key in body.memo:
            return body.memo[key]
        op = v.owner
        cheap = isinstance(op, _CHEAP_OPS)
        if not root and ((not cheap and self.lookup(("t", v.id)) is not None) or self._is_leaf(v)):
            r = self._leaf_arg(body, v, view)
            body.memo[key] = r
            return r
        out = body.lines.append
        if isinstance(op, t.Constant):
            r = self.fresh("k")
            out(f"{r} = arith.constant {literal(op.value, v.dtype)} : {v.dtype}")
        elif isinstance(op, t.Splat):
            r = self.scalar(op.src)
        elif isinstance(op, t.MakeRange):
            if view[0] is None:
                r = self.fresh("k")
                out(f"{r} = arith.constant {op.start} : i32")
            else:
                i = self._linalg_index(body, view[0])
                r = self.fresh("rg")
                out(f"{r} = arith.index_cast {i} : index to i32")
                if op.start:
                    c, r2 = self.fresh("k"), self.fresh("rg")
                    out(f"{c} = arith.constant {op.start} : i32")
                    out(f"{r2} = arith.addi {r}, {c} : i32")
                    r = r2
        elif isinstance(op, t.Broadcast):
            sview = tuple(None if (ns == 1 and nr != 1) else x
                          for x, ns, nr in zip(view, op.src.shape, v.shape))
            r = self._elem(body, op.src, sview)
        elif isinstance(op, t.ExpandDims):
            r = self._elem(body, op.src, view[:op.axis] + view[op.axis + 1:])
        elif isinstance(op, t.Trans):
            sview = [None] * len(view)
            for i, o in enumerate(op.order):
                sview[o] = view[i]
            r = self._elem(body, op.src, tuple(sview))
        elif isinstance(op, t.Elementwise):
            args = [self._elem(body, a, view) for a in op.args]
            r = self._elementwise(op, args, out)
        elif isinstance(op, t.Load):
            r = self._gather_elem(body, op, view)
        else:
            r = self._leaf_arg(body, v, view)
        body.memo[key] = r
        return r

    # -- gathers --------------------------------------------------------------------------
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

    # -- structured accesses ---------------------------------------------------------------
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

    def _select_index(self, cond: str, a: str, b: str) -> str:
        r = self.fresh("i")
        self.w(f"{r} = arith.select {cond}, {a}, {b} : index")
        return r

    def _cmp(self, pred: str, a: str, b: str, ty: str = "index") -> str:
        key = ("cmp", pred, a, b, ty)
        r = self.lookup(key)
        if r is None:
            r = self.fresh("p")
            self.w(f"{r} = arith.cmpi {pred}, {a}, {b} : {ty}")
            self.bind(key, r)
        return r

    def _cond_value(self, c: Cond) -> str:
        if c.kind == "val":
            return self.scalar(c.value)
        return self._cmp("slt", self.poly(c.poly), self.idx(0))

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
            raise self.err(f"load of {dt} from a buffer of {p.dtype}", op)
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
        if (box is None or id(op) in self.assume_full) and self.full_version and id(op) in self.slab_ok:
            name, dims, ty = self._slab_load(p, acc, shape, active, inner)
            self._bind_load(v, _Tensor(name, dims, ty), snapshot)
            return
        if box is None or id(op) in self.assume_full:
            name = self._slice_load(p, acc, shape, active, inner, rty, None, other)
        else:
            ranges = self._masked_ranges(box, shape, active, inner)
            checked = self.full_version and id(op) in self.slab_ok
            if id(op) in self.slab_able and (checked or self.slab_able[id(op)] == tuple(active)):
                name, dims, ty = self._masked_slab_load(op, acc, shape, active, inner, rty, ranges,
                                                        other, checked)
                self._bind_load(v, _Tensor(name, dims, ty), snapshot)
                return
            name = self._slice_load(p, acc, shape, active, inner, rty, ranges, other)
        self._bind_load(v, _Tensor(name, tuple(active), rty.mlir()), snapshot)

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
        init = self._fill(other, tile_ty)
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
        s0 = self.poly(stride)
        off = self.poly(acc.form.offset)
        col = self._binop("arith.minsi", off, self._binop("arith.subi", s0, self.idx(cols)))
        start = self._binop("arith.subi", off, col)
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

    def _uniform_other(self, op: t.Load, acc: StructuredAccess) -> str:
        if acc.other is not None:
            if acc.other.is_tile:
                return self.const(acc.other.owner.value, op.result.dtype)
            return self.scalar(acc.other)
        return self.const(0, op.result.dtype)

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
                    ranges: Optional[dict], other: str, init: Optional[str] = None) -> str:
        """Loads the tile (active dims only). `ranges` None: the whole tile, static sizes."""
        outer = [d for d in active if d != inner]
        pos_in_r = {d: i for i, d in enumerate(active)}
        n = shape[inner]
        stride = self._stride(acc.form.strides[inner])
        btype = self.buf_type(p)

        def row(pos: dict[int, str], into: Optional[str]) -> str:
            if ranges is None:
                start = self._row_offset(acc, pos)
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
            offs = [pos[d] if d in pos else "0" for d in active]
            sizes = ["1"] * len(active)
            offs[pos_in_r[inner]] = "0" if ranges is None else ranges[inner][0]
            sizes[pos_in_r[inner]] = str(n) if ranges is None else size
            y = self.fresh("ins")
            self.w(f"{y} = tensor.insert_slice {x} into {into}[{', '.join(offs)}] [{', '.join(sizes)}] "
                   f"[{', '.join('1' for _ in active)}] : {sty} into {rty.mlir()}")
            return y

        if ranges is None:
            init = None
            if outer:
                init = self._empty(rty.mlir())
        elif init is None:
            init = self._fill(other, rty)
        if not outer:
            return row({}, init)
        return self._row_loops(outer, shape, ranges, init, rty, row)

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
        """For a single-element access: an i1 that holds when index 0 is inside `box`."""
        if box is None:
            return None
        conds = [self._cond_value(c) for c in box.conds]
        for d in range(len(box.lo)):
            conds += [self._cmp("sle", self.poly(q), self.idx(0)) for q in box.lo[d]]
            conds += [self._cmp("sgt", self.poly(q), self.idx(0)) for q in box.hi[d]]
        return self._and(conds)

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
            raise self.err("scalar load through an unanalyzable pointer", op)
        other = self._uniform_other(op, acc) if op.mask is not None else None
        return self._scalar_read(op.buffer, self.poly(acc.form.offset), acc.box, other, op.result.dtype,
                                 id(op) in self.snapshots)

    def _store(self, op: t.Store) -> None:
        acc = self.facts.access(op)
        p = op.buffer
        if op.value.dtype != p.dtype:
            raise self.err(f"store of {op.value.dtype} into a buffer of {p.dtype}", op)
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
        if box is None or id(op) in self.assume_full:
            self._slice_store(p, acc, shape, active, inner, rty, val, None)
        else:
            ranges = self._masked_ranges(box, shape, active, inner)
            if self.loop_depth and any(isinstance(o, t.Load) and o.buffer is p for o in self.k.walk()):
                # In a kernel loop that also loads this buffer, IREE shrinks the value's op to
                # the masked size and then needs a dynamic stack allocation per iteration,
                # which it rejects; a copy of the whole tile keeps every allocation static.
                val = self._copy(val, rty.mlir())
            self._slice_store(p, acc, shape, active, inner, rty, val, ranges)

    def _slice_store(self, p: t.Param, acc, shape, active, inner, rty: t.TileType, val: str,
                     ranges: Optional[dict]) -> None:
        outer = [d for d in active if d != inner]
        pos_in_r = {d: i for i, d in enumerate(active)}
        n = shape[inner]
        stride = self._stride(acc.form.strides[inner])
        btype = self.buf_type(p)

        def row(pos: dict[int, str], _acc) -> None:
            if ranges is None:
                start = self._row_offset(acc, pos)
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
        x = self.fresh("one")
        self.w(f"{x} = tensor.from_elements {value} : tensor<1x{p.dtype}>")
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
            raise self.err("scalar store through an unanalyzable pointer", op)
        shape = op.value.shape
        val, offs = self.tensor(op.value), self.tensor(op.offsets)
        mask = self.tensor(op.mask) if op.mask is not None else None
        ivs = []
        for d, n in enumerate(shape):
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

    # -- reductions and dots -----------------------------------------------------------------
    def _reduce(self, op: t.Reduce) -> None:
        src0 = op.srcs[0]
        shape = src0.shape
        rank = len(shape)
        axis = op.axis
        rshape = tuple(n for i, n in enumerate(shape) if i != axis)
        out_types = [t.TileType(rshape, s.dtype) if rshape else t.TileType((), s.dtype) for s in op.srcs]
        known = _combiner_identity(op.combiner)
        if known is not None:
            inits = [self._fill(self.const(known[1], s.dtype), ty) for s, ty in zip(op.srcs, out_types)]
            body = _Body(rank)
            xs = [self._elem(body, s, tuple(range(rank))) for s in op.srcs]
            loops_shape = shape
        else:
            # No known identity: start from element 0 along the axis, combine the rest.
            srcs = [self.tensor(s) for s in op.srcs]
            inits, rests = [], []
            for s, name, ty in zip(op.srcs, srcs, out_types):
                offs = ", ".join("0" for _ in shape)
                ones = ", ".join("1" for _ in shape)
                first = ", ".join("1" if i == axis else str(n) for i, n in enumerate(shape))
                init = self.fresh("init")
                if rshape:
                    self.w(f"{init} = tensor.extract_slice {name}[{offs}] [{first}] [{ones}] : "
                           f"{s.type.mlir()} to {ty.mlir()}")
                else:
                    x = self.fresh("x")
                    self.w(f"{x} = tensor.extract {name}[{', '.join(self.idx(0) for _ in shape)}] : {s.type.mlir()}")
                    self.w(f"{init} = tensor.from_elements {x} : {ty.mlir()}")
                inits.append(init)
                if shape[axis] > 1:
                    rest_shape = tuple(n - 1 if i == axis else n for i, n in enumerate(shape))
                    rty = t.TileType(rest_shape, s.dtype)
                    rest = self.fresh("rest")
                    roffs = ", ".join("1" if i == axis else "0" for i in range(rank))
                    self.w(f"{rest} = tensor.extract_slice {name}[{roffs}] [{', '.join(map(str, rest_shape))}] "
                           f"[{ones}] : {s.type.mlir()} to {rty.mlir()}")
                    rests.append((rest, rty))
            if shape[axis] == 1:
                self._bind_reduce_results(op, inits, out_types)
                return
            body = _Body(rank)
            xs = []
            for rest, rty in rests:
                arg = self.fresh("in")
                body.ins.append((rest, rty.mlir(), self._map(rank, [f"d{i}" for i in range(rank)]), arg, rty.dtype))
                xs.append(arg)
            loops_shape = rests[0][1].shape
        accs = [self.fresh("acc") for _ in op.srcs]
        body.memo["__outs__"] = accs
        ys = self._combine(body, op.combiner, accs, xs)
        out_map = self._map(rank, [f"d{i}" for i in range(rank) if i != axis])
        its = ["reduction" if i == axis else "parallel" for i in range(rank)]
        out = self.fresh("red")
        self._write_generic(out, body, [out_map] * len(op.srcs), its, inits, [ty.mlir() for ty in out_types],
                            [s.dtype for s in op.srcs], ys, loops_shape)
        names = [out] if len(op.srcs) == 1 else [f"{out}#{i}" for i in range(len(op.srcs))]
        self._bind_reduce_results(op, names, out_types)

    def _bind_reduce_results(self, op: t.Reduce, names: list[str], out_types: list[t.TileType]) -> None:
        for r, name, ty in zip(op.results, names, out_types):
            if r.is_tile:
                self.bind(("t", r.id), _Tensor(name, tuple(range(len(r.shape))), ty.mlir()))
            else:
                s = self.fresh("x")
                self.w(f"{s} = tensor.extract {name}[] : {ty.mlir()}")
                self.bind(("s", r.id), s)

    def _combine(self, body: _Body, block: t.Block, lhs: list[str], rhs: list[str]) -> list[str]:
        """Emits the scalar combiner region into `body`, with (lhs, rhs) bound to its args."""
        self.scopes.append({})
        for a, name in zip(block.args, lhs + rhs):
            self.bind(("s", a.id), name)
        for op in block.ops:
            if not isinstance(op, (t.Elementwise, t.Constant)):
                raise self.err(f"unsupported op {op.name} in a reduce combiner", op)
            if isinstance(op, t.Constant):
                r = self.fresh("k")
                body.lines.append(f"{r} = arith.constant {literal(op.value, op.result.dtype)} : {op.result.dtype}")
            else:
                r = self._elementwise(op, [self.scalar(a) for a in op.args], body.lines.append)
            self.bind(("s", op.result.id), r)
        ys = [self.scalar(y) for y in block.yields]
        self.scopes.pop()
        return ys

    def _dot(self, op: t.Dot) -> None:
        a, b, c = self.tensor(op.a), self.tensor(op.b), self.tensor(op.acc)
        r = self.fresh("mm")
        m, k = op.a.shape
        n = op.b.shape[1]
        slot = self._config_slot("matmul", (m, n, k), ("parallel", "parallel", "reduction"),
                                 _bytes(op.acc.dtype))
        self.w(f"{r} = linalg.matmul {slot}ins({a}, {b} : {op.a.type.mlir()}, {op.b.type.mlir()}) "
               f"outs({c} : {op.acc.type.mlir()}) -> {op.acc.type.mlir()}")
        self.bind(("t", op.result.id), _Tensor(r, (0, 1), op.result.type.mlir()))

    def _reshape(self, op: t.Reshape) -> None:
        src = self.tensor(op.src)
        st, rt_ = op.src.type, op.result.type
        cur, cur_ty = src, st.mlir()
        if len(st.shape) > 1:
            flat = t.TileType((st.numel,), st.dtype).mlir()
            n = self.fresh("flat")
            self.w(f"{n} = tensor.collapse_shape {cur} [[{', '.join(map(str, range(len(st.shape))))}]] : "
                   f"{cur_ty} into {flat}")
            cur, cur_ty = n, flat
        if len(rt_.shape) > 1:
            n = self.fresh("resh")
            self.w(f"{n} = tensor.expand_shape {cur} [[{', '.join(map(str, range(len(rt_.shape))))}]] "
                   f"output_shape [{', '.join(map(str, rt_.shape))}] : {cur_ty} into {rt_.mlir()}")
            cur = n
        self.bind(("t", op.result.id), _Tensor(cur, tuple(range(len(rt_.shape))), rt_.mlir()))

    # -- control flow ------------------------------------------------------------------------
    # Tiles cross region boundaries (loop iter_args and results, scf.if results) as vectors,
    # not tensors: IREE's codegen rewrites elementwise generics in ways that break in-place
    # bufferization of tensor iter_args, and cannot join buffers of different kinds (a slice
    # of a binding and a stack tile) at an scf.if. Vectors have no buffers to reconcile.
    # The exception is a dot accumulator (`_tensor_carried`): the matmul writes it in place.
    @staticmethod
    def _vector_type(v: t.Value) -> str:
        return f"vector<{'x'.join(map(str, v.shape))}x{v.dtype}>"

    def _region_value(self, v: t.Value) -> tuple[str, str]:
        """(ssa name, type) of `v` as it crosses into or out of a region."""
        if not v.is_tile:
            return self.scalar(v), v.dtype
        src = self.tensor(v)
        zeros = ", ".join(self.idx(0) for _ in v.shape)
        inb = ", ".join("true" for _ in v.shape)
        r = self.fresh("vec")
        self.w(f"{r} = vector.transfer_read {src}[{zeros}], {self.const(0, v.dtype)} {{in_bounds = [{inb}]}} : "
               f"{v.type.mlir()}, {self._vector_type(v)}")
        return r, self._vector_type(v)

    def _bind_region_value(self, v: t.Value, name: str) -> None:
        if not v.is_tile:
            self.bind(("s", v.id), name)
            return
        zeros = ", ".join(self.idx(0) for _ in v.shape)
        inb = ", ".join("true" for _ in v.shape)
        e, r = self.fresh("e"), self.fresh("tile")
        self.w(f"{e} = tensor.empty() : {v.type.mlir()}")
        self.w(f"{r} = vector.transfer_write {name}, {e}[{zeros}] {{in_bounds = [{inb}]}} : "
               f"{self._vector_type(v)}, {v.type.mlir()}")
        self.bind(("t", v.id), _Tensor(r, tuple(range(len(v.shape))), v.type.mlir()))

    def _tensor_carried(self, op: t.For, j: int) -> bool:
        """A dot accumulator: the iter_arg's one use is as the accumulator of a dot in the loop
        body, and the loop yields that dot. It crosses the loop as a tensor: the matmul updates
        it in place, and IREE tiles it (a vector this size would be unrolled whole)."""
        arg, y = op.iter_args[j], op.body.yields[j]
        dot = y.owner
        return (isinstance(dot, t.Dot) and dot in op.body.ops and dot.acc is arg
                and dot.a is not arg and dot.b is not arg
                and [id(u) for u in self._uses.get(arg.id, [])] == [id(dot)])

    def _for(self, op: t.For) -> None:
        live = self.facts.live
        keep = [j for j in range(len(op.inits))
                if op.results[j].id in live or op.iter_args[j].id in live]
        offsets = [j for j in range(len(op.inits)) if (id(op), j) in self.facts.carried_used]
        as_tensor = {j for j in keep if self._tensor_carried(op, j)}
        inits, types = [], []
        for j in keep:
            if j in as_tensor:
                inits.append(self.tensor(op.inits[j]))
                types.append(op.inits[j].type.mlir())
            else:
                n, ty = self._region_value(op.inits[j])
                inits.append(n)
                types.append(ty)
        for j in offsets:
            inits.append(self.poly(self.facts.loop_offsets[(id(op), j)].init))
            types.append("index")
        lb, ub = self.scalar(op.lb), self.scalar(op.ub)
        peel = self.facts.plan.peels.get(id(op)) if self.full_version else None
        if peel is not None:
            # The full iterations [lb, mid) with the moving accesses unmasked, then [mid, ub).
            mid = self._peel_point(op, peel)
            saved = self.assume_full
            self.assume_full = saved | peel.accesses
            inits = self._loop(op, lb, mid, keep, offsets, as_tensor, inits, types)
            self.assume_full = saved
            lb = mid
        names = self._loop(op, lb, ub, keep, offsets, as_tensor, inits, types)
        for j, n in zip(keep, names):
            if j in as_tensor:
                self.bind(("t", op.results[j].id), _Tensor(n, tuple(range(len(op.results[j].shape))),
                                                            op.results[j].type.mlir()))
            else:
                self._bind_region_value(op.results[j], n)
        for j, n in zip(offsets, names[len(keep):]):
            self.bind(Carried(op, j, "result").key(), n)

    def _peel_point(self, op: t.For, peel) -> str:
        """The first induction value at or after which some moving access is not full.

        Iteration iv is full when c + d * iv <= 0 (d > 0) for each condition, i.e. iv <= F with
        F = floor(-c / d). With S = min(F) + 1 clamped to [lb, ub], the full iterations are those
        before mid = lb + ceil((S - lb) / step) * step."""
        ivty = op.lb.dtype

        def to_index(name: str) -> str:
            if ivty == "index":
                return name
            r = self.fresh("i")
            self.w(f"{r} = arith.index_cast {name} : {ivty} to index")
            return r

        lb, ub, step = (to_index(self.scalar(v)) for v in (op.lb, op.ub, op.step))
        s = None
        conds = {(tuple(sorted(c.terms.items(), key=repr)), d): (c, d) for c, d in peel.conds}
        for c, d in conds.values():
            f = self._binop("arith.floordivsi", self.poly(-c), self.idx(d))
            s = f if s is None else self._binop("arith.minsi", s, f)
        s = self._binop("arith.addi", s, self.idx(1))
        s = self._binop("arith.maxsi", self._binop("arith.minsi", s, ub), lb)
        n = self._binop("arith.ceildivsi", self._binop("arith.subi", s, lb), step)
        mid = self._binop("arith.addi", lb, self._binop("arith.muli", n, step))
        if ivty == "index":
            return mid
        r = self.fresh("mid")
        self.w(f"{r} = arith.index_cast {mid} : index to {ivty}")
        return r

    def _loop(self, op: t.For, lb: str, ub: str, keep: list[int], offsets: list[int], as_tensor: set[int],
              inits: list[str], types: list[str]) -> list[str]:
        """One scf.for over [lb, ub) running op's body; returns the names of its results."""
        step = self.scalar(op.step)
        iv = self.fresh("iv")
        args = [self.fresh("it") for _ in inits]
        nres = len(inits)
        res = self.fresh("for") if nres else None
        lhs = f"{res}:{nres} = " if nres > 1 else (f"{res} = " if nres else "")
        ivty = op.lb.dtype
        suffix = f" : {ivty}" if ivty != "index" else ""
        if nres:
            iters = ", ".join(f"{a} = {i}" for a, i in zip(args, inits))
            self.w(f"{lhs}scf.for {iv} = {lb} to {ub} step {step} iter_args({iters}) -> "
                   f"({', '.join(types)}){suffix} {{")
        else:
            self.w(f"scf.for {iv} = {lb} to {ub} step {step}{suffix} {{")
        self.indent += 1
        self.loop_depth += 1
        self.scopes.append({})
        self.bind(("s", op.iv.id), iv)
        for j, a in zip(keep, args):
            if j in as_tensor:
                v = op.iter_args[j]
                self.bind(("t", v.id), _Tensor(a, tuple(range(len(v.shape))), v.type.mlir()))
            else:
                self._bind_region_value(op.iter_args[j], a)
        for j, a in zip(offsets, args[len(keep):]):
            self.bind(Carried(op, j, "arg").key(), a)
        self._block(op.body)
        ys = [self.tensor(op.body.yields[j]) if j in as_tensor else self._region_value(op.body.yields[j])[0]
              for j in keep]
        for j, a in zip(offsets, args[len(keep):]):
            step_p = self.facts.loop_offsets[(id(op), j)].step
            ys.append(self._binop("arith.addi", a, self.poly(step_p)))
        if nres:
            self.w(f"scf.yield {', '.join(ys)} : {', '.join(types)}")
        self.scopes.pop()
        self.loop_depth -= 1
        self.indent -= 1
        self.w("}")
        return [res] if nres == 1 else [f"{res}#{i}" for i in range(nres)]

    def _if(self, op: t.If) -> None:
        live = self.facts.live
        keep = [j for j in range(len(op.results)) if op.results[j].id in live]
        types = [self._vector_type(op.results[j]) if op.results[j].is_tile else op.results[j].dtype
                 for j in keep]
        cond = self.scalar(op.cond)
        res = self.fresh("if") if keep else None
        lhs = f"{res}:{len(keep)} = " if len(keep) > 1 else (f"{res} = " if keep else "")
        self.w(f"{lhs}scf.if {cond}" + (f" -> ({', '.join(types)})" if keep else "") + " {")
        for bi, blk in enumerate((op.then, op.otherwise)):
            if bi == 1:
                self.w("} else {")
            self.indent += 1
            self.scopes.append({})
            self._block(blk)
            if keep:
                ys = [self._region_value(blk.yields[j])[0] for j in keep]
                self.w(f"scf.yield {', '.join(ys)} : {', '.join(types)}")
            self.scopes.pop()
            self.indent -= 1
        self.w("}")
        names = [res] if len(keep) == 1 else [f"{res}#{i}" for i in range(len(keep))]
        for j, n in zip(keep, names):
            self._bind_region_value(op.results[j], n)


def emit_module(kernel: t.Kernel, facts: Facts, options: EmitOptions = EmitOptions()) -> str:
    """The IREE input module (MLIR text) for `kernel`."""
    return Emitter(kernel, facts, options).module()


def verify(module_text: str, kernel: str) -> None:
    """Parses and verifies the emitted module; a failure here is a triton-iree bug."""
    from iree.compiler import ir
    with ir.Context():
        try:
            ir.Module.parse(module_text)
        except ir.MLIRError as e:
            from .errors import CompileError
            err = CompileError(f"triton-iree emitted an invalid module (a bug; please report it with "
                               f"the module from TRITON_IREE_DUMP_DIR): {e}", kernel=kernel)
            err.module_text = module_text
            raise err from None


def host_vector_bytes() -> int:
    """The widest vector registers of this CPU that IREE targets with --iree-llvmcpu-target-cpu=host."""
    import platform
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        try:
            with open("/proc/cpuinfo") as f:
                flags = next((ln for ln in f if ln.startswith("flags")), "").split()
        except OSError:
            flags = []
        return 64 if "avx512f" in flags else 32 if "avx2" in flags else 16
    return 16


def cpu_options() -> EmitOptions:
    import os
    vec = host_vector_bytes()
    return EmitOptions(max_workgroups=max(128, 8 * (os.cpu_count() or 1)),
                       cpu_tiling=CpuTiling(vector_bytes=vec, elementwise_bytes=min(32, vec)))


def lower(kernel: t.Kernel, options: EmitOptions = EmitOptions()) -> str:
    """Tile program -> verified IREE input module: the analyses, then the emitter."""
    from .analysis import analyze
    text = emit_module(kernel, analyze(kernel), options)
    verify(text, kernel.name)
    return text
