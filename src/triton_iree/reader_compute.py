"""Reductions, scans, tl.map_elementwise, gathers, histograms and tl.dot, mixed into the TTIR
reader: the ops with a scalar region (a combiner or a body) and the other whole-tile computations."""
from __future__ import annotations

from iree.compiler import ir

from . import rewrites, tile as t
from .errors import UnsupportedError
from .float_casts import FP8_MAX
from .pointers import Ptr
from .ttir import _attr_int


class ComputeOps:
    """TTIRReader's reductions, scans, mapped bodies, gathers, histograms and dots."""

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

    def _op_tt_dot(self, op, loc: str) -> None:
        a, b, c = (self._val(v, op) for v in op.operands)
        # fp8 operands are upcast to f32 (exact; the one conversion IREE's CPU code has for fp8).
        a, b = (self._float_cast(x, "f32", loc) if x.dtype in FP8_MAX else x for x in (a, b))
        # An fp16 accumulator in f32: see `rewrites`.
        if (r := rewrites.dot(a, b, c, loc, self._emit_value)) is None:
            r = self._emit(t.Dot(a, b, c, loc)).result
        self._bind(op, r)
