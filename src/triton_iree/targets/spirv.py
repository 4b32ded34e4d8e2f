"""vulkan and metal-spirv: IREE's SPIR-V code generation (`SpirvTiling`: the BaseDistribute
pipeline). What GPU targets share: `gpu.py`.

`Vulkan` names the SPIR-V properties the emitter works around, and `MetalSpirv` inherits them
from it: dispatches are configured for IREE's SPIR-V pipelines (`SpirvTiling.spirv`), SPIR-V
vectors have at most 4 elements (`narrow_vectors`), f64 exp, log and the functions built on
them are inline f64 arithmetic (`prepare`: `f64_exp_log`; GLSL.std.450 has them for 16- and
32-bit floats only), fmod is exact integer arithmetic (`f32_fmod`), and every float add,
subtract, multiply and divide of the SPIR-V is marked NoContraction, so that drivers round each
on its own (`rewrite_executables`). Vulkan's runtime side (its driver, tensors passed as copies)
is Vulkan's own; metal-spirv is compile-only here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, ClassVar, Optional

from .. import f32_fmod, f64_exp_log, float_bits, tile as t
from ..errors import CompileError, ResourceLimitError
from .base import COPIED
from .gpu import ROW_VECTOR, Gpu, GpuTiling, drop_shortcuts
from .spirv_memory import ops_named, share_workgroup_memory

if TYPE_CHECKING:
    from ..lowering.options import EmitOptions


# The most warps `SpirvTiling.for_kernel` gives a program, and the consecutive elements each of
# its threads takes of a tile.
LOOP_WARPS = 16
LOOP_VECTOR = 2
# The most threads of a row program (`SpirvTiling.row_threads`).
ROW_THREADS = 256
# A thread's columns of a vectorized matmul's accumulator (`SpirvTiling.vector_matmul`), as one of
# SPIR-V's vectors, and the K elements of each step.
MATMUL_VECTOR = 4
MATMUL_K_STEP = 4
# The most rows of that accumulator a thread takes where more warps than num_warps can spare it
# the rest, up to MATMUL_WARPS warps (`SpirvTiling._matmul_warps`).
MATMUL_THREAD_ROWS = 8
MATMUL_WARPS = 16
# The arches whose plain matmuls run on that pipeline: those the suite's pass has run it right on,
# lavapipe (`llvmpipe`) and NVIDIA's driver (`ampere`, on an H100). Others keep the register dot.
VECTOR_MATMUL_ARCHES = ("llvmpipe", "ampere")

# The workgroup memory a program may take on NVIDIA's Vulkan driver. IREE's NVIDIA targets carry
# CUDA's limit (163 KiB for sm_80); on an H100 and an H200 (driver 580.159.04) programs of 112 and
# 128 KiB never returned. The driver reports 48 KiB (maxComputeSharedMemorySize), but programs of
# 60, 65.6 (the softmax of 8192-element f32 rows), 72 and 96 KiB ran right there: the limit is the
# most that was seen to run. The `ampere` module names IREE's own target for
# `--iree-vulkan-target=ampere` with it, so that IREE's check of each dispatch's workgroup memory
# refuses more (ResourceLimitError).
NVIDIA_VULKAN_WORKGROUP_MEMORY = 96 * 1024
# IREE's target for each arch whose module names its own (`Vulkan.device_target`), as
# `--iree-vulkan-target=<arch>` makes it but for its workgroup memory (the %d).
_IREE_TARGETS = {
    "ampere": (
        '#hal.device.target<"vulkan", [#hal.executable.target<"vulkan-spirv", "vulkan-spirv-fb", '
        '{iree_codegen.target_info = #iree_gpu.target<arch = "sm_80", features = "spirv:v1.6,cap:Shader", '
        'wgp = <compute = fp64|fp32|fp16|int64|int32|int16|int8, storage = b64|b32|b16|b8, '
        'subgroup = shuffle|arithmetic, dot = dp4xi8toi32, mma = [<NV_MMA_SYNC_F32_16x8x16_F16>, '
        '<NV_MMA_SYNC_F16_16x8x16_F16>, <NV_MMA_SYNC_F32_16x8x16_BF16>, <NV_WMMA_F32_16x16x16_F16>, '
        '<NV_WMMA_F16_16x16x16_F16>], subgroup_size_choices = [32], max_workgroup_sizes = [1024, 1024, 1024], '
        'max_thread_count_per_workgroup = 1024, max_workgroup_memory_bytes = %d, '
        'max_workgroup_counts = [2147483647, 65535, 65535]>>}>]>'),
    "llvmpipe": (
        '#hal.device.target<"vulkan", [#hal.executable.target<"vulkan-spirv", "vulkan-spirv-fb", '
        '{iree_codegen.target_info = #iree_gpu.target<arch = "llvmpipe", features = "spirv:v1.6,cap:Shader,'
        'cap:PhysicalStorageBufferAddresses,cap:PhysicalStorageBuffer64,cap:Int64,cap:Float64", '
        'wgp = <compute = fp64|fp32|fp16|int64|int32|int16|int8, storage = b64|b32|b16|b8, '
        'subgroup = shuffle|arithmetic, dot = dp4xi8toi32, subgroup_size_choices = [8], '
        'max_workgroup_sizes = [1024, 1024, 1024], max_thread_count_per_workgroup = 1024, '
        'max_workgroup_memory_bytes = %d, max_workgroup_counts = [65535, 65535, 65535]>>}>]>'),
}
# The workgroup memory IREE's check of each dispatch allows on the second try of a program whose
# tiles it refused (`Vulkan.relaxed_module`): tiles then share memory (`spirv_memory`), and
# `Vulkan.rewrite_executables` checks the arch's own limit.
RELAXED_WORKGROUP_MEMORY = 1 << 24


@dataclass(frozen=True)
class SpirvTiling(GpuTiling):
    """The configuration of a dispatch for IREE's SPIR-V BaseDistribute pipeline."""
    narrow_vectors: bool = True   # see `lowering.options.GpuTilingPolicy`
    # The device's subgroup (SPIR-V's, a warp on NVIDIA): 32 on NVIDIA GPUs, 8 on lavapipe.
    # Triton's warps stay 32 threads (`threads`); this sizes the subgroup reductions.
    device_subgroup: int = 32
    # The workgroup memory a dispatch may take (bytes; `Vulkan.workgroup_memory`).
    workgroup_memory: int = 32 * 1024
    # Whether plain matmuls run on IREE's SPIR-V matmul pipeline (VECTOR_MATMUL_ARCHES).
    matmul_pipeline: bool = False
    # (M, N, K) of the program's one tl.dot where IREE's SPIR-V matmul pipeline computes it
    # (`for_kernel`); None: no such dot.
    vector_matmul: Optional[tuple[int, int, int]] = None

    llvmgpu: ClassVar[bool] = False
    spirv: ClassVar[bool] = True
    # One element a thread at a time: BaseDistribute reads and writes a thread's tile element by
    # element (it never vectorizes), so consecutive elements per thread only spread each
    # subgroup's accesses over 4 times the memory (16-byte strides); single elements make them
    # consecutive (coalesced). Programs with tiles in kernel loops take LOOP_VECTOR (`for_kernel`).
    thread_vector: int = 1

    def for_kernel(self, kernel: t.Kernel) -> "SpirvTiling":
        """Programs that carry tiles through kernel loops and compute no tl.dot (layer norm) get
        a thread for every 2 elements of their largest tile, up to LOOP_WARPS warps, where
        num_warps gives fewer, and each thread takes LOOP_VECTOR consecutive elements of a tile
        where the tile has more elements than threads. BaseDistribute gives each thread its
        elements one after another, and such a program's loop accumulates in workgroup memory
        between barriers: more threads, and a fixed count of elements a thread whose loads the
        driver can issue together, keep more loads in flight. Programs without loops gained
        neither consistently (measurements on H100s: docs/gpu.md, Vulkan). A plain matmul on
        IREE's SPIR-V matmul pipeline may get more warps too (`_matmul_warps`)."""
        ops = list(kernel.walk())
        if any(isinstance(op, t.Dot) for op in ops):
            mm = self._vector_matmul(kernel, ops) if self.matmul_pipeline else None
            return replace(self, vector_matmul=mm) if mm is None else self._matmul_warps(mm)
        if not any(t.tiles_in_loop(op) for op in ops):
            return self
        largest = max(math.prod(r.shape) for op in ops for r in op.results if r.is_tile)
        warps = min(LOOP_WARPS, largest // (2 * self.subgroup_size))
        return replace(self, num_warps=max(warps, self.num_warps), thread_vector=LOOP_VECTOR)

    def _matmul_warps(self, mm: tuple[int, int, int]) -> "SpirvTiling":
        """This configuration for the vector matmul `mm`, with the warps doubled, up to
        MATMUL_WARPS, while each thread would take more than MATMUL_THREAD_ROWS rows of the
        accumulator and the doubled threads still split the tile (`_splits`). On H100s (fp16
        4096^3; docs/gpu.md, Vulkan), 16 rows a thread ran 1.2 to 5.7 times slower than the same
        tile with twice the warps and 8 rows (64 x 64 at 2 warps 38.96 ms, at 4 warps 6.89), and
        4 rows were not faster than 8."""
        m, n, _ = mm
        tiling = replace(self, vector_matmul=mm)
        while m * (n // MATMUL_VECTOR) > MATMUL_THREAD_ROWS * tiling.threads and tiling.num_warps < MATMUL_WARPS:
            more = replace(tiling, num_warps=tiling.num_warps * 2)
            if not more._splits(m, n):
                break
            tiling = more
        return tiling

    def _splits(self, m: int, n: int) -> bool:
        """Whether an m x n accumulator splits into the threads' tiles of MATMUL_VECTOR columns:
        every column tile in a row of threads, and the rows evenly over the rows of threads."""
        cols = n // MATMUL_VECTOR
        return n % MATMUL_VECTOR == 0 and cols <= self.threads and self.threads % cols == 0 and \
            m % (self.threads // cols) == 0

    def _vector_matmul(self, kernel: t.Kernel, ops: list[t.Op]) -> Optional[tuple[int, int, int]]:
        """(M, N, K) of the one tl.dot of a program computed by IREE's SPIR-V MatmulPromoteVectorize
        pipeline: f16, bf16 or f32 operands, each a loaded tile (or its transpose), into an f32
        accumulator the dot writes over (`_accumulates_in_place`), 2-D, in a program with no
        other reduction, scan, gather, atomic or histogram, in tiles that split into the threads'
        (MATMUL_VECTOR columns, K in steps of MATMUL_K_STEP) and whose workgroup memory fits.
        That pipeline keeps each thread's tile of the accumulator in registers across
        the K steps and reads the operands as vectors, from copies it makes in workgroup memory,
        padded against bank conflicts. None otherwise: the dot is a `_register_dot`."""
        dots = [op for op in ops if isinstance(op, t.Dot)]
        serial = (t.Reduce, t.Scan, t.Gather, t.Atomic, t.Histogram)
        if len(dots) != 1 or any(isinstance(op, serial) for op in ops):
            return None
        d = dots[0]
        if len(d.a.shape) != 2 or d.acc.dtype != "f32" or \
                any(v.dtype not in ("f16", "bf16", "f32") for v in (d.a, d.b)):
            return None
        loaded = all(isinstance(v.owner, t.Load) or
                     isinstance(v.owner, t.Trans) and isinstance(v.owner.src.owner, t.Load) for v in (d.a, d.b))
        if not loaded or not _accumulates_in_place(kernel, d):
            return None
        (m, k), n = d.a.shape, d.b.shape[1]
        if k % MATMUL_K_STEP or not self._splits(m, n):
            return None
        # The accumulator and both operands twice (the program's tiles and the pipeline's copies),
        # rows padded by 16 bytes.
        def tile(rows: int, columns: int, dtype: str) -> int:
            return rows * (columns * t.bitwidth(dtype) // 8 + 16)
        need = tile(m, n, "f32") + 2 * (tile(m, k, d.a.dtype) + tile(k, n, d.b.dtype))
        return (m, n, k) if need <= self.workgroup_memory else None

    def spirv_lowering_config(self, loops: tuple[int, ...], iterators: tuple[str, ...]) -> str:
        """The root's tile sizes. IREE's SPIR-V pipeline tiles every op of the dispatch with the
        first lowering_config it finds and requires the configs it finds to be equal, so the
        ops of the root's rank carry the root's too: then the tiling is the root's even where
        bufferization turns the root into a memref.copy (a tile that is only loaded and
        stored), which leaves no config behind."""
        zeros = ", ".join("0" for _ in loops)
        thread = ", ".join(map(str, self.thread_tiles(loops, iterators)))
        return f"#iree_codegen.lowering_config<tile_sizes = [[{zeros}], [{thread}]]>"

    def compilation_info(self, loops: tuple[int, ...], iterators: tuple[str, ...], rows: int = 1) -> str:
        """The root's configuration; `rows` rows of threads (`thread_rows`). The `vector_matmul`:
        IREE's MatmulPromoteVectorize pipeline, a thread per MATMUL_VECTOR columns in each row
        of threads."""
        if self.vector_matmul is not None and tuple(loops) == self.vector_matmul and iterators[-1] == "reduction":
            cols = loops[1] // MATMUL_VECTOR
            thread_rows = loops[0] * cols // self.threads
            return (f"#iree_codegen.compilation_info<lowering_config = #iree_codegen.lowering_config<tile_sizes = "
                    f"[[0, 0, 0], [{thread_rows}, {MATMUL_VECTOR}], [0, 0, {MATMUL_K_STEP}]]>, "
                    f"translation_info = #iree_codegen.translation_info<pipeline = "
                    f"#iree_gpu.spirv_pipeline<MatmulPromoteVectorize> "
                    f"workgroup_size = [{cols}, {self.threads // cols}, 1], "
                    f"{{pipeline_depth = 1 : i64, store_stage = 1 : i64}}>>")
        return (f"#iree_codegen.compilation_info<lowering_config = {self.spirv_lowering_config(loops, iterators)}, "
                f"translation_info = #iree_codegen.translation_info<pipeline = "
                f"#iree_gpu.spirv_pipeline<BaseDistribute> workgroup_size = [{self.threads // rows}, {rows}, 1]>>")

    def thread_rows(self, ops, root) -> int:
        """The rows of threads of a dispatch whose ops are all 2-D and elementwise over their
        loops (a tl.dot's `_register_dot`, 2-D elementwise programs): as many as leave each row
        one thread per column tile of the root, where that spreads the threads over more of the
        tile. BaseDistribute gives the threads of a row (x) the columns and the rows of threads
        (y) the tile's rows, each thread every `rows`-th row: a 64 x 64 tile has 2 rows of 64
        threads rather than 64 threads doing every row and 64 idle. 1 for other dispatches: an op
        of another rank or with a reduction would run on every row of threads, and where it
        writes over its input or accumulates, each row would apply it again."""
        if not all(len(o.loops) == 2 and o.iterators == ("parallel", "parallel") for o in ops):
            return 1
        cols = root.loops[1] // self.thread_tiles(root.loops, root.iterators)[1]
        return self.threads // cols if cols < self.threads and self.threads % cols == 0 else 1

    @property
    def row_threads(self) -> int:
        """The threads of a row program's workgroup: Triton's 32 x num_warps, at most
        ROW_THREADS and the square of the device's subgroup: IREE reduces across subgroups with
        one subgroup reduction of the subgroups' results (64 threads on lavapipe's subgroups of
        8). Softmax of 8192^2 on an H100, 100 invocations: 31 to 34 ms with 256 threads, 42 to
        43 with 512, 51 to 54 with 1024 (Triton's at 16 warps: 18.1)."""
        return min(self.threads, ROW_THREADS, self.device_subgroup * self.device_subgroup)

    def row_length(self, kernel) -> Optional[int]:
        """As on CUDA, with `row_threads`, and where every reduction to a scalar gives 16- or
        32-bit values: IREE distributes reductions of those only (a sum of booleans failed to
        compile: 'vector.transfer_read' op requires the bitwidth of the minor 1-D vector to be
        an integral multiple of the bitwidth of the source element type)."""
        n = super().row_length(kernel)
        if n is None or n % (ROW_VECTOR * self.row_threads):
            return None
        if any(isinstance(op, t.Reduce) and op.to_scalar and any(t.bitwidth(r.dtype) not in (16, 32) for r in op.results)
               for op in kernel.walk()):
            return None
        return n

    def row_reduction_configs(self, ops, n: int) -> Optional[list[str]]:
        """The attributes of a row program's linalg ops (`row_length`): IREE's SPIR-V
        SubgroupReduce pipeline with `row_threads` threads (num_warps subgroups of 32 on NVIDIA).
        It walks each op of the row in steps of ROW_VECTOR x threads elements, each thread
        taking ROW_VECTOR consecutive ones of each step (a subgroup's accesses are consecutive),
        and reduces each thread's part, then across each subgroup (subgroup operations), then
        across the subgroups through workgroup memory. Every linalg op carries the same tile
        sizes (none per workgroup, one step per reduction step), as IREE's own configuration
        of that pipeline does; the last reduction to a scalar is the root. (With the whole row
        as one step, each thread took n / threads consecutive elements.) None
        where an op is not of the row's length (a reduction seeded with its first element,
        argmax, reduces n - 1)."""
        row = [i for i, o in enumerate(ops) if o.kind == "generic"]
        whole = [i for i in row if "parallel" not in ops[i].iterators]
        if not whole or any(ops[i].loops != (n,) for i in row):
            return None
        cfg = f"#iree_codegen.lowering_config<tile_sizes = [[], [{ROW_VECTOR * self.row_threads}]]>"
        attrs = [f"lowering_config = {cfg}" if o.kind in ("generic", "fill", "copy") else "" for o in ops]
        attrs[whole[-1]] = (f"compilation_info = #iree_codegen.compilation_info<lowering_config = {cfg}, "
                            f"translation_info = #iree_codegen.translation_info<pipeline = "
                            f"#iree_gpu.spirv_pipeline<SubgroupReduce> workgroup_size = [{self.row_threads}, 1, 1] "
                            f"subgroup_size = {self.device_subgroup}>>")
        return attrs

    def spirv_serial_reduction(self, ops) -> Optional[list[str]]:
        """A dispatch that reduces a tile to a scalar and also reduces along some dims only
        (`tl.max(..., keep_dims=True)`, a row reduction), or has linalg ops in kernel loops
        (where `pairwise_reductions` leaves no reduction to a scalar of a 1-D tile of 2^k
        elements, as Triton's are): one thread per workgroup, IREE's BaseDistribute pipeline
        with no tiling, on the last reduction to a scalar, the others without configuration.
        IREE configures such a dispatch itself the same way where its tiles have 512 elements or
        more; with fewer its SubgroupReduce configuration (tile sizes [[], [n]]) vectorizes the
        ops in the loops whole, wider than SPIR-V's vectors ('failed to legalize operation'), and
        its partial-reduction tiling of the root refused the other reduction ('tiling parallel
        dimensions is not supported with partial reduction tiling strategies'). None for other
        dispatches: IREE's own configuration is kept (softmax: SubgroupReduce)."""
        whole = [i for i, o in enumerate(ops) if o.iterators and "parallel" not in o.iterators]
        partial = any(o.iterators and "parallel" in o.iterators and "reduction" in o.iterators for o in ops)
        if not whole or not (partial or any(o.depth for o in ops if o.kind == "generic")):
            return None
        attrs = [""] * len(ops)
        attrs[whole[-1]] = ("compilation_info = #iree_codegen.compilation_info<lowering_config = "
                            "#iree_codegen.lowering_config<tile_sizes = []>, translation_info = "
                            "#iree_codegen.translation_info<pipeline = #iree_gpu.spirv_pipeline<BaseDistribute> "
                            "workgroup_size = [1, 1, 1]>>")
        return attrs


def _accumulates_in_place(kernel: t.Kernel, dot: t.Dot) -> bool:
    """Whether `dot` writes over its accumulator in IREE's bufferization: the accumulator has
    no other use, and where it is a loop's carried tile, the loop carries the dot's result (and
    nothing else uses it) and starts from a constant or a tile nothing else uses. IREE's SPIR-V
    matmul pipeline spreads a copy into workgroup memory over the workgroup's threads even where the
    copy is one thread's tile, so a bufferization copy of the accumulator (an accumulator also
    scaled, `acc * decay`) was left mostly undone."""
    acc, uses = dot.acc, t.uses(kernel)
    if uses.get(acc.id) != [dot]:
        return False
    if not isinstance(acc.owner, t.Block):
        # (Not carried by a loop or yielded from a branch: the accumulator of the next step
        # would be another tile than the one the dot wrote over.)
        return not any(op.regions() for op in uses.get(dot.result.id, []))
    loop = next((op for op in kernel.walk() if isinstance(op, t.For) and op.body is acc.owner), None)
    if loop is None or acc not in loop.iter_args:
        return False
    i = loop.iter_args.index(acc)
    # (A constant start, `tl.zeros`, is a fill of its own where it is a tile: other uses read
    # its value, as the masked loads' `other=0.0`.)
    init = loop.inits[i]
    return loop.body.yields[i] is dot.result and uses.get(dot.result.id) == [loop] and \
        (uses.get(init.id) == [loop] or isinstance(init.owner, t.Constant))


def pairwise_reductions(kernel: t.Kernel) -> None:
    """In a program with tiles in kernel loops (layer norm), each reduction of a 1-D tile of n
    elements (a power of two) to scalars as log2(n) steps that combine neighbouring elements
    (the halves of `tl.split` of the tile as (n/2, 2), combined by `tl.map_elementwise` of the
    combiner), then the one element left: elementwise ops that IREE's BaseDistribute pipeline
    spreads over the threads, where a reduction of a whole tile runs on one thread with the rest
    of the dispatch (`SpirvTiling.spirv_serial_reduction`). Neighbours keep the combiner's
    operands in order."""
    if not any(t.tiles_in_loop(op) for op in kernel.walk()):
        return
    subst: dict[int, t.Value] = {}
    for block in kernel.blocks():
        ops: list[t.Op] = []
        for op in block.ops:
            n = op.srcs[0].shape[0] if isinstance(op, t.Reduce) and op.to_scalar else 0
            if n < 2 or n & (n - 1):
                ops.append(op)
                continue
            srcs = op.srcs
            while n > 1:
                n //= 2
                halves: list[list[t.Value]] = [[], []]
                for s in srcs:
                    ops.append(t.Reshape(s, t.TileType((n, 2), s.dtype), op.loc))
                    ops.append(t.Split(ops[-1].result, [t.TileType((n,), s.dtype)] * 2, op.loc))
                    halves[0].append(ops[-1].results[0])
                    halves[1].append(ops[-1].results[1])
                ops.append(t.MapElementwise(halves[0] + halves[1], op.combiner,
                                            [t.TileType((n,), s.dtype) for s in srcs], op.loc))
                srcs = ops[-1].results
            for r, s in zip(op.results, srcs):
                ops.append(t.Unsplat(s, r.type, op.loc))
                subst[r.id] = ops[-1].result
        block.ops = ops
    if subst:
        t.replace_uses(kernel, subst)


# SPIR-V's float arithmetic ops (`Vulkan.rewrite_executables`).
_FLOAT_OPS = frozenset(f"spirv.{n}" for n in ("FAdd", "FSub", "FMul", "FDiv", "FRem", "FMod", "FNegate",
                                               "VectorTimesScalar", "Dot"))


@dataclass(frozen=True)
class Vulkan(Gpu):
    """IREE's vulkan-spirv target and vulkan driver, on torch CPU tensors passed as copies
    (importing host memory in place, through VK_EXT_external_memory_host, needs whole pages, and
    pages a tensor shares with other objects were corrupted on Mesa's lavapipe). `llvmpipe` is
    IREE's name for lavapipe; the default arch, `ampere`, describes an NVIDIA GPU."""
    name: ClassVar[str] = "vulkan"
    backend: ClassVar[str] = "vulkan-spirv"
    default_arch: ClassVar[str] = "ampere"
    known_arches: ClassVar[tuple[str, ...]] = ("ampere", "rdna3", "llvmpipe")
    driver: ClassVar[str] = "vulkan"
    memory: ClassVar[str] = COPIED
    # The test suite's GPU pass (tests/plugins/on_target.py) passes on NVIDIA's Vulkan driver
    # (an H100, for ampere). On lavapipe (llvmpipe) sorts of 256 elements and more need more
    # than its 32 KiB of workgroup memory, and checked mode more push constants than its 128 bytes.
    validated_for_triton: ClassVar[bool] = True
    validated_arches: ClassVar[tuple[str, ...]] = ("ampere",)
    # SPIR-V has no vectors wider than 4 elements: tiles cross control flow as tensors, and
    # 2-D tiles are loaded by rows rather than through a slab's 2-D view.
    narrow_vectors: ClassVar[bool] = True
    executable_rewrite: ClassVar[str] = "no_contraction, shared workgroup memory"   # `rewrite_executables`
    # Each gathered tile takes workgroup memory of its own on SPIR-V: grouped steps of a sort
    # would take more, a loop takes one tile a merge.
    sort_loops: ClassVar[bool] = True

    @property
    def flags(self) -> tuple[str, ...]:
        # The asynchronous execution model: a launch waits on its own fence. Through IREE's
        # synchronous wrapper, a launch of one workgroup took 0.58 ms on an H100's Vulkan driver,
        # against 0.28 ms invoked with fences (a 4-byte queue copy, submitted and waited on: 0.05 ms).
        return (f"--iree-vulkan-target={self.arch}", "--iree-execution-model=async-external")

    def emit_options(self, num_warps: int = 4) -> "EmitOptions":
        return replace(super().emit_options(num_warps), device_target=self.device_target)

    @property
    def device_target(self) -> Optional[str]:
        """The device target the module names (`EmitOptions.device_target`): for `ampere` and
        `llvmpipe`, IREE's with `workgroup_memory` (for `ampere` NVIDIA_VULKAN_WORKGROUP_MEMORY,
        not CUDA's); None (iree-compile's, from `flags`) otherwise."""
        template = _IREE_TARGETS.get(self.arch)
        return template % self.workgroup_memory if template else None

    def relaxed_module(self, module_text: str) -> Optional[str]:
        """`module_text` naming the arch's target with RELAXED_WORKGROUP_MEMORY, for a second
        try after IREE refused its tiles' workgroup memory (`compile.build`): IREE counts every
        tile's memory apart, and tiles used one after another share it once its code generation
        is done (`rewrite_executables`). None for arches whose module does not name its target."""
        template = _IREE_TARGETS.get(self.arch)
        if template is None:
            return None
        from iree.compiler import ir
        with ir.Context():
            module = ir.Module.parse(module_text)
            module.operation.attributes["hal.device.targets"] = ir.Attribute.parse(
                f"[{template % RELAXED_WORKGROUP_MEMORY} : !hal.device]")
            return module.operation.get_asm(enable_debug_info=True, use_local_scope=True, assume_verified=True)

    def tiling(self, num_warps: int) -> SpirvTiling:
        return SpirvTiling(num_warps=num_warps, subgroup_size=32, narrow_vectors=self.narrow_vectors,
                           device_subgroup=self.device_subgroup, workgroup_memory=self.workgroup_memory,
                           matmul_pipeline=self.arch in VECTOR_MATMUL_ARCHES)

    @property
    def workgroup_memory(self) -> int:
        """The workgroup memory a dispatch may take on the arch (bytes), as IREE's check of each
        dispatch counts it: NVIDIA_VULKAN_WORKGROUP_MEMORY for `ampere`, 64 KiB for AMD's
        `rdna3`, 32 KiB elsewhere (lavapipe; Apple GPUs through metal-spirv)."""
        return {"ampere": NVIDIA_VULKAN_WORKGROUP_MEMORY, "rdna3": 64 * 1024}.get(self.arch, 32 * 1024)

    @property
    def device_subgroup(self) -> int:
        """The subgroup size of IREE's target for the arch (lavapipe's is 8)."""
        return 8 if self.arch == "llvmpipe" else 32

    def rewrite_executables(self, text: str) -> str:
        """Every float add, subtract, multiply, divide, remainder, negation and dot product of
        the SPIR-V marked `no_contraction` (SPIR-V's NoContraction decoration, which MLIR's
        serializer writes for that attribute; IREE's conversion to SPIR-V keeps no attribute of
        the arith ops, so it is set on the SPIR-V ops, before serialization). Without it a
        Vulkan driver may contract and reassociate float arithmetic (Vulkan's precision rules),
        and Mesa's does: lavapipe folded (x + 1.5 2^52) - 1.5 2^52 into x, so x - round(x) in f32
        sin's argument reduction was 0 for every x (sin(0.5) gave 3e-45), and two-sums and
        Dekker's products, on which the f64 functions' reductions rely, lose their low parts.
        With it each such op is rounded on its own, and none is fused into a multiply-add
        (IREE's explicit ones, a matmul's, stay fused). Then tiles used one after another share
        workgroup memory (`_share_workgroup_memory`). The module is read and written with MLIR's
        Python bindings."""
        from iree.compiler import ir

        def mark(op) -> None:
            for region in op.regions:
                for block in region.blocks:
                    for inner in block.operations:
                        inner = inner.operation
                        if inner.name in _FLOAT_OPS:
                            inner.attributes["no_contraction"] = ir.UnitAttr.get()
                        mark(inner)
        with ir.Context():
            try:
                module = ir.Module.parse(text)
            except ir.MLIRError as e:
                raise CompileError(f"the SPIR-V executables could not be read to mark their float ops "
                                   f"no_contraction: {e}") from None
            mark(module.operation)
            self._share_workgroup_memory(module)
            return str(module)

    def _share_workgroup_memory(self, module) -> None:
        """Tiles used one after another share workgroup memory (`spirv_memory`). A module
        compiled for RELAXED_WORKGROUP_MEMORY (`relaxed_module`) must then fit the arch's own
        limit, or it is refused as IREE refuses a dispatch over the limit."""
        from iree.compiler.dialects import iree_gpu
        shared = share_workgroup_memory(module)
        if not any(iree_gpu.TargetInfo.get_gpu_target_info(v.attributes["target"]).max_workgroup_memory_bytes
                   == RELAXED_WORKGROUP_MEMORY for v in ops_named(module.operation, "hal.executable.variant")):
            return
        limit = self.workgroup_memory
        for name, (_, after) in shared.items():
            if after is None:
                raise CompileError(f"the workgroup memory of '{name}', which IREE refused for {self.name} "
                                   f"({self.arch}), could not be counted: a variable's type has no size known here")
            if after > limit:
                raise ResourceLimitError(
                    f"the kernel's tiles need {after} bytes of workgroup memory in one program (tiles used one "
                    f"after another sharing it), more than the {limit} bytes {self.name} ({self.arch}) has: use "
                    f"smaller block sizes (the tl.constexpr arguments that set the tiles' shapes)",
                    needed=after, limit=limit)

    def prepare(self, kernel: t.Kernel) -> None:
        # f32 sin, cos and tan: each element's general argument reduction (no tile-wide test).
        drop_shortcuts(kernel)
        # SPIR-V's GLSL.std.450 has no f64 Exp, Log, Exp2, Log2 or Pow: f64 exp, log and the
        # functions IREE builds on them as inline f64 arithmetic.
        f64_exp_log.expand_kernel(kernel)
        # OpFRem is not exact: fmod of f32, f16 and bf16 in integer arithmetic.
        f32_fmod.expand_kernel(kernel)
        # x.to(f16).to(f32) must round x: the upcast built from the f16's bits.
        float_bits.expand_round_trips(kernel)
        # Layer norm's sums: spread over the threads, not run with the whole program on one.
        pairwise_reductions(kernel)


@dataclass(frozen=True)
class MetalSpirv(Vulkan):
    """Apple GPUs through IREE's metal-spirv target: SPIR-V code generation (Vulkan's, with its
    SPIR-V properties), translated to Metal Shading Language. Compile-only: the module embeds
    the MSL source, which Metal compiles when it loads the module (a .metallib would need Apple's
    toolchain), and IREE's metal driver runs on macOS and iOS only. The arch is the platform."""
    name: ClassVar[str] = "metal-spirv"
    backend: ClassVar[str] = "metal-spirv"
    default_arch: ClassVar[str] = "macos"
    known_arches: ClassVar[tuple[str, ...]] = ("macos", "ios", "ios-simulator")
    driver: ClassVar[str] = "metal"
    compile_only: ClassVar[bool] = True
    validated_for_triton: ClassVar[bool] = False
    validated_arches: ClassVar[tuple[str, ...]] = ()

    @property
    def flags(self) -> tuple[str, ...]:
        return (f"--iree-metal-target-platform={self.arch}", "--iree-metal-compile-to-metallib=false")
