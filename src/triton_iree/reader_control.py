"""Control flow, mixed into the TTIR reader: scf.for, scf.while and scf.if (with pointers carried
as offsets), calls of `noinline` functions (inlined), and cf branches (an early `return`)."""
from __future__ import annotations

import re
from typing import Optional

from iree.compiler import ir

from . import tile as t
from .errors import UnsupportedError
from .locations import source_loc
from .pointers import Addr, Ptr


class ControlOps:
    """TTIRReader's loops, ifs, calls and branches."""

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
