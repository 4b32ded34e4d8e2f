"""Reader: TTIR (generic MLIR text) into the tile program.

TTIR is parsed with IREE's MLIR Python bindings, with unregistered dialects allowed: `tt.*`
ops arrive as unregistered ops, `!tt.ptr<T>` as an opaque type, and arith/math/scf ops fully
typed. The reader walks the kernel once and builds the tile program. Pointer values never
reach the tile program: each becomes (buffer, i64 element offset).

Ops that IREE's CPU code lacks or computes less accurately than Triton (fp8 abs, fp64 library
functions, f32 sin / cos / tan, fp16 / bf16 sums, fp16 dot accumulators, atomics masked off
everywhere) are rewritten on reading: `rewrites`, called from one place per op kind.
"""
from __future__ import annotations

import re
from typing import Optional

from iree.compiler import ir

from . import abi, rewrites, tile as t
from .dot_scaled import DotScaled
from .errors import UnsupportedError, InputError, python_name
from .float_casts import FP8_MAX, FloatCasts
from .locations import library_call, loc_name, sort_call, source_loc
from .pointers import Addr, Ptr, known_divisor, memory_dtype, ptr_pointee, unit_bytes
from .sort import BitonicSort

# arith.cmpi / arith.cmpf predicate enums, as TTIR's generic form prints them (integers).
CMPI_PREDICATES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")
CMPF_PREDICATES = ("false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord",
                   "ueq", "ugt", "uge", "ult", "ule", "une", "uno", "true")

# Elementwise ops the emitter lowers 1:1 (scalar form inside linalg bodies or in the dispatch).
ELEMENTWISE_OPS = frozenset("""
arith.addi arith.subi arith.muli arith.divsi arith.divui arith.remsi arith.remui
arith.ceildivsi arith.floordivsi arith.andi arith.ori arith.xori arith.shli arith.shrsi
arith.shrui arith.maxsi arith.minsi arith.maxui arith.minui arith.addf arith.subf arith.mulf
arith.divf arith.remf arith.negf arith.maximumf arith.minimumf arith.maxnumf arith.minnumf
arith.cmpi arith.cmpf arith.select arith.extsi arith.extui arith.trunci arith.extf
arith.truncf arith.sitofp arith.uitofp arith.fptosi arith.fptoui arith.bitcast
arith.mulsi_extended arith.mului_extended
math.exp math.exp2 math.log math.log2 math.log10 math.log1p math.expm1 math.sqrt math.rsqrt
math.sin math.cos math.tan math.tanh math.sinh math.cosh math.asin math.acos math.atan
math.atan2 math.erf math.absf math.absi math.floor math.ceil math.trunc math.round
math.roundeven math.fma math.powf math.copysign math.cbrt math.ctlz math.cttz math.ctpop
""".split())

# tt.atomic_rmw's atomic_rmw_op enum (FADD is add on floats).
ATOMIC_RMW_OPS = {1: "and", 2: "or", 3: "xor", 4: "add", 5: "add", 6: "max", 7: "min", 8: "umax",
                  9: "umin", 10: "xchg"}

# Largest finite values, smallest normal values and mantissa bits of the fp8 types, and
# tt.fp_to_fp's rounding enum for toward zero.

# TTIR ops that are plain elementwise ops under another name.
RENAMED_OPS = {"tt.precise_sqrt": "math.sqrt", "tt.precise_divf": "arith.divf"}

def _attr_int(op, name: str) -> int:
    return ir.IntegerAttr(op.attributes[name]).value


def _scalar_of_attr(attr, dtype: str):
    if isinstance(attr, (ir.DenseElementsAttr, ir.DenseIntElementsAttr, ir.DenseFPElementsAttr)):
        if not attr.is_splat:
            return None
        attr = attr.get_splat_value()
    if isinstance(attr, ir.BoolAttr):
        return bool(attr.value)
    if isinstance(attr, ir.IntegerAttr):
        v = attr.value
        return bool(v) if dtype == "i1" else v
    if isinstance(attr, ir.FloatAttr):
        return attr.value
    return None


def _inserted_unit_dims(src: tuple[int, ...], dst: tuple[int, ...]) -> Optional[list[int]]:
    """The dims of `dst` that a row-major reshape of `src` to `dst` inserts as size 1, or None
    when the reshape does more than insert unit dims."""
    axes, j = [], 0
    for i, d in enumerate(dst):
        if j < len(src) and d == src[j]:
            j += 1
        elif d == 1:
            axes.append(i)
        else:
            return None
    return axes if j == len(src) else None


