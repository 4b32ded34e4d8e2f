"""triton-iree: run unchanged Triton kernels through IREE.

Installing the package registers a Triton backend (entry point ``triton.backends``, name
``iree``). Its driver is active by itself where no CUDA/ROCm GPU is usable, so
``kernel[grid](...)`` on torch CPU tensors runs on IREE's llvm-cpu target. ``activate``
selects a target explicitly.
"""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version as _version

from .errors import CompileError, DeviceError, InputError, LaunchError, TritonIreeError, UnsupportedError

try:
    __version__ = _version("triton-iree")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+src"

TARGETS = ("llvm-cpu", "cuda", "hip", "vulkan")


def activate(target: str = "llvm-cpu", arch: str | None = None) -> None:
    """Makes triton-iree Triton's active driver, compiling for `target` (default llvm-cpu).

    cuda is validated (the test suite passes on an NVIDIA GPU); hip and vulkan raise
    UnsupportedError until their lowering is (see compile.UNVALIDATED_TARGETS_VAR)."""
    from triton.backends.compiler import GPUTarget
    from triton.runtime import driver as triton_driver

    from .backend.driver import IreeDriver
    from .compile import make_target
    name = make_target(target, arch=arch).name   # refuses unknown and unvalidated targets
    gpu_target = GPUTarget("cpu", "llvm-cpu", 1) if name == "llvm-cpu" else \
        GPUTarget("iree", f"{name}:{arch}" if arch else name, 32)
    triton_driver.set_active(IreeDriver(gpu_target))


def prepare(text: str) -> str:
    """triton-shared's linalg + memref output -> a module stock iree-compile accepts."""
    from .ttshared import prepare as _prepare
    return _prepare(text)


__all__ = ["activate", "prepare", "TritonIreeError", "UnsupportedError", "CompileError",
           "LaunchError", "DeviceError", "InputError", "__version__", "TARGETS"]
