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
import ctypes
import math
import operator
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Sequence

import iree.runtime as rt
from iree.runtime._binding import create_hal_driver

from . import targets
from .abi import BASE, BUFFER, GRID, SCALAR, Abi, ordered_name
from .borrowed import borrowed_view
from .compile import compile_module
from .copies import BufferPool, DeviceCopies
from .errors import LaunchError
from .types import ELEMENT_BYTES


_ELEMENT_TYPES = {
    "f32": rt.HalElementType.FLOAT_32, "f16": rt.HalElementType.FLOAT_16,
    "bf16": rt.HalElementType.BFLOAT_16, "f64": rt.HalElementType.FLOAT_64,
    "i8": rt.HalElementType.INT_8, "i16": rt.HalElementType.INT_16,
    "i32": rt.HalElementType.INT_32, "i64": rt.HalElementType.INT_64,
    "f8E4M3FN": rt.HalElementType.FLOAT_8_E4M3_FN, "f8E5M2": rt.HalElementType.FLOAT_8_E5M2,
}


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
    _views.clear()
    for ctx in list(_contexts):
        ctx.context = ctx.function = ctx.ordered = ctx.results = None
    for kernel in list(_kernels):
        kernel._arg_lists.clear()
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


def torch_uint8():
    import torch
    return torch.uint8


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
        # Host launches: the context, argument list and `shared` of recent launches, keyed by
        # `host_key` (see `_launch_host`).
        self._arg_lists: dict[tuple, tuple[_Context, rt.VmVariantList, SharedMemory | None]] = {}
        LOAD_STATS["loads"] += 1
        _kernels.add(self)

    def allow_inline(self, stack_bytes: int | None) -> None:
        """Lets small launches run inline if the module's code needs at most `stack_bytes` of
        stack (None: unknown), which fits the caller's stack (`INLINE_MAX_STACK_BYTES`)."""
        self.inline_ok = self.module_bytes is not None and stack_bytes is not None and \
            stack_bytes <= INLINE_MAX_STACK_BYTES
        if not self.inline_ok:
            self.module_bytes = None   # kept only to load the inline copy
        self._arg_lists.clear()        # they hold the context that ran them, inline or not

    def launch(self, abi: Abi, values: Sequence[Any], grid: Sequence[int],
               shared: "SharedMemory | None" = None) -> None:
        """Imports the arguments (`values`: one per `abi.params`), then runs the kernel; nothing
        runs if an argument is unusable. `shared`: the kernel's module for arguments that share
        memory, if it has one. On the host, a launch like an earlier one reuses what that one
        built (see `_launch_host`). (Checked mode launches through `checks.launch`.)"""
        if self.dev.memory == targets.HOST:
            return self._launch_host(abi, values, grid, shared)
        spans = check_arguments(self.dev, abi, values, grid, self.name)
        if shared is not None and shared.needed(spans):
            if self.dev.memory == targets.COPIED:
                raise LaunchError(f"pointer arguments that share memory are not supported on {self.dev.driver}, "
                                  "where each tensor is passed as a copy; nothing ran", kernel=self.name)
            return shared.kernel(self).launch(abi, values, grid)
        ctx = self.main   # GPU modules never run inline (`allow_inline`: local-task's only)
        if ctx.dev.memory == targets.COPIED:
            # The copies' semaphore goes with the launch, their buffers to the device's pool (dropped
            # at exit): HAL objects that outlive their device crash the interpreter at exit.
            _vulkan_launch.copies = copies = DeviceCopies(ctx.dev.device, ctx.dev.pool)
            try:
                args = build_arguments(ctx.dev, abi, values, grid, spans)
                copies.uploaded()
                self._invoke(ctx, args)
                return copies.write_back()
            finally:
                _vulkan_launch.copies = None
        args = build_arguments(ctx.dev, abi, values, grid, spans)   # targets.DEVICE
        if ctx.ordered is not None and ctx.loaded:
            dev = ctx.dev
            if dev.order is None:
                dev.order = targets.for_driver(dev.driver).stream_order(lambda t: import_tensor(dev, t, "i64"))
            if dev.order is not None:
                try:
                    return dev.order.launch(ctx.context, ctx.ordered, args, dev.timeline)
                except LaunchError as e:
                    raise LaunchError(e.message, kernel=self.name) from None
                except Exception as e:
                    raise LaunchError(f"the IREE runtime failed to queue the launch: {e}", kernel=self.name) from None
        torch_stream_sync()
        self._invoke(ctx, args)
        ctx.loaded = True

    def _launch_host(self, abi: Abi, values: Sequence[Any], grid: Sequence[int],
                     shared: "SharedMemory | None") -> None:
        """`launch` on host memory (`targets.HOST`): a launch whose `host_key` was seen before
        and the same `shared` reuses that launch's context and argument list, skipping the
        checks, the choice of module and context and the list's building (all decided by what
        the key holds); any other launch takes the full path and, if it runs, leaves its list for
        the next."""
        key = host_key(abi, values, grid)
        if key is not None:
            hit = self._arg_lists.get(key)
            if hit is not None and hit[2] is shared:
                return self._invoke(hit[0], hit[1])
        spans = check_arguments(self.dev, abi, values, grid, self.name)
        if shared is not None and shared.needed(spans):
            return shared.kernel(self).launch(abi, values, grid)
        ctx = self.main
        if self.inline_ok and (grid[0] * grid[1] * grid[2] == 1 or
                               sum(sp[1] for sp in spans) <= INLINE_MAX_BYTES):
            ctx = self.inline or self._make_inline()
        args = build_arguments(ctx.dev, abi, values, grid, spans)
        if key is not None:
            if len(self._arg_lists) >= 64:
                self._arg_lists.clear()
            self._arg_lists[key] = (ctx, args, shared)
        self._invoke(ctx, args)

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


