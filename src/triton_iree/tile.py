"""The tile program: the one IR between the readers and the emitter.

A tile program is one Triton program instance, written over static-shape tiles and scalars.
It has the semantics of TTIR with one change: there are no pointer values. Every pointer is a
buffer (a pointer parameter of the kernel) plus an integer *element offset* (an i64 scalar or
tile). So ``tl.load(x_ptr + offs)`` is ``Load(buffer=x_ptr, offsets=sext(offs))``.

Readers (TTIR, triton-shared's memref IR) produce it; analyses (pointer and mask analysis,
liveness) read it and return facts about it; the emitter lowers it to IREE's input form.
Ops carry the source location of the Triton line they came from.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional, Sequence

INT_TYPES = ("i1", "i8", "i16", "i32", "i64")
FLOAT_TYPES = ("f16", "bf16", "f32", "f64", "f8E4M3FN", "f8E5M2")


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_TYPES


def bitwidth(dtype: str) -> int:
    return {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "f16": 16, "bf16": 16,
            "f32": 32, "f64": 64, "f8E4M3FN": 8, "f8E5M2": 8}[dtype]


@dataclass(frozen=True)
class ScalarType:
    dtype: str

    @property
    def shape(self) -> tuple[int, ...]:
        return ()

    def mlir(self) -> str:
        return self.dtype


@dataclass(frozen=True)
class TileType:
    shape: tuple[int, ...]
    dtype: str

    def mlir(self) -> str:
        return f"tensor<{'x'.join(map(str, self.shape))}x{self.dtype}>" if self.shape else \
            f"tensor<{self.dtype}>"

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


Type = ScalarType | TileType


def with_dtype(ty: Type, dtype: str) -> Type:
    return TileType(ty.shape, dtype) if isinstance(ty, TileType) else ScalarType(dtype)


_ids = itertools.count()


class Value:
    """An SSA value: the result of an op, or a block argument."""
    __slots__ = ("type", "owner", "id", "hint")

    def __init__(self, type: Type, owner: "Op | Block | None" = None, hint: str = ""):
        self.type = type
        self.owner = owner
        self.id = next(_ids)
        self.hint = hint

    @property
    def is_tile(self) -> bool:
        return isinstance(self.type, TileType)

    @property
    def dtype(self) -> str:
        return self.type.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    def __repr__(self) -> str:
        return f"%{self.hint or 'v'}{self.id}:{self.type.mlir()}"


@dataclass(eq=False)
class Block:
    """A region with one block: arguments, ops, and the values it yields."""
    args: list[Value] = field(default_factory=list)
    ops: list["Op"] = field(default_factory=list)
    yields: list[Value] = field(default_factory=list)

    def add(self, op: "Op") -> "Op":
        self.ops.append(op)
        return op

    def walk(self) -> Iterator["Op"]:
        for op in self.ops:
            yield op
            for region in op.regions():
                yield from region.walk()


@dataclass(eq=False)
class Param:
    """A kernel parameter. Pointer parameters are buffers; the rest are scalars."""
    index: int
    name: str
    dtype: str           # element type for buffers, value type for scalars
    is_buffer: bool
    value: Optional[Value] = None  # the scalar's SSA value (scalars only)
    # Triton's tt.divisibility: the integer (a pointer's address, in bytes) is a multiple of it.
    divisibility: int = 1


class Op:
    """Base class. Subclasses list their operand fields in ``_operands``."""
    _operands: tuple[str, ...] = ()
    results: list[Value]
    loc: str

    def _init(self, types: Sequence[Type], loc: str, hint: str = "") -> None:
        self.results = [Value(t, self, hint) for t in types]
        self.loc = loc

    @property
    def result(self) -> Value:
        assert len(self.results) == 1, self
        return self.results[0]

    def operands(self) -> list[Value]:
        out: list[Value] = []
        for name in self._operands:
            v = getattr(self, name)
            if v is None:
                continue
            if isinstance(v, (list, tuple)):
                out.extend(v)
            else:
                out.append(v)
        return out

    def regions(self) -> list[Block]:
        return []

    @property
    def name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return f"{self.name}({', '.join(map(repr, self.operands()))}) -> {self.results}"


class Constant(Op):
    """A scalar constant, or a tile with every element equal to `value`."""

    def __init__(self, value: int | float | bool, type: Type, loc: str = ""):
        self.value = value
        self._init([type], loc)


class ProgramId(Op):
    def __init__(self, axis: int, loc: str = ""):
        self.axis = axis
        self._init([ScalarType("i32")], loc, "pid")


class NumPrograms(Op):
    def __init__(self, axis: int, loc: str = ""):
        self.axis = axis
        self._init([ScalarType("i32")], loc, "nprog")


class MakeRange(Op):
    def __init__(self, start: int, end: int, loc: str = ""):
        self.start, self.end = start, end
        self._init([TileType((end - start,), "i32")], loc, "range")


class Splat(Op):
    _operands = ("src",)

    def __init__(self, src: Value, type: TileType, loc: str = ""):
        self.src = src
        self._init([type], loc)


class Broadcast(Op):
    """Grows size-1 dims of `src` to the result shape (same rank)."""
    _operands = ("src",)

    def __init__(self, src: Value, type: TileType, loc: str = ""):
        self.src = src
        self._init([type], loc)


class ExpandDims(Op):
    _operands = ("src",)

    def __init__(self, src: Value, axis: int, type: TileType, loc: str = ""):
        self.src, self.axis = src, axis
        self._init([type], loc)


class Reshape(Op):
    """Row-major reshape (tt.reshape without `allow_reorder`)."""
    _operands = ("src",)

    def __init__(self, src: Value, type: TileType, loc: str = ""):
        self.src = src
        self._init([type], loc)


class Unsplat(Op):
    """tt.unsplat: the element of a single-element tile, as a scalar."""
    _operands = ("src",)

    def __init__(self, src: Value, type: ScalarType, loc: str = ""):
        self.src = src
        self._init([type], loc)


class Trans(Op):
    """Permutes dims: result dim i is source dim order[i]."""
    _operands = ("src",)

    def __init__(self, src: Value, order: tuple[int, ...], type: TileType, loc: str = ""):
        self.src, self.order = src, order
        self._init([type], loc)


class Join(Op):
    """tt.join: stacks `a` and `b` (same shape) along a new last dim of size 2."""
    _operands = ("a", "b")

    def __init__(self, a: Value, b: Value, type: TileType, loc: str = ""):
        self.a, self.b = a, b
        self._init([type], loc)


class Split(Op):
    """tt.split: the two halves of `src` along its last dim (of size 2)."""
    _operands = ("src",)

    def __init__(self, src: Value, types: Sequence[Type], loc: str = ""):
        self.src = src
        self._init(types, loc)


class Cat(Op):
    """tt.cat: `a` then `b` along dim 0 (1-D tiles)."""
    _operands = ("a", "b")

    def __init__(self, a: Value, b: Value, type: TileType, loc: str = ""):
        self.a, self.b = a, b
        self._init([type], loc)


class Elementwise(Op):
    """An arith/math op applied elementwise (scalars or same-shape tiles).

    `opname` is the MLIR op name (``arith.addf``, ``math.exp``, ``arith.cmpi``...);
    `attrs` holds its inherent attributes as MLIR text (``{"predicate": "slt"}``).
    """
    _operands = ("args",)

    def __init__(self, opname: str, args: Sequence[Value], type: Type, attrs: dict | None = None,
                 loc: str = ""):
        self.opname = opname
        self.args = list(args)
        self.attrs = dict(attrs or {})
        self._init([type], loc)

    @property
    def name(self) -> str:
        return self.opname


class Reduce(Op):
    """tt.reduce: combines `srcs` along `axis` with the scalar `combiner` region.

    The combiner's block takes (lhs..., rhs...) scalars and yields the combined values.
    """
    _operands = ("srcs",)

    def __init__(self, srcs: Sequence[Value], axis: int, combiner: Block, types: Sequence[Type],
                 loc: str = ""):
        self.srcs = list(srcs)
        self.axis = axis
        self.combiner = combiner
        self._init(types, loc)

    def regions(self) -> list[Block]:
        return [self.combiner]

    @property
    def to_scalar(self) -> bool:
        """It reduces a 1-D tile to scalars."""
        return not self.results[0].is_tile


class Scan(Op):
    """tt.scan: inclusive prefix combination of `srcs` along `axis` (from the last element when
    `reverse`), with the scalar `combiner` region taking (accumulated..., element...)."""
    _operands = ("srcs",)

    def __init__(self, srcs: Sequence[Value], axis: int, reverse: bool, combiner: Block,
                 loc: str = ""):
        self.srcs = list(srcs)
        self.axis, self.reverse = axis, reverse
        self.combiner = combiner
        self._init([s.type for s in self.srcs], loc)

    def regions(self) -> list[Block]:
        return [self.combiner]


class MapElementwise(Op):
    """tl.map_elementwise: the scalar function `body` (a region taking one element of each of
    `args`, same shape, and yielding one element of each result) applied to every element."""
    _operands = ("args",)

    def __init__(self, args: Sequence[Value], body: Block, types: Sequence[Type], loc: str = ""):
        self.args = list(args)
        self.body = body
        self._init(types, loc)

    def regions(self) -> list[Block]:
        return [self.body]


class Gather(Op):
    """tt.gather: result[i] = src[i with dim `axis` replaced by index[i]]."""
    _operands = ("src", "index")

    def __init__(self, src: Value, index: Value, axis: int, type: TileType, loc: str = ""):
        self.src, self.index, self.axis = src, index, axis
        self._init([type], loc)


class Histogram(Op):
    """tt.histogram: i32 counts of the values of 1-D `src` in each bin [b, b + 1) of the
    result's length, counting only where `mask` holds."""
    _operands = ("src", "mask")

    def __init__(self, src: Value, mask: Optional[Value], type: TileType, loc: str = ""):
        self.src, self.mask = src, mask
        self._init([type], loc)


