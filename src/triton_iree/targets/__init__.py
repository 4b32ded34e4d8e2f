"""Targets: one class per IREE target (`base.Target`), and the one registry of them.

Modelled on IREE's Codegen: the targets (`cpu`: llvm-cpu; `llvmgpu`: cuda, hip; `spirv`: vulkan,
metal-spirv) sit beside the generic lowering and depend on it, never the reverse: the emitter
gets what it needs through `EmitOptions` (`Target.emit_options`), and the caller asks the target
for its rewrites of the tile program (`Target.prepare`). Adding a target is one class and one
line in `REGISTRY`; the command line, `activate`, `aot`, the backend, the runtime and `compile`
read it from here.
"""
from __future__ import annotations

import os
from typing import Optional

from ..errors import LaunchError, UnsupportedError
from .base import COPIED, DEVICE, HOST, Target
from .cpu import LlvmCpu
from .llvmgpu import Cuda, Hip
from .spirv import MetalSpirv, Vulkan

__all__ = ["ALIASES", "COPIED", "DEVICE", "HOST", "NAMES", "REGISTRY", "UNVALIDATED_TARGETS_VAR", "Cuda", "Hip",
           "LlvmCpu", "MetalSpirv", "Target", "Vulkan",
           "for_driver", "from_triton", "make_target", "target_class"]

REGISTRY: dict[str, type[Target]] = {
    "llvm-cpu": LlvmCpu,
    "cuda": Cuda,
    "hip": Hip,
    "vulkan": Vulkan,
    "metal-spirv": MetalSpirv,
}
ALIASES = {"cpu": "llvm-cpu", "rocm": "hip"}
NAMES = tuple(REGISTRY)

# Targets not validated for an input (`Target.validated_for_triton`, `validated_for_linalg`)
# or an arch (`validated_arches`) build, but are refused unless a developer working on them opts
# in: hip and metal-spirv have not run the test suite on their GPUs, vulkan has passed it on
# NVIDIA's driver (arch ampere) only, and linalg input (triton-shared's)
# carries no GPU lowering configuration, so IREE would tile its dispatches again onto the
# program id.
UNVALIDATED_TARGETS_VAR = "TRITON_IREE_UNVALIDATED_TARGETS"


def target_class(name: str) -> type[Target]:
    """The class of the target `name` (or of its alias); ValueError for an unknown name."""
    cls = REGISTRY.get(ALIASES.get(name, name))
    if cls is None:
        raise ValueError(f"unknown target '{name}' (expected {', '.join(NAMES[:-1])} or {NAMES[-1]})")
    return cls


def make_target(name: str = "llvm-cpu", *, arch: Optional[str] = None, cpu: Optional[str] = None,
                triton: bool = True) -> Target:
    """The target `name` for `arch` (its default when None; `cpu`: the LLVM CPU of llvm-cpu).
    A target not validated for the input or the arch is refused unless UNVALIDATED_TARGETS_VAR=1:
    `triton`, a Triton kernel (lowered by triton-iree, or Triton's own CUDA kernel in native
    mode), else linalg input."""
    cls = target_class(name)
    validated = cls.validated_for_triton if triton else cls.validated_for_linalg
    what = "" if triton else " for linalg input (triton-shared's)"
    arch = arch or cls.default_arch
    if validated and cls.validated_arches and arch not in cls.validated_arches:
        validated = False
        what = f" for arch '{arch}' (only for {', '.join(cls.validated_arches)})"
    if not validated and os.environ.get(UNVALIDATED_TARGETS_VAR) != "1":
        raise UnsupportedError(f"target '{cls.name}' is not validated yet{what}: its lowering may compute wrong "
                               f"answers (set {UNVALIDATED_TARGETS_VAR}=1 to use it anyway, for work on "
                               f"the GPU lowering)")
    return cls.of(arch=arch, cpu=cpu)


def from_triton(gpu_target) -> Target:
    """The target a Triton GPUTarget names (`Target.triton_target`): backend 'cpu' is llvm-cpu;
    backend 'iree' carries '<target>[:<arch>]' in its arch field. The one reader of that string."""
    if gpu_target.backend == "cpu":
        return make_target("llvm-cpu")
    name, _, arch = str(gpu_target.arch).partition(":")
    return make_target(name, arch=arch or None)


def for_driver(driver: str) -> type[Target]:
    """The target whose modules the IREE runtime driver `driver` runs."""
    for cls in REGISTRY.values():
        if driver == cls.driver or driver in cls.other_drivers:
            return cls
    raise LaunchError(f"IREE driver '{driver}' runs no triton-iree target")