# IREE's CPU code assumes 64-byte aligned buffers (it uses aligned vector loads and stores),
# and its DLPack import refuses anything else. So a buffer covers the tensor's whole storage
# (a kernel may reach elements before its pointer, e.g. through a negative stride), imported
# from a 64-byte aligned address, and the kernel gets the element offset of the tensor's first
# element (its base offset: see `abi`). For host memory that address is the
# last aligned one at or before the storage, possibly before it (`torch.from_numpy` of memory
# that is only 16-byte aligned), in the same page; the kernel never touches what lies there.
IMPORT_ALIGNMENT = 64


def import_span(tensor, alignment: int = IMPORT_ALIGNMENT) -> tuple[int, int, int]:
    """(base address, byte length, element offset of the first element) of the buffer that
    `import_tensor` imports for `tensor`: from the `alignment`-aligned base to the end of its
    storage. The base is at or before the storage's start for host memory; device memory
    cannot be imported from before its storage, so there it is the first aligned address in the
    storage (the last one at or before the first element if that comes first: `flat_view`
    refuses it)."""
    esize = tensor.element_size()
    ptr = tensor.data_ptr()
    if ptr % esize:
        raise LaunchError(f"tensor memory at {ptr:#x} cannot be imported: it is not aligned to its "
                          f"{esize}-byte elements (copy it with .clone())")
    storage = tensor.untyped_storage()
    start = storage.data_ptr()
    base = start - start % alignment
    if base < start and not tensor.is_cpu:
        base = min(base + alignment, ptr - ptr % alignment)
    return base, start + storage.nbytes() - base, (ptr - base) // esize


