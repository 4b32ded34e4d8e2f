"""Scans (`tl.cumsum`, `tl.cumprod`, `tl.associative_scan`): an `scf.for` along the scan
axis, in Triton's order, for any combine function and any number of operands.

The loop carries the results. Step k combines the results at the previous position with the
slice of the operands at position k (from the end when `reverse`) in a `linalg.generic` over
the other dims, and inserts the combined values at position k. This is the
sequential order of Triton's interpreter: combine(accumulated, element). On GPUs the loop runs
on one thread of the workgroup. (IREE's
`iree_linalg_ext.scan` takes one operand, so it cannot run multi-operand scans.)"""
from __future__ import annotations

from .. import tile as t
from .shape import _slice
from .values import EmitterBase, _Body, _Tensor


def _without(ty: t.TileType, axis: int) -> t.TileType:
    return t.TileType(tuple(n for d, n in enumerate(ty.shape) if d != axis), ty.dtype)


class ScanEmitter(EmitterBase):
    """tt.scan."""

    def _scan_slice(self, src: str, ty: t.TileType, axis: int, at: str) -> str:
        """The rank-reduced slice of `src` at position `at` along `axis`."""
        r = self.fresh("sl")
        self.w(f"{r} = tensor.extract_slice {src}{_slice(ty.shape, axis, at)} : {ty.mlir()} to "
               f"{_without(ty, axis).mlir()}")
        return r

    def _scan_insert(self, part: str, into: str, ty: t.TileType, axis: int, at: str) -> str:
        r = self.fresh("ins")
        self.w(f"{r} = tensor.insert_slice {part} into {into}{_slice(ty.shape, axis, at)} : "
               f"{_without(ty, axis).mlir()} into {ty.mlir()}")
        return r

    def _scan(self, op: t.Scan) -> None:
        types = [s.type for s in op.srcs]
        shape, axis = types[0].shape, op.axis
        n = shape[axis]
        if n == 1:
            for r, s in zip(op.results, op.srcs):
                self.bind(("t", r.id), _Tensor(self.tensor(s), tuple(range(len(shape))), r.type.mlir()))
            return
        # On GPUs on one thread (`_on_one_thread`). Spread over the threads by IREE, a scan's
        # loop order is not kept across the workgroup's threads, and its results are wrong.
        srcs = [self.tensor(s) for s in op.srcs]
        res = self._on_one_thread(types, [self._empty(ty.mlir()) for ty in types],
                                  lambda dests: self._scan_loop(op, srcs, dests))
        for r, name in zip(op.results, res):
            self.bind(("t", r.id), _Tensor(name, tuple(range(len(shape))), r.type.mlir()))

    def _scan_loop(self, op: t.Scan, srcs: list[str], dests: list[str]) -> list[str]:
        """The scan of the tiles `srcs` into the tiles `dests`: its results."""
        types = [s.type for s in op.srcs]
        shape, axis = types[0].shape, op.axis
        n = shape[axis]
        first = self.idx(n - 1 if op.reverse else 0)
        outs = [self._scan_insert(self._scan_slice(s, ty, axis, first), d, ty, axis, first)
                for s, d, ty in zip(srcs, dests, types)]
        rests = [_without(ty, axis) for ty in types]
        k = self.fresh("k")
        args = [self.fresh("out") for _ in outs]
        loop_types = [ty.mlir() for ty in types]
        res = self.fresh("scan")
        iters = ", ".join(f"{a} = {i}" for a, i in zip(args, outs))
        self.w(f"{res}:{len(args)} = scf.for {k} = {self.idx(1)} to {self.idx(n)} step {self.idx(1)} "
               f"iter_args({iters}) -> ({', '.join(loop_types)}) {{")
        self.indent += 1
        self.scopes.append({})
        if op.reverse:
            at = self._binop("arith.subi", self.idx(n - 1), k)
            prev = self._binop("arith.addi", at, self.idx(1))
        else:
            at, prev = k, self._binop("arith.subi", k, self.idx(1))
        rank = len(shape) - 1
        ident = self._map(rank, [f"d{i}" for i in range(rank)])
        body = _Body(rank)
        ins = {}
        for part, pos in (("acc", prev), ("x", at)):
            ins[part] = []
            for src, ty in zip(args if part == "acc" else srcs, types):
                a = self.fresh("in")
                body.ins.append((self._scan_slice(src, ty, axis, pos), _without(ty, axis).mlir(), ident, a, ty.dtype))
                ins[part].append(a)
        self.scopes.append({})
        for a, name in zip(op.combiner.args, ins["acc"] + ins["x"]):
            self.bind(("s", a.id), name)
        self._scalar_block(op.combiner, body.lines, "", "tl.associative_scan")
        ys = [self.scalar(y) for y in op.combiner.yields]
        self.scopes.pop()
        step = self.fresh("step")
        self._write_generic(step, body, [ident] * len(rests), ["parallel"] * rank,
                            [self._empty(r.mlir()) for r in rests], [r.mlir() for r in rests],
                            [r.dtype for r in rests], ys, rests[0].shape)
        steps = [step] if len(rests) == 1 else [f"{step}#{i}" for i in range(len(rests))]
        new_outs = [self._scan_insert(a, o, ty, axis, at) for a, o, ty in zip(steps, args, types)]
        self.w(f"scf.yield {', '.join(new_outs)} : {', '.join(loop_types)}")
        self.scopes.pop()
        self.indent -= 1
        self.w("}")
        return [f"{res}#{j}" for j in range(len(op.results))]