class Dot(Op):
    """acc + a @ b on 2-D tiles, or per batch index on 3-D tiles (leading batch dim); products
    and sums in the accumulator's type."""
    _operands = ("a", "b", "acc")

    def __init__(self, a: Value, b: Value, acc: Value, loc: str = ""):
        self.a, self.b, self.acc = a, b, acc
        self._init([acc.type], loc, "dot")


class Load(Op):
    """Loads `buffer[offsets]` where `mask` holds; `other` elsewhere (undefined if None)."""
    _operands = ("offsets", "mask", "other")

    def __init__(self, buffer: Param, offsets: Value, mask: Optional[Value], other: Optional[Value],
                 type: Type, loc: str = ""):
        self.buffer, self.offsets, self.mask, self.other = buffer, offsets, mask, other
        self._init([type], loc, buffer.name)


class Store(Op):
    """Stores `value` into `buffer[offsets]` where `mask` holds."""
    _operands = ("offsets", "value", "mask")

    def __init__(self, buffer: Param, offsets: Value, value: Value, mask: Optional[Value],
                 loc: str = ""):
        self.buffer, self.offsets, self.value, self.mask = buffer, offsets, value, mask
        self._init([], loc)


class Atomic(Op):
    """tt.atomic_rmw / tt.atomic_cas: for each element where `mask` holds, in row-major order,
    reads `buffer[offsets]`, writes `kind` of it and `value` back, and returns what it read
    (undefined where the mask is off). `kind` is 'add', 'max', 'min', 'umax', 'umin', 'and',
    'or', 'xor', 'xchg', or 'cas' (writes `value` where the old value's bits equal `cmp`'s).
    `value` may reinterpret the buffer's elements (same width), as after a pointer bitcast."""
    _operands = ("offsets", "value", "mask", "cmp")

    def __init__(self, kind: str, buffer: Param, offsets: Value, value: Value, mask: Optional[Value],
                 cmp: Optional[Value] = None, loc: str = ""):
        self.kind, self.buffer = kind, buffer
        self.offsets, self.value, self.mask, self.cmp = offsets, value, mask, cmp
        self._init([value.type], loc, "old")


