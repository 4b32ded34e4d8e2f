"""Runtime: load a .vmfb once, launch it on the caller's buffers, zero-copy.

Pointer arguments are imported as HAL buffer views over the caller's own memory: the kernel
reads and writes the torch tensor in place. Nothing is copied in or out. Everything that does
not depend on argument values (instance, device, VM context, function handle, argument plan)
is built once and cached.

Warm-launch cost (a 16-element vector add on a 2-core x86 host): IREE's local-task executor
spends about 50 us waking a worker thread and waiting for it, against about 2 us for the same
dispatch run inline by local-sync. So launches with little work run inline on the calling
thread (see `LoadedKernel.launch`); everything else runs on local-task's worker threads.
"""
from __future__ import annotations

import atexit
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Sequence

import iree.runtime as rt
from iree.runtime._binding import create_hal_driver

from . import targets
from .abi import Abi, ordered_name
from .arguments import argument_items, build_arguments, check_arguments, clear_views, import_tensor, launch_key, \
    vm_list
from .compile import compile_module
from .copies import BufferPool, DeviceCopies
from .errors import LaunchError


@dataclass
class Device:
    """One IREE runtime instance and device per driver (local-task, cuda, ...). `memory`: how
    the driver takes the caller's tensors (`targets.HOST`, `DEVICE` or `COPIED`), imported as
    buffers aligned to `alignment` bytes; both from the target the driver runs."""
    driver: str
    instance: rt.VmInstance
    device: rt.HalDevice
    hal_module: rt.VmModule
    memory: str
    alignment: int
    timeline: "Timeline"
    order: Any = None   # `Target.stream_order`'s, made at the first ordered launch
    pool: BufferPool = field(default_factory=BufferPool)   # buffers of copies (`targets.COPIED`)


class Timeline:
    """The fences of a device's invocations of functions compiled with IREE's asynchronous
    execution model (CUDA's): each waits for the previous one's signal, so IREE runs them in the
    order they were made whatever it defers, and signals its own. `lock`: held while one is made."""

    def __init__(self, device: rt.HalDevice):
        self.device = device
        self.lock = threading.RLock()
        self.semaphore: rt.HalSemaphore | None = None   # made at the first invocation
        self.value = 0

    def invoke(self, context: rt.VmContext, function, args: rt.VmVariantList) -> rt.HalFence:
        """Invokes `function` with `args` and its fences; returns the fence it signals when done."""
        with self.lock:
            if self.semaphore is None:
                self.semaphore = self.device.create_semaphore(0)
            wait = rt.HalFence.create_at(self.semaphore, self.value)
            signal = rt.HalFence.create_at(self.semaphore, self.value + 1)
            args.push_ref(wait)
            args.push_ref(signal)
            try:
                context.invoke(function, args, rt.VmVariantList(4))
            except Exception:
                # What failed may never signal: later invocations wait on a new timeline.
                self.semaphore, self.value = self.device.create_semaphore(0), 0
                raise
            self.value += 1
            return signal


def _release_at_exit() -> None:
    """Drops every IREE object the runtime keeps (the modules' contexts, functions and argument
    lists, the devices' timelines, stream orders, pooled buffers, HAL modules, devices and the VM
    instance) before the interpreter tears down: a HAL object that outlives its device crashes it at exit,
    and nanobind reports the objects still alive when IREE's bindings are freed as leaks, which
    they are whenever a kernel outlives the modules (held in a reference cycle, or by Triton).
    Nothing launches after this."""
    clear_views()
    for ctx in list(_contexts):
        ctx.context = ctx.function = ctx.ordered = ctx.results = None
    for kernel in list(_kernels):
        kernel._kept.clear()
    for dev in _devices.values():
        dev.timeline.semaphore = dev.timeline.device = None
        dev.order = dev.pool = None
        dev.device = dev.hal_module = dev.instance = None
    _devices.clear()
    global _instance
    _instance = None


atexit.register(_release_at_exit)
_devices: dict[str, Device] = {}
# Every module context and loaded kernel, for `_release_at_exit`.
_contexts: "weakref.WeakSet[_Context]" = weakref.WeakSet()
_kernels: "weakref.WeakSet[LoadedKernel]" = weakref.WeakSet()
_lock = threading.Lock()
_instance: rt.VmInstance | None = None   # one VM instance for every device: a module loads once

