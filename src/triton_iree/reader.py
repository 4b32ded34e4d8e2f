"""Reader: TTIR (generic MLIR text) into the tile program.

TTIR is parsed with IREE's MLIR Python bindings, with unregistered dialects allowed: `tt.*`
ops arrive as unregistered ops, `!tt.ptr<T>` as an opaque type, and arith/math/scf ops fully
typed. The reader walks the kernel once and builds the tile program. Pointer values never
reach the tile program: each becomes (buffer, i64 element offset).

Ops that IREE's CPU code lacks or computes less accurately than Triton (fp8 abs, fp64 library
functions, f32 sin / cos / tan, fp16 / bf16 sums, fp16 dot accumulators, atomics masked off
everywhere) are rewritten on reading: `rewrites`, called from one place per op kind.

The reader is one class, `TTIRReader`: here the walk, elementwise ops, program ids and debugging
ops; mixed in, one module per op family: `reader_memory` (pointers, loads, stores, atomics),
`reader_shapes`, `reader_compute` (reductions, scans, gathers, dots), `reader_control` (loops, ifs,
calls, branches), `float_casts`, `sort` (tl.sort, tl.topk) and `dot_scaled`; TTIR's enums are in `ttir`.
"""
from __future__ import annotations

from typing import Optional

from iree.compiler import ir

from . import abi, rewrites, tile as t
from .dot_scaled import DotScaled
from .errors import UnsupportedError, InputError, python_name
from .float_casts import FloatCasts
from .locations import library_call, loc_name, sort_call, source_loc
from .pointers import Addr, Ptr, memory_dtype, ptr_pointee
from .reader_compute import ComputeOps
from .reader_control import ControlOps
from .reader_memory import MemoryOps
from .reader_shapes import ShapeOps
from .sort import BitonicSort
from .ttir import CMPF_PREDICATES, CMPI_PREDICATES, ELEMENTWISE_OPS, RENAMED_OPS, _attr_int, _scalar_of_attr


class TTIRReader(MemoryOps, ShapeOps, ComputeOps, ControlOps, FloatCasts, BitonicSort, DotScaled):
    def __init__(self, text: str, context: Optional[ir.Context] = None, sort_loops: bool = False):
        self.text = text
        self.context = context
        self.sort_loops = sort_loops   # see `BitonicSort._bitonic`
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

    # -- debugging ops and hints --------------------------------------------------------------
    def _op_tt_assert(self, op, loc: str) -> None:
        # Triton emits tt.assert only under its debug switch; `checks` turns it into a check.
        cond = self._val(op.operands[0], op)
        self._emit(t.Assert(cond, ir.StringAttr(op.attributes["message"]).value, loc))

    def _op_tt_print(self, op, loc: str) -> None:
        values = [self._val(v, op) for v in op.operands]
        signed = [bool(s) for s in ir.DenseI32ArrayAttr(op.attributes["isSigned"])]
        self._emit(t.Print(values, ir.StringAttr(op.attributes["prefix"]).value,
                           ir.BoolAttr(op.attributes["hex"]).value, signed, loc))

    def _op_gpu_barrier(self, op, loc: str) -> None:
        """tl.debug_barrier: synchronizes the threads of one program. A program here runs its ops
        in order, and its loads and stores keep program order (`memory_order`): dropped."""

    _op_ttg_barrier = _op_gpu_barrier   # the same, as Triton 3.9 writes it

    def _op_llvm_intr_assume(self, op, loc: str) -> None:
        """tl.assume: a hint for the optimizer; dropped."""


def read_ttir(text: str, sort_loops: bool = False) -> t.Kernel:
    """Parses generic-form TTIR text into a tile program. `sort_loops`: large sorting networks
    run each merge as a loop (`BitonicSort._bitonic`), for targets that keep each gathered
    tile in workgroup memory (`Target.sort_loops`)."""
    return TTIRReader(text, sort_loops=sort_loops).read()
