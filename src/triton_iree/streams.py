"""GPU launches ordered with torch's current CUDA stream, without waiting on the host.

CUDA modules are compiled with IREE's asynchronous execution model
(`--iree-execution-model=async-external`): their function takes a wait fence and a signal fence
after its arguments and returns once the work is queued. A launch

- records a CUDA event on torch's current stream and imports it as an IREE semaphore value:
  the launch's wait fence, so the kernel runs after everything torch queued before it;
- signals the next value of the device's launch semaphore when the kernel has run, exports that
  value as a CUDA event, and makes torch's current stream wait for it: torch's later work (on
  that stream) sees the kernel's results.

The call returns as soon as both are queued, as Triton's launches do. A launch that fails on the
GPU fails the launch semaphore; the next launch on the device raises it.

Modules compiled with IREE's synchronous model (older caches, or .vmfb files of older
builds) keep the blocking launch: wait for torch's stream, run, return when the kernel has run.
Where the driver cannot import or export CUDA events, launches of asynchronous modules block in
the same way (the signal fence is waited on before the call returns).
"""
from __future__ import annotations

import ctypes
import threading
from typing import Any

import iree.runtime as rt

from .errors import LaunchError

ASYNC_MODEL = "coarse-fences"   # the reflection of a function compiled with async-external


def is_async(function) -> bool:
    """True for a function of IREE's asynchronous model (it takes a wait and a signal fence)."""
    try:
        return function.reflection.get("iree.abi.model") == ASYNC_MODEL
    except AttributeError:
        return False


def torch_stream_sync() -> None:
    """Waits on the host for torch's current CUDA stream (the blocking launch's first step)."""
    import sys
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.current_stream().synchronize()


_libcuda = None


def _cuda_driver():
    global _libcuda
    if _libcuda is None:
        lib = ctypes.CDLL("libcuda.so.1")
        lib.cuStreamWaitEvent.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint]
        lib.cuStreamWaitEvent.restype = ctypes.c_int
        _libcuda = lib
    return _libcuda


class StreamOrder:
    """The launch semaphore of one CUDA device and the ordering of its launches with torch's
    streams (see the module docstring)."""

    def __init__(self, device: rt.HalDevice, driver: str):
        self.device, self.driver = device, driver
        self.launches = device.create_semaphore(0)   # value n: the n-th launch has run
        self.count = 0
        self.incoming = device.create_semaphore(0)   # value n: torch's stream reached the n-th launch
        self.incoming_count = 0
        # torch events recorded for launches still queued: CUDA must not see them destroyed before
        # IREE's stream has waited on them, i.e. before the launch ran.
        self.events: list[tuple[int, Any]] = []
        self.external = True     # False once the driver refused to import or export a CUDA event
        self.lock = threading.Lock()

    def check(self) -> None:
        """Raises the failure of an earlier asynchronous launch on this device, if one failed."""
        try:
            self.launches.query()
        except Exception as e:
            raise LaunchError(f"an earlier asynchronous launch on {self.driver} failed on the device: {e}; "
                              f"the outputs of the launches since then are undefined") from None

    def invoke(self, context: rt.VmContext, function, args: rt.VmVariantList) -> None:
        """Runs an asynchronous function: appends its wait and signal fences to `args`, invokes it,
        and orders torch's current stream after it."""
        import torch
        with self.lock:
            self.check()
            stream = torch.cuda.current_stream()
            wait = self._torch_fence(stream) if self.external else None
            if wait is None:
                torch_stream_sync()
                wait = rt.HalFence(0)
            self.count += 1
            signal = rt.HalFence.create_at(self.launches, self.count)
            args.push_ref(wait)
            args.push_ref(signal)
            context.invoke(function, args, rt.VmVariantList(1))
            if not (self.external and self._torch_waits(stream, self.count)):
                signal.wait()
            self._retire()

    def _torch_fence(self, stream):
        """A fence reached when `stream` has run what torch queued on it so far, or None if the
        driver cannot import a CUDA event."""
        import torch
        event = torch.cuda.Event()
        event.record(stream)
        point = rt.HalExternalTimepoint()
        point.type = rt.ExternalTimepointType.CUDA_EVENT
        point.compatibility = int(rt.SemaphoreCompatibility.DEVICE_WAIT)
        point.cuda_event = event.cuda_event
        try:
            self.incoming.import_timepoint(self.incoming_count + 1, point)
        except Exception:
            self.external = False
            return None
        self.incoming_count += 1
        self.events.append((self.count + 1, event))
        return rt.HalFence.create_at(self.incoming, self.incoming_count)

    def _torch_waits(self, stream, value: int) -> bool:
        """Makes `stream` wait on the device for launch `value`; False if the driver cannot
        export it as a CUDA event."""
        point = rt.HalExternalTimepoint()
        try:
            self.launches.export_timepoint(value, rt.ExternalTimepointType.CUDA_EVENT,
                                           int(rt.ExternalTimepointFlags.NONE), point)
        except Exception:
            self.external = False
            return False
        status = _cuda_driver().cuStreamWaitEvent(stream.cuda_stream, point.cuda_event, 0)
        if status != 0:
            raise LaunchError(f"cuStreamWaitEvent failed (CUDA error {status}) ordering torch's stream "
                              f"after a launch; the launch was queued")
        return True

    def _retire(self) -> None:
        """Drops the torch events of launches that have run."""
        self.check()
        done = self.launches.query()
        self.events = [(v, e) for v, e in self.events if v > done]
