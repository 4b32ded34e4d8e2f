"""GPUs (cuda, hip: `llvmgpu`; vulkan, metal-spirv: `spirv`): what their targets share, the
per-dispatch configuration's common part (`GpuTiling`), and how IREE's GPU code generation sees
the emitted programs.

One Triton program is one IREE workgroup of num_warps warps (32 threads each; on AMD's CDNA GPUs
waves of 64, as Triton's AMD backend counts them). IREE's GPU pipelines tile a dispatch again and
map their tiles onto workgroup ids unless the root op says otherwise; the program id is the
workgroup id, so that would compute wrong answers. So the root op of every dispatch carries a
`compilation_info` whose workgroup tile sizes are all 0 (the whole tile is one workgroup's); a
tl.dot program on CUDA and on CDNA GPUs gets IREE's vector distribution with tensor cores (MFMA on
AMD: `mma_program`, `mma_configs`); otherwise thread tile sizes spread the tile over the
workgroup's threads: IREE's LLVMGPU TileAndFuse pipeline on CUDA and HIP, the SPIR-V backend's
BaseDistribute pipeline on Vulkan (which refuses LLVMGPU pipelines). A dispatch that reduces a
tile to a scalar has no parallel loop to split, so IREE never re-tiles it onto the program id; on
CUDA and HIP a row program (`row_length`) gets IREE's vector distribution of reductions
configured here (`row_reduction_configs`), on Vulkan IREE's SPIR-V SubgroupReduce pipeline
configured here (`SpirvTiling.row_reduction_configs`); on Vulkan a program with tiles in kernel
loops (layer norm) reduces by combining neighbours, elementwise ops spread over the threads
(`spirv.pairwise_reductions`), one that also reduces along some dims only gets one thread per
workgroup (`SpirvTiling.spirv_serial_reduction`), the rest IREE's own configuration.

The emitted form differs from the CPU's where IREE would otherwise drop or replace that
configuration (see `EmitOptions.gpu_tiling`'s users): tiles are stored from a linalg.copy
(IREE moves no named op into a store's row loop, and a tile only loaded and stored keeps a
linalg op), scalars from a one-element linalg.fill, scatters read their tiles after an
`iree_gpu.value_barrier`, masked rows are loaded as a tensor.pad (`LoadEmitter._gpu_pads`), a
reshaped tile is stored unreshaped (`llvmgpu.sink_stored_reshapes`) and read by a matmul through a slice
(`DotEmitter._reshape_barrier`; IREE sinks reshapes into the ops around them and rebuilds those
without their configuration), and a reduction's loop is innermost (`ReductionEmitter._reduce`:
IREE would interchange the loops and keep the tile sizes, splitting the reduction over racing
threads); on Vulkan every op of the root's rank carries the root's tile sizes, a root without size-1 loops is
preferred, a dispatch of 2-D elementwise ops only gets rows of threads (`SpirvTiling.thread_rows`),
2-D tiles are loaded by rows rather than as slabs (gathered in tl.dot programs), a plain
matmul's dot runs on IREE's SPIR-V MatmulPromoteVectorize pipeline where it has run right
(`SpirvTiling.vector_matmul`, `spirv.VECTOR_MATMUL_ARCHES`) and another float tl.dot sums in
registers (`DotEmitter._register_dot`). BaseDistribute bufferizes the
whole dispatch before spreading each op over the threads on its own, so there every tile is a
buffer in workgroup memory and ops see each other's elements only through it: a workgroup
barrier precedes every op that reads tiles (`EmitterBase._sync`), elementwise ops write over an
input (`ComputeEmitter._write_over_input`) and a dot reads a transposed operand through its
indexing map (`DotEmitter._dot_operand`), to keep within the workgroup memory (attention).

On CUDA and HIP the parts of a program that read, combine and write element after element
(atomics, scatters, histograms, scans, gathers of 2-D tiles, reductions to 64-bit scalars) run on
the workgroup's first thread between barriers (`EmitterBase._on_one_thread`); fills of a stored
scalar's element or of a tile in workgroup memory are spread over the threads on their own; and
f32 sin, cos and tan take their general argument reduction per element, as on Vulkan (`drop_shortcuts`).
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from .. import tile as t
from ..analysis import closed_form_reduce
from .base import Target

if TYPE_CHECKING:
    from ..lowering.options import EmitOptions


# Elements a thread of a row program reads at once (16 bytes of f32), as in Triton's layouts.
ROW_VECTOR = 4


@dataclass(frozen=True)
class GpuTiling:
    """Per-dispatch GPU configuration: `num_warps` warps of `subgroup_size` threads. Its
    subclasses configure dispatches for one family of IREE's pipelines (`llvmgpu`, `spirv`)."""
    num_warps: int = 4
    subgroup_size: int = 32
    # The most consecutive elements a thread takes of the innermost parallel loop (`thread_tiles`).
    thread_vector: int = 4

    @property
    def threads(self) -> int:
        return self.num_warps * self.subgroup_size

    def for_kernel(self, kernel: t.Kernel) -> "GpuTiling":
        """The configuration of `kernel`'s programs: this one, unless a subclass knows better."""
        return self

    def thread_tiles(self, loops: tuple[int, ...], iterators: tuple[str, ...]) -> list[int]:
        """Per-thread tile of each parallel loop: the innermost parallel loops are split over
        the threads, each thread taking up to `thread_vector` consecutive elements (vector
        accesses)."""
        tiles = [0 if it == "reduction" else 1 for it in iterators]
        threads = self.threads
        for d in reversed(range(len(loops))):
            if iterators[d] == "reduction":
                continue
            per = 1
            while per < self.thread_vector and loops[d] % (per * 2) == 0 and loops[d] // (per * 2) >= 1 and \
                    loops[d] // per > threads:
                per *= 2
            tiles[d] = per
            threads = max(1, threads // max(1, loops[d] // per))
        return tiles

    def row_length(self, kernel) -> Optional[int]:
        """n, where the program is a row program: it reduces 1-D tiles to scalars and all its
        tiles are 1-D of n elements, n a multiple of ROW_VECTOR x threads (softmax, layer norm).
        Such dispatches get the subclass' `row_reduction_configs`. None otherwise. (On CUDA and
        HIP a reduction of a uniform tile is computed in closed form, no linalg op: it does not
        count.)"""
        lengths, reduces = set(), False
        for op in kernel.walk():
            reduces |= isinstance(op, t.Reduce) and op.to_scalar and not (self.llvmgpu and closed_form_reduce(op))
            lengths.update(r.shape for r in op.results if r.is_tile)
        if not reduces or len(lengths) != 1:
            return None
        shape, = lengths
        if len(shape) != 1 or shape[0] % (ROW_VECTOR * self.threads):
            return None
        return shape[0]


@dataclass(frozen=True)
class Gpu(Target):
    """A GPU target: one program per workgroup of `tiling`'s threads, masked tiles only (a
    separate full-tile version of each program pays off on CPUs, where masked vector accesses
    are slow; GPU threads mask for free), but for the programs the lowering gives one
    (`ModuleEmitter._program`)."""

    @abc.abstractmethod
    def tiling(self, num_warps: int) -> GpuTiling:
        """The configuration of programs of `num_warps` warps."""

    def emit_options(self, num_warps: int = 4) -> "EmitOptions":
        from ..lowering.options import EmitOptions
        return EmitOptions(max_workgroups=None, full_tiles=False, gpu_tiling=self.tiling(num_warps))


def drop_shortcuts(kernel: t.Kernel) -> None:
    """Each `If` with a shortcut (`t.If.shortcut`: f32 sin, cos and tan) becomes its general
    branch, and the ops that only computed its condition go. The condition reduces the whole
    tile (a max of |x|), which makes IREE configure the dispatch itself, as a reduction, and
    would run an elementwise kernel as one: on CUDA it failed to ('failed to distribute': tl.cos
    of 64 f32); on Vulkan IREE's SubgroupReduce configuration refused it ('expected to contain
    <= 1 scf.if ops', 'contains conflicting lowering configuration'), and with the lowering's
    BaseDistribute configuration the If's tensor results failed to bufferize ('incompatible
    buffer types on then/else branches'). Each thread takes the general path for its own
    elements instead."""
    subst: dict[int, t.Value] = {}

    def inline(block: t.Block) -> None:
        ops = []
        for op in block.ops:
            for region in op.regions():
                inline(region)
            if isinstance(op, t.If) and op.shortcut:
                ops += op.then.ops
                subst.update({r.id: y for r, y in zip(op.results, op.then.yields)})
            else:
                ops.append(op)
        block.ops = ops

    inline(kernel.body)
    if not subst:
        return

    t.replace_uses(kernel, subst)
    blocks = kernel.blocks()
    while True:   # the condition's ops, now unused
        uses = t.uses(kernel)
        dead = {id(op) for op in kernel.walk() if isinstance(op, (t.Constant, t.Elementwise, t.Reduce, t.Reshape))
                and not any(uses.get(r.id) for r in op.results)}
        if not dead:
            return
        for b in blocks:
            b.ops = [op for op in b.ops if id(op) not in dead]
