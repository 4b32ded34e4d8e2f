"""triton-shared input: its memref + linalg output, raised to the tile program.

iree-compile cannot take triton-shared's output as it is: memrefs cannot cross IREE's public
function boundary (the VM has no type for them), IREE wants linalg on tensors, and it does not
support unranked memrefs at all. Rather than patching the memref program, `prepare` reads it
back into the same tile program the Triton path builds (tile.py) and hands it to the one
emitter (`lowering.lower`), so both inputs share the analyses, the IREE input form and the runtime.

What triton-shared's memref ops mean in tile terms:

- A pointer argument (``memref<*xT>`` / ``memref<?xT>``) is a buffer parameter. The last six
  i32 arguments are num_programs x, y, z and program_id x, y, z.
- ``memref.reinterpret_cast`` (offset o, static sizes, strides st) is a strided view of a
  buffer; ``memref.subview`` narrows a view (its dynamic sizes are the mask).
- ``memref.alloc`` is a tile in registers (mem2reg): each alloc has a current tile value,
  which copies, fills and linalg ops on the alloc replace. An alloc changed inside ``scf.for``
  or ``scf.if`` becomes a loop-carried value or a result of the ``If``.
- ``memref.copy`` from a buffer view into an alloc is a Load at the alloc's shape, with offsets
  ``o + sum_d (range_d - origin_d) * st_d`` built from tile ops (so the pointer analysis finds
  the slice again) and mask ``origin_d <= range_d < origin_d + size_d``; the alloc's previous
  contents are the masked-off value. A copy the other way, or
  ``bufferization.materialize_in_destination`` into a buffer view, is a Store.
- linalg.generic / map / fill / transpose / broadcast become tile ops at the iteration shape;
  linalg.reduce becomes Reduce and linalg.matmul Dot. Tensors are tile values; ``index`` is i64.

Contents a program leaves undefined (``tensor.empty``, a fresh alloc) may be given any value;
the reader picks whichever keeps accesses structured (e.g. an alloc filled only on one side of
an ``scf.if`` holds the fill value on both sides).
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from typing import Optional, Union

from iree.compiler import ir

from . import tile as t
from .analysis import uniform_scalar
from .errors import InputError, TritonIreeError, UnsupportedError
from .locations import source_loc
from .reader import CMPF_PREDICATES, CMPI_PREDICATES, ELEMENTWISE_OPS, _scalar_of_attr

GRID_ARGS = 6   # num_programs x, y, z, then program_id x, y, z

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


# The index lists of linalg.reduce / linalg.broadcast (`dimensions = [...]`) and
# linalg.transpose (`permutation = [...]`) in their custom assembly forms.
_INDEX_LIST_KEY = re.compile(r"(?<![\w%@#^$.-])(?:dimensions|permutation)\s*=\s*")
_INT = re.compile(r"-?(?:0x[0-9a-fA-F]+|[0-9]+)")
_INDEX_LIST = re.compile(rf"\[\s*(?:{_INT.pattern}\s*(?:,\s*{_INT.pattern}\s*)*)?\]")
_PURE_OPS = (t.Constant, t.Splat, t.Broadcast, t.ExpandDims, t.MakeRange, t.Reshape, t.Trans,
             t.Elementwise, t.ProgramId, t.NumPrograms)
# Ops that only alias their first operand (same contents, another type).
_ALIAS_OPS = ("memref.cast", "memref.assume_alignment", "tensor.cast")
_VIEW_OPS = ("memref.subview", "memref.reinterpret_cast") + _ALIAS_OPS


class TTSharedReader:
    def __init__(self, text: str, filename: Optional[str] = None):
        self.text = text
        self.filename = filename
        self.env: dict = {}
        self.kernel_name: Optional[str] = None
        self.block: t.Block = t.Block()

    # -- entry ------------------------------------------------------------------------
    def read(self) -> t.Kernel:
        self._check_index_lists()
        with ir.Context() as ctx, ir.Location.unknown():
            ctx.allow_unregistered_dialects = True   # leftover tt.* ops get a proper error
            try:
                module = ir.Module.parse(self.text)
            except ir.MLIRError as e:
                diags = e.error_diagnostics
                if diags:
                    d = diags[0]
                    where = self._fix_loc(source_loc(d.location))
                    msg = " ".join(d.message.split())
                    raise InputError(f"input does not parse: {msg}", loc=where or None) from None
                raise InputError("input does not parse: " + " ".join(str(e).split())) from None
            ops = list(module.body.operations)
            others = [op for op in ops if op.operation.name != "func.func"]
            if others:
                raise self._unsupported(others[0], "only func.func is supported at module level")
            # Declarations (external functions) may sit beside the kernel; calls to them fail later.
            funcs = [op for op in ops if op.operation.regions[0].blocks]
            if len(funcs) != 1:
                raise InputError(f"expected one func.func with a body in the module, found {len(funcs)}")
            return self._read_func(funcs[0])

    def _check_index_lists(self) -> None:
        """MLIR's parser crashes (SIGSEGV) on a malformed index list of linalg.reduce,
        linalg.broadcast (`dimensions = [...]`) or linalg.transpose (`permutation = [...]`), or
        one holding an integer outside i64; refuse those before parsing."""
        for m in _INDEX_LIST_KEY.finditer(self.text):
            if self.text.startswith("array<", m.end()):
                continue   # the generic form's attribute: parsed safely
            lst = _INDEX_LIST.match(self.text, m.end())
            bad = lst is None or any(not -2 ** 63 <= int(n, 0) < 2 ** 63 for n in _INT.findall(lst.group()))
            if bad:
                line = self.text.count("\n", 0, m.start()) + 1
                raise InputError(f"input does not parse: '{m.group().strip()}' must be followed by a list "
                                 f"of 64-bit integers in brackets", loc=f"{self.filename or '-'}:{line}")

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

    # -- the function ----------------------------------------------------------------------
    def _read_func(self, func) -> t.Kernel:
        self.kernel_name = ir.StringAttr(func.attributes["sym_name"]).value
        if not func.regions[0].blocks:
            raise self._unsupported(func, "a declaration without a body")
        if len(func.regions[0].blocks) != 1:
            raise self._unsupported(func, "more than one block (unstructured control flow)")
        block = func.regions[0].blocks[0]
        args = list(block.arguments)
        if len(args) < GRID_ARGS or any(str(a.type) != "i32" for a in args[-GRID_ARGS:]):
            raise InputError("expected the last six arguments to be i32 (num_programs x, y, z, "
                             "program_id x, y, z), as triton-shared emits them",
                             kernel=self.kernel_name, loc=self.loc(func) or None)
        params: list[t.Param] = []
        for i, arg in enumerate(args[:-GRID_ARGS]):
            name = f"arg{i}"
            ty = arg.type
            if isinstance(ty, (ir.MemRefType, ir.UnrankedMemRefType)):
                if isinstance(ty, ir.MemRefType) and (ty.rank != 1 or not (isinstance(ty.layout, ir.AffineMapAttr)
                                                                    and ty.layout.value == ir.AffineMap.get_identity(1))):
                    raise self._unsupported(func, f"pointer argument {i} of type {ty} (expected "
                                                  f"memref<*xT> or memref<?xT>)")
                dtype = self._dtype(ty.element_type, func)
                if dtype == "i1":
                    raise self._unsupported(func, f"pointer argument {i} to i1")
                p = t.Param(i, name, dtype, True)
                self.env[arg] = BufView(p, 0, [-1], [1])
            else:
                dtype = self._dtype(ty, func)
                p = t.Param(i, name, dtype, False)
                p.value = t.Value(t.ScalarType(dtype), None, name)
                self.env[arg] = p.value
            params.append(p)
        loc = self.loc(func)
        grid = args[-GRID_ARGS:]
        body = t.Block()
        self.block = body
        for axis in range(3):
            self.env[grid[axis]] = self.emit(t.NumPrograms(axis, loc)).result
            self.env[grid[3 + axis]] = self.emit(t.ProgramId(axis, loc)).result
        rets = self._read_ops(block, body)
        if rets:
            raise self._unsupported(func, "a kernel that returns values")
        return t.Kernel(self.kernel_name, params, body, loc)

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

    # -- memref views -----------------------------------------------------------------------
    def _op_memref_reinterpret_cast(self, op, loc: str) -> None:
        src = self.get(op.source, op)
        if not isinstance(src, BufView):
            raise self._unsupported(op, "reinterpret_cast of something other than a pointer argument")
        offs = self.mixed(op.static_offsets, op.offsets, op)
        sizes = self.mixed(op.static_sizes, op.sizes, op)
        strides = self.mixed(op.static_strides, op.strides, op)
        if not all(isinstance(s, int) for s in sizes):
            raise self._unsupported(op, "dynamic sizes (a tile needs a static shape)")
        self.bind(op, BufView(src.param, offs[0], sizes, strides))

    def _dropped_dims(self, op, sizes: list[Scalar], result_rank: int) -> set[int]:
        if result_rank == len(sizes):
            return set()
        ones = {d for d, s in enumerate(sizes) if isinstance(s, int) and s == 1}
        if len(sizes) - result_rank != len(ones):
            raise self._unsupported(op, "an ambiguous rank-reducing slice")
        return ones

    def _op_memref_subview(self, op, loc: str) -> None:
        src = self.get(op.source, op)
        offs = self.mixed(op.static_offsets, op.offsets, op)
        sizes = self.mixed(op.static_sizes, op.sizes, op)
        strides = self.mixed(op.static_strides, op.strides, op)
        dropped = self._dropped_dims(op, sizes, op.result.type.rank)
        if isinstance(src, BufView):
            if len(src.sizes) != len(sizes):
                raise self._unsupported(op, "a subview of a pointer argument that was not reinterpret_cast")
            offset = src.offset
            for o, s in zip(offs, src.strides):
                offset = self.add(offset, self.mul(o, s, loc), loc)
            keep = [d for d in range(len(sizes)) if d not in dropped]
            self.bind(op, BufView(src.param, offset, [sizes[d] for d in keep],
                                  [self.mul(src.strides[d], strides[d], loc) for d in keep]))
            return
        if isinstance(src, Alloc):
            src = Window.whole(src)
        if not isinstance(src, Window):
            raise self._unsupported(op, "a subview of this memref")
        self.bind(op, self._subwindow(op, src, offs, sizes, strides, dropped, loc))

    def _subwindow(self, op, src: Window, offs, sizes, strides, dropped, loc: str) -> Window:
        if not all(isinstance(s, int) and s == 1 for s in strides):
            raise self._unsupported(op, "a strided slice of a tile")
        dims, fixed = [], dict(src.fixed)
        for k, (e, a, _) in enumerate(src.dims):
            origin = self.add(a, offs[k], loc)
            if k in dropped:
                fixed[e] = origin
            else:
                dims.append((e, origin, sizes[k]))
        return Window(src.root, dims, fixed)

    def _alias(self, op, loc: str) -> None:
        self.bind(op, self.get(op.operation.operands[0], op))

    _op_memref_cast = _alias
    _op_memref_assume_alignment = _alias
    _op_tensor_cast = _alias

    def _op_memref_alloc(self, op, loc: str) -> None:
        ty = op.result.type
        if len(op.operation.operands):
            raise self._unsupported(op, "an alloc with dynamic sizes")
        shape = self._static_shape(ty, op)
        dtype = self._dtype(ty.element_type, op)
        self.bind(op, Alloc(shape, dtype, Undef(shape, dtype)))

    _op_memref_alloca = _op_memref_alloc

    def _op_memref_dealloc(self, op, loc: str) -> None:
        pass

    # -- loads and stores ---------------------------------------------------------------------
    def _bounds(self, shape, win: Window, sizes: list[Scalar]) -> dict[int, tuple[Scalar, Scalar, bool]]:
        """Per root dim that needs a mask: (origin, size, needs a lower bound)."""
        out = {}
        for (e, a, _), n in zip(win.dims, sizes):
            whole = isinstance(a, int) and a == 0 and isinstance(n, int) and n >= shape[e]
            if not whole:
                out[e] = (a, n, not (isinstance(a, int) and a <= 0))
        for e, a in win.fixed.items():
            if not (isinstance(a, int) and a == 0 and shape[e] == 1):
                out[e] = (a, 1, True)
        return out

    def _mask(self, shape, bounds: dict, loc: str) -> Optional[t.Value]:
        """The i1 tile `origin_d <= range_d < origin_d + size_d` over the bounded dims."""
        mask = None
        for e, (a, n, lower) in sorted(bounds.items()):
            idx = self.index_range(shape[e], a, loc)
            n1 = self.splat(self.i64(n, loc), (shape[e],), loc)
            m = self.ew("arith.cmpi", [idx, n1], "i1", loc, {"predicate": "slt"})
            if lower:
                z = self.zeros((shape[e],), "i64", loc)
                m = self._and(self.ew("arith.cmpi", [idx, z], "i1", loc, {"predicate": "sge"}), m, loc)
            mask = self._and(mask, self.place(m, e, shape, loc) if len(shape) > 1 else m, loc)
        return mask

    def _access(self, win: Window, buf: BufView, op, loc: str) -> tuple[t.Value, Optional[t.Value]]:
        """Offsets (i64) and mask, at the shape of `win`'s root, for moving the window's elements
        to or from the buffer view `buf` (same shape as the window)."""
        shape = _shape(win.root)
        if len(win.dims) != len(buf.sizes):
            raise self._unsupported(op, "a copy between views of different ranks")
        sizes = []
        for (_, _, n), m in zip(win.dims, buf.sizes):
            if isinstance(n, int) and isinstance(m, int) and m >= 0 and n != m:
                raise InputError(f"copy between views of different sizes ({n} and {m})",
                                 kernel=self.kernel_name, loc=loc or None)
            sizes.append(n if isinstance(n, int) or not isinstance(m, int) or m < 0 else m)
        if not shape:
            return self.i64(buf.offset, loc), None
        offsets = self.splat(self.i64(buf.offset, loc), shape, loc)
        for (e, a, _), st in zip(win.dims, buf.strides):
            if isinstance(st, int) and st == 0:
                continue
            idx = self.index_range(shape[e], a, loc)
            if not (isinstance(st, int) and st == 1):
                idx = self.ew("arith.muli", [idx, self.splat(self.i64(st, loc), (shape[e],), loc)], "i64", loc)
            offsets = self.ew("arith.addi", [offsets, self.place(idx, e, shape, loc)], "i64", loc)
        bounds = self._bounds(shape, win, sizes)
        # A bound on a size-1 dim becomes a condition folded into a bound of a longer dim (it
        # makes that dim's valid range empty), so that the access stays one structured slice.
        wide = [e for e in range(len(shape)) if shape[e] > 1]
        narrow = [e for e in bounds if shape[e] == 1]
        if wide and narrow:
            guard = None
            for e in narrow:
                a, n, lower = bounds.pop(e)
                neg = self.i64(self.sub(0, a, loc), loc)
                g = self.ew("arith.cmpi", [neg, self.i64(n, loc)], "i1", loc, {"predicate": "slt"})
                if lower:
                    g = self._and(g, self.ew("arith.cmpi", [neg, self.i64(0, loc)], "i1", loc,
                                             {"predicate": "sge"}), loc)
                guard = self._and(guard, g, loc)
            e = next((d for d in reversed(wide) if d in bounds), wide[-1])
            a, n, lower = bounds.get(e, (0, shape[e], False))
            n = self.select(guard, self.i64(n, loc), self.i64(0, loc), loc)
            bounds[e] = (a, n, lower)
        return offsets, self._mask(shape, bounds, loc)

    def _load_into(self, win: Window, buf: BufView, op, loc: str) -> None:
        alloc = win.root
        if buf.param.dtype != alloc.dtype:
            raise self._unsupported(op, f"a copy from {buf.param.dtype} into {alloc.dtype}")
        offsets, mask = self._access(win, buf, op, loc)
        ty = t.TileType(alloc.shape, alloc.dtype) if alloc.shape else t.ScalarType(alloc.dtype)
        prev = alloc.value
        if mask is None or isinstance(prev, Undef):
            new = self.emit(t.Load(buf.param, offsets, mask, None, ty, loc)).result
        elif uniform_scalar(prev) is not None:
            new = self.emit(t.Load(buf.param, offsets, mask, prev, ty, loc)).result
        else:
            ld = self.emit(t.Load(buf.param, offsets, mask, None, ty, loc)).result
            new = self.select(mask, ld, prev, loc)
        alloc.value = new

    def _store_from(self, win: Window, buf: BufView, op, loc: str) -> None:
        value = self.tile(win.root, op)
        if buf.param.dtype != value.dtype:
            raise self._unsupported(op, f"a store of {value.dtype} into {buf.param.dtype}")
        offsets, mask = self._access(win, buf, op, loc)
        self.emit(t.Store(buf.param, offsets, value, mask, loc))

    def _assign(self, src: Window, dst: Window, op, loc: str) -> None:
        """Copies window `src` of a tile into window `dst` of an alloc."""
        if _shape(src.root) != dst.root.shape or src.root.dtype != dst.root.dtype or \
                len(src.dims) != len(dst.dims) or src.fixed or dst.fixed or \
                not all(e1 == e2 and _same(a1, a2) for (e1, a1, _), (e2, a2, _) in zip(src.dims, dst.dims)):
            raise self._unsupported(op, "a copy between differently placed parts of tiles")
        value = self.tile(src.root, op)
        shape = dst.root.shape
        mask = self._mask(shape, self._bounds(shape, dst, [n for _, _, n in dst.dims]), loc) if shape else None
        if mask is not None and not isinstance(dst.root.value, Undef):
            value = self.select(mask, value, dst.root.value, loc)
        dst.root.value = value

    def _copy(self, src, dst, op, loc: str) -> None:
        src = Window.whole(src) if isinstance(src, (Alloc, t.Value, Undef)) else src
        dst = Window.whole(dst) if isinstance(dst, Alloc) else dst
        if isinstance(dst, Window) and not isinstance(dst.root, Alloc):
            raise self._unsupported(op, "a copy into a tensor")
        if isinstance(src, BufView) and isinstance(dst, Window):
            self._load_into(dst, src, op, loc)
        elif isinstance(src, Window) and isinstance(dst, BufView):
            if isinstance(src.root, Alloc):
                src = Window(src.root.value, src.dims, src.fixed)
            self._store_from(src, dst, op, loc)
        elif isinstance(src, Window) and isinstance(dst, Window):
            if isinstance(src.root, Alloc):
                src = Window(src.root.value, src.dims, src.fixed)
            self._assign(src, dst, op, loc)
        else:
            raise self._unsupported(op, "a copy from one pointer argument to another")

    def _op_memref_copy(self, op, loc: str) -> None:
        self._copy(self.get(op.source, op), self.get(op.target, op), op, loc)

    def _op_bufferization_materialize_in_destination(self, op, loc: str) -> None:
        if op.operation.results:
            raise self._unsupported(op, "a tensor destination")
        self._copy(self.get(op.operation.operands[0], op), self.get(op.operation.operands[1], op), op, loc)

    def _op_bufferization_to_tensor(self, op, loc: str) -> None:
        src = self.get(op.operation.operands[0], op)
        if isinstance(src, Alloc):
            self.bind(op, src.value)
        elif isinstance(src, Window) and isinstance(src.root, Alloc):
            self.bind(op, Window(src.root.value, src.dims, src.fixed))
        elif isinstance(src, BufView) and all(isinstance(s, int) and s >= 0 for s in src.sizes):
            tmp = Alloc(tuple(src.sizes), src.param.dtype, Undef(tuple(src.sizes), src.param.dtype))
            self._load_into(Window.whole(tmp), src, op, loc)
            self.bind(op, tmp.value)
        else:
            raise self._unsupported(op, "to_tensor of this memref")

    def _op_bufferization_to_buffer(self, op, loc: str) -> None:
        x = self.get(op.operation.operands[0], op)
        if isinstance(x, Window):
            raise self._unsupported(op, "to_buffer of a part of a tile")
        self.bind(op, Alloc(_shape(x), x.dtype, x))

    _op_bufferization_to_memref = _op_bufferization_to_buffer

    def _op_bufferization_alloc_tensor(self, op, loc: str) -> None:
        if len(op.operation.operands):
            raise self._unsupported(op, "an alloc_tensor with operands")
        ty = self._type(op.result.type, op)
        self.bind(op, Undef(ty.shape, ty.dtype))

    # -- scalar element access -------------------------------------------------------------------
    def _indices(self, op, values) -> list[t.Value]:
        return [self.i64(self.scalar(v, op), self.loc(op)) for v in values]

    def _point(self, x, idx: list[t.Value], op, loc: str):
        """(root, root indices) of element `idx` of an alloc or tile window."""
        win = Window.whole(x) if not isinstance(x, Window) else x
        full: dict[int, Scalar] = dict(win.fixed)
        for (e, a, _), i in zip(win.dims, idx):
            full[e] = self.add(a, i, loc)
        return win.root, [full[e] for e in range(len(_shape(win.root)))]

    def _point_mask(self, shape, at: list[Scalar], loc: str) -> t.Value:
        mask = None
        for e, i in enumerate(at):
            m = self.ew("arith.cmpi", [self.index_range(shape[e], 0, loc),
                                       self.splat(self.i64(i, loc), (shape[e],), loc)], "i1", loc,
                        {"predicate": "eq"})
            mask = self._and(mask, self.place(m, e, shape, loc) if len(shape) > 1 else m, loc)
        return mask

    def _extract(self, tile_v: t.Value, at: list[Scalar], loc: str) -> t.Value:
        """One element of a tile: select it, then sum the tile (the others add nothing)."""
        if not tile_v.is_tile:
            return tile_v
        shape, dtype = tile_v.shape, tile_v.dtype
        if dtype == "i1":
            name, ident = "arith.ori", False
        elif t.is_float(dtype):
            name, ident = "arith.addf", -0.0   # x + -0.0 == x for every x
        else:
            name, ident = "arith.addi", 0
        x = self.select(self._point_mask(shape, at, loc), tile_v, self.const(ident, dtype, shape, loc), loc)
        for axis in reversed(range(len(shape))):
            blk = t.Block()
            lhs, rhs = t.Value(t.ScalarType(dtype), blk), t.Value(t.ScalarType(dtype), blk)
            blk.args = [lhs, rhs]
            y = t.Elementwise(name, [lhs, rhs], t.ScalarType(dtype), loc=loc)
            blk.ops.append(y)
            blk.yields = [y.result]
            rshape = shape[:axis]
            ty = t.TileType(rshape, dtype) if rshape else t.ScalarType(dtype)
            x = self.emit(t.Reduce([x], axis, blk, [ty], loc)).result
            shape = rshape
        return x

    def _element_load(self, op, m, idx: list[t.Value], loc: str) -> None:
        if isinstance(m, BufView):
            ty = t.ScalarType(m.param.dtype)
            off = self.i64(self._element_offset(m, idx, loc), loc)
            self.bind(op, self.emit(t.Load(m.param, off, None, None, ty, loc)).result)
            return
        root, at = self._point(m, idx, op, loc)
        self.bind(op, self._extract(self.tile(root, op), at, loc))

    def _element_store(self, op, v: t.Value, m, idx: list[t.Value], loc: str) -> None:
        if isinstance(m, BufView):
            if v.dtype != m.param.dtype:
                raise self._unsupported(op, f"a store of {v.dtype} into {m.param.dtype}")
            self.emit(t.Store(m.param, self.i64(self._element_offset(m, idx, loc), loc), v, None, loc))
            return
        root, at = self._point(m, idx, op, loc)
        if not isinstance(root, Alloc):
            raise self._unsupported(op, "a store into this memref")
        root.value = self._insert(root.value, v, at, root.shape, loc)

    def _element_offset(self, m: BufView, idx: list[Scalar], loc: str) -> Scalar:
        off = m.offset
        for i, st in zip(idx, m.strides):
            off = self.add(off, self.mul(i, st, loc), loc)
        return off

    def _op_memref_load(self, op, loc: str) -> None:
        ops = list(op.operation.operands)
        self._element_load(op, self.get(ops[0], op), self._indices(op, ops[1:]), loc)

    def _op_memref_store(self, op, loc: str) -> None:
        ops = list(op.operation.operands)
        self._element_store(op, self.scalar(ops[0], op), self.get(ops[1], op), self._indices(op, ops[2:]), loc)

    def _affine_indices(self, op, operands) -> list[Scalar]:
        """The indices of affine.load/store: sums and products of dims, symbols and constants."""
        amap = ir.AffineMapAttr(op.attributes["map"]).value
        vals = self._indices(op, operands)
        loc = self.loc(op)

        def value(e) -> Scalar:
            if isinstance(e, ir.AffineDimExpr):
                return vals[e.position]
            if isinstance(e, ir.AffineSymbolExpr):
                return vals[amap.n_dims + e.position]
            if isinstance(e, ir.AffineConstantExpr):
                return int(e.value)
            if isinstance(e, ir.AffineAddExpr):
                return self.add(value(e.lhs), value(e.rhs), loc)
            if isinstance(e, ir.AffineMulExpr):
                return self.mul(value(e.lhs), value(e.rhs), loc)
            raise self._unsupported(op, f"affine map {amap}")

        return [value(e) for e in amap.results]

    def _op_affine_load(self, op, loc: str) -> None:
        ops = list(op.operation.operands)
        self._element_load(op, self.get(ops[0], op), self._affine_indices(op, ops[1:]), loc)

    def _op_affine_store(self, op, loc: str) -> None:
        ops = list(op.operation.operands)
        self._element_store(op, self.scalar(ops[0], op), self.get(ops[1], op),
                            self._affine_indices(op, ops[2:]), loc)

    def _insert(self, prev, v: t.Value, at, shape, loc: str) -> t.Value:
        if not shape:
            return v
        new = self.splat(v, shape, loc)
        if isinstance(prev, Undef):
            return new
        return self.select(self._point_mask(shape, at, loc), new, prev, loc)

    def _op_tensor_extract(self, op, loc: str) -> None:
        ops = list(op.operation.operands)
        x = self.get(ops[0], op)
        idx = self._indices(op, ops[1:])
        root, at = self._point(x, idx, op, loc)
        self.bind(op, self._extract(self.tile(root, op), at, loc))

    def _op_tensor_insert(self, op, loc: str) -> None:
        ops = list(op.operation.operands)
        v = self.scalar(ops[0], op)
        x = self.get(ops[1], op)
        if isinstance(x, Window):
            raise self._unsupported(op, "an insert into a part of a tile")
        idx = self._indices(op, ops[2:])
        self.bind(op, self._insert(x, v, idx, _shape(x), loc))

    # -- tensors ------------------------------------------------------------------------------
    def _op_tensor_empty(self, op, loc: str) -> None:
        if len(op.operation.operands):
            raise self._unsupported(op, "dynamic sizes")
        ty = self._type(op.result.type, op)
        self.bind(op, Undef(ty.shape, ty.dtype))

    def _op_tensor_splat(self, op, loc: str) -> None:
        ty = self._type(op.result.type, op)
        self.bind(op, self.splat(self.scalar(op.operation.operands[0], op), ty.shape, loc))

    def _op_tensor_extract_slice(self, op, loc: str) -> None:
        src = self.get(op.source, op)
        if isinstance(src, (t.Value, Undef)):
            src = Window.whole(src)
        if not isinstance(src, Window) or isinstance(src.root, Alloc):
            raise self._unsupported(op, "a slice of this value")
        offs = self.mixed(op.static_offsets, op.offsets, op)
        sizes = self.mixed(op.static_sizes, op.sizes, op)
        strides = self.mixed(op.static_strides, op.strides, op)
        dropped = self._dropped_dims(op, sizes, op.result.type.rank)
        self.bind(op, self._subwindow(op, src, offs, sizes, strides, dropped, loc))

    def _reshape(self, op, loc: str) -> None:
        x = self.value(op.operation.operands[0], op)
        ty = self._type(op.result.type, op)
        if not isinstance(ty, t.TileType) or not x.is_tile:
            raise self._unsupported(op, "a reshape to or from a 0-d tensor")
        self.bind(op, self.emit(t.Reshape(x, ty, loc)).result)

    _op_tensor_expand_shape = _reshape
    _op_tensor_collapse_shape = _reshape

    # -- linalg -------------------------------------------------------------------------------
    def _dest(self, v: ir.Value, op):
        """A linalg output: (alloc it updates or None, its current contents)."""
        x = self.get(v, op)
        if isinstance(x, Window) and isinstance(x.root, Alloc) and x.is_whole:
            x = x.root
        if isinstance(x, Alloc):
            return x, x.value
        if isinstance(x, (t.Value, Undef)):
            return None, x
        raise self._unsupported(op, "an output that is not a whole tile or alloc")

    def _results(self, op, outs: list, values: list[t.Value]) -> None:
        """Binds linalg results: allocs take the new values, tensor results are bound."""
        res = list(op.operation.results)
        for (alloc, _), v in zip(outs, values):
            if alloc is not None:
                alloc.value = v
        if res:
            for r, v in zip(res, values):
                self.env[r] = v

    def _outs(self, op, values) -> list:
        return [self._dest(v, op) for v in values]

    def _check_dtype(self, op, v: t.Value, dtype: str) -> None:
        if v.dtype != dtype:
            raise self._unsupported(op, f"a result of {v.dtype} into an output of {dtype}")

    def _op_linalg_fill(self, op, loc: str) -> None:
        x = self.scalar(op.inputs[0], op)
        dst = self.get(op.outputs[0], op)
        if isinstance(dst, Window) and isinstance(dst.root, Alloc) and not dst.is_whole:
            # A fill of part of an alloc: the fill where the window is, the old contents elsewhere.
            if x.dtype != dst.root.dtype:
                raise self._unsupported(op, f"a fill of {x.dtype} into {dst.root.dtype}")
            self._assign(Window(self.splat(x, dst.root.shape, loc), dst.dims, dst.fixed), dst, op, loc)
            return
        outs = self._outs(op, op.outputs)
        _, prev = outs[0]
        if x.dtype != prev.dtype:
            raise self._unsupported(op, f"a fill of {x.dtype} into {prev.dtype}")
        self._results(op, outs, [self.splat(x, _shape(prev), loc)])

    def _affine_exprs(self, op, attr) -> list[Optional[int]]:
        """An indexing map's results: loop dim positions, or None for the constant 0."""
        amap = ir.AffineMapAttr(attr).value
        out = []
        for e in amap.results:
            if isinstance(e, ir.AffineDimExpr):
                out.append(e.position)
            elif isinstance(e, ir.AffineConstantExpr) and e.value == 0:
                out.append(None)
            else:
                raise self._unsupported(op, f"indexing map {amap}")
        return out

    def _to_loops(self, x: t.Value, exprs: list[Optional[int]], loops: tuple[int, ...], op, loc: str) -> t.Value:
        """Operand `x` (indexed by `exprs`) as a tile over the whole iteration space."""
        if not x.is_tile:
            return self.splat(x, loops, loc)
        if any(e is None for e in exprs):
            keep = [i for i, e in enumerate(exprs) if e is not None]
            x = self.emit(t.Reshape(x, t.TileType(tuple(x.shape[i] for i in keep), x.dtype), loc)).result \
                if keep else None
            exprs = [exprs[i] for i in keep]
            if x is None:
                raise self._unsupported(op, "an operand indexed only by constants")
        if len(set(exprs)) != len(exprs):
            raise self._unsupported(op, "an indexing map that repeats a loop dimension")
        order = tuple(sorted(range(len(exprs)), key=lambda i: exprs[i]))
        if order != tuple(range(len(exprs))):
            x = self.emit(t.Trans(x, order, t.TileType(tuple(x.shape[i] for i in order), x.dtype), loc)).result
        dims = sorted(exprs)
        shape = list(x.shape)
        for j in range(len(loops)):
            if j not in dims:
                shape.insert(j, 1)
                x = self.emit(t.ExpandDims(x, j, t.TileType(tuple(shape), x.dtype), loc)).result
        if tuple(shape) != tuple(loops):
            x = self.emit(t.Broadcast(x, t.TileType(tuple(loops), x.dtype), loc)).result
        return x

    def _from_loops(self, y: t.Value, exprs: list[Optional[int]], out_shape, op, loc: str) -> t.Value:
        """A tile over the iteration space, written to an output indexed by `exprs`."""
        ks = [e for e in exprs if e is not None]
        nloops = len(y.shape) if y.is_tile else 0
        if sorted(ks) != list(range(nloops)):
            raise self._unsupported(op, "an output map that is not a permutation of the loops")
        if not y.is_tile:
            return self.splat(y, tuple(out_shape), loc) if out_shape else y
        order = tuple(ks)
        if order != tuple(range(nloops)):
            y = self.emit(t.Trans(y, order, t.TileType(tuple(y.shape[i] for i in order), y.dtype), loc)).result
        if len(exprs) != nloops:
            y = self.emit(t.Reshape(y, t.TileType(tuple(out_shape), y.dtype), loc)).result
        return y

    def _eval_body(self, mblock, args: list[t.Value], shape: tuple[int, ...]) -> list[t.Value]:
        """A linalg region as tile ops over `shape` (scalar ops when `shape` is ())."""
        for a, v in zip(mblock.arguments, args):
            self.env[a] = v
        for op in mblock.operations:
            name = op.operation.name
            loc = self.loc(op)
            self._check_attrs(op, name)
            try:
                if name == "linalg.yield":
                    return [self.lift(self.scalar(v, op), shape, loc) if not self.get(v, op).is_tile
                            else self.get(v, op) for v in op.operation.operands]
                if name == "arith.constant":
                    ty = self._type(op.result.type, op)
                    if ty.shape:
                        raise self._unsupported(op, "a tensor constant inside a linalg body")
                    value = _scalar_of_attr(op.attributes["value"], ty.dtype)
                    self.bind(op, self.const(value, ty.dtype, shape, loc))
                elif name == "linalg.index":
                    d = ir.IntegerAttr(op.attributes["dim"]).value
                    r = self.index_range(shape[d], 0, loc)
                    self.bind(op, self.place(r, d, shape, loc) if len(shape) > 1 else r)
                elif name in ELEMENTWISE_OPS or name in _CASTS_TO_INDEX:
                    ins = []
                    for v in op.operation.operands:
                        x = self.get(v, op)
                        if not isinstance(x, t.Value):
                            raise self._unsupported(op, "a non-scalar operand inside a linalg body")
                        ins.append(x)
                    self.bind(op, self._elementwise(op, ins, shape))
                elif name == "memref.load":
                    self._gather(op, shape, loc)
                else:
                    raise self._unsupported(op, "inside a linalg body")
            except TritonIreeError:
                raise
            except Exception as e:
                raise UnsupportedError(f"cannot read op '{name}' ({type(e).__name__}: {e})",
                                       kernel=self.kernel_name, loc=loc or None) from e
        raise InputError("a linalg body without linalg.yield", kernel=self.kernel_name)

    def _gather(self, op, shape, loc: str) -> None:
        ops = list(op.operation.operands)
        m = self.get(ops[0], op)
        if not isinstance(m, BufView):
            raise self._unsupported(op, "a load from a tile inside a linalg body")
        off = self.lift(self.i64(m.offset, loc), shape, loc)
        for v, st in zip(ops[1:], m.strides):
            i = self.get(v, op)
            i = self.lift(i if i.dtype == "i64" else self.ew("arith.extsi", [i], "i64", loc), shape, loc)
            if not (isinstance(st, int) and st == 1):
                i = self.ew("arith.muli", [i, self.lift(self.i64(st, loc), shape, loc)], "i64", loc)
            off = self.ew("arith.addi", [off, i], "i64", loc)
        ty = t.TileType(shape, m.param.dtype) if shape else t.ScalarType(m.param.dtype)
        self.bind(op, self.emit(t.Load(m.param, off, None, None, ty, loc)).result)

    def _op_linalg_generic(self, op, loc: str) -> None:
        its = [str(a) for a in op.iterator_types]
        if any("parallel" not in s for s in its):
            raise self._unsupported(op, "a linalg.generic with reduction iterators (use linalg.reduce)")
        ins = [self.value(v, op) for v in op.inputs]
        outs = self._outs(op, op.outputs)
        maps = [self._affine_exprs(op, m) for m in op.indexing_maps]
        n = len(its)
        loops: list[Optional[int]] = [None] * n
        for v, exprs in zip(list(op.inputs) + list(op.outputs), maps):
            ty = v.type
            if not isinstance(ty, ir.ShapedType):
                continue
            for i, e in enumerate(exprs):
                if e is not None:
                    loops[e] = ty.shape[i]
        if any(s is None or s < 0 for s in loops):
            raise self._unsupported(op, "an iteration space without static sizes")
        shape = tuple(loops)
        args = [self._to_loops(x, m, shape, op, loc) for x, m in zip(ins, maps)]
        out_maps = maps[len(ins):]
        body = op.regions[0].blocks[0]
        for (_, prev), m, barg in zip(outs, out_maps, list(body.arguments)[len(ins):]):
            if len(list(barg.uses)):
                args.append(self._to_loops(self.tile(prev, op), m, shape, op, loc))
            else:
                args.append(None)
        ys = self._eval_body(body, args, shape)
        results = []
        for y, (_, prev), m in zip(ys, outs, out_maps):
            r = self._from_loops(y, m, _shape(prev), op, loc)
            self._check_dtype(op, r, prev.dtype)
            results.append(r)
        self._results(op, outs, results)

    def _op_linalg_map(self, op, loc: str) -> None:
        ins = [self.value(v, op) for v in op.inputs]
        outs = self._outs(op, [op.init])
        shape = _shape(outs[0][1])
        ys = self._eval_body(op.regions[0].blocks[0], [self.lift(x, shape, loc) for x in ins], shape)
        self._check_dtype(op, ys[0], outs[0][1].dtype)
        self._results(op, outs, ys)

    def _op_linalg_copy(self, op, loc: str) -> None:
        if not op.operation.results:
            self._copy(self.get(op.inputs[0], op), self.get(op.outputs[0], op), op, loc)
            return
        self._results(op, self._outs(op, op.outputs), [self.value(op.inputs[0], op)])

    def _op_linalg_transpose(self, op, loc: str) -> None:
        x = self.value(op.input, op)
        perm = tuple(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
        outs = self._outs(op, [op.init])
        ty = t.TileType(tuple(x.shape[i] for i in perm), x.dtype)
        self._results(op, outs, [self.emit(t.Trans(x, perm, ty, loc)).result])

    def _op_linalg_broadcast(self, op, loc: str) -> None:
        x = self.value(op.input, op)
        dims = sorted(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
        outs = self._outs(op, [op.init])
        out_shape = _shape(outs[0][1])
        if not x.is_tile:
            self._results(op, outs, [self.splat(x, out_shape, loc)])
            return
        shape = list(x.shape)
        for d in dims:
            shape.insert(d, 1)
            x = self.emit(t.ExpandDims(x, d, t.TileType(tuple(shape), x.dtype), loc)).result
        if tuple(shape) != out_shape:
            x = self.emit(t.Broadcast(x, t.TileType(out_shape, x.dtype), loc)).result
        self._results(op, outs, [x])

    def _op_linalg_reduce(self, op, loc: str) -> None:
        xs = [self.value(v, op) for v in op.inputs]
        outs = self._outs(op, op.inits)
        dims = sorted(ir.DenseI64ArrayAttr(op.attributes["dimensions"]), reverse=True)
        mblock = op.regions[0].blocks[0]
        dtypes = [x.dtype for x in xs]
        cur = xs
        for axis in dims:
            # linalg combines (element, accumulator); the tile combiner takes (lhs, rhs) =
            # (accumulated, next element).
            blk = t.Block()
            lhs = [t.Value(t.ScalarType(d), blk) for d in dtypes]
            rhs = [t.Value(t.ScalarType(d), blk) for d in dtypes]
            blk.args = lhs + rhs
            with self._into(blk):
                blk.yields = self._eval_body(mblock, rhs + lhs, ())
            rshape = tuple(n for i, n in enumerate(cur[0].shape) if i != axis)
            types = [t.TileType(rshape, d) if rshape else t.ScalarType(d) for d in dtypes]
            cur = self.emit(t.Reduce(cur, axis, blk, types, loc)).results
        # Then the initial value: linalg.reduce folds the elements into the outputs.
        inits = [prev for _, prev in outs]
        if any(isinstance(p, Undef) for p in inits):
            results = list(cur)
        else:
            shape = _shape(inits[0])
            results = self._eval_body(mblock, list(cur) + [self.tile(p, op) for p in inits], shape)
        for r, (_, prev) in zip(results, outs):
            self._check_dtype(op, r, prev.dtype)
        self._results(op, outs, results)

    def _op_linalg_matmul(self, op, loc: str) -> None:
        if "cast" in op.operation.attributes and "unsigned" in str(op.operation.attributes["cast"]):
            raise self._unsupported(op, "unsigned casts")
        a, b = (self.value(v, op) for v in op.inputs)
        outs = self._outs(op, op.outputs)
        acc = self.tile(outs[0][1], op)
        if "indexing_maps" in op.operation.attributes:
            ma, mb, mc = (self._affine_exprs(op, m) for m in op.indexing_maps)
            if mc != [0, 1] or sorted(ma) != [0, 2] or sorted(mb) != [1, 2]:
                raise self._unsupported(op, "a matmul with these indexing maps")
            if ma == [2, 0]:
                a = self.emit(t.Trans(a, (1, 0), t.TileType((a.shape[1], a.shape[0]), a.dtype), loc)).result
            if mb == [1, 2]:
                b = self.emit(t.Trans(b, (1, 0), t.TileType((b.shape[1], b.shape[0]), b.dtype), loc)).result
        if len(a.shape) != 2 or len(b.shape) != 2:
            raise self._unsupported(op, "a matmul that is not 2-D")
        self._results(op, outs, [self.emit(t.Dot(a, b, acc, loc)).result])

    # -- control flow ---------------------------------------------------------------------------
    def _written_allocs(self, regions) -> list[Alloc]:
        """The allocs from outside `regions` that ops inside them change, in order."""
        found: dict[int, Alloc] = {}

        def root(v: ir.Value):
            while v not in self.env:
                if not isinstance(v, ir.OpResult) or v.owner.name not in _VIEW_OPS:
                    return None
                v = v.owner.operands[0]
            x = self.env[v]
            if isinstance(x, Window) and isinstance(x.root, Alloc):
                return x.root
            return x if isinstance(x, Alloc) else None

        def targets(op) -> list:
            name = op.name
            if name in ("memref.copy", "bufferization.materialize_in_destination"):
                return [op.operands[1]]
            if name == "memref.store":
                return [op.operands[1]]
            if name.startswith("linalg."):
                v = op.opview
                outs = getattr(v, "outputs", None) or getattr(v, "inits", None)
                if outs is None and hasattr(v, "init"):
                    outs = [v.init]
                return [o for o in (outs or []) if isinstance(o.type, (ir.MemRefType, ir.UnrankedMemRefType))]
            return []

        def visit(region) -> None:
            for blk in region.blocks:
                for op in blk.operations:
                    o = op.operation
                    for v in targets(o):
                        a = root(v)
                        if a is not None:
                            found.setdefault(id(a), a)
                    for r in o.regions:
                        visit(r)

        for r in regions:
            visit(r)
        return list(found.values())

    def _carry(self, x, op):
        """An scf.for init as (tile value, template to rebuild it from the carried value)."""
        if isinstance(x, t.Value):
            return x, None
        if isinstance(x, Undef):
            return self.zeros(x.shape, x.dtype, self.loc(op)), None
        if isinstance(x, BufView):
            return self.i64(x.offset, self.loc(op)), x
        raise self._unsupported(op, "a loop-carried value of this kind (an alloc or a slice)")

    def _op_scf_for(self, op, loc: str) -> None:
        operands = list(op.operation.operands)
        lb, ub, step = (self.scalar(v, op) for v in operands[:3])
        if isinstance(step.owner, t.Constant) and step.owner.value <= 0:
            raise self._unsupported(op, f"a step of {step.owner.value} (the step must be positive)")
        inits, templates = [], []
        for v in operands[3:]:
            val, tmpl = self._carry(self.get(v, op), op)
            inits.append(val)
            templates.append(tmpl)
        allocs = self._written_allocs(op.operation.regions)
        for a in allocs:
            inits.append(self.tile(a.value, op))
        mblock = op.operation.regions[0].blocks[0]
        body = t.Block()
        iv = t.Value(lb.type, body, "iv")
        body.args.append(iv)
        margs = list(mblock.arguments)
        self.env[margs[0]] = iv
        carried = [t.Value(v.type, body, "it") for v in inits]
        body.args += carried
        for a, v, tmpl in zip(margs[1:], carried, templates):
            self.env[a] = v if tmpl is None else BufView(tmpl.param, v, tmpl.sizes, tmpl.strides)
        for a, v in zip(allocs, carried[len(templates):]):
            a.value = v
        yields = self._read_ops(mblock, body)
        out = []
        for y, arg, tmpl in zip(yields, carried, templates):
            if tmpl is not None:
                if not (isinstance(y, BufView) and y.param is tmpl.param and len(y.strides) == len(tmpl.strides)
                        and all(map(_same, y.strides, tmpl.strides)) and all(map(_same, y.sizes, tmpl.sizes))):
                    raise self._unsupported(op, "a loop-carried view that changes its argument, "
                                                "sizes or strides")
                with self._into(body):
                    out.append(self.i64(y.offset, loc))
            elif isinstance(y, Undef):
                out.append(arg)   # undefined: any value will do, e.g. the one carried in
            elif isinstance(y, t.Value):
                out.append(y)
            elif isinstance(y, Window) and y.is_whole:
                with self._into(body):
                    out.append(self.tile(y, op))
            else:
                raise self._unsupported(op, "a loop-carried value of this kind")
        for a, arg in zip(allocs, carried[len(templates):]):
            out.append(arg if isinstance(a.value, Undef) else self.tile(a.value, op))
        for y, init in zip(out, inits):
            if y.type != init.type:
                raise self._unsupported(op, f"a loop-carried value that changes type ({init.type.mlir()} "
                                            f"to {y.type.mlir()})")
        body.yields = out
        f = self.emit(t.For(lb, ub, step, inits, body, loc))
        for r, v, tmpl in zip(op.operation.results, f.results, templates):
            self.env[r] = v if tmpl is None else BufView(tmpl.param, v, tmpl.sizes, tmpl.strides)
        for a, v in zip(allocs, f.results[len(templates):]):
            a.value = v

    def _op_scf_if(self, op, loc: str) -> None:
        cond = self.scalar(op.operation.operands[0], op)
        regions = list(op.operation.regions)
        allocs = self._written_allocs(regions)
        before = [a.value for a in allocs]
        branches = []
        for region in regions:
            blk = t.Block()
            for a, v in zip(allocs, before):
                a.value = v
            ys = self._read_ops(region.blocks[0], blk) if region.blocks else []
            if len(ys) != len(op.operation.results):
                raise InputError("scf.if branches yield different numbers of values",
                                 kernel=self.kernel_name, loc=loc or None)
            branches.append((blk, list(ys) + [a.value for a in allocs]))
        (tb, ty), (eb, ey) = branches
        for a, v in zip(allocs, before):
            a.value = v
        pure = all(isinstance(o, _PURE_OPS) for b in (tb, eb) for o in b.ops)
        slots = []   # indices of values that differ between the branches
        merged: list = [None] * len(ty)
        for j, (a, b) in enumerate(zip(ty, ey)):
            if isinstance(a, Undef) and isinstance(b, Undef):
                merged[j] = a
            elif isinstance(b, Undef) or a is b:
                merged[j] = a   # undefined on one side: the other side's value will do
            elif isinstance(a, Undef):
                merged[j] = b
            elif isinstance(a, t.Value) and isinstance(b, t.Value) and a.type == b.type:
                slots.append(j)
            else:
                raise self._unsupported(op, "branches that yield different kinds of values")
        if pure:
            # Cheap, side-effect-free branches run unconditionally; results are selected.
            self.block.ops += tb.ops + eb.ops
            for j in slots:
                merged[j] = self.select(cond, ty[j], ey[j], loc)
        else:
            need = list(slots)
            # A value defined in one branch only must come out through the If as well.
            for j, m in enumerate(merged):
                if j not in slots and isinstance(m, t.Value) and self._defined_in(m, tb, eb):
                    need.append(j)
            need.sort()
            for blk, ys in ((tb, ty), (eb, ey)):
                with self._into(blk):
                    # Undefined on this side: any value will do.
                    blk.yields = [self.tile(Undef(_shape(merged[j]), merged[j].dtype)
                                            if isinstance(ys[j], Undef) else ys[j], op) for j in need]
            iff = self.emit(t.If(cond, tb, eb, [v.type for v in tb.yields], loc))
            for j, r in zip(need, iff.results):
                merged[j] = r
        nres = len(op.operation.results)
        for r, m in zip(op.operation.results, merged[:nres]):
            self.env[r] = m
        for a, m in zip(allocs, merged[nres:]):
            a.value = m

    def _defined_in(self, v: t.Value, *blocks: t.Block) -> bool:
        ops = {id(o) for b in blocks for o in b.walk()}
        return isinstance(v.owner, t.Op) and id(v.owner) in ops


# Attributes that change an accepted op's meaning in ways the tile program does not express.
_UNSUPPORTED_ATTRS = {"arith.truncf": ("roundingmode",), "arith.extf": ("roundingmode",),
                      "scf.for": ("unsignedCmp",)}

# index casts: index is i64 in the tile program.
_CASTS_TO_INDEX = frozenset({"arith.index_cast", "arith.index_castui"})


def read_ttshared(text: str, filename: Optional[str] = None) -> t.Kernel:
    """triton-shared's memref/linalg output (MLIR text) as a tile program."""
    return TTSharedReader(text, filename).read()


def prepare(text: str, filename: Optional[str] = None) -> str:
    """triton-shared's linalg + memref output -> an IREE input module (MLIR text).

    `filename` names the input in error locations (MLIR calls parsed text '-').
    """
    from . import lowering
    kernel = read_ttshared(text, filename)
    return lowering.lower(kernel)
