"""`tl.dot`: `linalg.matmul` (`linalg.batch_matmul` for 3-D tiles) on the operand tiles,
accumulating into its accumulator."""
from __future__ import annotations

from .. import tile as t
from .values import EmitterBase, _bytes, _Tensor

class DotEmitter(EmitterBase):
    """tl.dot."""

    def _dot(self, op: t.Dot) -> None:
        if len(op.a.shape) == 3:
            self._batch_dot(op, self.tensor(op.a), self.tensor(op.b), self.tensor(op.acc), self.fresh("mm"))
            return
        m, k = op.a.shape
        n = op.b.shape[1]
        (a, a_ty, a_map), (b, b_ty, b_map) = self._operand(op.a, "d0, d2"), self._operand(op.b, "d2, d1")
        c, r = self.tensor(op.acc), self.fresh("mm")
        maps = ""
        if (a_map, b_map) != ("d0, d2", "d2, d1"):
            maps = (f"indexing_maps = [affine_map<(d0, d1, d2) -> ({a_map})>, affine_map<(d0, d1, d2) -> ({b_map})>, "
                    f"affine_map<(d0, d1, d2) -> (d0, d1)>] ")
        mma = None
        if self.gpu_mma:
            # Operands staged through workgroup memory, but tiles gathered element by element:
            # IREE then applies their masks after the staging, in another layout, which it cannot
            # distribute ('failed to distribute').
            mma = (*self.gpu_mma[id(op)], tuple(i for i, x in enumerate((a, b)) if x not in self.gathered))
        slot = self._config_slot("matmul", (m, n, k), ("parallel", "parallel", "reduction"),
                                 _bytes(op.acc.dtype), mma=mma)
        self.w(f"{r} = linalg.matmul {maps}{slot}ins({a}, {b} : {a_ty}, {b_ty}) "
               f"outs({c} : {op.acc.type.mlir()}) -> {op.acc.type.mlir()}")
        self.bind(("t", op.result.id), _Tensor(r, (0, 1), op.result.type.mlir()))

    def _operand(self, v: t.Value, dims: str) -> tuple[str, str, str]:
        """A 2-D operand of a tensor-core matmul: (tensor, its type, its indexing map's results).
        A tile held transposed (a load of its columns, `tl.trans`) is read through a transposed
        map: IREE fails to stage a transposing op's result in workgroup memory ('tensor.empty'
        op incorrect number of dynamic sizes)."""
        e = self.tensor_entry(v)
        if self.gpu_mma and e.dims == (1, 0):
            return e.name, e.type, ", ".join(reversed(dims.split(", ")))
        return self.tensor(v), v.type.mlir(), dims

    def _batch_dot(self, op: t.Dot, a: str, b: str, c: str, r: str) -> None:
        nb, m, k = op.a.shape
        n = op.b.shape[2]
        slot = self._config_slot("batch_matmul", (nb, m, n, k), ("parallel",) * 3 + ("reduction",),
                                 _bytes(op.acc.dtype))
        self.w(f"{r} = linalg.batch_matmul {slot}ins({a}, {b} : {op.a.type.mlir()}, {op.b.type.mlir()}) "
               f"outs({c} : {op.acc.type.mlir()}) -> {op.acc.type.mlir()}")
        self.bind(("t", op.result.id), _Tensor(r, (0, 1, 2), op.result.type.mlir()))
