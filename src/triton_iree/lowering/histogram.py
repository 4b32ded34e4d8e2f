"""`tl.histogram`: one pass over the input, adding each value in [0, num_bins) (where the mask
holds) to its bin of an i32 tile (on GPUs on one thread: `_on_one_thread`)."""
from __future__ import annotations

from .. import tile as t
from .values import EmitterBase, _Tensor


class HistogramEmitter(EmitterBase):
    """tt.histogram."""

    def _histogram(self, op: t.Histogram) -> None:
        ty, src = op.result.type, op.src
        x_t = self.tensor(src)
        mask = self.tensor(op.mask) if op.mask is not None else None
        bins = self.const(ty.shape[0], src.dtype)

        def count(dests: list[str]) -> list[str]:
            i, h, res = self.fresh("el"), self.fresh("h"), self.fresh("hist")
            self.w(f"{res} = scf.for {i} = {self.idx(0)} to {self.idx(src.shape[0])} step {self.idx(1)} "
                   f"iter_args({h} = {dests[0]}) -> ({ty.mlir()}) {{")
            self.indent += 1
            self.scopes.append({})
            x = self.fresh("x")
            self.w(f"{x} = tensor.extract {x_t}[{i}] : {src.type.mlir()}")
            # Unsigned: negative values are out of range too.
            valid = self._cmp("ult", x, bins, src.dtype)
            if mask is not None:
                m = self.fresh("m")
                self.w(f"{m} = tensor.extract {mask}[{i}] : {op.mask.type.mlir()}")
                valid = self._binop("arith.andi", valid, m, "i1")
            xi = self.fresh("i")
            self.w(f"{xi} = arith.index_cast {x} : {src.dtype} to index")
            at = self._select_index(valid, xi, self.idx(0))
            one, c, c1, h1 = self.fresh("one"), self.fresh("c"), self.fresh("c"), self.fresh("h")
            self.w(f"{one} = arith.extui {valid} : i1 to i32")
            self.w(f"{c} = tensor.extract {h}[{at}] : {ty.mlir()}")
            self.w(f"{c1} = arith.addi {c}, {one} : i32")
            self.w(f"{h1} = tensor.insert {c1} into {h}[{at}] : {ty.mlir()}")
            self.w(f"scf.yield {h1} : {ty.mlir()}")
            self.scopes.pop()
            self.indent -= 1
            self.w("}")
            return [res]

        [res] = self._on_one_thread([ty], [self._fill(self.const(0, "i32"), ty)], count, shared_writes=True)
        self.bind(("t", op.result.id), _Tensor(res, (0,), ty.mlir()))
