"""cuda and hip: IREE's LLVMGPU code generation (`LlvmGpuTiling`: TileAndFuse, vector
distribution of row reductions and of tensor-core matmuls) and the rewrites of the tile program
it needs (`gpu.drop_shortcuts`, `sink_stored_reshapes`). What GPU targets share: `gpu.py`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from .. import tile as t
from .gpu import ROW_VECTOR, Gpu, GpuTiling, drop_shortcuts

# Tensor-core instructions IREE's CUDA target offers from sm_80 on, by (operand, accumulator)
# element type, with their M x N x K shape.
NV_MMA = {("f16", "f32"): ("NV_MMA_SYNC_F32_16x8x16_F16", (16, 8, 16)),
          ("bf16", "f32"): ("NV_MMA_SYNC_F32_16x8x16_BF16", (16, 8, 16))}
# AMD's matrix cores (MFMA) on the CDNA GPUs IREE's ROCm target offers them for (gfx90a, gfx94x,
# gfx95x), whose waves are 64 threads wide (Triton's num_warps counts such waves there).
AMD_MFMA = {("f16", "f32"): ("MFMA_F32_16x16x16_F16", (16, 16, 16)),
            ("bf16", "f32"): ("MFMA_F32_16x16x16_BF16", (16, 16, 16))}


@dataclass(frozen=True)
class LlvmGpuTiling(GpuTiling):
    """The configuration of a dispatch for IREE's LLVMGPU pipelines (cuda, hip)."""
    mma: tuple = ()           # the target's tensor-core instructions: NV_MMA's or AMD_MFMA's items

    llvmgpu: ClassVar[bool] = True     # see `lowering.options.GpuTilingPolicy`
    spirv: ClassVar[bool] = False
    narrow_vectors: ClassVar[bool] = False

    def lowering_config(self, loops: tuple[int, ...], iterators: tuple[str, ...]) -> str:
        """IREE's LLVMGPU TileAndFuse tile sizes: none per workgroup, `thread_tiles` per thread,
        reduction loops one element at a time."""
        zeros = ", ".join("0" for _ in loops)
        thread = ", ".join(map(str, self.thread_tiles(loops, iterators)))
        fields = [f"workgroup = [{zeros}]", f"thread = [{thread}]"]
        if "reduction" in iterators:
            fields.append("reduction = [" + ", ".join("1" if it == "reduction" else "0" for it in iterators) + "]")
        return f"#iree_gpu.lowering_config<{{{', '.join(fields)}}}>"

    def compilation_info(self, loops: tuple[int, ...], iterators: tuple[str, ...]) -> str:
        return (f"#iree_codegen.compilation_info<lowering_config = {self.lowering_config(loops, iterators)}, "
                f"translation_info = #iree_codegen.translation_info<pipeline = #iree_gpu.pipeline<TileAndFuse> "
                f"workgroup_size = [{self.threads}, 1, 1] subgroup_size = {self.subgroup_size}>>")

    def row_reduction_configs(self, ops, n: int) -> Optional[list[str]]:
        """The attributes of a row program's linalg ops (`row_length`): IREE's vector distribution
        of reductions, with the program's `num_warps` warps and Triton's own layout: each thread
        reads ROW_VECTOR consecutive elements, the warp's threads side by side, the row in
        n / (ROW_VECTOR x threads) such slices per thread, held in registers. The last reduction
        to a scalar is the root; every 1-D op of the row carries the same layout, those in kernel
        loops too (IREE's own configuration leaves those undistributed: each thread then ran the
        whole loop body, 500x slower than Triton on layer norm). Fills carry none (IREE rejects a
        layout on their scalar operand); the copies before stores are dropped in such dispatches.
        None where an op is not of the row's length: IREE's own configuration is kept.
        """
        base = (f"lane_basis = [[{self.subgroup_size}], [0]], "
                f"subgroup_basis = [[{self.num_warps}], [0]], thread = [{ROW_VECTOR}]")
        red = f"#iree_gpu.lowering_config<{{{base}, partial_reduction = [{n}], workgroup = [0]}}>"
        ser = f"#iree_gpu.lowering_config<{{{base}, serial = [{n}]}}>"
        row = [i for i, o in enumerate(ops) if o.kind == "generic"]
        whole = [i for i in row if "parallel" not in ops[i].iterators]
        if not whole or any(ops[i].loops != (n,) for i in row):
            return None     # a reduction seeded with its first element (argmax) reduces n - 1
        attrs = [""] * len(ops)
        for i in row:
            attrs[i] = f"lowering_config = {red if i in whole else ser}"
        attrs[whole[-1]] = (f"compilation_info = #iree_codegen.compilation_info<lowering_config = {red}, "
                            f"translation_info = #iree_codegen.translation_info<pipeline = "
                            f"#iree_gpu.pipeline<VectorDistribute> workgroup_size = [{self.threads}, 1, 1] "
                            f"subgroup_size = {self.subgroup_size}>>")
        return attrs


    def mma_program(self, kernel) -> Optional[dict]:
        """{id(dot): (instruction, subgroup basis)} where every tl.dot of the program can run on
        the target's tensor cores and the program reduces nothing to a scalar: a tl.dot program
        (the matmul). None otherwise. Each dot's M x N tile is split over the warps, sgm x sgn
        warps of (M/sgm) x (N/sgn) elements, as square as the instruction's shape allows."""
        mma = dict(self.mma)
        dots = [op for op in kernel.walk() if isinstance(op, t.Dot)]
        if not dots or any(isinstance(op, t.Reduce) and op.to_scalar for op in kernel.walk()):
            return None
        stored = {id(p) for p in kernel.stored_buffers()}
        plan = {}
        for op in dots:
            kind = mma.get((op.a.dtype, op.acc.dtype))
            if len(op.a.shape) != 2 or op.b.dtype != op.a.dtype or kind is None or _loaded_from(op.acc, stored):
                return None
            name, (im, in_, ik) = kind
            (m, k), n = op.a.shape, op.b.shape[1]
            splits = [(sm, self.num_warps // sm) for sm in range(1, self.num_warps + 1)
                      if self.num_warps % sm == 0 and m % (sm * im) == 0 and n % (self.num_warps // sm * in_) == 0]
            if k % ik or not splits:
                return None
            sm, sn = min(splits, key=lambda s: abs(m // s[0] - n // s[1]))
            plan[id(op)] = (name, (sm, sn))
        return plan

    def mma_configs(self, ops) -> list[str]:
        """The attributes of a tl.dot program's linalg ops (`mma_program`; each matmul carries its
        instruction, subgroup basis and staged operands in `mma`): IREE's vector
        distribution with tensor cores on every matmul, operands read as slabs staged through
        workgroup memory, the whole K of the program's tile in one step (the program's own loop walks K,
        and its accumulator stays in registers across iterations). The last matmul is the root.
        Other ops carry nothing: IREE derives their layouts from the matmuls'."""
        attrs = [""] * len(ops)
        mms = [i for i, o in enumerate(ops) if o.kind == "matmul"]
        for i in mms:
            name, (sm, sn), staged = ops[i].mma
            k = ops[i].loops[2]
            cfg = (f"#iree_gpu.lowering_config<{{mma_kind = #iree_gpu.mma_layout<{name}>, "
                   f"promote_operands = [{', '.join(map(str, staged))}], "
                   f"reduction = [0, 0, {k}], subgroup_basis = [[{sm}, {sn}, 1], [0, 1, 2]], workgroup = [0, 0, 0]}}>")
            attrs[i] = f"lowering_config = {cfg}"
            if i == mms[-1]:
                attrs[i] = (f"compilation_info = #iree_codegen.compilation_info<lowering_config = {cfg}, "
                            f"translation_info = #iree_codegen.translation_info<pipeline = "
                            f"#iree_gpu.pipeline<VectorDistribute> workgroup_size = [{self.threads}, 1, 1] "
                            f"subgroup_size = {self.subgroup_size}>>")
        return attrs

    @staticmethod
    def reduced_on_one_thread(op: t.Reduce) -> bool:
        """A reduction of a tile to 64-bit scalars: on CUDA and HIP on one thread (`_on_one_thread`).
        IREE's vector distribution of it failed ('failed to distribute': an i64 tl.sum of i32, an
        f64 one of f32)."""
        return op.to_scalar and any(t.bitwidth(r.dtype) == 64 for r in op.results)


def _loaded_from(v: t.Value, buffers: set) -> bool:
    """Whether `v` is computed elementwise from a load of one of `buffers` (ids of Params).
    A dot's accumulator loaded from a buffer the program also stores (`c += a @ b`, in place)
    is a snapshot in workgroup memory (the memory order), and IREE failed to distribute a
    tensor-core matmul accumulating into it where the operands are gathered ('failed to
    distribute': an fp16 accumulator dot): such programs keep IREE's TileAndFuse pipeline."""
    op = v.owner
    if isinstance(op, t.Load):
        return id(op.buffer) in buffers
    return isinstance(op, t.Elementwise) and any(_loaded_from(a, buffers) for a in op.args)


def sink_stored_reshapes(kernel: t.Kernel) -> None:
    """CUDA and HIP: an unmasked store of a reshaped tile (tl.reshape, tl.map_elementwise with
    pack > 1) stores the tile before the reshape through its offsets reshaped the other way
    (row-major both: the same element goes to the same place). IREE's GPU code generation folds
    the reshape and the copy the store takes (`_store_copy`) into a map_store, and with the copy
    the dispatch's configuration; IREE's own configuration of the rest then failed ('write
    affecting operations on global resources are restricted to workgroup distributed
    contexts'). Offsets the analysis cannot follow through the reshape make it a scatter."""
    for block in kernel.blocks():
        ops = []
        for op in block.ops:
            if isinstance(op, t.Store) and op.mask is None and op.value.is_tile and \
                    isinstance(op.value.owner, t.Reshape) and op.offsets.is_tile:
                src = op.value.owner.src
                offsets = t.Reshape(op.offsets, t.with_dtype(src.type, op.offsets.dtype), op.loc)
                ops.append(offsets)
                op.offsets, op.value = offsets.result, src
            ops.append(op)
        block.ops = ops


@dataclass(frozen=True)
class LlvmGpu(Gpu):
    """A target of IREE's LLVMGPU code generation."""

    def wave(self) -> int:
        """Threads per warp."""
        return 32

    def tensor_cores(self) -> dict:
        """The tensor-core instructions dots run on, as NV_MMA; none by default."""
        return {}

    def tiling(self, num_warps: int) -> LlvmGpuTiling:
        return LlvmGpuTiling(num_warps=num_warps, subgroup_size=self.wave(), mma=tuple(self.tensor_cores().items()))

    def prepare(self, kernel: t.Kernel) -> None:
        drop_shortcuts(kernel)
        sink_stored_reshapes(kernel)


@dataclass(frozen=True)
class Cuda(LlvmGpu):
    """NVIDIA GPUs through IREE's cuda target and driver, on torch CUDA tensors. Validated for
    Triton kernels: the test suite's GPU part passes on an NVIDIA GPU (tests/plugins/on_target.py)."""
    name: ClassVar[str] = "cuda"
    backend: ClassVar[str] = "cuda"
    default_arch: ClassVar[str] = "sm_80"
    known_arches: ClassVar[tuple[str, ...]] = ("sm_80", "sm_89", "sm_90")
    driver: ClassVar[str] = "cuda"
    validated_for_triton: ClassVar[bool] = True
    native_mode: ClassVar[bool] = True

    @property
    def flags(self) -> tuple[str, ...]:
        # IREE takes f32 math.sqrt from libdevice, whose __nv_sqrtf is sqrt.approx unless
        # __CUDA_PREC_SQRT is set: 1 ulp off, where Triton's sqrt_rn and libdevice.sqrt are
        # correctly rounded.
        # The asynchronous execution model: a launch returns once queued (`cuda_streams`).
        return (f"--iree-cuda-target={self.arch}", "--nvvm-reflect-add=__CUDA_PREC_SQRT=1",
                "--iree-execution-model=async-external")

    def tensor_cores(self) -> dict:
        return NV_MMA

    def finish_module(self, module_text: str) -> str:
        from .cuda_streams import ordered_functions
        return ordered_functions(module_text)

    @classmethod
    def stream_order(cls, import_tensor):
        from .cuda_streams import StreamOrder
        return StreamOrder(import_tensor)


@dataclass(frozen=True)
class Hip(LlvmGpu):
    """AMD GPUs through IREE's rocm target and hip driver, on torch ROCm tensors. A warp is a
    wave of 64 threads on the gfx9 GPUs (CDNA), as in Triton's AMD backend; the CDNA GPUs IREE
    offers matrix cores for (gfx90a, gfx94x, gfx95x) run dots on them (AMD_MFMA)."""
    name: ClassVar[str] = "hip"
    backend: ClassVar[str] = "rocm"
    default_arch: ClassVar[str] = "gfx942"
    known_arches: ClassVar[tuple[str, ...]] = ("gfx90a", "gfx942", "gfx1100")
    driver: ClassVar[str] = "hip"

    @property
    def flags(self) -> tuple[str, ...]:
        return (f"--iree-rocm-target={self.arch}",)

    def wave(self) -> int:
        return 64 if self.arch.startswith("gfx9") else 32

    def tensor_cores(self) -> dict:
        return AMD_MFMA if self.arch.startswith(("gfx90a", "gfx94", "gfx95")) else {}