# Triton tiles live on the stack of IREE's CPU worker threads (a 64x64 f32 tile is 16 KiB,
# and LLVM spills vector tiles there too); IREE's default of 128 KiB is too small for them.
# The compiler is told a smaller limit (--iree-llvmcpu-stack-allocation-limit, 1 MiB), so
# that a kernel needing more fails to compile instead of overflowing at run time.
CPU_WORKER_STACK_BYTES = 64 << 20
_flags_set = False


def _set_runtime_flags() -> None:
    global _flags_set
    if not _flags_set:
        rt.flags.parse_flags(f"--task_worker_stack_size={CPU_WORKER_STACK_BYTES}")
        _flags_set = True


def get_device(driver: str) -> Device:
    global _instance
    with _lock:
        dev = _devices.get(driver)
        if dev is None:
            _set_runtime_flags()
            if _instance is None:
                _instance = rt.VmInstance()
            instance = _instance
            try:
                # A driver of our own, created after the flags are set: iree.runtime's cached
                # one may predate them (any earlier rt.Config or rt.get_device), and its
                # worker threads would then have 128 KiB stacks that Triton tiles overflow.
                device = create_hal_driver(driver).create_default_device()
            except Exception as e:  # the runtime raises plain RuntimeError/ValueError
                raise LaunchError(f"IREE driver '{driver}' is not usable here: {e}") from None
            target = targets.for_driver(driver)
            dev = Device(driver, instance, device, rt.create_hal_module(instance, device), target.memory,
                         target.import_alignment, Timeline(device))
            _devices[driver] = dev
        return dev


LOAD_STATS = {"loads": 0}

# Launches whose buffers span at most this many bytes in all run inline on local-sync; so do
# launches of a single program, which local-task could not spread over threads anyway.
# Measured through kernel[grid] on 2 cores, inline vs local-task: vector add 2^14 f32
# (192 KiB) 19 vs 37 us, 2^18 (3 MiB) 63 vs 72 us; softmax 32x1024 (256 KiB) 72 vs 92 us,
# 128x1024 (1 MiB) 238 vs 201 us; matmul 128^3 (192 KiB) 200 vs 170 us (raw invokes).
INLINE_MAX_BYTES = 256 << 10
# Inline launches run on the caller's stack (commonly 8 MiB), not on the 64 MiB worker stacks,
# so only kernels whose code is known to need at most this much stack run inline (LLVM reports
# each function's frame when iree-compile builds it: `compile.Compiled.stack_bytes`).
INLINE_MAX_STACK_BYTES = 256 << 10
INLINE_DRIVER = "local-sync"


def launch_device(values: Sequence[Any]):
    """Where a launch's tensors live (a GPU's memory for a GPU launch; the CPU without tensors):
    the extra buffers a launch passes (prints' logs, checked mode's records) go there too."""
    import torch
    return next((v.device for v in values if isinstance(v, torch.Tensor)), torch.device("cpu"))


def torch_stream_sync() -> None:
    """Orders a GPU launch after the work torch queued: waits for torch's current CUDA stream.
    IREE runs the launch on a stream of its own and returns when it has finished, so work that
    torch queues afterwards sees its results. (IREE 3.13's CUDA driver can neither import a CUDA
    event as a semaphore timepoint nor export one, so the two streams cannot be ordered on the
    device: docs/gpu.md.)"""
    import sys
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.current_stream().synchronize()


class _Context:
    """The module loaded into one device's VM context."""

    def __init__(self, dev: Device, module: rt.VmModule, name: str):
        self.dev = dev
        self.context = rt.VmContext(dev.instance, modules=[dev.hal_module, module])
        self.function = module.lookup_function(name)
        if self.function is None:
            raise LaunchError(f"the compiled module has no function '{name}'", kernel=name)
        # Compiled for IREE's asynchronous execution model (CUDA): the function takes fences, and
        # its ordered twin (`abi.ordered_name`) runs it in order with torch's stream.
        self.fenced = self.function.reflection.get("iree.abi.model") == "coarse-fences"
        self.ordered = module.lookup_function(ordered_name(name)) if self.fenced else None
        # Whether a launch has run the module's kernels. The first one waits on the host instead
        # of running ordered: CUDA loads a kernel at its first launch (lazy loading, CUDA 12's
        # default), which can wait for the whole device to be idle, and torch's stream, waiting
        # for the ordered launch's signal, never is (the fp16 matmuls of 128 x 128 tiles hung so).
        self.loaded = False
        # Result lists that host launches reuse (a new one costs ~0.3 us; an invoke empties the
        # list it is given first). Only on the host, where a result kept until the next launch is
        # a view of host memory holding no reference to its tensor (like `_views`' views);
        # the GPU paths keep a new list per launch.
        self.results: list[rt.VmVariantList] | None = [] if dev.memory == targets.HOST else None
        _contexts.add(self)


