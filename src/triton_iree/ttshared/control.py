"""Control flow: scf.for and scf.if, with the allocs they change carried as tile values."""
from __future__ import annotations

from iree.compiler import ir

from .. import tile as t
from ..errors import InputError
from .values import Alloc, BufView, TTSharedBase, Undef, Window, _same, _shape

_PURE_OPS = (t.Constant, t.Splat, t.Broadcast, t.ExpandDims, t.MakeRange, t.Reshape, t.Trans,
             t.Elementwise, t.ProgramId, t.NumPrograms)
# Ops that only alias their first operand (same contents, another type).
_ALIAS_OPS = ("memref.cast", "memref.assume_alignment", "tensor.cast")
_VIEW_OPS = ("memref.subview", "memref.reinterpret_cast") + _ALIAS_OPS


class ControlReader(TTSharedBase):
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
