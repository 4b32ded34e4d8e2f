"""`Target`: everything triton-iree knows about one IREE target, in one object.

A target names its iree-compile backend and flags, its architecture, the IREE runtime driver
that runs its modules and how that driver takes the caller's tensors, whether it is validated,
the Triton `GPUTarget` it is activated with, and the emitter's choices for it (`emit_options`,
`prepare`). Each concrete target is one subclass (`cpu`, `llvmgpu`, `spirv`) and one line in the
registry (`targets/__init__.py`).

Nothing here imports iree.compiler or the lowering at import time: the runtime reads targets
on installs without IREE's compiler.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Optional

from ..errors import LaunchError

if TYPE_CHECKING:
    from .. import tile as t
    from ..lowering.options import EmitOptions

# How a runtime driver takes the caller's torch tensors.
HOST = "host"       # CPU tensors, imported in place (zero-copy)
DEVICE = "device"   # GPU tensors (CUDA, ROCm), imported in place through DLPack
COPIED = "copied"   # CPU tensors, copied into device buffers and the changed bytes copied back


@dataclass(frozen=True)
class Target(abc.ABC):
    """One IREE target, for one architecture (`arch`; "" where a target has none)."""
    arch: str = ""

    name: ClassVar[str]              # the name users give (--target, activate, aot)
    backend: ClassVar[str]           # iree-compile's --iree-hal-target-backends value
    default_arch: ClassVar[str] = ""
    known_arches: ClassVar[tuple[str, ...]] = ()   # a few, for the command line's help
    driver: ClassVar[str]            # the IREE runtime driver that runs the modules
    other_drivers: ClassVar[tuple[str, ...]] = ()  # further drivers that run them
    memory: ClassVar[str] = DEVICE   # HOST, DEVICE or COPIED: how `driver` takes tensors
    import_alignment: ClassVar[int] = 64   # bytes; the alignment of each imported buffer
    # Validated against reference results on a real device: for Triton kernels (triton-iree's
    # lowering, or Triton's own kernel in native mode), for linalg input (triton-shared's).
    validated_for_triton: ClassVar[bool] = False
    validated_for_linalg: ClassVar[bool] = False
    validated_arches: ClassVar[tuple[str, ...]] = ()   # if any: the only arches validated
    compile_only: ClassVar[bool] = False   # builds modules that no driver here can run
    # Native mode: Triton's own kernel for the target, wrapped in an IREE module (`native`).
    native_mode: ClassVar[bool] = False
    # Large sorting networks run each merge as a loop (`reader.read_ttir`), not as unrolled
    # steps grouped to share gathers.
    sort_loops: ClassVar[bool] = False

    @property
    @abc.abstractmethod
    def flags(self) -> tuple[str, ...]:
        """The target's iree-compile flags (besides the backend and the common ones)."""

    @property
    def is_cpu(self) -> bool:
        return False

    @classmethod
    def of(cls, arch: str | None = None, cpu: str | None = None) -> "Target":
        """The target for `arch` (its default when None); `cpu` is for CPU targets."""
        return cls(arch=arch or cls.default_arch)

    def triton_target(self):
        """The Triton GPUTarget this target is activated with: '<name>:<arch>' in its arch
        field, which `targets.from_triton` reads back."""
        from triton.backends.compiler import GPUTarget
        return GPUTarget("iree", f"{self.name}:{self.arch}", 32)

    def runtime_driver(self) -> str:
        """The driver that launches this target's modules; refused for a compile-only target."""
        if self.compile_only:
            raise LaunchError(f"target '{self.name}' is compile-only: triton-iree builds its modules "
                              f"(triton-iree compile, aot.compile_kernel) but cannot launch them")
        return self.driver

    @abc.abstractmethod
    def emit_options(self, num_warps: int = 4) -> "EmitOptions":
        """The emitter's choices for this target, for programs of `num_warps` warps."""

    def finish_module(self, module_text: str) -> str:
        """The input module as iree-compile gets it for this target: `module_text` (any module
        triton-iree makes, the lowering's or native mode's) with what the target's runtime needs
        besides; unchanged by default."""
        return module_text

    def relaxed_module(self, module_text: str) -> Optional[str]:
        """The module for a second try after IREE refused its tiles' workgroup memory (a GPU
        target whose `rewrite_executables` checks the real limit itself); None for no second try."""
        return None

    # A rewrite of the module's executables after IREE's code generation and before it
    # serializes them (`rewrite_executables`); its name is part of each module's cache key. ""
    # for none: then iree-compile runs once, otherwise twice (`compile.commands`).
    executable_rewrite: ClassVar[str] = ""

    def rewrite_executables(self, text: str) -> str:
        """The module as `iree-compile --compile-to=executable-targets` prints it (`text`), with
        the target's `executable_rewrite` done; for iree-compile to finish from there."""
        return text

    @classmethod
    def stream_order(cls, import_tensor):
        """What orders this driver's launches with torch's stream on the device (an object with
        `launch(context, function, args, timeline)`; `import_tensor`: a torch tensor -> its HAL
        buffer view), or None: then a launch waits for torch's stream first and returns when it
        has finished."""
        return None

    def prepare(self, kernel: "t.Kernel") -> None:
        """Target-specific rewrites of the tile program before emission; none by default."""