class LoadedKernel:
    """A compiled kernel loaded into a VM context, ready to launch."""

    def __init__(self, vmfb: bytes, name: str, driver: str, aliasing: bool = False):
        self.name = name
        self.aliasing = aliasing   # compiled for pointer arguments that share memory
        self.main = _Context(get_device(driver), rt.VmModule.copy_buffer(get_device(driver).instance, vmfb),
                             name)
        self.dev = self.main.dev
        self.module_bytes = vmfb if driver == "local-task" else None
        self.inline_ok = False     # see `allow_inline`
        self.inline: _Context | None = None   # created on the first launch that runs inline
        # What recent launches built, keyed by their `launch_key`: (context, `shared`, the host's
        # argument list or a GPU launch's items). See `launch`.
        self._kept: dict[tuple, tuple[_Context, SharedMemory | None, Any]] = {}
        LOAD_STATS["loads"] += 1
        _kernels.add(self)

    def allow_inline(self, stack_bytes: int | None) -> None:
        """Lets small launches run inline if the module's code needs at most `stack_bytes` of
        stack (None: unknown), which fits the caller's stack (`INLINE_MAX_STACK_BYTES`)."""
        self.inline_ok = self.module_bytes is not None and stack_bytes is not None and \
            stack_bytes <= INLINE_MAX_STACK_BYTES
        if not self.inline_ok:
            self.module_bytes = None   # kept only to load the inline copy
        self._kept.clear()   # they hold the context that ran them, inline or not

    def launch(self, abi: Abi, values: Sequence[Any], grid: Sequence[int],
               shared: "SharedMemory | None" = None) -> None:
        """Imports the arguments (`values`: one per `abi.params`), then runs the kernel; nothing
        runs if an argument is unusable. `shared`: the kernel's module for arguments that share
        memory, if it has one. (Checked mode launches through `checks.launch`.)

        A launch whose `launch_key` was seen before with the same `shared` reuses what that
        launch built, skipping the checks, the choice of module and context and the imports (all
        decided by what the key holds): on the host its context and argument list, on a GPU the
        items of its ordered launch. Any other launch takes the full path and, if it runs, leaves
        what it built for the next."""
        memory = self.dev.memory
        key = None
        if memory != targets.COPIED:
            key = launch_key(abi, values, grid, memory == targets.HOST)
            if key is not None:
                hit = self._kept.get(key)
                if hit is not None and hit[1] is shared:
                    return self._run(hit[0], hit[2])
        spans = check_arguments(self.dev, abi, values, grid, self.name)
        if shared is not None and shared.needed(spans):
            if memory == targets.COPIED:
                raise LaunchError(f"pointer arguments that share memory are not supported on {self.dev.driver}, "
                                  "where each tensor is passed as a copy; nothing ran", kernel=self.name)
            return shared.kernel(self).launch(abi, values, grid)
        ctx = self.main
        if memory == targets.COPIED:
            return self._launch_copied(ctx, abi, values, grid, spans)
        if memory == targets.HOST:
            if self.inline_ok and (grid[0] * grid[1] * grid[2] == 1 or
                                   sum(sp[1] for sp in spans) <= INLINE_MAX_BYTES):
                ctx = self.inline or self._make_inline()
            kept = vm_list(argument_items(ctx.dev, abi, values, grid, spans))
        else:   # targets.DEVICE; GPU modules never run inline (`allow_inline`: local-task's only)
            kept = argument_items(ctx.dev, abi, values, grid, spans)
            if ctx.ordered is None or not ctx.loaded or self._stream_order() is None:
                torch_stream_sync()
                self._invoke(ctx, vm_list(kept))
                ctx.loaded = True
                return
        if key is not None:
            if len(self._kept) >= 64:
                self._kept.clear()
            self._kept[key] = (ctx, shared, kept)
        self._run(ctx, kept)

    def _stream_order(self):
        """The device's `Target.stream_order`, made at its first ordered launch (None: it has none)."""
        dev = self.dev
        if dev.order is None:
            dev.order = targets.for_driver(dev.driver).stream_order(lambda t: import_tensor(dev, t, "i64"))
        return dev.order

    def _run(self, ctx: _Context, kept) -> None:
        """Runs the module in `ctx` on what `launch` keeps: a host launch's argument list, or the
        items of a GPU launch, run ordered with torch's stream."""
        dev = ctx.dev
        if dev.memory == targets.HOST:
            return self._invoke(ctx, kept)
        try:   # the list has room for the order's flags and sequence number, and the two fences
            return dev.order.launch(ctx.context, ctx.ordered, vm_list(kept, 4), dev.timeline)
        except LaunchError as e:
            raise LaunchError(e.message, kernel=self.name) from None
        except Exception as e:
            raise LaunchError(f"the IREE runtime failed to queue the launch: {e}", kernel=self.name) from None

    def _launch_copied(self, ctx: _Context, abi: Abi, values: Sequence[Any], grid: Sequence[int],
                       spans: Sequence[tuple[int, int, int]]) -> None:
        """`launch` on a driver that takes copies (`targets.COPIED`): the copies' semaphore goes
        with the launch, their buffers to the device's pool (dropped at exit): HAL objects that
        outlive their device crash the interpreter at exit."""
        copies = DeviceCopies(ctx.dev.device, ctx.dev.pool)
        args = build_arguments(ctx.dev, abi, values, grid, spans, copies)
        copies.uploaded()
        self._invoke(ctx, args)
        copies.write_back()

    def _make_inline(self) -> _Context:
        dev = get_device(INLINE_DRIVER)
        self.inline = _Context(dev, rt.VmModule.copy_buffer(dev.instance, self.module_bytes), self.name)
        return self.inline

    def _invoke(self, ctx: _Context, args: rt.VmVariantList) -> None:
        try:
            spare, results = ctx.results, None
            if spare:
                try:
                    results = spare.pop()
                except IndexError:   # another thread took the last one
                    pass
            if ctx.fenced:   # the host waits for what it queued
                ctx.dev.timeline.invoke(ctx.context, ctx.function, args).wait()
                return
            if results is None:
                results = rt.VmVariantList(1)
            ctx.context.invoke(ctx.function, args, results)
            if spare is not None:   # not after a failure: that list is dropped
                spare.append(results)
        except Exception as e:
            raise LaunchError(f"the IREE runtime failed during the launch, so output buffers may hold "
                              f"partial results: {e}", kernel=self.name) from None



class SharedMemory:
    """Launches with pointer arguments that share memory (the same tensor twice, or
    overlapping views) where the kernel writes one of them: they run a second module, compiled
    on first use, whose loads keep program order across every buffer (see `memory_order`)."""

    def __init__(self, module_text: str, written: Sequence[int], target):
        self.module_text, self.written, self.target = module_text, tuple(written), target
        self.loaded: LoadedKernel | None = None

    @staticmethod
    def of(metadata, target) -> "SharedMemory | None":
        text = getattr(metadata, "iree_shared_memory_module", "")
        return SharedMemory(text, metadata.iree_written, target) if text else None

    def needed(self, spans: Sequence[tuple[int, int, int]]) -> bool:
        """A written buffer's storage (its `import_span`) overlaps another buffer's."""
        for i in self.written:
            base, nbytes, _ = spans[i]
            for j, (b, n, _) in enumerate(spans):
                if j != i and base < b + n and b < base + nbytes:
                    return True
        return False

    def kernel(self, main: LoadedKernel) -> LoadedKernel:
        if self.loaded is None:
            vmfb = compile_module(self.module_text, self.target, name=main.name)
            self.loaded = LoadedKernel(vmfb, main.name, main.dev.driver, aliasing=True)
        return self.loaded
