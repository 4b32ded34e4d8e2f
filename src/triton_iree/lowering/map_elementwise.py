"""`tl.map_elementwise`: one `linalg.generic` whose body is the user's scalar function, with its
`if`s as `scf.if` on scalars (each element runs only the branch it takes). Scans emit their
combine functions the same way (`_scalar_block`)."""
from __future__ import annotations

from .. import tile as t
from ..errors import tile_op_name
from .values import EmitterBase, _Body, _Tensor, literal


class MapElementwiseEmitter(EmitterBase):
    """tt.map_elementwise."""

    def _map_elementwise(self, op: t.MapElementwise) -> None:
        shape = op.results[0].shape
        rank = len(shape)
        body = _Body(rank)
        xs = [self._elem(body, a, tuple(range(rank))) for a in op.args]
        self.scopes.append({})
        for a, x in zip(op.body.args, xs):
            self.bind(("s", a.id), x)
        self._scalar_block(op.body, body.lines, "", "tl.map_elementwise")
        ys = [self.scalar(y) for y in op.body.yields]
        self.scopes.pop()
        out = self.fresh("map")
        ident = self._map(rank, [f"d{i}" for i in range(rank)])
        types = [r.type.mlir() for r in op.results]
        self._write_generic(out, body, [ident] * len(types), ["parallel"] * rank,
                            [self._empty(ty) for ty in types], types, [r.dtype for r in op.results], ys, shape)
        names = [out] if len(types) == 1 else [f"{out}#{i}" for i in range(len(types))]
        for r, name in zip(op.results, names):
            self.bind(("t", r.id), _Tensor(name, tuple(range(rank)), r.type.mlir()))

    def _scalar_block(self, block: t.Block, lines: list[str], pad: str, construct: str) -> None:
        """The ops of a scalar region (the function `construct` applies), as lines of a linalg
        body indented by `pad`."""
        out = lambda line: lines.append(pad + line)   # noqa: E731
        for op in block.ops:
            if isinstance(op, t.Constant):
                r = self.fresh("k")
                out(f"{r} = arith.constant {literal(op.value, op.result.dtype)} : {op.result.dtype}")
            elif isinstance(op, t.Elementwise):
                r = self._elementwise(op, [self.scalar(a) for a in op.args], out)
            elif isinstance(op, t.If) and not any(v.is_tile for v in op.results):
                r = self._scalar_if(op, lines, pad, construct)
            else:
                raise self.err(f"{tile_op_name(op)} in the function of {construct} is not supported by triton-iree",
                               op)
            if isinstance(op, t.If):
                for v, name in zip(op.results, r):
                    self.bind(("s", v.id), name)
            else:
                self.bind(("s", op.result.id), r)

    def _scalar_if(self, op: t.If, lines: list[str], pad: str, construct: str) -> list[str]:
        res = self.fresh("if")
        types = ", ".join(v.dtype for v in op.results)
        n = len(op.results)
        lhs = f"{res}:{n} = " if n > 1 else (f"{res} = " if n else "")
        lines.append(f"{pad}{lhs}scf.if {self.scalar(op.cond)}" + (f" -> ({types})" if n else "") + " {")
        for i, blk in enumerate((op.then, op.otherwise)):
            if i:
                lines.append(pad + "} else {")
            self.scopes.append({})
            self._scalar_block(blk, lines, pad + "  ", construct)
            if n:
                lines.append(f"{pad}  scf.yield {', '.join(self.scalar(y) for y in blk.yields)} : {types}")
            self.scopes.pop()
        lines.append(pad + "}")
        return [res] if n == 1 else [f"{res}#{i}" for i in range(n)]
