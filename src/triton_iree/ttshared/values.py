"""The triton-shared reader's state and the helpers its modules share: what a memref or tensor
is in tile terms (`Undef`, `Alloc`, `BufView`, `Window`), building tile ops, types, operand
lookup, walking a block op by op, and arith / math ops."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Optional, Union

from iree.compiler import ir

from .. import tile as t
from ..errors import TritonIreeError, UnsupportedError
from ..locations import source_loc
from ..ttir import CMPF_PREDICATES, CMPI_PREDICATES, ELEMENTWISE_OPS, _scalar_of_attr

Scalar = Union[int, t.Value]   # a static integer or an i64 scalar value


@dataclass
class Undef:
    """Contents the program never defined (tensor.empty, a fresh alloc)."""
    shape: tuple[int, ...]
    dtype: str


@dataclass(eq=False)
class Alloc:
    """memref.alloc: a tile whose current value is `value`."""
    shape: tuple[int, ...]
    dtype: str
    value: Union[t.Value, Undef]


@dataclass
class BufView:
    """A strided view of a pointer argument: element i is at offset + sum_d i_d * strides[d]."""
    param: t.Param
    offset: Scalar
    sizes: list[Scalar]
    strides: list[Scalar]


@dataclass
class Window:
    """A box of a tile: a subview of an alloc, or an extract_slice of a tensor.

    Window dim k is root dim dims[k][0], from origin dims[k][1], of size dims[k][2]. Root dims
    not listed (rank-reduced away) sit at `fixed[d]`.
    """
    root: Union[Alloc, t.Value, Undef]
    dims: list[tuple[int, Scalar, Scalar]]
    fixed: dict[int, Scalar] = field(default_factory=dict)

    @staticmethod
    def whole(root) -> "Window":
        return Window(root, [(d, 0, n) for d, n in enumerate(root.shape)])

    @property
    def is_whole(self) -> bool:
        return not self.fixed and all(e == k and a == 0 and n == self.root.shape[e]
                                      for k, (e, a, n) in enumerate(self.dims))


def _shape(x) -> tuple[int, ...]:
    return tuple(x.shape)


def _same(a: Scalar, b: Scalar) -> bool:
    return a == b if isinstance(a, int) and isinstance(b, int) else a is b


# Attributes that change an accepted op's meaning in ways the tile program does not express.
_UNSUPPORTED_ATTRS = {"arith.truncf": ("roundingmode",), "arith.extf": ("roundingmode",),
                      "scf.for": ("unsignedCmp",)}

# index casts: index is i64 in the tile program.
_CASTS_TO_INDEX = frozenset({"arith.index_cast", "arith.index_castui"})


class TTSharedBase:
    """State (the value environment, the block being filled) and shared helpers."""

    def __init__(self, text: str, filename: Optional[str] = None):
        self.text = text
        self.filename = filename
        self.env: dict = {}
        self.kernel_name: Optional[str] = None
        self.block: t.Block = t.Block()

    # -- locations and errors ----------------------------------------------------------------
    def _fix_loc(self, loc: str) -> str:
        if self.filename and loc.startswith("-:"):
            return self.filename + loc[1:]
        return loc

    def loc(self, op) -> str:
        return self._fix_loc(source_loc(op.location))

    def _unsupported(self, op, what: str = "") -> UnsupportedError:
        name = op.operation.name
        msg = f"unsupported op '{name}'" + (f": {what}" if what else "")
        return UnsupportedError(msg, kernel=self.kernel_name, loc=self.loc(op) or None)

    # -- building tile ops --------------------------------------------------------------------
    def emit(self, op: t.Op) -> t.Op:
        self.block.add(op)
        return op

    @contextlib.contextmanager
    def _into(self, block: t.Block):
        saved = self.block
        self.block = block
        try:
            yield block
        finally:
            self.block = saved

    def const(self, value, dtype: str, shape: tuple[int, ...] = (), loc: str = "") -> t.Value:
        ty = t.TileType(shape, dtype) if shape else t.ScalarType(dtype)
        return self.emit(t.Constant(value, ty, loc)).result

    def i64(self, x: Scalar, loc: str = "") -> t.Value:
        if isinstance(x, int):
            return self.const(x, "i64", loc=loc)
        if x.dtype == "i64":
            return x
        return self.ew("arith.extsi", [x], "i64", loc)

    def ew(self, opname: str, args: list[t.Value], dtype: str, loc: str = "", attrs=None) -> t.Value:
        ty = t.with_dtype(args[-1].type, dtype)
        return self.emit(t.Elementwise(opname, args, ty, attrs, loc)).result

    def splat(self, x: t.Value, shape: tuple[int, ...], loc: str = "") -> t.Value:
        if not shape:
            return x
        return self.emit(t.Splat(x, t.TileType(shape, x.dtype), loc)).result

    def lift(self, x: t.Value, shape: tuple[int, ...], loc: str = "") -> t.Value:
        """`x` as a value of `shape`: scalars are splat, tiles must already have it."""
        if not x.is_tile:
            return self.splat(x, shape, loc)
        assert x.shape == tuple(shape), (x, shape)
        return x

    def add(self, a: Scalar, b: Scalar, loc: str) -> Scalar:
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        if isinstance(a, int) and a == 0:
            return b
        if isinstance(b, int) and b == 0:
            return a
        return self.ew("arith.addi", [self.i64(a, loc), self.i64(b, loc)], "i64", loc)

    def sub(self, a: Scalar, b: Scalar, loc: str) -> Scalar:
        if isinstance(a, int) and isinstance(b, int):
            return a - b
        if isinstance(b, int) and b == 0:
            return a
        return self.ew("arith.subi", [self.i64(a, loc), self.i64(b, loc)], "i64", loc)

    def mul(self, a: Scalar, b: Scalar, loc: str) -> Scalar:
        if isinstance(a, int) and isinstance(b, int):
            return a * b
        if isinstance(a, int) and a == 1:
            return b
        if isinstance(b, int) and b == 1:
            return a
        if (isinstance(a, int) and a == 0) or (isinstance(b, int) and b == 0):
            return 0
        return self.ew("arith.muli", [self.i64(a, loc), self.i64(b, loc)], "i64", loc)

    def place(self, v: t.Value, axis: int, shape: tuple[int, ...], loc: str) -> t.Value:
        """A 1-D tile along dim `axis` of `shape` (expand_dims, then broadcast)."""
        cur = [v.shape[0]]
        for d in range(len(shape)):
            if d != axis:
                cur.insert(d, 1)
                v = self.emit(t.ExpandDims(v, d, t.TileType(tuple(cur), v.dtype), loc)).result
        if tuple(cur) != tuple(shape):
            v = self.emit(t.Broadcast(v, t.TileType(tuple(shape), v.dtype), loc)).result
        return v

    def index_range(self, n: int, origin: Scalar, loc: str) -> t.Value:
        """The 1-D i64 tile [0 - origin, n - origin)."""
        r = self.emit(t.MakeRange(0, n, loc)).result
        r = self.ew("arith.extsi", [r], "i64", loc)
        if not (isinstance(origin, int) and origin == 0):
            r = self.ew("arith.subi", [r, self.splat(self.i64(origin, loc), (n,), loc)], "i64", loc)
        return r

    def _and(self, a: Optional[t.Value], b: Optional[t.Value], loc: str) -> Optional[t.Value]:
        if a is None:
            return b
        if b is None:
            return a
        return self.ew("arith.andi", [a, b], "i1", loc)

    def select(self, cond: t.Value, a: t.Value, b: t.Value, loc: str) -> t.Value:
        return self.emit(t.Elementwise("arith.select", [cond, a, b], a.type, loc=loc)).result

    def zeros(self, shape, dtype: str, loc: str) -> t.Value:
        return self.const(0.0 if t.is_float(dtype) else 0, dtype, tuple(shape), loc)

    # -- types -----------------------------------------------------------------------------
    def _dtype(self, ty: ir.Type, op) -> str:
        if isinstance(ty, ir.IndexType):
            return "i64"
        s = str(ty)
        if s in t.INT_TYPES or s in t.FLOAT_TYPES:
            return s
        raise self._unsupported(op, f"element type {s}")

    def _static_shape(self, ty: ir.Type, op) -> tuple[int, ...]:
        if not ty.has_static_shape:
            raise self._unsupported(op, f"dynamic shape {ty}")
        return tuple(ty.shape)

    def _type(self, ty: ir.Type, op) -> t.Type:
        if isinstance(ty, ir.RankedTensorType):
            shape = self._static_shape(ty, op)
            dtype = self._dtype(ty.element_type, op)
            return t.TileType(shape, dtype) if shape else t.ScalarType(dtype)
        if isinstance(ty, ir.ShapedType):
            raise self._unsupported(op, f"value of type {ty}")
        return t.ScalarType(self._dtype(ty, op))

    # -- values ----------------------------------------------------------------------------
    def get(self, v: ir.Value, op):
        try:
            return self.env[v]
        except KeyError:
            raise self._unsupported(op, "an operand this reader could not follow") from None

    def scalar(self, v: ir.Value, op) -> t.Value:
        x = self.get(v, op)
        if not isinstance(x, t.Value) or x.is_tile:
            raise self._unsupported(op, "expected a scalar operand")
        return x

    def tile(self, x, op) -> t.Value:
        """The contents of a tensor or alloc as a tile value (scalar for 0-d)."""
        if isinstance(x, t.Value):
            return x
        if isinstance(x, Undef):
            return self.zeros(x.shape, x.dtype, self.loc(op))
        if isinstance(x, Alloc):
            return self.tile(x.value, op)
        if isinstance(x, Window) and x.is_whole:
            return self.tile(x.root, op)
        if isinstance(x, Window):
            raise self._unsupported(op, "a part of a tile used as a value (only stores of it "
                                        "are supported)")
        raise self._unsupported(op, "a pointer view used as a tile value (copy it into an "
                                    "alloc first)")

    def value(self, v: ir.Value, op) -> t.Value:
        return self.tile(self.get(v, op), op)

    def mixed(self, static: ir.Attribute, dynamic, op) -> list[Scalar]:
        """Static/dynamic operand lists (offsets, sizes, strides) as ints and i64 values."""
        dyn = iter(dynamic)
        out: list[Scalar] = []
        for s in ir.DenseI64ArrayAttr(static):
            if s == ir.ShapedType.get_dynamic_size() or s == ir.ShapedType.get_dynamic_stride_or_offset():
                out.append(self.i64(self.scalar(next(dyn), op), self.loc(op)))
            else:
                out.append(int(s))
        return out

    # -- walking ---------------------------------------------------------------------------
    def _read_ops(self, mblock, tblock: t.Block) -> list:
        """Reads `mblock` into `tblock`; returns what its terminator yields (env objects)."""
        with self._into(tblock):
            for op in mblock.operations:
                name = op.operation.name
                if name in ("func.return", "scf.yield"):
                    return [self.get(v, op) for v in op.operation.operands]
                self._read_op(op, name)
        return []

    def _read_op(self, op, name: str) -> None:
        handler = getattr(self, "_op_" + name.replace(".", "_"), None)
        self._check_attrs(op, name)
        try:
            if handler is not None:
                handler(op, self.loc(op))
            elif name in ELEMENTWISE_OPS or name in _CASTS_TO_INDEX:
                self._top_elementwise(op)
            else:
                raise self._unsupported(op)
        except TritonIreeError:
            raise
        except Exception as e:   # a form this reader does not expect: report it, op and place
            raise UnsupportedError(f"cannot read op '{name}' ({type(e).__name__}: {e})",
                                   kernel=self.kernel_name, loc=self.loc(op) or None) from e

    def _check_attrs(self, op, name: str) -> None:
        for attr in _UNSUPPORTED_ATTRS.get(name, ()):
            if attr in op.operation.attributes:
                raise self._unsupported(op, f"attribute '{attr}'")

    def bind(self, op, x) -> None:
        self.env[op.operation.results[0]] = x

    # -- arith / math ----------------------------------------------------------------------
    def _op_arith_constant(self, op, loc: str) -> None:
        ty = self._type(op.result.type, op)
        value = _scalar_of_attr(op.attributes["value"], ty.dtype)
        if value is None:
            raise self._unsupported(op, "a non-splat dense constant")
        self.bind(op, self.const(value, ty.dtype, ty.shape, loc))

    def _top_elementwise(self, op) -> None:
        args = [self.value(v, op) for v in op.operation.operands]
        shape = next((a.shape for a in args if a.is_tile), ())
        self.bind(op, self._elementwise(op, args, shape))

    def _elementwise(self, op, args: list[t.Value], shape: tuple[int, ...]) -> t.Value:
        """An arith/math op on values of `shape` (scalars are splat to it)."""
        name = op.operation.name
        loc = self.loc(op)
        if len(op.operation.results) != 1:
            raise self._unsupported(op, "an op with several results")
        rty = op.operation.results[0].type
        rdtype = self._dtype(rty.element_type if isinstance(rty, ir.ShapedType) else rty, op)
        args = [self.lift(a, shape, loc) for a in args]
        attrs = {}
        if name in _CASTS_TO_INDEX:
            # index is i64 in the tile program.
            src = args[0].dtype
            if src == rdtype:
                return args[0]
            if t.bitwidth(src) < t.bitwidth(rdtype):
                name = "arith.extui" if name == "arith.index_castui" else "arith.extsi"
            else:
                name = "arith.trunci"
        elif name == "arith.cmpi":
            attrs["predicate"] = CMPI_PREDICATES[ir.IntegerAttr(op.attributes["predicate"]).value]
        elif name == "arith.cmpf":
            attrs["predicate"] = CMPF_PREDICATES[ir.IntegerAttr(op.attributes["predicate"]).value]
        ty = t.TileType(shape, rdtype) if shape else t.ScalarType(rdtype)
        return self.emit(t.Elementwise(name, args, ty, attrs, loc)).result