class Assert(Op):
    """tt.assert (`tl.device_assert` under Triton's debug switch): fails where `cond` is false."""
    _operands = ("cond",)

    def __init__(self, cond: Value, message: str, loc: str = ""):
        self.cond, self.message = cond, message
        self._init([], loc)


class Print(Op):
    """tt.print (`tl.device_print`, `print` in a kernel): `values` printed with `prefix`, in hex
    where `hex`; `signed[i]` says whether an integer value is signed. `prints.instrument` turns
    it into stores that the launcher prints from."""
    _operands = ("values",)

    def __init__(self, values: Sequence[Value], prefix: str, hex: bool, signed: Sequence[bool], loc: str = ""):
        self.values, self.prefix, self.hex, self.signed = list(values), prefix, hex, list(signed)
        self._init([], loc)


class For(Op):
    """scf.for: body args are (iv, *iter_args); the body yields the next iter_args."""
    _operands = ("lb", "ub", "step", "inits")

    def __init__(self, lb: Value, ub: Value, step: Value, inits: Sequence[Value], body: Block,
                 loc: str = ""):
        self.lb, self.ub, self.step = lb, ub, step
        self.inits = list(inits)
        self.body = body
        self._init([v.type for v in self.inits], loc)

    @property
    def iv(self) -> Value:
        return self.body.args[0]

    @property
    def iter_args(self) -> list[Value]:
        return self.body.args[1:]

    def regions(self) -> list[Block]:
        return [self.body]


class While(Op):
    """scf.while: `before` takes the carried values and yields (cond, *forwarded); while cond
    holds, `after` takes the forwarded values and yields the next carried values. The results
    are the forwarded values of the first iteration whose cond is false."""
    _operands = ("inits",)

    def __init__(self, inits: Sequence[Value], before: Block, after: Block, loc: str = ""):
        self.inits = list(inits)
        self.before, self.after = before, after
        self._init([v.type for v in before.yields[1:]], loc)

    @property
    def cond(self) -> Value:
        return self.before.yields[0]

    def regions(self) -> list[Block]:
        return [self.before, self.after]


