"""`tl.dot`: `linalg.matmul` (`linalg.batch_matmul` for 3-D tiles) on the operand tiles,
accumulating into its accumulator. On Vulkan a plain matmul's dot is a linalg.matmul that IREE's
SPIR-V matmul pipeline computes where it has run right (`SpirvTiling.vector_matmul`), another
float 2-D dot a `linalg.map` over the accumulator that runs the K loop in registers
(`DotEmitter._register_dot`)."""
from __future__ import annotations

from .. import tile as t
from .values import EmitterBase, _bytes, _Tensor

class DotEmitter(EmitterBase):
    """tl.dot."""

    def _dot(self, op: t.Dot) -> None:
        if len(op.a.shape) == 3:
            a, b, c = self.tensor(op.a), self.tensor(op.b), self.tensor(op.acc)
            self._sync()
            self._batch_dot(op, a, b, c, self.fresh("mm"))
            return
        (a, a_t, a_ty), (b, b_t, b_ty) = self._dot_operand(op.a), self._dot_operand(op.b)
        c = self.tensor(op.acc)
        self._sync()
        r = self.fresh("mm")
        if self.base_distribute and _float_dot(op) and self.options.gpu_tiling.vector_matmul is None:
            self._register_dot(op, (a, a_t, a_ty), (b, b_t, b_ty), c, r)
            return
        m, k = op.a.shape
        n = op.b.shape[1]
        maps = ""
        if a_t or b_t:
            res = ("d2, d0" if a_t else "d0, d2", "d1, d2" if b_t else "d2, d1", "d0, d1")
            maps = f"indexing_maps = [{', '.join(f'affine_map<(d0, d1, d2) -> ({r})>' for r in res)}] "
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

    def _register_dot(self, op: t.Dot, a: tuple[str, bool, str], b: tuple[str, bool, str], c: str, r: str) -> None:
        """A float tl.dot in a Vulkan dispatch the lowering configures: a linalg.map over the
        accumulator, written over it (in place), each of whose elements runs the dot's K loop
        (`scf.for`) on a scalar that stays in a register, reading the operands' elements with
        tensor.extract. IREE's BaseDistribute pipeline gives each thread elements of a
        linalg.matmul and computes each as K multiply-adds whose accumulator it loads and stores
        in workgroup memory at every step (it never vectorizes): a chain of dependent loads and
        stores. Products and sums are in the accumulator's type, the operands converted to it;
        fused multiply-adds, but in f64. (Blocks of 4 x 4 elements an invocation, as the slices
        of the accumulator that a linalg.generic writes, were copied by IREE's bufferization, 16
        KiB more workgroup memory for a 64 x 64 f32 accumulator: attention no longer fitted
        lavapipe's 32 KiB.)"""
        dt, acc_ty = op.acc.dtype, op.acc.type.mlir()
        zero, one, kk = self.idx(0), self.idx(1), self.idx(op.a.shape[1])
        slot = self._config_slot("matmul", op.acc.shape, ("parallel", "parallel"), _bytes(dt))
        x, o = self.fresh("acc"), self.fresh("o")
        # (As a linalg.generic reading the accumulator as its input or output, bufferization
        # failed for 16 x 16 tiles: 'Yield operand #0 is not equivalent to the corresponding
        # iter bbArg'.)
        self.w(f"{r} = linalg.map ins({c} : {acc_ty}) outs({c} : {acc_ty}) {slot}")
        self.w(f"  ({x}: {dt}, {o}: {dt}) {{")
        self.indent += 1
        i, j, step, total, s = self.fresh("i"), self.fresh("j"), self.fresh("k"), self.fresh("sum"), self.fresh("s")
        self.w(f"{i} = linalg.index 0 : index")
        self.w(f"{j} = linalg.index 1 : index")
        self.w(f"{s} = scf.for {step} = {zero} to {kk} step {one} iter_args({total} = {x}) -> ({dt}) {{")
        terms = []
        for (name, transposed, ty), v, at in ((a, op.a, (i, step)), (b, op.b, (step, j))):
            e = self.fresh("e")
            self.w(f"  {e} = tensor.extract {name}[{', '.join(at[::-1] if transposed else at)}] : {ty}")
            terms.append(self._float_to(e, v.dtype, dt))
        y = self.fresh("y")
        if dt == "f64":
            p = self.fresh("p")
            self.w(f"  {p} = arith.mulf {terms[0]}, {terms[1]} : {dt}")
            self.w(f"  {y} = arith.addf {total}, {p} : {dt}")
        else:
            self.w(f"  {y} = math.fma {terms[0]}, {terms[1]}, {total} : {dt}")
        self.w(f"  scf.yield {y} : {dt}")
        self.w("}")
        self.w(f"linalg.yield {s} : {dt}")
        self.indent -= 1
        self.w("}")
        self.bind(("t", op.result.id), _Tensor(r, (0, 1), acc_ty))

    def _float_to(self, x: str, src: str, dst: str) -> str:
        """Float `x` of type `src` converted to `dst` (inside `_register_dot`'s loop)."""
        if src == dst:
            return x
        y = self.fresh("cv")
        cast = "arith.extf" if t.bitwidth(src) < t.bitwidth(dst) else "arith.truncf"
        self.w(f"  {y} = {cast} {x} : {src} to {dst}")
        return y

    def _dot_operand(self, v: t.Value) -> tuple[str, bool, str]:
        """(tensor, transposed, type) of a 2-D dot operand: a transposed tile is read through the
        matmul's indexing map rather than copied where a copy fails or costs.
        - In a Vulkan dispatch the lowering configures, a `tl.trans` operand: IREE's
          BaseDistribute pipeline bufferizes the whole dispatch before tiling it, so every tile
          the dispatch materializes is a buffer in workgroup memory (32 KiB on lavapipe), and a
          transposed copy is one more (attention's tiles did not fit).
        - In a tensor-core program, a tile held transposed (a load of its columns): IREE fails to
          stage a transposing op's result in workgroup memory ('tensor.empty' op incorrect number
          of dynamic sizes)."""
        src = v.owner
        if self.base_distribute and isinstance(src, t.Trans) and src.order == (1, 0):
            return self.tensor(src.src), True, src.src.type.mlir()
        e = self.tensor_entry(v)
        if self.gpu_mma and e.dims == (1, 0):
            return e.name, True, e.type
        if self.llvmgpu and _after_reshape(v):
            return self._reshape_barrier(self.tensor(v), v.type), False, v.type.mlir()
        return self.tensor(v), False, v.type.mlir()

    def _reshape_barrier(self, x: str, ty: t.TileType) -> str:
        """CUDA and HIP: operand `x` (computed from a reshaped tile) read through a slice of it
        with a leading unit dim. IREE's GPU code generation sinks reshapes into the linalg ops
        that read their results (fusion by expansion), and rebuilt the matmul without its
        configuration; IREE's own configuration then failed ('Could not find a subgroup basis':
        tl.dot_scaled, whose decoded operands are reshaped). A reshape does not sink into a slice."""
        m, k = ty.shape
        unit = t.TileType((1, m, k), ty.dtype).mlir()
        u, s = self.fresh("unit"), self.fresh("operand")
        self.w(f"{u} = tensor.expand_shape {x} [[0, 1], [2]] output_shape [1, {m}, {k}] : {ty.mlir()} into {unit}")
        self.w(f"{s} = tensor.extract_slice {u}[0, 0, 0] [1, {m}, {k}] [1, 1, 1] : {unit} to {ty.mlir()}")
        return s

    def _batch_dot(self, op: t.Dot, a: str, b: str, c: str, r: str) -> None:
        nb, m, k = op.a.shape
        n = op.b.shape[2]
        slot = self._config_slot("batch_matmul", (nb, m, n, k), ("parallel",) * 3 + ("reduction",),
                                 _bytes(op.acc.dtype))
        self.w(f"{r} = linalg.batch_matmul {slot}ins({a}, {b} : {op.a.type.mlir()}, {op.b.type.mlir()}) "
               f"outs({c} : {op.acc.type.mlir()}) -> {op.acc.type.mlir()}")
        self.bind(("t", op.result.id), _Tensor(r, (0, 1, 2), op.result.type.mlir()))


def _float_dot(op: t.Dot) -> bool:
    """A 2-D tl.dot of f16, bf16, f32 or f64 operands, each of the accumulator's type or of
    another width (others, fp8 and integers, stay a linalg.matmul)."""
    return all(v.dtype in ("f16", "bf16", "f32", "f64") for v in (op.a, op.b, op.acc)) and \
        all(v.dtype == op.acc.dtype or t.bitwidth(v.dtype) != t.bitwidth(op.acc.dtype) for v in (op.a, op.b))


def _after_reshape(v: t.Value) -> bool:
    """Tile `v` is computed from a reshaped tile by ops emitted as linalg.generics with
    projected-permutation maps, through which IREE sinks the reshape (`_reshape_barrier`)."""
    return t.computed_from(v, lambda op: isinstance(op, t.Reshape),
                           lambda op: isinstance(op, (t.Elementwise, t.Broadcast, t.ExpandDims, t.Trans, t.Join)))
