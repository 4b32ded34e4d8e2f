"""Per-target choices of the emitter."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from .targets.cpu import CpuTiling
    from .targets.gpu import GpuTiling


@dataclass(frozen=True)
class EmitOptions:
    """Per-target choices of the emitter.

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
    """
    max_workgroups: Optional[int] = None
    cpu_tiling: Optional[CpuTiling] = None
    may_alias: bool = False
    no_libm: frozenset = frozenset()
    gpu_tiling: Optional[GpuTiling] = None
    full_tiles: bool = True
