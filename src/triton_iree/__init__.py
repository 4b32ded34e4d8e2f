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

from .targets import NAMES as TARGETS


def activate(target: str = "llvm-cpu", arch: str | None = None) -> None:
    """Makes triton-iree Triton's active driver, compiling for `target` (default llvm-cpu) and
    launching on its runtime driver.

    cuda is validated (the test suite passes on an NVIDIA GPU), and vulkan for arches ampere
    (NVIDIA's driver) and llvmpipe (lavapipe); hip, other vulkan arches and metal-spirv raise
    UnsupportedError until their lowering is (see targets.UNVALIDATED_TARGETS_VAR), and a
    compile-only target (metal-spirv) raises LaunchError: it cannot launch here."""
    from triton.runtime import driver as triton_driver

    from .backend.driver import IreeDriver
    from .targets import make_target
    chosen = make_target(target, arch=arch)   # refuses unknown and unvalidated targets
    chosen.runtime_driver()                    # refuses compile-only targets
    triton_driver.set_active(IreeDriver(chosen.triton_target()))


def prepare(text: str) -> str:
    """triton-shared's linalg + memref output -> a module stock iree-compile accepts."""
    from .ttshared import prepare as _prepare
    return _prepare(text)


__all__ = ["activate", "prepare", "TritonIreeError", "UnsupportedError", "CompileError",
           "LaunchError", "DeviceError", "InputError", "__version__", "TARGETS"]
