"""The emitter's state and its MLIR text helpers: names, constants, scalars, index arithmetic
over the analyses' polynomials, and the small records the other modules share."""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Callable, Optional

from .. import tile as t
from ..analysis import closed_form_reduce
from ..forms import Carried, Cond, Facts, GatherAccess, Poly
from ..errors import UnsupportedError
from ..memory_order import snapshot_loads, stores_before_access
from .options import EmitOptions

_INT_DIVS = {"arith.divsi", "arith.divui", "arith.remsi", "arith.remui", "arith.ceildivsi",
             "arith.floordivsi"}
# Ops recomputed inside each consumer rather than read from a materialized tensor.
_CHEAP_OPS = (t.Constant, t.Splat, t.MakeRange, t.Broadcast, t.ExpandDims, t.Trans)
# bf16 ops that IREE's bf16-as-f32 emulation gets right: no rounding involved.
_BF16_EXACT = {"arith.select", "arith.bitcast", "arith.extf"}
_CASTS = {"arith.extsi", "arith.extui", "arith.trunci", "arith.extf", "arith.truncf",
          "arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui", "arith.bitcast"}


def _loads_feed_elementwise_1d(kernel: t.Kernel) -> bool:
    """Whether every load and store of `kernel` is of 1-D tiles (or scalars) and every loaded
    value is read by elementwise ops and stores only."""
    readers: dict[int, list] = {}
    for op in kernel.walk():
        for v in op.operands():
            readers.setdefault(v.id, []).append(op)
    return all(all(len(v.shape) <= 1 for v in op.operands() + op.results) and
               all(isinstance(r, (t.Elementwise, t.Store)) for res in op.results for r in readers.get(res.id, []))
               for op in kernel.walk() if isinstance(op, (t.Load, t.Store)))


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
    text = repr(float(x))
    # MLIR's float literals need a decimal point before an exponent: 1e+300 -> 1.0e+300.
    return text if "." in text or "e" not in text else text.replace("e", ".0e", 1)


def literal(value, dtype: str) -> str:
    if dtype == "i1":   # printed with its type (`arith.constant 1 : i1`); `true : i1` does not parse
        return "1" if value else "0"
    if t.is_float(dtype):
        return _float_literal(float(value), dtype)
    return str(int(value))


