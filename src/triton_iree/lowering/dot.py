"""`tl.dot`: `linalg.matmul` (`linalg.batch_matmul` for 3-D tiles) on the operand tiles,
accumulating into its accumulator."""
from __future__ import annotations

from .. import tile as t
from .values import EmitterBase, _bytes, _Tensor

class DotEmitter(EmitterBase):
    """tl.dot."""

    def _dot(self, op: t.Dot) -> None:
        a, b, c = self.tensor(op.a), self.tensor(op.b), self.tensor(op.acc)
        r = self.fresh("mm")
        if len(op.a.shape) == 3:
            self._batch_dot(op, a, b, c, r)
            return
        m, k = op.a.shape
        n = op.b.shape[1]
        slot = self._config_slot("matmul", (m, n, k), ("parallel", "parallel", "reduction"),
                                 _bytes(op.acc.dtype))
        self.w(f"{r} = linalg.matmul {slot}ins({a}, {b} : {op.a.type.mlir()}, {op.b.type.mlir()}) "
               f"outs({c} : {op.acc.type.mlir()}) -> {op.acc.type.mlir()}")
        self.bind(("t", op.result.id), _Tensor(r, (0, 1), op.result.type.mlir()))

    def _batch_dot(self, op: t.Dot, a: str, b: str, c: str, r: str) -> None:
        nb, m, k = op.a.shape
        n = op.b.shape[2]
        slot = self._config_slot("batch_matmul", (nb, m, n, k), ("parallel",) * 3 + ("reduction",),
                                 _bytes(op.acc.dtype))
        self.w(f"{r} = linalg.batch_matmul {slot}ins({a}, {b} : {op.a.type.mlir()}, {op.b.type.mlir()}) "
               f"outs({c} : {op.acc.type.mlir()}) -> {op.acc.type.mlir()}")
        self.bind(("t", op.result.id), _Tensor(r, (0, 1, 2), op.result.type.mlir()))
