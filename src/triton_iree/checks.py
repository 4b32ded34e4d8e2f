"""Checked mode: bounds checks on every access, and `tl.device_assert`, as a tile-program pass.

The backend runs `instrument` on the tile program before the analyses: with bounds checks when
they are asked for (the `check_bounds` launch option, or TRITON_IREE_CHECK_BOUNDS=1), else only
for a kernel that has asserts (Triton keeps `tl.device_assert` only under its debug switch,
`TRITON_DEBUG=1` or `debug=True`), checking just those. It rewrites the kernel in place:

- With bounds checks, every Load, Store and Atomic, structured or not, scalar or tile, fails where
  its mask holds and its offset is outside ``[start, end)``: offsets count elements from the
  start of the buffer the runtime imported for the argument, and `start` and `end` bound the
  argument's storage inside it (two new i64 scalar parameters per buffer; the import may begin
  before the storage, at an aligned address). A failing access is not performed at all: its negation (a scalar)
  joins the mask, which keeps a structured access structured. For structured accesses whose
  form the pointer analysis gives in scalars, failing is computed from their lowest and highest
  offsets (a few scalar ops); for the rest (gathers, pointers carried by loops), element by
  element.
- Each Assert (``tt.assert``) fails where its condition is false, and is removed. Without bounds
  checks, a program that failed performs no later access (its masks join "no failure yet").

Each program keeps the first failure it meets as two i64 scalars, threaded through loops and
ifs: the failing site's number plus one (0: none yet) and the offset (of the lowest failing
element, relative to the argument's pointer). At its end, a program that failed writes a
record of them into entry `slot % RECORD_ENTRIES` (slot: its linear program id) of an extra
output buffer of a fixed size: with at most RECORD_ENTRIES programs, each has its own entry.
Programs that share an entry may write it at the same time (there are no atomics); each of a
record's i64 words is written whole, and each carries the writer's `slot // RECORD_ENTRIES` in
its upper 32 bits, so the runtime keeps only records whose words all come from one program.
It raises `DeviceError` for the first program among them (`Checks`, at the end of this module).

Record words: slot + 1; then, each under that 32-bit tag, the site number plus one, the low
and the high 32 bits of the offset. The parameters this adds to the kernel (their order:
`abi.check_params`): the record buffer (i64, RECORD_ENTRIES x RECORD_FIELDS, zero on entry),
and with bounds checks each buffer argument's start and end.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from . import abi, program_state
from . import tile as t
from .analysis import analyze
from .errors import DeviceError, LaunchError
from .forms import Box, Poly, StructuredAccess

if TYPE_CHECKING:
    from .runtime import LoadedKernel, SharedMemory

I64 = t.ScalarType("i64")
RECORD_ENTRIES = 1024
RECORD_FIELDS = 4
_LOW32 = (1 << 32) - 1
_I64_MAX = (1 << 63) - 1
_INT_ATOMS = ("i8", "i16", "i32", "i64")


@dataclass(frozen=True)
class Site:
    """One checked access or assertion of the kernel."""
    kind: str        # 'load' | 'store' | 'atomic' | 'assert'
    param: str       # the argument an access goes through ('' for asserts)
    loc: str
    message: str = ""


class _Instrumenter:
    def __init__(self, kernel: t.Kernel, bounds: bool):
        self.k, self.bounds_checked = kernel, bounds
        self.sites: list[Site] = []
        self.block = kernel.body
        # Of the unchecked kernel: the accesses' forms and masks.
        self.facts = analyze(kernel) if bounds else None
        index = len(kernel.params) + len(kernel.base_offsets)
        record, *extents = abi.check_params([p.name for p in kernel.buffers] if bounds else [])
        self.record = t.Param(index, record.name, record.dtype, True)
        self.record_base = self._scalar_param(index + 1, abi.base_name(record.name))
        # The parameters this adds, in the ABI's order.
        self.added = [self.record, *(self._scalar_param(index + 2 + i, e.name) for i, e in enumerate(extents))]
        by_name = {p.name: p for p in self.added}
        self.extents = {id(p): tuple(by_name[e] for e in abi.extent_names(p.name))
                        for p in kernel.buffers} if bounds else {}

    @staticmethod
    def _scalar_param(index: int, name: str) -> t.Param:
        p = t.Param(index, name, "i64", False)
        p.value = t.Value(I64, None, name)
        return p

    def emit(self, op: t.Op) -> t.Value | None:
        self.block.ops.append(op)
        return op.result if op.results else None

    def ew(self, opname: str, args: list[t.Value], dtype: str, **attrs) -> t.Value:
        return self.emit(t.Elementwise(opname, args, t.with_dtype(args[0].type, dtype), attrs, self.loc))

    def const(self, value, like: t.Value, dtype: str) -> t.Value:
        return self.emit(t.Constant(value, t.with_dtype(like.type, dtype), self.loc))

    def reduce_all(self, x: t.Value, opname: str) -> t.Value:
        """Combines every element of tile `x` with `opname`: a scalar."""
        if len(x.shape) > 1:   # one 1-D reduction (nested ones trip IREE's tiling next to a matmul)
            x = self.emit(t.Reshape(x, t.TileType((x.type.numel,), x.dtype), self.loc))
        blk = t.Block()
        blk.args = [t.Value(t.ScalarType(x.dtype), blk) for _ in range(2)]
        blk.ops = [t.Elementwise(opname, blk.args, t.ScalarType(x.dtype), loc=self.loc)]
        blk.yields = [blk.ops[0].result]
        return self.emit(t.Reduce([x], 0, blk, [t.ScalarType(x.dtype)], self.loc))

    # -- the pass --------------------------------------------------------------------------
    def run(self) -> list[Site]:
        k = self.k
        zero = t.Constant(0, I64)
        k.body.ops.insert(0, zero)
        self.unfailed = zero.result   # the state's code before any check
        state = self.visit(k.body, (zero.result, zero.result))
        self.loc = k.loc
        self.block = k.body
        slot = program_state.program_slot(self.emit, self.loc)
        entry = self.ew("arith.remsi", [slot, self.i64(RECORD_ENTRIES)], "i64")
        at = self.ew("arith.muli", [entry, self.i64(RECORD_FIELDS)], "i64")
        at = self.ew("arith.addi", [self.record_base.value, at], "i64")
        tag = self.ew("arith.divsi", [slot, self.i64(RECORD_ENTRIES)], "i64")
        tag = self.ew("arith.shli", [tag, self.i64(32)], "i64")
        code, offset = state
        low = self.ew("arith.andi", [offset, self.i64(_LOW32)], "i64")
        high = self.ew("arith.shrui", [offset, self.i64(32)], "i64")
        words = [self.ew("arith.addi", [slot, self.i64(1)], "i64"),
                 *(self.ew("arith.ori", [tag, w], "i64") for w in (code, low, high))]
        failed = self.ew("arith.cmpi", [code, self.i64(0)], "i1", predicate="ne")
        for j, v in enumerate(words):
            off = self.ew("arith.addi", [at, self.i64(j)], "i64")
            self.emit(t.Store(self.record, off, v, failed, self.loc))
        k.params += self.added
        k.base_offsets.append(self.record_base)
        return self.sites

    def visit(self, block: t.Block, state: tuple) -> tuple:
        ops, block.ops = block.ops, []
        for op in ops:
            self.block, self.loc = block, op.loc
            if isinstance(op, (t.Load, t.Store, t.Atomic)) and self.bounds_checked:
                state = self.access(op, state)
            elif isinstance(op, (t.Load, t.Store, t.Atomic)) and state[0] is not self.unfailed:
                self.stop_after_failure(op, state[0])
            elif isinstance(op, t.Assert):
                failed = self.any(self.negate(op.cond))
                state = self.update(failed, state[1], Site("assert", "", op.loc, op.message), state)
                continue
            elif isinstance(op, (t.For, t.While, t.If)) and _has_checks(
                    op, self.bounds_checked or state[0] is not self.unfailed):
                state = program_state.carry(op, state, self.visit)
            block.ops.append(op)
        return state

    def access(self, op: t.Load | t.Store | t.Atomic, state: tuple) -> tuple:
        """Checks op's offsets against its buffer's storage. A failing access is not performed at
        all: a scalar condition joins its mask, which keeps a structured access structured."""
        offs, mask = op.offsets, op.mask
        start, end = (e.value for e in self.extents[id(op.buffer)])
        size, base = self.ew("arith.subi", [end, start], "i64"), self._base(op.buffer)
        kind = {t.Load: "load", t.Store: "store", t.Atomic: "atomic"}[type(op)]
        site = Site(kind, op.buffer.name, op.loc)
        if not offs.is_tile:
            # Unsigned: an offset before the start is huge.
            rel = self.ew("arith.subi", [offs, start], "i64")
            ok = self.ew("arith.cmpi", [rel, size], "i1", predicate="ult")
            failed = self.ew("arith.cmpi", [rel, size], "i1", predicate="uge")
            if mask is not None:
                ok, failed = self.ew("arith.andi", [mask, ok], "i1"), self.ew("arith.andi", [mask, failed], "i1")
            op.mask = ok
            return self.update(failed, self.ew("arith.subi", [offs, base], "i64"), site, state)
        rel = self.ew("arith.subi", [offs, self.emit(t.Splat(start, offs.type, self.loc))], "i64")
        bad = self.ew("arith.cmpi", [rel, self.emit(t.Splat(size, offs.type, self.loc))], "i1", predicate="uge")
        if mask is not None:
            bad = self.ew("arith.andi", [mask, bad], "i1")
        failed = self.bounds(op, start, end)
        if failed is None:
            failed = self.any(bad)
        ok = self.emit(t.Splat(self.negate(failed), bad.type, self.loc))
        op.mask = ok if mask is None else self.ew("arith.andi", [mask, ok], "i1")
        # The lowest failing offset, computed only where the access fails.
        outer, self.block = self.block, t.Block()
        rel = self.ew("arith.subi", [offs, self.emit(t.Splat(base, offs.type, self.loc))], "i64")
        rel = self.ew("arith.select", [bad, rel, self.const(_I64_MAX, rel, "i64")], "i64")
        self.block.yields = [self.reduce_all(rel, "arith.minsi")]
        then, self.block = self.block, outer
        where = self.emit(t.If(failed, then, t.Block(yields=[state[1]]), [I64], self.loc))
        return self.update(failed, where, site, state)

    def stop_after_failure(self, op: t.Load | t.Store | t.Atomic, code: t.Value) -> None:
        """Without bounds checks: a program that failed an assert performs no later access (as a
        GPU thread stops there), so an index an assert refused is never used."""
        ok = self.ew("arith.cmpi", [code, self.i64(0)], "i1", predicate="eq")
        if op.offsets.is_tile:
            ok = self.emit(t.Splat(ok, t.with_dtype(op.offsets.type, "i1"), self.loc))
        op.mask = ok if op.mask is None else self.ew("arith.andi", [op.mask, ok], "i1")

    def bounds(self, op: t.Load | t.Store | t.Atomic, lo: t.Value, hi: t.Value) -> t.Value | None:
        """Whether a structured access leaves [lo, hi), from its lowest and highest offsets
        (over the mask's box); None where its form mentions a loop-carried pointer, and for
        atomics (checked element by element)."""
        if isinstance(op, t.Atomic):
            return None
        acc = self.facts.access(op)
        if not isinstance(acc, StructuredAccess) or not all(
                isinstance(a, t.Value) and a.dtype in _INT_ATOMS for p in acc.polys() for a in p.atom_list()):
            return None
        shape = op.offsets.shape
        box = acc.box or Box.full(len(shape))
        low = high = self.poly(acc.form.offset)
        conds = []
        for d, n in enumerate(shape):
            first, end = self.i64(0), self.i64(n)
            for p in box.lo[d]:
                first = self.ew("arith.maxsi", [first, self.poly(p)], "i64")
            for p in box.hi[d]:
                end = self.ew("arith.minsi", [end, self.poly(p)], "i64")
            if box.lo[d] or box.hi[d]:
                conds.append(self.ew("arith.cmpi", [first, end], "i1", predicate="slt"))
            if not acc.form.strides[d].is_zero():
                stride = self.poly(acc.form.strides[d])
                last = self.ew("arith.subi", [end, self.i64(1)], "i64")
                a, b = (self.ew("arith.muli", [i, stride], "i64") for i in (first, last))
                low = self.ew("arith.addi", [low, self.ew("arith.minsi", [a, b], "i64")], "i64")
                high = self.ew("arith.addi", [high, self.ew("arith.maxsi", [a, b], "i64")], "i64")
        for c in box.conds:
            conds.append(c.value if c.kind == "val" else
                         self.ew("arith.cmpi", [self.poly(c.poly), self.i64(0)], "i1", predicate="slt"))
        failed = self.ew("arith.ori", [self.ew("arith.cmpi", [low, lo], "i1", predicate="slt"),
                                       self.ew("arith.cmpi", [high, hi], "i1", predicate="sge")], "i1")
        for c in conds:
            failed = self.ew("arith.andi", [failed, c], "i1")
        return failed

    def poly(self, p: Poly) -> t.Value:
        """`p` (over integer scalars) as an i64 scalar computed here."""
        total = self.i64(0)
        for mono, c in p.terms.items():
            term = self.i64(c)
            for k in mono:
                a = p.atoms[k]
                if a.dtype != "i64":
                    a = self.ew("arith.extsi", [a], "i64")
                term = self.ew("arith.muli", [term, a], "i64")
            total = self.ew("arith.addi", [total, term], "i64")
        return total

    def i64(self, value: int) -> t.Value:
        return self.emit(t.Constant(value, I64, self.loc))

    def any(self, bad: t.Value) -> t.Value:
        """Whether `bad` holds anywhere (a scalar i1)."""
        if not bad.is_tile:
            return bad
        x = self.reduce_all(self.ew("arith.extui", [bad], "i8"), "arith.maxui")
        return self.ew("arith.cmpi", [x, self.const(0, x, "i8")], "i1", predicate="ne")

    def negate(self, x: t.Value) -> t.Value:
        return self.ew("arith.xori", [x, self.const(True, x, "i1")], "i1")

    def _base(self, p: t.Param) -> t.Value:
        return self.k.base_offsets[self.k.buffers.index(p)].value

    def update(self, failed: t.Value, where: t.Value, site: Site, state: tuple) -> tuple:
        """The state after `site`, which fails where `failed` holds (at offset `where`)."""
        self.sites.append(site)
        code, offset = state
        first = self.ew("arith.andi", [failed, self.ew("arith.cmpi", [code, self.i64(0)], "i1", predicate="eq")],
                        "i1")
        return (self.ew("arith.select", [first, self.i64(len(self.sites)), code], "i64"),
                self.ew("arith.select", [first, where, offset], "i64"))


def _has_checks(op_or_block, bounds: bool = True) -> bool:
    blocks = op_or_block.regions() if isinstance(op_or_block, t.Op) else [op_or_block]
    kinds = (t.Load, t.Store, t.Atomic, t.Assert) if bounds else t.Assert
    return any(isinstance(op, kinds) for b in blocks for op in b.walk())


def has_asserts(kernel: t.Kernel) -> bool:
    return _has_checks(kernel.body, bounds=False)


def instrument(kernel: t.Kernel, bounds: bool = True) -> list[Site]:
    """Adds checked mode to `kernel` (in place), with bounds checks or only for its asserts;
    returns its sites, numbered from 1."""
    return _Instrumenter(kernel, bounds).run()


# --- the launch side: reading the records back -----------------------------------------------

def launch(kernel: "LoadedKernel", kernel_abi: abi.Abi, values: Sequence[Any], grid: Sequence[int],
           checks: "Checks | None", shared: "SharedMemory | None" = None) -> None:
    """Runs `kernel` on `values`, through checked mode's `checks` where the kernel has them."""
    if checks is None:
        kernel.launch(kernel_abi, values, grid, shared)
    else:
        checks.launch(kernel, kernel_abi, values, grid, shared)


class Checks:
    """Checked mode (see `checks`): passes the extra arguments, reads the failure records back
    and raises `DeviceError` for the first program that failed."""

    def __init__(self, info: dict, kernel_abi: abi.Abi):
        self.sites, self.written, self.bounds = info["sites"], info["written"], info["bounds"]
        self.abi = kernel_abi.extended(abi.check_params([b.name for b in kernel_abi.buffers] if self.bounds else []))

    @staticmethod
    def of(metadata, kernel_abi: abi.Abi) -> "Checks | None":
        """The checks of a kernel compiled in checked mode (its metadata has them), else None.
        `kernel_abi`: the kernel's, with the print logs if it prints."""
        info = getattr(metadata, "checks", None)
        return Checks(info, kernel_abi) if info else None

    def launch(self, kernel: "LoadedKernel", kernel_abi: abi.Abi, values: Sequence[Any],
               grid: Sequence[int], shared: "SharedMemory | None" = None) -> None:
        import torch

        from .arguments import check_arguments   # not at the top: it needs iree.runtime
        from .runtime import launch_device
        spans = check_arguments(kernel.dev, kernel_abi, values, grid, kernel.name)
        buffers = [(p.name, v) for p, v in zip(kernel_abi.params, values) if p.is_buffer]
        # Each buffer's storage inside the buffer imported for it, [start, end) in elements, and its
        # pointer's offset there: the import may begin before the storage (host memory, aligned).
        bounds = {name: (max(v.untyped_storage().data_ptr() - base, 0) // v.element_size(),
                         nbytes // v.element_size(), lead)
                  for (name, v), (base, nbytes, lead) in zip(buffers, spans)}
        n = grid[0] * grid[1] * grid[2]
        if n > RECORD_ENTRIES << 32:
            raise LaunchError(f"checked mode launches at most {RECORD_ENTRIES << 32} programs; this grid has {n}, "
                              f"nothing ran", kernel=kernel.name)
        records = torch.zeros((RECORD_ENTRIES, RECORD_FIELDS), dtype=torch.int64, device=launch_device(values))
        added = {abi.CHECK_RECORDS: records}
        for name, (start, end, _) in bounds.items():
            added.update(zip(abi.extent_names(name), (start, end)))
        kernel.launch(self.abi, [*values, *(added[p.name] for p in self.abi.params[len(kernel_abi.params):])], grid,
                      shared=shared)
        written = records[records[:, 0] != 0].tolist()
        if written:
            whole = sorted(r for r in map(_record, written) if r is not None)
            slot = whole[0][0] if whole else written[0][0] - 1
            pid = (slot % grid[0], slot // grid[0] % grid[1], slot // (grid[0] * grid[1]))
            if not whole:
                raise DeviceError(f"program {pid} failed a check, but failing programs that share its record "
                                  f"wrote it at the same time, so what failed is unknown; the rest of the launch "
                                  f"ran", kernel=kernel.name, loc="", program_id=pid)
            _, code, offset = whole[0]
            shared_note = "" if n <= RECORD_ENTRIES else (
                f" (of the failing programs recorded: those whose linear ids differ by a multiple of "
                f"{RECORD_ENTRIES} share one record, so an earlier program may have failed too)")
            self._raise(kernel.name, self.sites[code - 1], pid, offset, bounds, shared_note)

    def _raise(self, kernel: str, site: dict, pid: tuple[int, int, int], offset: int, bounds: dict,
               note: str = "") -> None:
        names = ", ".join(f"'{w}'" for w in self.written)
        ran = (f"The rest of the launch ran, so {names} may have been written." if names
               else "The kernel writes no arguments.")
        where = dict(kernel=kernel, loc=site["loc"], program_id=pid)
        if site["kind"] == "assert":
            raise DeviceError(f"device_assert failed in program {pid}{note}: {site['message']}. {ran}",
                              assert_message=site["message"], **where)
        start, end, lead = bounds[site["param"]]
        raise DeviceError(
            f"out-of-bounds {site['kind']} through '{site['param']}' in program {pid}{note}: element offset {offset} "
            f"from the pointer is outside [{start - lead}, {end - lead}), the tensor's storage; that access "
            f"was not performed. {ran}", access=site["kind"], param=site["param"], offset=offset, **where)


def _record(words: list[int]) -> tuple[int, int, int] | None:
    """(slot, site number + 1, offset) of a checked-mode record (see `checks`), or None when
    its words were written by different programs."""
    slot = words[0] - 1
    tag = slot // RECORD_ENTRIES & 0xFFFFFFFF
    code, low, high = ((w & (1 << 64) - 1) for w in words[1:])
    if any(w >> 32 != tag for w in (code, low, high)):
        return None
    offset = (high & 0xFFFFFFFF) << 32 | low & 0xFFFFFFFF
    return slot, code & 0xFFFFFFFF, offset - (1 << 64) if offset >> 63 else offset
