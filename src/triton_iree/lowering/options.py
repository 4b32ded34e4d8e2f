"""Per-target choices of the emitter, and what it asks of a target's tiling (the targets
package implements these protocols; the lowering imports no target)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol, Union


class CpuTilingPolicy(Protocol):
    """Per-op vector tile sizes for IREE's llvm-cpu code generation (`targets.cpu.CpuTiling`)."""

    def configures(self, ops) -> bool:
        """Whether a dispatch with these linalg ops (`_LinalgOp`) gets per-op configs."""

    def lowering_config(self, kind: str, loops: tuple[int, ...], iterators: tuple[str, ...],
                        elt_bytes: int, math: bool = False) -> str:
        """One op's lowering_config attribute."""

    def compilation_info(self, lowering_config: str) -> str:
        """The root op's compilation_info around its lowering_config."""


class GpuTilingPolicy(Protocol):
    """The configuration of a GPU dispatch. `llvmgpu`: configured for IREE's LLVMGPU pipelines
    (TileAndFuse, vector distribution); `spirv`: for its SPIR-V BaseDistribute pipeline;
    `narrow_vectors`: the target's vectors have at most 4 elements (SPIR-V), so tiles cross
    control flow as tensors and 2-D tiles are loaded by rows, not through a slab's 2-D view."""
    llvmgpu: bool
    spirv: bool
    narrow_vectors: bool

    def compilation_info(self, loops: tuple[int, ...], iterators: tuple[str, ...]) -> str:
        """The root op's compilation_info."""

    def for_kernel(self, kernel) -> "GpuTilingPolicy":
        """The configuration of `kernel`'s programs (a target may size them by the kernel)."""


class LlvmGpuTilingPolicy(GpuTilingPolicy, Protocol):
    """What the emitter asks of a tiling where `llvmgpu` holds (`targets.llvmgpu.LlvmGpuTiling`)."""

    def lowering_config(self, loops: tuple[int, ...], iterators: tuple[str, ...]) -> str:
        """A non-root op's lowering_config."""

    def row_length(self, kernel) -> Optional[int]:
        """n, where the program is a row program of n-element rows; None otherwise."""

    def row_reduction_configs(self, ops, n: int) -> Optional[list[str]]:
        """The attributes of a row program's linalg ops; None to keep IREE's configuration."""

    def mma_program(self, kernel) -> Optional[dict]:
        """{id(dot): plan} where every tl.dot of the program runs on tensor cores; else None."""

    def mma_configs(self, ops) -> list[str]:
        """The attributes of a tensor-core program's linalg ops."""

    def reduced_on_one_thread(self, op) -> bool:
        """Whether the reduction `op` runs on the workgroup's first thread."""


class SpirvTilingPolicy(GpuTilingPolicy, Protocol):
    """What the emitter asks of a tiling where `spirv` holds (`targets.spirv.SpirvTiling`).
    `vector_matmul`: (M, N, K) of the program's one tl.dot where it is a linalg.matmul on IREE's
    SPIR-V matmul pipeline, which `compilation_info` configures; None: no such dot."""
    vector_matmul: Optional[tuple[int, int, int]]

    def spirv_lowering_config(self, loops: tuple[int, ...], iterators: tuple[str, ...]) -> str:
        """The root's tile sizes, which the ops of its rank carry too."""

    def row_length(self, kernel) -> Optional[int]:
        """n, where the program is a row program of n-element rows; None otherwise."""

    def row_reduction_configs(self, ops, n: int) -> Optional[list[str]]:
        """The attributes of a row program's linalg ops (SubgroupReduce); None: not configured."""

    def spirv_serial_reduction(self, ops) -> Optional[list[str]]:
        """The attributes of a dispatch reduced on one thread; None to keep IREE's configuration."""


@dataclass(frozen=True)
class EmitOptions:
    """Per-target choices of the emitter (`targets.Target.emit_options` makes them).

    max_workgroups: run several Triton programs (consecutive along axis 0) in one IREE
    workgroup so that there are at most about this many workgroups. Each workgroup costs the
    CPU executor a task; one program per task is too fine for small blocks. None (GPUs): one
    program per workgroup.
    cpu_tiling: per-op lowering configs for llvm-cpu (None: IREE's defaults).
    may_alias: pointer arguments may share memory (see `memory_order`).
    no_libm: (math op, element type) pairs that the target's code would compute by calling
    libm, which its executables cannot link: refused with UnsupportedError.
    gpu_tiling: the GPU configuration of each dispatch's root op (None: not a GPU).
    full_tiles: give each program a static full-tile version beside the masked one.
    device_target: the `#hal.device.target` attribute the module names as its
    `hal.device.targets` (iree-compile then takes it over its own flags' target); None: the
    flags' target.
    """
    max_workgroups: Optional[int] = None
    cpu_tiling: Optional[CpuTilingPolicy] = None
    may_alias: bool = False
    no_libm: frozenset = frozenset()
    gpu_tiling: Optional[Union[LlvmGpuTilingPolicy, SpirvTilingPolicy]] = None
    full_tiles: bool = True
    device_target: Optional[str] = None
