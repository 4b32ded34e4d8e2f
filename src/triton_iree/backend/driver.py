"""The backend's driver: target selection, module loading and the launcher."""
from __future__ import annotations

import atexit
import operator
import os
import statistics
import time
from typing import Optional

from triton.backends.compiler import GPUTarget
from triton.backends.driver import DriverBase

from .. import abi, arguments, checks, compat, prints, runtime, targets
from ..errors import LaunchError


def gpu_usable() -> bool:
    """True when torch sees a CUDA or ROCm GPU: then Triton's own driver should be active."""
    try:
        import torch
    except ImportError:
        return False
    try:
        return torch.cuda.is_available()
    except Exception:
        return False


def cpu_benchmarker(fn, warmup: int = 5, rep: int = 25, quantiles=None, return_mode: str = "mean",
                    **_ignored):
    """`triton.testing.do_bench` for the CPU: wall-clock milliseconds of `fn()`."""
    fn()
    times = []
    deadline = time.perf_counter() + max(warmup, 1) / 1000.0
    while time.perf_counter() < deadline:
        fn()
    end = time.perf_counter() + rep / 1000.0
    while True:
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000.0)
        if time.perf_counter() >= end and len(times) >= 3:
            break
    if quantiles is not None:
        qs = statistics.quantiles(times, n=100, method="inclusive") if len(times) > 1 else times * 99
        out = [qs[min(max(int(q * 100) - 1, 0), 98)] if 0 < q < 1 else (min(times) if q <= 0 else max(times))
               for q in quantiles]
        return out[0] if len(out) == 1 else out
    return {"mean": statistics.fmean, "median": statistics.median, "min": min, "max": max,
            "all": list}[return_mode](times)


class IreeUtils:
    """`driver.utils`: what Triton's CompiledKernel asks of a device."""

    @staticmethod
    def load_binary(name: str, kernel: bytes, shared: int, device):
        target = IreeDriver.current_target
        loaded = runtime.LoadedKernel(kernel, name, targets.from_triton(target).runtime_driver())
        return loaded, loaded, 0, 0, 1 << 30

    @staticmethod
    def unload_module(module) -> None:
        # Called by Triton >= 3.8 when a compiled kernel is freed. The module's IREE objects
        # are released with the kernel's last reference to them; nothing else holds them.
        return None

    @staticmethod
    def get_device_properties(device) -> dict:
        return {"max_shared_mem": 1 << 30, "multiprocessor_count": os.cpu_count() or 1,
                "max_num_regs": 1 << 16, "warpSize": 1}


def launch_grid(gx, gy, gz, kernel: str) -> tuple[int, int, int]:
    """The grid as ints; like Triton's own launchers, anything else (2.5) is refused."""
    try:
        return operator.index(gx), operator.index(gy), operator.index(gz)
    except TypeError:
        raise LaunchError(f"the grid must be integers, got ({gx!r}, {gy!r}, {gz!r})", kernel=kernel) from None


class IreeLauncher:
    """Launches one compiled kernel: `launcher(gx, gy, gz, stream, function, ...args)`."""

    def __init__(self, src, metadata):
        signature = dict(src.signature)
        names = list(signature.keys())
        self.name = metadata.name
        self.abi = abi.of_signature(names, signature, self.name, getattr(metadata, "iree_written", None))
        self.printer = prints.Printer.of(metadata)
        self.checks = checks.Checks.of(metadata, self.printer.extend(self.abi) if self.printer else self.abi)
        keep = [i for i, n in enumerate(names) if signature[n] != "constexpr"]
        # The non-constexpr arguments as a tuple (itemgetter: one C call per launch).
        self.keep = operator.itemgetter(*keep) if len(keep) > 1 else lambda args: tuple(args[i] for i in keep)
        self.buffers = self.abi.buffer_indices
        from triton.runtime.jit import TensorWrapper   # not at the top: triton.runtime imports this module
        self.wrapper = TensorWrapper
        self.shared = runtime.SharedMemory.of(metadata, targets.from_triton(IreeDriver.current_target))
        # Told to the loaded module at the first launch (Triton loads it without the metadata).
        self.stack_bytes = getattr(metadata, "iree_stack_bytes", None)
        self.told = False

    def __call__(self, gridX, gridY, gridZ, stream, function, packed_metadata, launch_metadata,
                 enter_hook, exit_hook, *args):
        if type(gridX) is int and type(gridY) is int and type(gridZ) is int:   # as Triton passes it
            grid = (gridX, gridY, gridZ)
        else:
            grid = launch_grid(gridX, gridY, gridZ, self.name)
        if not self.told:
            function.allow_inline(self.stack_bytes)
            self.told = True
        values = self.keep(args)
        wrapper = self.wrapper
        for i in self.buffers:
            if type(values[i]) is wrapper:   # triton.reinterpret
                values = list(values)
                values[i] = arguments.reinterpreted(values[i], self.abi.params[i], self.name)
        if enter_hook is not None:
            enter_hook(launch_metadata)
        if self.printer is not None:
            self.printer.launch(function, self.abi, values, grid, self.checks, self.shared)
        else:
            checks.launch(function, self.abi, values, grid, self.checks, self.shared)
        if exit_hook is not None:
            exit_hook(launch_metadata)


atexit.register(compat.drop_compiled_kernels)


class IreeDriver(DriverBase):
    # The target that `get_current_target` reports; `triton_iree.activate` changes it. Each
    # target is its own "device" to Triton, so kernels compiled for one are never launched
    # on another.
    current_target: GPUTarget = targets.LlvmCpu().triton_target()
    _targets: list[GPUTarget] = [current_target]

    def __init__(self, target: Optional[GPUTarget] = None):
        super().__init__()
        if target is not None:
            IreeDriver.current_target = target
            if target not in IreeDriver._targets:
                IreeDriver._targets.append(target)
        self.utils = IreeUtils()
        self.launcher_cls = IreeLauncher

    @staticmethod
    def is_active() -> bool:
        return not gpu_usable()

    def get_current_target(self) -> GPUTarget:
        return IreeDriver.current_target

    def get_current_device(self) -> int:
        return IreeDriver._targets.index(IreeDriver.current_target)

    def set_current_device(self, device: int) -> None:
        if not 0 <= device < len(IreeDriver._targets):
            raise LaunchError(f"triton-iree has no device {device}")
        IreeDriver.current_target = IreeDriver._targets[device]

    def get_current_stream(self, device=None) -> int:
        return 0

    def get_active_torch_device(self):
        import torch
        return torch.device("cpu")

    def get_device_interface(self):
        import torch
        return torch.cpu

    def map_python_to_cpp_type(self, ty: str) -> str:
        return {"i1": "int8_t", "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
                "u32": "uint32_t", "u64": "uint64_t", "fp32": "float", "fp64": "double"}.get(ty, "void*")

    def get_benchmarker(self):
        return cpu_benchmarker

    def get_empty_cache_for_benchmark(self):
        import torch
        return torch.empty(64 * 1024 * 1024 // 4, dtype=torch.int)

    def clear_cache(self, cache) -> None:
        cache.zero_()