class TTIRReader(FloatCasts, BitonicSort, DotScaled):
    def __init__(self, text: str, context: Optional[ir.Context] = None):
        self.text = text
        self.context = context
        self.env: dict[ir.Value, t.Value | Ptr] = {}
        self.kernel_name = "<kernel>"
        self._cfg_path: list = []     # the blocks of the branch path being read
        self.funcs: dict = {}          # sym_name -> tt.func
        self._calls: list[str] = []    # the functions being inlined, outermost first
        self._in_sort_group = False
        self.sort_calls: list[tuple[str, str]] = []   # (tl.sort or tl.topk, the user's line)

    # -- entry -------------------------------------------------------------------------
    def read(self) -> t.Kernel:
        ctx = self.context or ir.Context()
        ctx.allow_unregistered_dialects = True
        with ctx, ir.Location.unknown():
            try:
                module = ir.Module.parse(self.text)
            except ir.MLIRError as e:
                raise InputError(f"TTIR does not parse: {e}") from None
            funcs = [op.operation for op in module.body.operations if op.operation.name == "tt.func"]
            # The kernel is the public function; the others are `noinline` functions it calls.
            kernels = [f for f in funcs if "sym_visibility" not in f.attributes
                       or ir.StringAttr(f.attributes["sym_visibility"]).value == "public"]
            if len(kernels) != 1:
                raise InputError(f"expected one public tt.func in the TTIR module, found {len(kernels)}")
            self.funcs = {ir.StringAttr(f.attributes["sym_name"]).value: f for f in funcs}
            return self._read_func(kernels[0])

    def _read_func(self, func) -> t.Kernel:
        self.kernel_name = ir.StringAttr(func.attributes["sym_name"]).value
        block = func.regions[0].blocks[0]
        params: list[t.Param] = []
        bases: list[t.Param] = []
        body = t.Block()
        self.block = body
        nargs = len(block.arguments)
        arg_attrs = list(ir.ArrayAttr(func.attributes["arg_attrs"])) if "arg_attrs" in func.attributes else []
        for i, arg in enumerate(block.arguments):
            name = loc_name(arg.location) or f"arg{i}"
            pointee = ptr_pointee(arg.type)
            attrs = ir.DictAttr(arg_attrs[i]) if i < len(arg_attrs) else None
            divisibility = ir.IntegerAttr(attrs["tt.divisibility"]).value \
                if attrs is not None and "tt.divisibility" in attrs else 1
            if pointee is not None:
                p = t.Param(i, name, memory_dtype(pointee), True, divisibility=divisibility)
                # The pointer is `base` elements into the buffer the runtime passes, which starts
                # 64-byte aligned: as many elements as the pointer's divisibility allows.
                base = t.Param(nargs + len(bases), abi.base_name(name), "i64", False,
                               divisibility=max(1, min(divisibility, 64) // max(1, t.bitwidth(p.dtype) // 8)))
                base.value = t.Value(t.ScalarType("i64"), None, base.name)
                bases.append(base)
                self.env[arg] = Ptr(p, base.value)
            else:
                dtype = self._dtype(arg.type, func)
                p = t.Param(i, name, dtype, False, divisibility=divisibility)
                p.value = t.Value(t.ScalarType(dtype), None, name)
                self.env[arg] = p.value
            params.append(p)
        self._read_ops(block, body)
        return t.Kernel(self.kernel_name, params, body, source_loc(func.location), bases, self.sort_calls)

    # -- helpers -----------------------------------------------------------------------
    def _unsupported(self, op, what: str = "") -> UnsupportedError:
        name = op.name if hasattr(op, "name") else op.operation.name
        construct = python_name(name)
        if (called := library_call(op.location)) is not None:
            construct = f"{called} ({name})"
        msg = f"{construct} is not supported by triton-iree" + (f": {what}" if what else "")
        return UnsupportedError(msg, kernel=self.kernel_name, loc=source_loc(op.location))

    def _dtype(self, ty: ir.Type, op) -> str:
        s = str(ty)
        if s in t.INT_TYPES or s in t.FLOAT_TYPES:
            return s
        raise self._unsupported(op, f"element type {s}")

    def _type(self, ty: ir.Type, op) -> t.Type:
        if isinstance(ty, ir.RankedTensorType):
            return t.TileType(tuple(ty.shape), self._dtype(ty.element_type, op))
        return t.ScalarType(self._dtype(ty, op))

    def _emit(self, op: t.Op) -> t.Op:
        self.block.add(op)
        return op

    def _emit_value(self, op: t.Op) -> t.Value:
        """Adds a one-result op; its result (how `rewrites` and `libdevice` add ops)."""
        return self._emit(op).result

    def _val(self, v: ir.Value, op) -> t.Value:
        x = self.env[v]
        if isinstance(x, Ptr):
            raise self._unsupported(op, "pointer used as a value")
        if isinstance(x, Addr):
            raise self._addr_misused(op)
        return x

    def _addr_misused(self, op) -> UnsupportedError:
        name = op.name if hasattr(op, "name") else op.operation.name
        return UnsupportedError(f"an integer converted from a pointer (.to(tl.int64) on a pointer) used by "
                                f"{python_name(name)}: triton-iree lets such an integer only have integers added or "
                                "subtracted, be subtracted from another into the same argument, or be converted back "
                                "to a pointer (a pointer is a tensor argument and an offset, not an address)",
                                kernel=self.kernel_name, loc=source_loc(op.location))

    def _get(self, v: ir.Value):
        return self.env[v]

    def _sext64(self, v: t.Value, loc: str) -> t.Value:
        if v.dtype == "i64":
            return v
        return self._emit(t.Elementwise("arith.extsi", [v], t.with_dtype(v.type, "i64"), loc=loc)).result

    # -- walking -----------------------------------------------------------------------
    def _read_ops(self, mblock, tblock: t.Block) -> list:
        """Reads the ops of `mblock` into `tblock`; returns the terminator's operands."""
        saved = self.block
        self.block = tblock
        try:
            ops = [op.operation for op in mblock.operations]
            i = 0
            while i < len(ops):
                op, i = ops[i], i + 1
                name = op.name
                if (not self._in_sort_group and name != "arith.constant" and "/triton/language/" in str(op.location)
                        and (call := sort_call(op.location))):
                    # tl.sort / tl.topk: the ops of one call of Triton's sort_impl, read as a group.
                    group = [op]
                    while i < len(ops) and (ops[i].name == "arith.constant" or
                                            (c := sort_call(ops[i].location)) is not None and c[2] == call[2]):
                        group.append(ops[i])
                        i += 1
                    self._read_sort_group(group, call[:2])
                    continue
                if name in ("tt.return", "scf.yield", "tt.reduce.return", "scf.condition",
                            "tt.scan.return", "tt.map_elementwise.return"):
                    return [self._get(v) for v in op.operands]
                if name == "cf.br":
                    return self._branch(op, op.successors[0], [self._get(v) for v in op.operands], tblock)
                if name == "cf.cond_br":
                    return self._cond_br(op.operation, tblock)
                self._read_op(op, name)
            return []
        finally:
            self.block = saved

    def _read_op(self, op, name: str) -> None:
        loc = source_loc(op.location)
        handler = getattr(self, "_op_" + name.replace(".", "_"), None)
        if handler is not None:
            handler(op, loc)
            return
        if name in ELEMENTWISE_OPS or name in RENAMED_OPS:
            self._elementwise(op, RENAMED_OPS.get(name, name), loc)
            return
        raise self._unsupported(op)

    def _bind(self, op, tv: t.Value | Ptr) -> None:
        self.env[op.results[0]] = tv

    # -- arith / math --------------------------------------------------------------------
    def _elementwise(self, op, opname: str, loc: str) -> None:
        if any(isinstance(self._get(v), Addr) for v in op.operands):
            self._addr_arith(op, opname, loc)
            return
        if opname == "arith.select" and isinstance(self._get(op.operands[1]), Ptr):
            self._select_ptr(op, loc)
            return
        args = [self._val(v, op) for v in op.operands]
        attrs = {}
        if opname == "arith.cmpi":
            attrs["predicate"] = CMPI_PREDICATES[_attr_int(op, "predicate")]
        elif opname == "arith.cmpf":
            attrs["predicate"] = CMPF_PREDICATES[_attr_int(op, "predicate")]
        elif op.operation.name == "tt.precise_divf":
            attrs["precise"] = True     # tl.math.div_rn: correctly rounded on every target
        if len(op.results) != 1:
            raise self._unsupported(op, "multi-result elementwise op")
        ty = self._type(op.results[0].type, op)
        # fp8 abs, fp64 library functions, f32 sin / cos / tan: see `rewrites`.
        if (r := rewrites.elementwise(opname, args, ty, loc, self._emit_value)) is None:
            r = self._emit(t.Elementwise(opname, args, ty, attrs, loc)).result
        self._bind(op, r)

    def _addr_arith(self, op, opname: str, loc: str) -> None:
        """An integer added to or subtracted from the integer of a pointer, or two such subtracted."""
        a, b = (self._get(v) for v in op.operands) if len(op.operands) == 2 else (None, None)
        addr_a, addr_b = isinstance(a, Addr), isinstance(b, Addr)
        if opname == "arith.subi" and addr_a and addr_b and a.buffer is b.buffer:
            self._bind(op, self._emit(t.Elementwise("arith.subi", [a.value, b.value], a.value.type, loc=loc)).result)
            return
        if opname not in ("arith.addi", "arith.subi") or addr_a == addr_b or (opname == "arith.subi" and addr_b):
            raise self._addr_misused(op)
        addr, other = (a, self._val(op.operands[1], op)) if addr_a else (b, self._val(op.operands[0], op))
        value = self._emit(t.Elementwise(opname, [addr.value, other], addr.value.type, loc=loc)).result
        self._bind(op, Addr(addr.buffer, value))

    def _select_ptr(self, op, loc: str) -> None:
        cond = self._val(op.operands[0], op)
        a, b = self._get(op.operands[1]), self._get(op.operands[2])
        if a.buffer is not b.buffer or a.view != b.view:
            raise self._unsupported(op, "select between pointers into different arguments")
        off = t.Elementwise("arith.select", [cond, a.offsets, b.offsets], a.offsets.type, loc=loc)
        self._bind(op, a.moved(self._emit(off).result))

    def _op_tt_mulhiui(self, op, loc: str) -> None:
        a, b = (self._val(v, op) for v in op.operands)
        if a.dtype != "i32":
            raise self._unsupported(op, f"umulhi of {a.dtype} (only i32)")
        wide = t.with_dtype(a.type, "i64")
        ea, eb = (self._emit(t.Elementwise("arith.extui", [x], wide, loc=loc)).result for x in (a, b))
        prod = self._emit(t.Elementwise("arith.muli", [ea, eb], wide, loc=loc)).result
        c32 = self._emit(t.Constant(32, wide, loc)).result
        hi = self._emit(t.Elementwise("arith.shrui", [prod, c32], wide, loc=loc)).result
        self._bind(op, self._emit(t.Elementwise("arith.trunci", [hi], a.type, loc=loc)).result)

    def _op_tt_clampf(self, op, loc: str) -> None:
        x, lo, hi = (self._val(v, op) for v in op.operands)
        # propagateNan: 0 = NONE (a NaN x clamps to lo, as on GPUs), 0xFFFF = ALL.
        nan = _attr_int(op, "propagateNan") != 0
        mx, mn = ("arith.maximumf", "arith.minimumf") if nan else ("arith.maxnumf", "arith.minnumf")
        y = self._emit(t.Elementwise(mx, [x, lo], x.type, loc=loc)).result
        self._bind(op, self._emit(t.Elementwise(mn, [y, hi], x.type, loc=loc)).result)

    def _op_tt_extern_elementwise(self, op, loc: str) -> None:
        from . import libdevice
        symbol = ir.StringAttr(op.attributes["symbol"]).value
        if ir.StringAttr(op.attributes["libname"]).value != libdevice.LIBRARY:
            raise self._unsupported(op, f"external function '{symbol}'")
        args = [self._val(v, op) for v in op.operands]
        ty = self._type(op.results[0].type, op)
        result = libdevice.expand(symbol, args, ty, loc, self._emit_value)
        if result is None:
            types = ", ".join(a.dtype for a in args)
            raise UnsupportedError(f"tl.extra.libdevice.{symbol} is not supported by triton-iree for "
                                   f"arguments of type {types}", kernel=self.kernel_name, loc=loc)
        self._bind(op, result)

    def _op_arith_constant(self, op, loc: str) -> None:
        ty = self._type(op.results[0].type, op)
        value = _scalar_of_attr(op.attributes["value"], ty.dtype)
        if value is None:
            raise self._unsupported(op, "non-splat dense constant")
        self._bind(op, self._emit(t.Constant(value, ty, loc)).result)

    def _op_ub_poison(self, op, loc: str) -> None:
        # An undefined value (Triton's placeholder for a loop variable read after its loop):
        # any value is a correct one; zero keeps the result deterministic.
        self._bind(op, self._emit(t.Constant(0, self._type(op.results[0].type, op), loc)).result)

    # -- program ids and ranges -------------------------------------------------------------
    def _op_tt_get_program_id(self, op, loc: str) -> None:
        self._bind(op, self._emit(t.ProgramId(_attr_int(op, "axis"), loc)).result)

    def _op_tt_get_num_programs(self, op, loc: str) -> None:
        self._bind(op, self._emit(t.NumPrograms(_attr_int(op, "axis"), loc)).result)

    def _op_tt_make_range(self, op, loc: str) -> None:
        start, end = _attr_int(op, "start"), _attr_int(op, "end")
        self._bind(op, self._emit(t.MakeRange(start, end, loc)).result)

    # -- shape ops (on values and on pointers alike) -------------------------------------------
    def _shape_op(self, op, loc: str, make) -> None:
        src = self._get(op.operands[0])
        rty = op.results[0].type
        if isinstance(src, Ptr):
            shape = tuple(ir.RankedTensorType(rty).shape)
            new = make(src.offsets, t.TileType(shape, "i64"))
            self._bind(op, src.moved(self._emit(new).result))
        elif isinstance(src, Addr):
            self._bind(op, Addr(src.buffer, self._emit(make(src.value, self._type(rty, op))).result))
        else:
            self._bind(op, self._emit(make(src, self._type(rty, op))).result)

    def _op_tt_splat(self, op, loc: str) -> None:
        self._shape_op(op, loc, lambda v, ty: t.Splat(v, ty, loc))

    def _op_tt_broadcast(self, op, loc: str) -> None:
        self._shape_op(op, loc, lambda v, ty: t.Broadcast(v, ty, loc))

    def _op_tt_expand_dims(self, op, loc: str) -> None:
        axis = _attr_int(op, "axis")
        self._shape_op(op, loc, lambda v, ty: t.ExpandDims(v, axis, ty, loc))

    def _op_tt_reshape(self, op, loc: str) -> None:
        src_shape = tuple(ir.RankedTensorType(op.operands[0].type).shape)
        if src_shape == tuple(ir.RankedTensorType(op.results[0].type).shape):
            # tl.sum / tl.max without an axis reshape a 1-D tile to its own shape: the tile
            # itself. (As an op it made the emitter compute the reduced values as a tile of
            # their own, which IREE fuses into the reduction, dropping its configuration.)
            self._bind(op, self._get(op.operands[0]))
            return
        axes = _inserted_unit_dims(src_shape, tuple(ir.RankedTensorType(op.results[0].type).shape))
        if axes:
            # Triton >= 3.9 rewrites descriptor accesses with reshapes that only add unit dims:
            # expand_dims, which the pointer and mask analyses follow.
            def expand(v: t.Value, ty: t.TileType) -> t.Op:
                shape = list(v.shape)
                for axis in axes[:-1]:
                    shape.insert(axis, 1)
                    v = self._emit(t.ExpandDims(v, axis, t.TileType(tuple(shape), ty.dtype), loc)).result
                return t.ExpandDims(v, axes[-1], ty, loc)
            self._shape_op(op, loc, expand)
            return
        # allow_reorder (a unit attribute) lets the compiler pick any element order; row-major,
        # which Triton's interpreter uses too, is one valid choice.
        self._shape_op(op, loc, lambda v, ty: t.Reshape(v, ty, loc))

    def _op_tt_unsplat(self, op, loc: str) -> None:
        src = self._get(op.operands[0])
        if isinstance(src, Ptr):
            self._bind(op, src.moved(self._emit(t.Unsplat(src.offsets, t.ScalarType("i64"), loc)).result))
        elif isinstance(src, Addr):
            self._bind(op, Addr(src.buffer, self._emit(t.Unsplat(src.value, t.ScalarType("i64"), loc)).result))
        else:
            self._bind(op, self._emit(t.Unsplat(src, self._type(op.results[0].type, op), loc)).result)

    def _op_tt_trans(self, op, loc: str) -> None:
        order = tuple(ir.DenseI32ArrayAttr(op.attributes["order"]))
        self._shape_op(op, loc, lambda v, ty: t.Trans(v, order, ty, loc))

    def _two_operand_shape_op(self, op, loc: str, make) -> None:
        """tt.join / tt.cat: of two values, or of two pointers into one argument."""
        a, b = (self._get(v) for v in op.operands)
        rty = ir.RankedTensorType(op.results[0].type)
        if isinstance(a, Addr) or isinstance(b, Addr):
            raise self._addr_misused(op)
        if isinstance(a, Ptr) or isinstance(b, Ptr):
            if not (isinstance(a, Ptr) and isinstance(b, Ptr) and a.buffer is b.buffer and a.view == b.view):
                raise self._unsupported(op, "pointers into different arguments")
            new = make(a.offsets, b.offsets, t.TileType(tuple(rty.shape), "i64"))
            self._bind(op, a.moved(self._emit(new).result))
        else:
            self._bind(op, self._emit(make(a, b, self._type(rty, op))).result)

    def _op_tt_join(self, op, loc: str) -> None:
        self._two_operand_shape_op(op, loc, lambda a, b, ty: t.Join(a, b, ty, loc))

    def _op_tt_cat(self, op, loc: str) -> None:
        self._two_operand_shape_op(op, loc, lambda a, b, ty: t.Cat(a, b, ty, loc))

    def _op_tt_split(self, op, loc: str) -> None:
        src = self._get(op.operands[0])
        if isinstance(src, Ptr):
            shape = tuple(ir.RankedTensorType(op.results[0].type).shape)
            split = self._emit(t.Split(src.offsets, [t.TileType(shape, "i64")] * 2, loc))
            for r, tv in zip(op.results, split.results):
                self.env[r] = src.moved(tv)
            return
        if isinstance(src, Addr):
            raise self._addr_misused(op)
        split = self._emit(t.Split(src, [self._type(r.type, op) for r in op.results], loc))
        for r, tv in zip(op.results, split.results):
            self.env[r] = tv

    # -- pointers --------------------------------------------------------------------------
    def _op_tt_addptr(self, op, loc: str) -> None:
        base = self._get(op.operands[0])
        if not isinstance(base, Ptr):
            raise self._unsupported(op, "base is not a pointer")
        off = self._sext64(self._val(op.operands[1], op), loc)
        if base.wide != 1:   # offsets count buffer elements
            off = self._emit(t.Elementwise("arith.muli", [off, self._emit(t.Constant(base.wide, off.type, loc)).result],
                                           off.type, loc=loc)).result
        new = t.Elementwise("arith.addi", [base.offsets, off], off.type, loc=loc)
        self._bind(op, base.moved(self._emit(new).result))

    def _op_tt_load(self, op, loc: str) -> None:
        seg = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
        operands = list(op.operands)
        ptr = self._get(operands[0])
        if not isinstance(ptr, Ptr):
            raise self._unsupported(op, "load from a block pointer or descriptor")
        mask = self._val(operands[1], op) if seg[1] else None
        other = self._val(operands[1 + seg[1]], op) if seg[2] else None
        if "boundaryCheck" in op.attributes and len(ir.DenseI32ArrayAttr(op.attributes["boundaryCheck"])):
            raise self._unsupported(op, "boundary-checked load")
        ty = self._type(op.results[0].type, op)
        if ptr.scale != 1:
            self._bind(op, self._narrow_load(ptr, mask, other, ty, loc))
            return
        if ptr.wide != 1:
            self._bind(op, self._wide_load(ptr, mask, other, ty, loc))
            return
        if ptr.view is None:
            self._bind(op, self._emit(t.Load(ptr.buffer, ptr.offsets, mask, other, ty, loc)).result)
            return
        # A bitcast pointer: load the buffer's elements and reinterpret them.
        raw_ty = t.with_dtype(ty, ptr.buffer.dtype)
        if other is not None:
            other = self._bitcast(other, ptr.buffer.dtype, loc)
        raw = self._emit(t.Load(ptr.buffer, ptr.offsets, mask, other, raw_ty, loc)).result
        self._bind(op, self._bitcast(raw, ty.dtype, loc))

    def _bitcast(self, v: t.Value, dtype: str, loc: str) -> t.Value:
        if v.dtype == dtype:
            return v
        return self._emit(t.Elementwise("arith.bitcast", [v], t.with_dtype(v.type, dtype), loc=loc)).result

    def _op_tt_bitcast(self, op, loc: str) -> None:
        src = self._get(op.operands[0])
        rty = op.results[0].type
        if not isinstance(src, Ptr):
            self._elementwise(op, "arith.bitcast", loc)
            return
        elt = rty.element_type if isinstance(rty, ir.RankedTensorType) else rty
        pointee = ptr_pointee(elt)
        if pointee is None:
            raise self._unsupported(op, "bitcast of a pointer to a non-pointer")
        dtype = memory_dtype(pointee)
        if t.bitwidth(dtype) == t.bitwidth(src.dtype):
            self._bind(op, Ptr(src.buffer, src.offsets, None if dtype == src.buffer.dtype else dtype, src.scale,
                               src.wide))
            return
        if src.scale != 1:
            # Back to offsets in buffer elements, if they are whole ones (else misaligned).
            if known_divisor(src.offsets) % src.scale:
                raise UnsupportedError(f"a pointer to {src.dtype}, cast from a pointer to the wider "
                                       f"{src.buffer.dtype}, cast again to a pointer to {dtype} "
                                       f"(.to(tl.pointer_type(...))) is supported by triton-iree only where its "
                                       f"offset is known to be a multiple of {src.scale} (a whole "
                                       f"{src.buffer.dtype}): a misaligned pointer", kernel=self.kernel_name, loc=loc)
            shift = self._emit(t.Constant(src.scale.bit_length() - 1, src.offsets.type, loc)).result
            src = Ptr(src.buffer, self._emit(t.Elementwise("arith.shrsi", [src.offsets, shift], src.offsets.type,
                                                           loc=loc)).result)
            if dtype == src.buffer.dtype:
                self._bind(op, src)
                return
        width, buffer_width = t.bitwidth(dtype), t.bitwidth(src.buffer.dtype)
        if width >= buffer_width:
            # Offsets count buffer elements as before; `wide` of them in each view element.
            self._bind(op, Ptr(src.buffer, src.offsets, None if dtype == src.buffer.dtype else dtype,
                               wide=width // buffer_width))
            return
        # A narrower view: offsets count its elements, `scale` in each buffer element.
        scale = buffer_width // width
        c = self._emit(t.Constant(scale, src.offsets.type, loc)).result
        offs = self._emit(t.Elementwise("arith.muli", [src.offsets, c], src.offsets.type, loc=loc)).result
        self._bind(op, Ptr(src.buffer, offs, dtype, scale))

    def _narrow_load(self, ptr: Ptr, mask, other, ty: t.Type, loc: str) -> t.Value:
        """A load through a narrower view: the buffer element holding each view element, shifted
        (little-endian) and truncated to it. Masked-off elements are `other`."""
        def ew(name, args, dtype):
            return self._emit(t.Elementwise(name, args, t.with_dtype(args[0].type, dtype), loc=loc)).result

        def const(value):
            return self._emit(t.Constant(value, ptr.offsets.type, loc)).result

        wide, width = f"i{t.bitwidth(ptr.buffer.dtype)}", t.bitwidth(ptr.dtype)
        elem = ew("arith.shrsi", [ptr.offsets, const(ptr.scale.bit_length() - 1)], "i64")
        shift = ew("arith.muli", [ew("arith.andi", [ptr.offsets, const(ptr.scale - 1)], "i64"), const(width)], "i64")
        raw = self._emit(t.Load(ptr.buffer, elem, mask, None, t.with_dtype(ty, ptr.buffer.dtype), loc)).result
        if wide != "i64":
            shift = ew("arith.trunci", [shift], wide)
        part = ew("arith.trunci", [ew("arith.shrui", [self._bitcast(raw, wide, loc), shift], wide)], f"i{width}")
        value = self._bitcast(part, ty.dtype, loc)
        if other is None or mask is None:
            return value
        return self._emit(t.Elementwise("arith.select", [mask, value, other], ty, loc=loc)).result

    def _wide_load(self, ptr: Ptr, mask, other, ty: t.Type, loc: str) -> t.Value:
        """A load through a wider view: its `wide` buffer elements, joined (little-endian).
        Masked-off elements are `other`."""
        narrow, wide = f"i{t.bitwidth(ptr.buffer.dtype)}", f"i{t.bitwidth(ptr.dtype)}"
        value = None
        for j in range(ptr.wide):
            raw = self._emit(t.Load(ptr.buffer, self._part_offsets(ptr, j, loc), mask, None,
                                    t.with_dtype(ty, ptr.buffer.dtype), loc)).result
            part = self._emit(t.Elementwise("arith.extui", [self._bitcast(raw, narrow, loc)], t.with_dtype(ty, wide),
                                            loc=loc)).result
            if j:
                shift = self._emit(t.Constant(j * t.bitwidth(narrow), part.type, loc)).result
                part = self._emit(t.Elementwise("arith.shli", [part, shift], part.type, loc=loc)).result
                part = self._emit(t.Elementwise("arith.ori", [value, part], part.type, loc=loc)).result
            value = part
        value = self._bitcast(value, ty.dtype, loc)
        if other is None or mask is None:
            return value
        return self._emit(t.Elementwise("arith.select", [mask, value, other], ty, loc=loc)).result

    def _wide_store(self, ptr: Ptr, value: t.Value, mask, loc: str) -> None:
        """A store through a wider view: each of its `wide` buffer elements (little-endian)."""
        narrow, wide = f"i{t.bitwidth(ptr.buffer.dtype)}", f"i{t.bitwidth(ptr.dtype)}"
        bits = self._bitcast(value, wide, loc)
        for j in range(ptr.wide):
            part = bits
            if j:
                shift = self._emit(t.Constant(j * t.bitwidth(narrow), bits.type, loc)).result
                part = self._emit(t.Elementwise("arith.shrui", [bits, shift], bits.type, loc=loc)).result
            part = self._emit(t.Elementwise("arith.trunci", [part], t.with_dtype(bits.type, narrow), loc=loc)).result
            self._emit(t.Store(ptr.buffer, self._part_offsets(ptr, j, loc), self._bitcast(part, ptr.buffer.dtype, loc),
                               mask, loc))

    def _part_offsets(self, ptr: Ptr, j: int, loc: str) -> t.Value:
        """The offsets of buffer element `j` of each element of a wider view."""
        if not j:
            return ptr.offsets
        c = self._emit(t.Constant(j, ptr.offsets.type, loc)).result
        return self._emit(t.Elementwise("arith.addi", [ptr.offsets, c], ptr.offsets.type, loc=loc)).result

    def _op_tt_ptr_to_int(self, op, loc: str) -> None:
        """The pointer's byte offset in its argument, kept with the argument (`Addr`)."""
        src = self._get(op.operands[0])
        if not isinstance(src, Ptr):
            raise self._unsupported(op, "a block pointer or descriptor converted to an integer")
        unit = self._emit(t.Constant(unit_bytes(src), src.offsets.type, loc)).result
        value = self._emit(t.Elementwise("arith.muli", [src.offsets, unit], src.offsets.type, loc=loc)).result
        self._bind(op, Addr(src.buffer, value))

    def _op_tt_int_to_ptr(self, op, loc: str) -> None:
        """An integer computed from a pointer, back to a pointer into the same argument, where
        its byte offset is known to be a multiple of the element size (a misaligned pointer
        faults on GPUs)."""
        src = self._get(op.operands[0])
        if not isinstance(src, Addr):
            raise UnsupportedError("an integer converted to a pointer (.to(tl.pointer_type(...)) on an integer) is "
                                   "supported by triton-iree only for an integer computed from a pointer argument "
                                   "(.to(tl.int64) on it, plus or minus integers): pointers are arguments and "
                                   "offsets, not addresses", kernel=self.kernel_name, loc=loc)
        rty = op.results[0].type
        dtype = memory_dtype(ptr_pointee(rty.element_type if isinstance(rty, ir.RankedTensorType) else rty))
        width, buffer_width = t.bitwidth(dtype) // 8, t.bitwidth(src.buffer.dtype) // 8
        unit = min(width, buffer_width)
        if known_divisor(src.value) % unit:
            raise UnsupportedError(f"an integer converted to a pointer to {dtype} (.to(tl.pointer_type(...))) is "
                                   f"supported by triton-iree only where it is known to be the integer of a pointer "
                                   f"plus or minus multiples of {unit} bytes: a misaligned pointer",
                                   kernel=self.kernel_name, loc=loc)
        offsets = src.value
        if unit > 1:
            shift = self._emit(t.Constant(unit.bit_length() - 1, src.value.type, loc)).result
            offsets = self._emit(t.Elementwise("arith.shrsi", [src.value, shift], src.value.type, loc=loc)).result
        view = None if dtype == src.buffer.dtype else dtype
        self._bind(op, Ptr(src.buffer, offsets, view, scale=max(1, buffer_width // width),
                           wide=max(1, width // buffer_width)))

    def _op_tt_atomic_rmw(self, op, loc: str) -> None:
        kind = ATOMIC_RMW_OPS[_attr_int(op, "atomic_rmw_op")]
        ptr, value, *mask = (self._get(v) for v in op.operands)
        if isinstance(value, Addr):
            raise self._addr_misused(op)
        self._atomic(op, kind, ptr, value, mask[0] if mask else None, None, loc)

    def _op_tt_atomic_cas(self, op, loc: str) -> None:
        ptr, cmp, value = (self._get(v) for v in op.operands)
        self._atomic(op, "cas", ptr, value, None, cmp, loc)

    def _atomic(self, op, kind: str, ptr, value, mask, cmp, loc: str) -> None:
        if not isinstance(ptr, Ptr):
            raise self._unsupported(op, "atomic on a block pointer or descriptor")
        if ptr.scale != 1 or ptr.wide != 1:
            raise self._unsupported(op, "atomic through a pointer cast to an element type of another size")
        if ptr.dtype not in ("i32", "i64", "f16", "bf16", "f32", "f64"):
            raise UnsupportedError(f"tl.atomic_{kind} on {ptr.dtype} is not supported by triton-iree",
                                   kernel=self.kernel_name, loc=loc)
        # A mask folded to false: see `rewrites`.
        if (r := rewrites.atomic(value, mask, loc, self._emit_value)) is None:
            r = self._emit(t.Atomic(kind, ptr.buffer, ptr.offsets, value, mask, cmp, loc)).result
        self._bind(op, r)

    def _op_tt_store(self, op, loc: str) -> None:
        operands = list(op.operands)
        ptr = self._get(operands[0])
        if not isinstance(ptr, Ptr):
            raise self._unsupported(op, "store to a block pointer or descriptor")
        if ptr.scale != 1:
            raise UnsupportedError(f"a store through a pointer cast to the narrower {ptr.dtype} "
                                   f"(.to(tl.pointer_type(...))) is not supported by triton-iree",
                                   kernel=self.kernel_name, loc=loc)
        value = self._val(operands[1], op)
        mask = self._val(operands[2], op) if len(operands) > 2 else None
        if "boundaryCheck" in op.attributes and len(ir.DenseI32ArrayAttr(op.attributes["boundaryCheck"])):
            raise self._unsupported(op, "boundary-checked store")
        if value.dtype == "i1":
            value = self._emit(t.Elementwise("arith.extui", [value], t.with_dtype(value.type, "i8"),
                                             loc=loc)).result
        if ptr.wide != 1:
            self._wide_store(ptr, value, mask, loc)
            return
        self._emit(t.Store(ptr.buffer, ptr.offsets, self._bitcast(value, ptr.buffer.dtype, loc), mask, loc))

    def _op_tt_assert(self, op, loc: str) -> None:
        # Triton emits tt.assert only under its debug switch; `checks` turns it into a check.
        cond = self._val(op.operands[0], op)
        self._emit(t.Assert(cond, ir.StringAttr(op.attributes["message"]).value, loc))

    def _op_tt_print(self, op, loc: str) -> None:
        values = [self._val(v, op) for v in op.operands]
        signed = [bool(s) for s in ir.DenseI32ArrayAttr(op.attributes["isSigned"])]
        self._emit(t.Print(values, ir.StringAttr(op.attributes["prefix"]).value,
                           ir.BoolAttr(op.attributes["hex"]).value, signed, loc))

    # -- compute -----------------------------------------------------------------------------
    def _op_tt_reduce(self, op, loc: str) -> None:
        srcs = [self._val(v, op) for v in op.operands]
        axis = _attr_int(op, "axis")
        combiner = self._scalar_region(op, op.regions[0].blocks[0])
        types = [self._type(r.type, op) for r in op.results]
        # fp16 / bf16 sums in f32: see `rewrites`.
        if (results := rewrites.reduce(srcs, axis, combiner, types, loc, self._emit_value)) is None:
            results = self._emit(t.Reduce(srcs, axis, combiner, types, loc)).results
        for r, tv in zip(op.results, results):
            self.env[r] = tv

    def _op_tt_scan(self, op, loc: str) -> None:
        srcs = [self._val(v, op) for v in op.operands]
        combiner = self._scalar_region(op, op.regions[0].blocks[0])
        reverse = ir.BoolAttr(op.attributes["reverse"]).value if "reverse" in op.attributes else False
        scan = self._emit(t.Scan(srcs, _attr_int(op, "axis"), reverse, combiner, loc))
        for r, tv in zip(op.results, scan.results):
            self.env[r] = tv

    def _op_tt_map_elementwise(self, op, loc: str) -> None:
        args = [self._val(v, op) for v in op.operands]
        pack = _attr_int(op, "pack")
        if pack > 1 and (not args[0].is_tile or args[0].type.numel % pack):
            # (Triton's verifier takes only powers of two.)
            raise UnsupportedError(f"tl.map_elementwise with pack={pack} over {args[0].type.mlir()}: the pack "
                                   "must divide the number of elements",
                                   kernel=self.kernel_name, loc=loc)
        body = self._scalar_region(op, op.regions[0].blocks[0])
        types = [self._type(r.type, op) for r in op.results]
        results = rewrites.map_elementwise(args, body, types, pack, loc, self._emit)
        for r, tv in zip(op.results, results):
            self.env[r] = tv

    def _op_tt_gather(self, op, loc: str) -> None:
        src, index = (self._val(v, op) for v in op.operands)
        ty = self._type(op.results[0].type, op)
        self._bind(op, self._emit(t.Gather(src, index, _attr_int(op, "axis"), ty, loc)).result)

    def _op_tt_histogram(self, op, loc: str) -> None:
        src = self._val(op.operands[0], op)
        mask = self._val(op.operands[1], op) if len(op.operands) > 1 else None
        ty = self._type(op.results[0].type, op)
        self._bind(op, self._emit(t.Histogram(src, mask, ty, loc)).result)

    def _scalar_region(self, op, mblock) -> t.Block:
        blk = t.Block()
        for a in mblock.arguments:
            v = t.Value(self._type(a.type, op), blk)
            blk.args.append(v)
            self.env[a] = v
        yields = self._read_ops(mblock, blk)
        for y in yields:
            if isinstance(y, Ptr):
                raise self._unsupported(op, "pointer yielded from a combiner")
        blk.yields = yields
        return blk

    def _op_gpu_barrier(self, op, loc: str) -> None:
        """tl.debug_barrier: synchronizes the threads of one program. A program here runs its ops
        in order, and its loads and stores keep program order (`memory_order`): dropped."""

    _op_ttg_barrier = _op_gpu_barrier   # the same, as Triton 3.9 writes it

    def _op_llvm_intr_assume(self, op, loc: str) -> None:
        """tl.assume: a hint for the optimizer; dropped."""

    def _op_tt_dot(self, op, loc: str) -> None:
        a, b, c = (self._val(v, op) for v in op.operands)
        # fp8 operands are upcast to f32 (exact; the one conversion IREE's CPU code has for fp8).
        a, b = (self._float_cast(x, "f32", loc) if x.dtype in FP8_MAX else x for x in (a, b))
        # An fp16 accumulator in f32: see `rewrites`.
        if (r := rewrites.dot(a, b, c, loc, self._emit_value)) is None:
            r = self._emit(t.Dot(a, b, c, loc)).result
        self._bind(op, r)

    # -- control flow ------------------------------------------------------------------------
    def _carried(self, op, inits: list) -> tuple[list[t.Value], list[Optional[Ptr]]]:
        """Pointer inits become their offsets; remembers which slots carry pointers."""
        vals, ptrs = [], []
        for x in inits:
            if isinstance(x, Addr):
                raise self._addr_misused(op)
            if isinstance(x, Ptr):
                vals.append(x.offsets)
                ptrs.append(x)
            else:
                vals.append(x)
                ptrs.append(None)
        return vals, ptrs

    def _yielded(self, op, yields: list, bufs: list) -> list[t.Value]:
        out = []
        for y, buf in zip(yields, bufs):
            if isinstance(y, Addr):
                raise self._addr_misused(op)
            if isinstance(y, Ptr):
                if buf is None or y.buffer is not buf.buffer or y.view != buf.view:
                    raise self._unsupported(op, "loop-carried pointer changes its base argument")
                out.append(y.offsets)
            else:
                if buf is not None:
                    raise self._unsupported(op, "loop-carried value mixes pointers and integers")
                out.append(y)
        return out

    def _op_scf_for(self, op, loc: str) -> None:
        operands = list(op.operands)
        lb, ub, step = (self._val(v, op) for v in operands[:3])
        if isinstance(step.owner, t.Constant) and step.owner.value <= 0:
            raise self._unsupported(op, f"a step of {step.owner.value} (the step must be positive)")
        inits, bufs = self._carried(op, [self._get(v) for v in operands[3:]])
        mblock = op.regions[0].blocks[0]
        body = t.Block()
        margs = list(mblock.arguments)
        iv = t.Value(lb.type, body, "iv")
        body.args.append(iv)
        self.env[margs[0]] = iv
        for a, init, buf in zip(margs[1:], inits, bufs):
            v = t.Value(init.type, body, "it")
            body.args.append(v)
            self.env[a] = buf.moved(v) if buf is not None else v
        body.yields = self._yielded(op, self._read_ops(mblock, body), bufs)
        for y, init in zip(body.yields, inits):
            if y.type != init.type:
                raise self._unsupported(op, "loop-carried value changes type")
        f = self._emit(t.For(lb, ub, step, inits, body, loc))
        for r, tv, buf in zip(op.results, f.results, bufs):
            self.env[r] = buf.moved(tv) if buf is not None else tv

    def _op_scf_while(self, op, loc: str) -> None:
        inits, bufs = self._carried(op, [self._get(v) for v in op.operands])
        before, after = t.Block(), t.Block()
        for a, init, buf in zip(op.regions[0].blocks[0].arguments, inits, bufs):
            v = t.Value(init.type, before, "it")
            before.args.append(v)
            self.env[a] = buf.moved(v) if buf is not None else v
        cond, *forwarded = self._read_ops(op.regions[0].blocks[0], before)
        fwd, fwd_bufs = self._carried(op, forwarded)
        before.yields = [cond, *fwd]
        for a, f, buf in zip(op.regions[1].blocks[0].arguments, fwd, fwd_bufs):
            v = t.Value(f.type, after, "it")
            after.args.append(v)
            self.env[a] = buf.moved(v) if buf is not None else v
        after.yields = self._yielded(op, self._read_ops(op.regions[1].blocks[0], after), bufs)
        if any(y.type != init.type for y, init in zip(after.yields, inits)):
            raise self._unsupported(op, "loop-carried value changes type")
        w = self._emit(t.While(inits, before, after, loc))
        for r, tv, buf in zip(op.results, w.results, fwd_bufs):
            self.env[r] = buf.moved(tv) if buf is not None else tv

    def _op_scf_if(self, op, loc: str) -> None:
        cond = self._val(op.operands[0], op)
        then_b, else_b = t.Block(), t.Block()
        then_y = self._read_ops(op.regions[0].blocks[0], then_b)
        else_y = self._read_ops(op.regions[1].blocks[0], else_b) if len(op.regions[1].blocks) else []
        if len(then_y) != len(op.results) or len(else_y) != len(op.results):
            raise self._unsupported(op, "scf.if without matching yields")
        for r, x in zip(op.results, self._if(op, cond, then_b, then_y, else_b, else_y, loc)):
            self.env[r] = x

    def _if(self, op, cond: t.Value, then_b: t.Block, then_y: list, else_b: t.Block, else_y: list,
            loc: str) -> list:
        """Emits an If of the two read branches; returns its results (pointers rebuilt)."""
        tv, bufs = self._carried(op, then_y)
        ev = self._yielded(op, else_y, bufs)
        then_b.yields, else_b.yields = tv, ev
        types = [v.type for v in tv]
        for a, b in zip(tv, ev):
            if a.type != b.type:
                raise self._unsupported(op, "branches yield different types")
        iff = self._emit(t.If(cond, then_b, else_b, types, loc))
        return [buf.moved(v) if buf is not None else v for v, buf in zip(iff.results, bufs)]

    # -- calls of `noinline` functions -----------------------------------------------------------
    def _op_tt_call(self, op, loc: str) -> None:
        """Inlines the callee: its body is read at the call site, its arguments bound to the
        call's operands (pointers included)."""
        callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        if callee in self._calls:
            m = re.search(r"([A-Za-z_]\w*?)__[^.]*$", callee)
            raise UnsupportedError(f"recursive call of the @triton.jit function "
                                   f"'{m.group(1) if m else callee}'", kernel=self.kernel_name, loc=loc)
        block = self.funcs[callee].regions[0].blocks[0]
        for a, v in zip(block.arguments, op.operands):
            self.env[a] = self._get(v)
        self._calls.append(callee)
        try:
            results = self._read_ops(block, self.block)
        finally:
            self._calls.pop()
        for r, x in zip(op.results, results):
            self.env[r] = x

    # -- branches (cf.br, cf.cond_br: an early `return` inside an `if`) -----------------------
    def _branch(self, op, successor, args: list, tblock: t.Block) -> list:
        """Reads the block a branch jumps to, its arguments bound to `args`, into `tblock`;
        returns what it returns. A block that several paths reach (the code after an `if` one of
        whose branches returns) is read once on each path."""
        if any(successor == b for b in self._cfg_path):
            raise self._unsupported(op, "branches that form a loop")
        for a, v in zip(successor.arguments, args):
            self.env[a] = v
        self._cfg_path.append(successor)
        try:
            return self._read_ops(successor, tblock)
        finally:
            self._cfg_path.pop()

    def _cond_br(self, op, tblock: t.Block) -> list:
        """cf.cond_br as an If whose branches run to the function's return."""
        ntrue = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))[1]
        args = [self._get(v) for v in op.operands]
        then_b, else_b = t.Block(), t.Block()
        then_y = self._branch(op, op.successors[0], args[1:1 + ntrue], then_b)
        else_y = self._branch(op, op.successors[1], args[1 + ntrue:], else_b)
        return self._if(op, self._val(op.operands[0], op), then_b, then_y, else_b, else_y,
                        source_loc(op.location))


def read_ttir(text: str) -> t.Kernel:
    """Parses generic-form TTIR text into a tile program."""
    return TTIRReader(text).read()