def _bytes(dtype: str) -> int:
    return max(1, t.bitwidth(dtype) // 8) if dtype in t.INT_TYPES + t.FLOAT_TYPES else 8


@dataclass
class _Tensor:
    """A materialized tile: an SSA tensor over some of the value's dims (the others are size 1
    or broadcast, and are implied)."""
    name: str
    dims: tuple[int, ...]
    type: str


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
    mma: Optional[tuple] = None    # on tensor cores: (instruction, subgroup basis, operands staged)
    dispatch: int = 0              # which of the kernel's dispatches (see `ModuleEmitter._parts`)
    spread: bool = False           # a fill to spread over the threads even if not the root

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


class EmitterBase():
    """State shared by every part of the emitter, and its text helpers."""

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
        self._consumer_memo: dict[int, frozenset[int]] = {}   # see `_consumers`
        self.assume_full: set[int] = set()      # accesses emitted unmasked here
        self.part: Optional[str] = None         # which dispatch of the kernel (see `ModuleEmitter._parts`)
        self.part_index = 0
        self.skip_tails = False                 # peeled loops' masked iterations are known empty
        self.full_version = False               # emitting the full-tile version of the program
        self.slab_ok: set[int] = set()          # loads whose slab conditions the version checks
        self.slab_able: dict[int, tuple[int, int]] = {}   # id(load) -> (outer, inner) dims
        self.loop_depth = 0
        self.one_thread = 0                     # emitting inside `_on_one_thread`'s loop
        self.if_depth = 0                       # emitting inside a runtime `if`
        self.linalg_ops: list[_LinalgOp] = []
        self.fills: dict[str, str] = {}          # tile from a linalg.fill (`_fill`) -> its scalar
        self.program_x: Optional[str] = None   # program id along axis 0, when coarsened
        # A kernel with atomics runs its programs one after another in one workgroup (see
        # `atomics`); program_ids then holds each axis' program id (an index).
        self.serial = any(isinstance(op, t.Atomic) for op in kernel.walk())
        self.program_ids: dict[int, str] = {}
        self.snapshots = snapshot_loads(kernel, facts, options.may_alias)
        self.snapshotting = False               # emitting a load in `snapshots`
        # GPU targets (see `configure`): a dispatch that reduces a tile to a scalar
        # gets, on LLVMGPU targets, IREE's vector distribution of reductions, configured by the
        # lowering for a row program (`GpuTiling.row_length`), by IREE otherwise; both want
        # masked rows as pads and map_stores (`loads`, `stores`). On Vulkan IREE configures it.
        gpu = options.gpu_tiling
        self.llvmgpu = gpu is not None and gpu.llvmgpu
        self.spirv = gpu is not None and gpu.spirv
        # GPUs: stores after which the workgroup waits (`memory_order.stores_before_access`):
        # other threads of the program may read what they wrote next (on Vulkan a barrier also
        # precedes every op that reads tiles, `_sync`, but not a read of a buffer).
        self.barrier_stores = stores_before_access(kernel, options.may_alias) if gpu is not None else set()
        # CUDA and HIP: a program with a scatter reduces to scalars on one thread too. A reduction
        # to a scalar makes IREE configure the dispatch itself, and it failed to distribute the
        # scattered tile's ops beside it ('failed to distribute'; iree-compile crashed configuring
        # checked mode's scatter).
        self.gpu_scatters = self.llvmgpu and any(
            isinstance(op, t.Store) and isinstance(facts.access(op), GatherAccess) for op in kernel.walk())
        # (On CUDA and HIP a reduction of a uniform tile is computed in closed form, no linalg
        # op: `ReductionEmitter._closed_form`; one to 64-bit scalars on one thread.)
        self.gpu_whole_reductions = gpu is not None and any(
            isinstance(op, t.Reduce) and op.to_scalar and
            not (self.llvmgpu and (closed_form_reduce(op) or gpu.reduced_on_one_thread(op) or self.gpu_scatters))
            for op in kernel.walk())
        self.gpu_row_length = gpu.row_length(kernel) if gpu is not None else None
        if self.spirv and (any(isinstance(op, t.MakeRange) and op.result.id in facts.live for op in kernel.walk()) or
                           any(t.tiles_in_loop(op) for op in kernel.walk())):
            # Vulkan: not where a tile of indices is computed with (`tl.where(cols < n, ..)` in
            # layer norm): its linalg.index becomes a vector.step, which IREE's SPIR-V
            # SubgroupReduce pipeline does not spread over the threads (the loop computing it
            # then ran on the first thread, on vectors of the row's length: 'failed to legalize
            # operation arith.constant'). Nor with tiles in kernel loops: their masked stores
            # failed to bufferize there ('unexpected allocation without upper bound shapes').
            self.gpu_row_length = None
        # A Vulkan row program: IREE's SPIR-V SubgroupReduce pipeline (`SpirvTiling.row_reduction_configs`).
        self.spirv_rows = self.spirv and self.gpu_row_length is not None
        # A tl.dot program on tensor cores (`GpuTiling.mma_program`): {id(dot): its plan}.
        self.gpu_mma = gpu.mma_program(kernel) if self.llvmgpu else None
        # A program with a part on one thread (`_on_one_thread`) reads its 2-D tiles element by
        # element (`_gather_tile`). A tile of rows, or a slab, lives in each thread's private
        # memory, where IREE has each thread fill only its share of it, and the one thread would
        # read the rest uninitialized (a 2-D tl.atomic_add). (1-D tiles are pads, which
        # each thread reads whole; gathered, a root that only they feed got a loop over
        # workgroups of its own, and then IREE refused the atomics' writes outside it.)
        self.gather_loads = self.llvmgpu and any(
            isinstance(op, (t.Atomic, t.Scan, t.Histogram)) or
            isinstance(op, t.Gather) and len(op.result.shape) > 1 or
            isinstance(op, t.Store) and isinstance(facts.access(op), GatherAccess) for op in kernel.walk())
        self.tile_stores = sum(isinstance(op, t.Store) and op.value.is_tile for op in kernel.walk())
        self.gathered: set[str] = set()         # tiles read element by element (`_gather_tile`)
        self.storage_views: set[str] = set()    # whole 1-D tiles loaded as slices of a binding
        # Triton's divisibility hints by scalar (an argument, or a pointer's base offset in its
        # buffer), for `aligned`.
        self.divisibility = {p.value.id: p.divisibility for p in kernel.params + kernel.base_offsets
                             if p.value is not None and p.divisibility > 1}
        self.loop_of_iv = {op.iv.id: op for op in kernel.walk() if isinstance(op, t.For)}
        # Vulkan dispatches the lowering configures: IREE's BaseDistribute pipeline (`_sync`).
        self.base_distribute = self.spirv and not self.gpu_whole_reductions
        # Of those, programs that load and store 1-D tiles only, each loaded tile read by
        # elementwise ops and stores only (vector add; layer norm, whose sums are elementwise
        # after `spirv.pairwise_reductions`): they get a full-tile version, whose loads are views
        # of the bindings (`storage_views`). (With 2-D tiles, loaded row by row, IREE sized the
        # full version's workgroup memory from the bindings' dynamic sizes: 'uses 137438957504
        # bytes of shared memory'; a view reshaped failed to compile: 'memref.collapse_shape' op
        # expected collapsed type to be 'memref<32xi32, #gpu.address_space<workgroup>>'.)
        self.spirv_full_tiles = self.base_distribute and _loads_feed_elementwise_1d(kernel)
        # Of those, tl.dot programs read their 2-D tiles element by element (`_gather_tile`): one
        # op that IREE spreads over all the threads. Row by row, each row was a copy into
        # workgroup memory of 8 threads, between barriers, the rows one after another.
        self.spirv_dot_gathers = self.base_distribute and any(isinstance(op, t.Dot) for op in kernel.walk())

    def _sync(self) -> None:
        """A workgroup barrier, in a Vulkan dispatch the lowering configures; before every linalg
        op that reads tiles other ops computed. IREE's BaseDistribute pipeline spreads each op
        over the workgroup's threads on its own (ops of other ranks, and reductions, give their
        elements to other threads) and puts no barrier between ops: a thread would read elements
        before the threads computing them wrote them, or write over elements other threads still
        read. (An iree_gpu.value_barrier would do it too, but IREE then copies every argument of
        the dispatch, whose binding offsets become push constants beyond Vulkan's 128 bytes.)"""
        if self.base_distribute and (not self.lines or self.lines[-1].strip() != "gpu.barrier"):
            self.w("gpu.barrier")

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

    @property
    def alloc_space(self) -> str:
        """The memory space of the allocations the emitter makes (snapshots, and the tiles a
        snapshot load writes into: `bufferization.alloc_tensor`), written after the op's operands.

        On LLVMGPU targets (CUDA, HIP), workgroup memory. IREE's TileAndFuse pipeline puts an
        allocation it does not see used by a thread-distributed loop in each thread's private
        memory, and then spreads every copy outside such a loop over the workgroup's threads
        (GPUDistributeCopyUsingForall), whatever the copy's memory spaces: each thread filled only
        its part of its own private copy, and read the rest uninitialized (a snapshot computed one
        element in 4 of a 1-D tile right; a tile gathered row by row, most of a tl.dot's operand
        wrong). In workgroup memory the threads fill one copy together, and IREE puts a barrier
        after the distributed copy before any thread reads it."""
        return " <{memory_space = #gpu.address_space<workgroup>}>" if self.llvmgpu else ""

    def _on_one_thread(self, outs: list[t.TileType], inits: list[str],
                       emit: Callable[[list[str]], list[str]], shared_writes: bool = False) -> list[str]:
        """A sequential part of a program (atomics, scatters, histograms, scans, gathers of N-D
        tiles, reductions to 64-bit scalars), emitted by `emit(dests)`: it returns tiles of types
        `outs` written into `dests` (first `inits`). `shared_writes`: the part reads, combines
        and writes memory that a copy of it on another thread would touch too (an atomic's
        buffer element, a histogram's bins), so it must run once per workgroup on every GPU.

        On CPUs `emit` writes into the program directly. On CUDA and HIP it runs on the
        workgroup's first thread, in a one-iteration `scf.forall` mapped to threads: IREE's GPU
        code generation refuses a write to global or workgroup memory outside a loop spread over
        the threads ('write affecting operations on shared resources are restricted to lane or
        thread distributed contexts'), and its elements must be read, combined and written in
        order. A gpu.barrier on both sides: the threads computed its input tiles and wrote memory
        before, and read its results and what it wrote after. (With iree_gpu.value_barriers of
        the input tiles instead, IREE merged the barriers of two such parts that read one tile,
        and the first then read the second's results, which it does not dominate.) On Vulkan
        see `_on_first_thread`; a part without `shared_writes` runs on every thread there, each
        computing the same results (a scan's loop holds linalg ops, which IREE spreads over the
        threads, so it cannot run on one)."""
        if self.spirv and shared_writes:
            return self._on_first_thread(outs, inits, emit)
        if not self.llvmgpu:
            return emit(inits)
        self.w("gpu.barrier")
        f, tid = self.fresh("serial"), self.fresh("tid")
        dests = [self.fresh("dest") for _ in outs]
        shared = ", ".join(f"{d} = {i}" for d, i in zip(dests, inits))
        head = f"{f}:{len(outs)} = " if outs else ""
        tys = ", ".join(ty.mlir() for ty in outs)
        self.w(f"{head}scf.forall ({tid}) in (1)" + (f" shared_outs({shared}) -> ({tys})" if outs else "") + " {")
        self.indent += 1
        self.scopes.append({})
        self.one_thread += 1
        results = emit(dests)
        self.one_thread -= 1
        self.w("scf.forall.in_parallel {")
        for r, d, ty in zip(results, dests, outs):
            zeros, ones = ", ".join("0" for _ in ty.shape), ", ".join("1" for _ in ty.shape)
            self.w(f"  tensor.parallel_insert_slice {r} into {d}[{zeros}] [{', '.join(map(str, ty.shape))}] "
                   f"[{ones}] : {ty.mlir()} into {ty.mlir()}")
        self.w("}")
        self.scopes.pop()
        self.indent -= 1
        self.w("} {mapping = [#gpu.thread<linear_dim_0>]}")
        self.w("gpu.barrier")
        return [f"{f}#{i}" for i in range(len(outs))]

    def _on_first_thread(self, outs: list[t.TileType], inits: list[str],
                         emit: Callable[[list[str]], list[str]]) -> list[str]:
        """`_on_one_thread` on Vulkan: an `scf.if` on the first thread's id. IREE's SPIR-V code
        generation has no scf.forall mapped to threads ('failed to legalize operation'), and its
        BaseDistribute pipeline runs an scf.for that holds no linalg op on every thread: each
        thread would read, combine and write every atomic element (a tl.atomic_add added each
        value once per thread), and the threads' increments of a histogram's bins would race.

        BaseDistribute bufferizes the whole dispatch into workgroup memory. The results must
        be one buffer for all threads: `emit` writes into `dests`, fresh allocations (copies of
        `inits`) that the other threads yield unchanged. Where the two branches yield different
        buffers, IREE selects between them by the condition, and the other threads read a buffer
        the first one never wrote (`emit` returning a tile not written into its dest did that).
        Barriers on both sides, as on CUDA."""
        self.w("gpu.barrier")
        dests = []
        for i, ty in zip(inits, outs):
            d = self.fresh("dest")
            self.w(f"{d} = bufferization.alloc_tensor() copy({i}) : {ty.mlir()}")
            dests.append(d)
        first, r = self.fresh("first"), self.fresh("serial")
        # The first thread along every dimension (the workgroup may have rows of threads:
        # `SpirvTiling.thread_rows`): the ids or'ed together are 0.
        ids = None
        for d in "xyz":
            tid = self.fresh("tid")
            self.w(f"{tid} = gpu.thread_id {d}")
            ids = tid if ids is None else self._binop("arith.ori", ids, tid)
        self.w(f"{first} = arith.cmpi eq, {ids}, {self.idx(0)} : index")
        tys = ", ".join(ty.mlir() for ty in outs)
        self.w((f"{r}:{len(outs)} = " if outs else "") + f"scf.if {first}" + (f" -> ({tys})" if outs else "") + " {")
        self.indent += 1
        self.scopes.append({})
        self.one_thread += 1
        results = emit(dests)
        self.one_thread -= 1
        if outs:
            self.w(f"scf.yield {', '.join(results)} : {tys}")
        self.scopes.pop()
        self.indent -= 1
        if outs:
            self.w("} else {")
            self.w(f"  scf.yield {', '.join(dests)} : {tys}")
        self.w("}")
        self.w("gpu.barrier")
        return [f"{r}#{i}" for i in range(len(outs))]

    def _for_each_element(self, shape: tuple[int, ...], ty: str, init: str,
                          body: Callable[[list[str], str], str]) -> str:
        """Nested scf.for loops over the indices of `shape` in row-major order, carrying a
        tensor of type `ty` from `init`: `body(indices, tensor)` returns the next tensor. The
        final tensor."""
        ivs, results, acc = [], [], init
        for n in shape:
            iv, arg, r = self.fresh("el"), self.fresh("acc"), self.fresh("each")
            self.w(f"{r} = scf.for {iv} = {self.idx(0)} to {self.idx(n)} step {self.idx(1)} "
                   f"iter_args({arg} = {acc}) -> ({ty}) {{")
            self.indent += 1
            self.scopes.append({})
            ivs.append(iv)
            results.append(r)
            acc = arg
        nxt = body(ivs, acc)
        for r in reversed(results):
            self.w(f"scf.yield {nxt} : {ty}")
            self.scopes.pop()
            self.indent -= 1
            self.w("}")
            nxt = r
        return nxt

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

    def scalar(self, v: t.Value) -> str:
        name = self.lookup(("s", v.id))
        if name is None:
            op = v.owner
            if isinstance(op, t.Constant) and not v.is_tile:
                return self.const(op.value, v.dtype)
            raise AssertionError(f"scalar {v} used before it was emitted")
        return name

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

    def divisor(self, p: Poly) -> int:
        """A divisor of p's value that Triton's divisibility hints prove (0 for p = 0)."""
        g = 0
        for mono, c in p.terms.items():
            term = abs(c)
            for k in mono:
                a = p.atoms[k]
                if isinstance(a, Carried):
                    lo = self.facts.loop_offsets.get((id(a.loop), a.index))
                    term *= math.gcd(self.divisor(lo.init), self.divisor(lo.step)) if lo is not None else 1
                else:
                    term *= self._value_divisor(a)
            g = math.gcd(g, term)
        return g

    def _value_divisor(self, v: t.Value) -> int:
        """A divisor of a scalar: its divisibility hint, a constant's value, or for a loop's
        induction variable, what divides its start and its step."""
        if v.id in self.divisibility:
            return self.divisibility[v.id]
        if isinstance(v.owner, t.Constant) and type(v.owner.value) is int:
            return abs(v.owner.value)
        loop = self.loop_of_iv.get(v.id)
        if loop is not None:
            return math.gcd(self._value_divisor(loop.lb), self._value_divisor(loop.step))
        return 1

    def aligned(self, x: str, d: int) -> str:
        """x (an index), on LLVMGPU targets with the largest power of two dividing d (up to 16)
        written into it: x & -that, which is x itself. LLVM then knows the low bits of the
        addresses computed from x and reads 16 bytes at once where they allow: IREE's vector
        loads of a slab with runtime strides and offsets were otherwise split into element
        loads (`ld.global.nc.b16` x 8 instead of one `ld.global.nc.v4.b32`). Only on the
        values addresses are computed from: where LLVM can prove the low bits itself it drops
        the `and`, and then its alignment inference, which looks less deep, no longer sees
        them (the offsets of loop-carried pointers)."""
        a = min(d & -d, 16) if d else 16
        if not self.llvmgpu or a < 2:
            return x
        r = self.fresh("al")
        self.w(f"{r} = arith.andi {x}, {self.idx(-a)} : index")
        return r

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

    def _cmp(self, pred: str, a: str, b: str, ty: str = "index") -> str:
        key = ("cmp", pred, a, b, ty)
        r = self.lookup(key)
        if r is None:
            r = self.fresh("p")
            self.w(f"{r} = arith.cmpi {pred}, {a}, {b} : {ty}")
            self.bind(key, r)
        return r

    def _select_index(self, cond: str, a: str, b: str) -> str:
        r = self.fresh("i")
        self.w(f"{r} = arith.select {cond}, {a}, {b} : index")
        return r

    def _cond_value(self, c: Cond) -> str:
        if c.kind == "val":
            return self.scalar(c.value)
        return self._cmp("slt", self.poly(c.poly), self.idx(0))
