"""Pointers, loads, stores and atomics, mixed into the TTIR reader: each pointer is read as
(buffer, i64 element offsets), with a view of another element type where it was cast
(bitcast, narrower or wider views, integers converted from and back to pointers)."""
from __future__ import annotations

from iree.compiler import ir

from . import rewrites, tile as t
from .errors import UnsupportedError
from .pointers import Addr, Ptr, known_divisor, memory_dtype, ptr_pointee, unit_bytes
from .ttir import ATOMIC_RMW_OPS, _attr_int


class MemoryOps:
    """TTIRReader's pointer ops, loads, stores and atomics."""

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