class If(Op):
    """`shortcut`: `then` computes the results for any input, and `otherwise` the same results,
    faster, where `cond` is false; a target may run `then` alone."""
    _operands = ("cond",)

    def __init__(self, cond: Value, then: Block, otherwise: Block, types: Sequence[Type],
                 loc: str = "", shortcut: bool = False):
        self.cond = cond
        self.then, self.otherwise = then, otherwise
        self.shortcut = shortcut
        self._init(types, loc)

    def regions(self) -> list[Block]:
        return [self.then, self.otherwise]


@dataclass(eq=False)
class Kernel:
    """One Triton program: parameters and the body every program instance runs."""
    name: str
    params: list[Param]
    body: Block
    loc: str = ""
    # Optional i64 element offsets, one per buffer, passed after the grid: where the kernel's
    # pointer starts inside the buffer the runtime imports (which must start 64-byte aligned).
    base_offsets: list[Param] = field(default_factory=list)
    # The tl.sort / tl.topk calls read into the body: (construct, the user's source line).
    sort_calls: list[tuple[str, str]] = field(default_factory=list)
    # Strings the compiled module keeps on its function (IREE's `iree.reflection`), read back
    # where it is loaded: what its launcher needs beyond the arguments (`prints`).
    reflection: dict[str, str] = field(default_factory=dict)

    @property
    def buffers(self) -> list[Param]:
        return [p for p in self.params if p.is_buffer]

    @property
    def scalars(self) -> list[Param]:
        return [p for p in self.params if not p.is_buffer]

    def walk(self) -> Iterator[Op]:
        return self.body.walk()

    def blocks(self) -> list[Block]:
        """The body and every region nested in it."""
        return [self.body] + [r for op in self.walk() for r in op.regions()]

    def stored_buffers(self) -> list[Param]:
        """Buffers the kernel writes, in parameter order."""
        written = {id(op.buffer) for op in self.walk() if isinstance(op, (Store, Atomic))}
        return [p for p in self.buffers if id(p) in written]


def replace_uses(kernel: Kernel, subst: dict[int, Value]) -> None:
    """Rewrites every operand and block yield of `kernel` that `subst` maps (by value id) to its
    replacement, following chains of replacements."""
    def new(v):
        while isinstance(v, Value) and v.id in subst:
            v = subst[v.id]
        return v

    for op in kernel.walk():
        for name in op._operands:
            v = getattr(op, name)
            setattr(op, name, type(v)(map(new, v)) if isinstance(v, (list, tuple)) else new(v))
    for b in kernel.blocks():
        b.yields = [new(v) for v in b.yields]


def expand_elementwise(kernel: Kernel, expand) -> None:
    """Replaces each Elementwise op `o` of `kernel` (in any block) for which `expand(o, emit)`
    returns a value: the ops it passed to `emit` (which returns an op's result) take `o`'s place,
    and `o`'s uses read that value."""
    subst: dict[int, Value] = {}
    for block in kernel.blocks():
        ops: list[Op] = []

        def emit(op: Op) -> Value:
            ops.append(op)
            return op.result
        for o in block.ops:
            r = expand(o, emit) if isinstance(o, Elementwise) else None
            if r is None:
                ops.append(o)
            else:
                subst[o.result.id] = r
        block.ops = ops
    if subst:
        replace_uses(kernel, subst)


def uses(kernel_or_block: Kernel | Block) -> dict[int, list[Op]]:
    """Maps each value id to the ops that use it (yields count as uses by the owning op)."""
    block = kernel_or_block.body if isinstance(kernel_or_block, Kernel) else kernel_or_block
    out: dict[int, list[Op]] = {}

    def visit(b: Block, owner: Optional[Op]) -> None:
        for op in b.ops:
            for v in op.operands():
                out.setdefault(v.id, []).append(op)
            for r in op.regions():
                visit(r, op)
        if owner is not None:
            for v in b.yields:
                out.setdefault(v.id, []).append(owner)

    visit(block, None)
    return out


def computed_from(v: Value, hit: Callable[[Op], bool], through: Callable[[Op], bool] = lambda op: True) -> bool:
    """Whether tile `v` is made by an op that `hit` accepts, or from one through tile operands
    of ops that `through` accepts."""
    seen: set[int] = set()
    work = [v]
    while work:
        x = work.pop()
        if x.id in seen or not x.is_tile or not isinstance(x.owner, Op):
            continue
        seen.add(x.id)
        if hit(x.owner):
            return True
        if through(x.owner):
            work.extend(x.owner.operands())
    return False


def tiles_in_loop(op: Op) -> bool:
    """Whether `op` is a kernel loop whose body computes tiles."""
    return isinstance(op, (For, While)) and any(r.is_tile for region in op.regions() for o in region.ops
                                                 for r in o.results)