def flat_view(tensor) -> tuple[Any, int]:
    """A 1-D view over the tensor's storage from the aligned base of `import_span` to its end,
    with the element offset of the tensor's first element inside it. No copy."""
    _, nbytes, lead = import_span(tensor)
    esize = tensor.element_size()
    if lead > tensor.storage_offset():
        raise LaunchError(f"tensor memory at {tensor.data_ptr():#x} cannot be imported on this device: its "
                          f"storage does not start {IMPORT_ALIGNMENT}-byte aligned (copy it with .clone())")
    return tensor.detach().as_strided((nbytes // esize,), (1,), tensor.storage_offset() - lead), lead


_HOST_MEMORY = rt.MemoryType.DEVICE_LOCAL | rt.MemoryType.HOST_VISIBLE
# Buffer views over host or GPU memory, keyed by (address, byte length, element type, driver). A
# view holds no reference to the tensor, so it is fully described by its key: a later tensor with
# the same address range (the one now being launched, which owns that memory) reuses it.
_views: dict[tuple, rt.HalBufferView] = {}
_VIEWS_MAX = 512


def import_tensor(dev: Device, tensor, dtype: str, span: tuple[int, int, int] | None = None,
                  written: bool = True) -> rt.HalBufferView:
    """The caller's tensor memory as a HAL buffer view of `dtype` elements (zero-copy), from the
    aligned base of `import_span` to the end of the storage (or a copy: `DeviceCopies.buffer`)."""
    want = _ELEMENT_TYPES.get(dtype)
    base, nbytes, _ = span or import_span(tensor, dev.alignment)
    if dev.memory == targets.COPIED:
        return _vulkan_launch.copies.buffer(tensor, base, nbytes, _ELEMENT_TYPES[dtype], ELEMENT_BYTES[dtype], written)
    if want is None or nbytes == 0:
        return _dlpack_view(dev, tensor, want)
    # Import the address range directly, once, instead of a DLPack round trip of the tensor each
    # launch (host memory: 0.5 us a tensor when cached, 1.4 us when not, against 4.5 us).
    key = (base, nbytes, want, dev.driver)
    bv = _views.get(key)
    if bv is None:
        if dev.memory == targets.DEVICE and base < tensor.untyped_storage().data_ptr():
            _dlpack_view(dev, tensor, want)   # raises: memory before the storage is not the tensor's
        if len(_views) >= _VIEWS_MAX:
            _views.clear()
        count = nbytes // ELEMENT_BYTES[dtype]
        if dev.memory == targets.HOST:
            # Not a reference to the tensor: the launch is synchronous and the caller holds it.
            mem = (ctypes.c_char * nbytes).from_address(base)
            buf = dev.device.allocator.import_host_allocation(mem, _HOST_MEMORY, rt.BufferUsage.DEFAULT)
            bv = rt.HalBufferView(buf, (count,), want)
        else:
            bv = borrowed_view(dev.device, base, nbytes, tensor.__dlpack_device__(), want, count)
        _views[key] = bv
    return bv


def _dlpack_view(dev: Device, tensor, want) -> rt.HalBufferView:
    """The tensor's storage from `import_span`'s base, imported through its own DLPack capsule
    (the view keeps the tensor alive)."""
    view, _ = flat_view(tensor)
    if view.element_size() == 1 and view.is_floating_point():
        view = view.view(torch_uint8())     # IREE's DLPack import has no fp8 types; the bytes are the same
    bv = dev.device.from_dlpack_capsule(view.__dlpack__())
    if want is not None and bv.element_type != want:
        bv = rt.HalBufferView(bv.get_buffer(), bv.shape, want)
    return bv


_vulkan_launch = threading.local()


def reinterpreted(wrapper, plan, kernel: str):
    """The tensor that a `triton.reinterpret` argument (Triton's TensorWrapper) stands for: its
    base tensor viewed as integers of the wrapper's element width, sharing its memory; the
    kernel reads them as the wrapper's dtype (the signature's). `plan`: its buffer's `abi.Slot`."""
    import torch
    ints = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[ELEMENT_BYTES[plan.dtype]]
    base = wrapper.base
    try:
        return base.view(ints)
    except RuntimeError as e:
        raise LaunchError(f"argument '{plan.name}': a {base.dtype} tensor of shape {tuple(base.shape)} and "
                          f"strides {base.stride()} cannot be read as {wrapper.dtype} in place: {e}",
                          kernel=kernel) from None


def check_arguments(dev: Device, abi: Abi, values: Sequence[Any], grid: Sequence[int],
                    kernel: str) -> list[tuple[int, int, int]]:
    """Raises before anything runs if an argument is unusable; returns each buffer argument's
    `import_span` (base address, byte length, element offset)."""
    spans = []
    on_cpu = dev.memory == targets.HOST
    on_gpu = dev.memory == targets.DEVICE
    on_host = not on_gpu   # CPU tensors, imported in place or copied
    alignment = dev.alignment
    for plan, v in zip(abi.params, values):
        if plan.is_buffer:
            try:
                if on_host and not v.is_cpu or on_gpu and v.is_cpu:
                    where = "the CPU" if on_cpu else \
                        f"{dev.driver}, which imports CPU tensors" if on_host else dev.driver
                    raise LaunchError(f"argument '{plan.name}' is on {v.device}, but the IREE target "
                                      f"runs on {where}", kernel=kernel)
                if on_gpu and (v.device.index or 0) != 0:
                    raise LaunchError(f"argument '{plan.name}' is on {v.device}: IREE's {dev.driver} device "
                                      f"here is GPU 0 (others are not supported yet)", kernel=kernel)
                spans.append(import_span(v, alignment))
            except AttributeError:
                raise LaunchError(f"argument '{plan.name}' must be a torch tensor, got {type(v).__name__}",
                                  kernel=kernel) from None
            except LaunchError as e:
                if e.kernel is not None:
                    raise
                raise LaunchError(f"argument '{plan.name}': {e.message}", kernel=kernel) from None
    for g in grid:
        if g < 0 or g >= 2 ** 31:
            raise LaunchError(f"grid dimension {g} is out of range", kernel=kernel)
    return spans


# Scalars whose values key a cached argument list: immutable, so equal values (of the same
# type: an i32 argument refuses 1.0 but takes 1) build the same list.
_PLAIN_SCALARS = frozenset((int, float, bool))


def host_key(abi: Abi, values: Sequence[Any], grid: Sequence[int]) -> tuple | None:
    """What a host launch's argument list depends on (see `LoadedKernel._launch_host`): the
    ABI's signature, the grid, each buffer's address, storage (address and byte length) and
    element size, which determine its `import_span` (the buffer view covers exactly that
    memory, whatever tensor owns it now), and each scalar's type and value (and a zero's sign:
    -0.0 == 0.0). None when the launch must take the full path: a buffer argument that is not
    a CPU tensor, or a scalar of another type. The checks that depend only on the key
    (alignment, the grid's range) passed when a launch with the same key built its list."""
    key = [abi.signature, *grid]
    push = key.append
    try:
        for i in abi.buffer_indices:
            v = values[i]
            if not v.is_cpu:
                return None
            storage = v.untyped_storage()
            push(v.data_ptr())
            push(storage.data_ptr())
            push(storage.nbytes())
            push(v.element_size())
        for i in abi.scalar_indices:
            v = values[i]
            t = type(v)
            if t not in _PLAIN_SCALARS:
                return None
            push(t)
            push(v)
            if t is float and v == 0.0:
                push(math.copysign(1.0, v))
    except (AttributeError, TypeError, IndexError):
        return None
    return tuple(key)


def int_argument(value, dtype: str) -> int:
    """An integer argument of Triton type `dtype` (i1 ... i64, u1 ... u64) as the VM's i64: its
    bits, read as signed at its width (so a u64 of 2^63 or more passes as a negative i64, and
    unsigned ops in the kernel see the caller's value). Raises ValueError if it fits neither
    the signed nor the unsigned range of that width."""
    v = operator.index(value)
    bits = int(dtype[1:])
    if bits == 1 and v in (0, 1) or bits > 1 and -(1 << (bits - 1)) <= v < 1 << (bits - 1):
        return v
    if bits > 1 and 0 <= v < 1 << bits:
        return v - (1 << bits)
    raise ValueError(f"{value} does not fit in {dtype}")


def build_arguments(dev: Device, abi: Abi, values: Sequence[Any], grid: Sequence[int],
                    spans: Sequence[tuple[int, int, int]]) -> rt.VmVariantList:
    """The VM argument list, in the order of `abi.slots`, for checked arguments (`values`: one per
    `abi.params`; spans from check_arguments)."""
    args = rt.VmVariantList(len(abi.slots))
    given = iter(values)
    for slot in abi.slots:
        kind = slot.kind
        if kind == BUFFER:
            args.push_ref(import_tensor(dev, next(given), slot.dtype, spans[slot.number], slot.written))
        elif kind == SCALAR:
            v = next(given)
            if slot.dtype[0] == "i":
                try:
                    args.push_int(int_argument(v, slot.dtype))
                except (TypeError, ValueError) as e:
                    raise LaunchError(f"argument '{slot.name}': {e}") from None
            else:
                try:
                    args.push_float(float(v))
                except (TypeError, ValueError, OverflowError) as e:
                    # Triton's name of the type (f32 -> fp32): the one the caller wrote.
                    raise LaunchError(f"argument '{slot.name}' must be a fp{slot.dtype[1:]} number: {e}") from None
        elif kind == GRID:
            args.push_int(int(grid[slot.number]))
        else:
            assert kind == BASE
            args.push_int(spans[slot.number][2])
    return args


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
