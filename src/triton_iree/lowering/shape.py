"""Data movement between tiles: `tl.join` / `tl.split` (and `tl.interleave`, a join and a
reshape) as `tensor.insert_slice` (on CUDA and HIP a `linalg.generic`, on Vulkan computed in the
ops that read the joined tile) / `tensor.extract_slice` along the last dim, `tl.cat` as two
`insert_slice`s, and `tl.gather` as a `linalg.generic` that extracts from the source tile (on CUDA
and HIP a gather of N-D tiles as a loop on one thread)."""
from __future__ import annotations

from .. import tile as t
from .values import EmitterBase, _Body, _Tensor


def _slice(shape: tuple[int, ...], axis: int, at: str, size: int = 1) -> str:
    """`[offsets] [sizes] [strides]` of a slice of `size` at `at` along `axis`, whole elsewhere."""
    offs = ", ".join(at if d == axis else "0" for d in range(len(shape)))
    sizes = ", ".join(str(size) if d == axis else str(n) for d, n in enumerate(shape))
    return f"[{offs}] [{sizes}] [{', '.join('1' for _ in shape)}]"


class ShapeEmitter(EmitterBase):
    """tl.join, tl.split, tl.cat, tl.gather."""

    def _bind_tile(self, v: t.Value, name: str) -> None:
        self.bind(("t", v.id), _Tensor(name, tuple(range(len(v.shape))), v.type.mlir()))

    def _insert_parts(self, out: t.Value, parts: list[tuple[t.Value, str]], axis: int) -> None:
        """`out` assembled from tiles inserted along `axis` at the given offsets."""
        cur = self._empty(out.type.mlir())
        for part, at in parts:
            size = part.shape[axis] if len(part.shape) == len(out.shape) else 1
            n = self.fresh("ins")
            self.w(f"{n} = tensor.insert_slice {self.tensor(part)} into {cur}{_slice(out.shape, axis, at, size)} : "
                   f"{part.type.mlir()} into {out.type.mlir()}")
            cur = n
        self._bind_tile(out, cur)

    def _join(self, op: t.Join) -> None:
        if self.spirv:
            # On Vulkan computed where it is read (`_join_elem`), in its consumer's op: two
            # tensor.insert_slice leave no linalg op of the joined tile's rank to carry the
            # configuration, and a linalg.generic of its own is fused by IREE into a consumer,
            # which then loses its configuration ('failed to get lowering configuration',
            # 'contains conflicting lowering configuration').
            return
        if not self.llvmgpu:
            self._insert_parts(op.result, [(op.a, "0"), (op.b, "1")], len(op.result.shape) - 1)
            return
        # On CUDA and HIP a linalg.generic that picks a or b by the new dim's index: IREE's
        # TileAndFuse pipeline spreads it over the threads with its consumer. Two
        # tensor.insert_slice are not fused, and leave the joined tile zero except for its
        # first elements (tl.join of pointers, tl.interleave of 2-D tiles).
        self._bind_tile(op.result, self._generic_map(op.result, root=True))

    def _join_elem(self, body: _Body, op: t.Join, view: tuple) -> str:
        """The element of `tl.join(a, b)` at `view`: a's or b's, by the new last dim's index."""
        a, b = self._elem(body, op.a, view[:-1]), self._elem(body, op.b, view[:-1])
        if view[-1] is None:
            return a
        first, pick = self.fresh("first"), self.fresh("join")
        body.lines.append(f"{first} = arith.cmpi eq, {self._linalg_index(body, view[-1])}, {self.idx(0)} : index")
        body.lines.append(f"{pick} = arith.select {first}, {a}, {b} : {op.result.dtype}")
        return pick

    def _cat(self, op: t.Cat) -> None:
        self._insert_parts(op.result, [(op.a, "0"), (op.b, str(op.a.shape[0]))], 0)

    def _split(self, op: t.Split) -> None:
        src = self.tensor(op.src)
        axis = len(op.src.shape) - 1
        for k, r in enumerate(op.results):
            n = self.fresh("half")
            if r.is_tile:
                self.w(f"{n} = tensor.extract_slice {src}{_slice(op.src.shape, axis, str(k))} : "
                       f"{op.src.type.mlir()} to {r.type.mlir()}")
                self._bind_tile(r, n)
            else:
                self.w(f"{n} = tensor.extract {src}[{self.idx(k)}] : {op.src.type.mlir()}")
                self.bind(("s", r.id), n)

    def _gather(self, op: t.Gather) -> None:
        """result[i] = src[i with i[axis] = index[i]]. An index outside the source is undefined
        in Triton; it is clamped here so that it cannot read outside the tile."""
        v = op.result
        rank = len(v.shape)
        src = self.tensor(op.src)
        last = self.idx(op.src.shape[op.axis] - 1)
        if self.llvmgpu and rank > 1:
            # On CUDA and HIP a gather of N-D tiles runs on one thread (`_on_one_thread`):
            # spread over the threads by IREE, such gathers (tl.gather, 2-D tl.sort) give
            # wrong results.
            index, ty = self.tensor(op.index), v.type.mlir()

            def element(at: list[str], acc: str) -> str:
                i, c, ci, x, r = (self.fresh(h) for h in ("gi", "gi", "gi", "x", "acc"))
                self.w(f"{i} = tensor.extract {index}[{', '.join(at)}] : {op.index.type.mlir()}")
                self.w(f"{ci} = arith.index_cast {i} : {op.index.dtype} to index")
                self.w(f"{c} = arith.minui {ci}, {last} : index")
                src_at = [c if d == op.axis else a for d, a in enumerate(at)]
                self.w(f"{x} = tensor.extract {src}[{', '.join(src_at)}] : {op.src.type.mlir()}")
                self.w(f"{r} = tensor.insert {x} into {acc}[{', '.join(at)}] : {ty}")
                return r

            [out] = self._on_one_thread([v.type], [self._empty(ty)],
                                        lambda dests: [self._for_each_element(v.shape, ty, dests[0], element)])
            self._bind_tile(v, out)
            return
        # The source is read element by element through tensor.extract, not as an input that
        # `_leaf_arg` would wait for: on Vulkan the threads computing it must be done first.
        self._sync()
        body = _Body(rank)
        index = self._elem(body, op.index, tuple(range(rank)))
        at = []
        for d in range(rank):
            if d != op.axis:
                at.append(self._linalg_index(body, d))
                continue
            i, c = self.fresh("gi"), self.fresh("gi")
            body.lines.append(f"{i} = arith.index_cast {index} : {op.index.dtype} to index")
            body.lines.append(f"{c} = arith.minui {i}, {last} : index")
            at.append(c)
        x = self.fresh("x")
        body.lines.append(f"{x} = tensor.extract {src}[{', '.join(at)}] : {op.src.type.mlir()}")
        out = self.fresh("gather")
        ident = self._map(rank, [f"d{i}" for i in range(rank)])
        self._write_generic(out, body, [ident], ["parallel"] * rank, [self._empty(v.type.mlir())],
                            [v.type.mlir()], [v.dtype], [x], v.shape)
        self._bind_tile(v, out)
