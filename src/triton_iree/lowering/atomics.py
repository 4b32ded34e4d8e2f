"""Atomics (`tl.atomic_add` ... `tl.atomic_cas`): each element is a read, a combine and a
write of one buffer element, in row-major order, where its mask holds.

IREE has no atomic op on tensors. The dispatch of a kernel with atomics runs all its programs
in one workgroup, one after another (`ModuleEmitter._serial_programs`), and on GPUs the elements
on one thread of it (`_on_one_thread`), so nothing else touches memory while an element is read,
combined and written: that makes each one atomic, at the cost of running the kernel on one core.
"""
from __future__ import annotations

from typing import Optional

from .. import tile as t
from ..types import TYPE_NAMES
from .values import EmitterBase, _Tensor

_INT_COMBINE = {"add": "arith.addi", "max": "arith.maxsi", "min": "arith.minsi", "umax": "arith.maxui",
                "umin": "arith.minui", "and": "arith.andi", "or": "arith.ori", "xor": "arith.xori"}


class AtomicEmitter(EmitterBase):
    """tt.atomic_rmw and tt.atomic_cas."""

    def _atomic(self, op: t.Atomic) -> None:
        v = op.result
        if not v.is_tile:
            m = self.scalar(op.mask) if op.mask is not None else None
            cmp = self.scalar(op.cmp) if op.cmp is not None else None
            one = t.TileType((1,), v.dtype)

            def scalar(dests: list[str]) -> list[str]:
                old = self._atomic_element(op, self.scalar(op.offsets), self.scalar(op.value), m, cmp)
                r = self.fresh("old")
                self.w(f"{r} = tensor.insert {old} into {dests[0]}[{self.idx(0)}] : {one.mlir()}")
                return [r]

            [r] = self._on_one_thread([one], [self._empty(one.mlir())], scalar, shared_writes=True)
            old = self.fresh("old")
            self.w(f"{old} = tensor.extract {r}[{self.idx(0)}] : {one.mlir()}")
            self.bind(("s", v.id), old)
            return
        operands = [x for x in (op.offsets, op.value, op.mask, op.cmp) if x is not None]
        ty = v.type.mlir()

        names = {id(x): self.tensor(x) for x in operands}

        def element(at: list[str], acc: str) -> str:
            def read(x: Optional[t.Value]) -> Optional[str]:
                if x is None:
                    return None
                e = self.fresh("x")
                self.w(f"{e} = tensor.extract {names[id(x)]}[{', '.join(at)}] : {x.type.mlir()}")
                return e

            old = self._atomic_element(op, read(op.offsets), read(op.value), read(op.mask), read(op.cmp))
            nxt = self.fresh("acc")
            self.w(f"{nxt} = tensor.insert {old} into {acc}[{', '.join(at)}] : {ty}")
            return nxt

        def elements(dests: list[str]) -> list[str]:
            return [self._for_each_element(v.shape, ty, dests[0], element)]

        [olds] = self._on_one_thread([v.type], [self._empty(ty)], elements, shared_writes=True)
        # The old values as a copy: IREE fused the loop into an elementwise consumer of its
        # result (`tl.where(mask, old, -1)`) and so ran every read-combine-write once more per
        # tile of the consumer (3 adds instead of 1); it never fuses through a copy.
        self.bind(("t", v.id), _Tensor(self._copy(olds, ty), tuple(range(len(v.shape))), ty))

    def _atomic_element(self, op: t.Atomic, off: str, x: str, mask: Optional[str],
                        cmp: Optional[str]) -> str:
        """One element: reads buffer[off], writes the combined value back; returns the value read
        (zero where `mask` is false, and nothing is read or written)."""
        p, dt = op.buffer, op.value.dtype
        oi = self.fresh("i")
        self.w(f"{oi} = arith.index_cast {off} : i64 to index")
        old = self.fresh("old")
        if mask is not None:
            zero = self.const(0, dt)
            self.w(f"{old} = scf.if {mask} -> ({dt}) {{")
            self.indent += 1
            self.scopes.append({})
        sl, raw = self.fresh("sl"), self.fresh("x")
        self.w(f"{sl} = iree_tensor_ext.dispatch.tensor.load {self.binding[id(p)]}, offsets = [{oi}], "
               f"sizes = [1], strides = [1] : {self.buf_type(p)} -> tensor<1x{p.dtype}>")
        self.w(f"{raw} = tensor.extract {sl}[{self.idx(0)}] : tensor<1x{p.dtype}>")
        cur = self._bitcast_scalar(raw, p.dtype, dt)
        new = self._bitcast_scalar(self._combine_atomic(op, cur, x, cmp), dt, p.dtype)
        one = self.fresh("one")
        self.w(f"{one} = tensor.from_elements {new} : tensor<1x{p.dtype}>")
        self.w(f"iree_tensor_ext.dispatch.tensor.store {one}, {self.binding[id(p)]}, offsets = [{oi}], "
               f"sizes = [1], strides = [1] : tensor<1x{p.dtype}> -> {self.buf_type(p)}")
        if mask is None:
            return cur
        self.w(f"scf.yield {cur} : {dt}")
        self.scopes.pop()
        self.indent -= 1
        self.w("} else {")
        self.w(f"  scf.yield {zero} : {dt}")
        self.w("}")
        return old

    def _bitcast_scalar(self, x: str, src: str, dst: str) -> str:
        if src == dst:
            return x
        r = self.fresh("x")
        self.w(f"{r} = arith.bitcast {x} : {src} to {dst}")
        return r

    def _combine_atomic(self, op: t.Atomic, cur: str, x: str, cmp: Optional[str]) -> str:
        dt = op.value.dtype
        if op.kind == "xchg":
            return x
        if op.kind == "cas":
            # Compares bits, as the hardware does (for floats too).
            ibits = f"i{t.bitwidth(dt)}"
            eq = self._cmp("eq", self._bitcast_scalar(cur, dt, ibits), self._bitcast_scalar(cmp, dt, ibits), ibits)
            r = self.fresh("x")
            self.w(f"{r} = arith.select {eq}, {x}, {cur} : {dt}")
            return r
        if t.is_float(dt):
            if op.kind != "add":
                raise self.err(f"tl.atomic_{op.kind} on {TYPE_NAMES.get(dt, dt)} is not supported by triton-iree "
                               f"(on floats only tl.atomic_add, tl.atomic_xchg and tl.atomic_cas)", op)
            if dt == "bf16":   # in f32, rounded to bf16 explicitly (see _bf16_elementwise)
                return self._bf16_elementwise(t.Elementwise("arith.addf", [], t.ScalarType(dt)), [cur, x], [dt, dt],
                                              self.w)
            return self._binop("arith.addf", cur, x, dt)
        return self._binop(_INT_COMBINE[op.kind], cur, x, dt)
