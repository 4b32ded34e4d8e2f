"""The arguments of a launch: the caller's values checked, their memory imported as IREE buffer
views (zero-copy, or copies where the driver needs them), and IREE's argument list built from
them in the order of the kernel's ABI (`abi`). `dev` is always the launch's `runtime.Device`.

A launch builds its arguments once as items (`argument_items`): what to push on IREE's list, in
order. A loaded kernel keeps the items of recent launches under their `launch_key`, the values
they were built from, and a launch with the same key reuses them without checking or importing
anything again (`runtime.LoadedKernel.launch`).
"""
from __future__ import annotations

import ctypes
import math
import operator
from typing import TYPE_CHECKING, Any, Sequence

import iree.runtime as rt

from . import targets
from .abi import BASE, BUFFER, GRID, SCALAR, Abi
from .borrowed import borrowed_view
from .errors import LaunchError
from .types import ELEMENT_BYTES

if TYPE_CHECKING:
    from .copies import DeviceCopies

_ELEMENT_TYPES = {
    "f32": rt.HalElementType.FLOAT_32, "f16": rt.HalElementType.FLOAT_16,
    "bf16": rt.HalElementType.BFLOAT_16, "f64": rt.HalElementType.FLOAT_64,
    "i8": rt.HalElementType.INT_8, "i16": rt.HalElementType.INT_16,
    "i32": rt.HalElementType.INT_32, "i64": rt.HalElementType.INT_64,
    "f8E4M3FN": rt.HalElementType.FLOAT_8_E4M3_FN, "f8E5M2": rt.HalElementType.FLOAT_8_E5M2,
}



def torch_uint8():
    import torch
    return torch.uint8


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


def clear_views() -> None:
    """Drops every kept buffer view (at exit: HAL objects must not outlive their device)."""
    _views.clear()


def import_tensor(dev, tensor, dtype: str, span: tuple[int, int, int] | None = None,
                  written: bool = True, copies: DeviceCopies | None = None) -> rt.HalBufferView:
    """The caller's tensor memory as a HAL buffer view of `dtype` elements (zero-copy), from the
    aligned base of `import_span` to the end of the storage; on a driver that takes copies
    (`targets.COPIED`), a buffer of `copies`, the launch's (`DeviceCopies.buffer`)."""
    want = _ELEMENT_TYPES.get(dtype)
    base, nbytes, _ = span or import_span(tensor, dev.alignment)
    if dev.memory == targets.COPIED:
        return copies.buffer(tensor, base, nbytes, _ELEMENT_TYPES[dtype], ELEMENT_BYTES[dtype], written)
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


def _dlpack_view(dev, tensor, want) -> rt.HalBufferView:
    """The tensor's storage from `import_span`'s base, imported through its own DLPack capsule
    (the view keeps the tensor alive)."""
    view, _ = flat_view(tensor)
    if view.element_size() == 1 and view.is_floating_point():
        view = view.view(torch_uint8())     # IREE's DLPack import has no fp8 types; the bytes are the same
    bv = dev.device.from_dlpack_capsule(view.__dlpack__())
    if want is not None and bv.element_type != want:
        bv = rt.HalBufferView(bv.get_buffer(), bv.shape, want)
    return bv


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


def check_arguments(dev, abi: Abi, values: Sequence[Any], grid: Sequence[int],
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


# Scalars whose values key cached items: immutable, so equal values (of the same type: an i32
# argument refuses 1.0 but takes 1) build the same items.
_PLAIN_SCALARS = frozenset((int, float, bool))


def launch_key(abi: Abi, values: Sequence[Any], grid: Sequence[int], on_host: bool) -> tuple | None:
    """What a launch's items (`argument_items`) depend on: the ABI's signature, the grid, each
    buffer's address, storage (address and byte length) and element size, which determine its
    `import_span` (the buffer view covers exactly that memory, whatever tensor owns it now), and
    each scalar's type and value (and a zero's sign: -0.0 == 0.0). None when the launch must take
    the full path: a buffer argument that is not a tensor in the device's memory (CPU tensors
    `on_host`, else tensors of GPU 0), or a scalar of another type. The checks that depend only
    on the key (alignment, the grid's range) passed when a launch with the same key built its
    items."""
    key = [abi.signature, *grid]
    push = key.append
    try:
        for i in abi.buffer_indices:
            v = values[i]
            if (not v.is_cpu) if on_host else v.get_device() != 0:
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


_PUSH_REF, _PUSH_INT, _PUSH_FLOAT = rt.VmVariantList.push_ref, rt.VmVariantList.push_int, rt.VmVariantList.push_float


def argument_items(dev, abi: Abi, values: Sequence[Any], grid: Sequence[int],
                   spans: Sequence[tuple[int, int, int]], copies: DeviceCopies | None = None) -> list[tuple]:
    """What IREE's argument list holds, in the order of `abi.slots`, for checked arguments
    (`values`: one per `abi.params`; spans from check_arguments): (the list's push method, the
    value) pairs. `copies`: the launch's, on a driver that takes copies."""
    items = []
    given = iter(values)
    for slot in abi.slots:
        kind = slot.kind
        if kind == BUFFER:
            items.append((_PUSH_REF, import_tensor(dev, next(given), slot.dtype, spans[slot.number], slot.written,
                                                   copies)))
        elif kind == SCALAR:
            v = next(given)
            if slot.dtype[0] == "i":
                try:
                    items.append((_PUSH_INT, int_argument(v, slot.dtype)))
                except (TypeError, ValueError) as e:
                    raise LaunchError(f"argument '{slot.name}': {e}") from None
            else:
                try:
                    items.append((_PUSH_FLOAT, float(v)))
                except (TypeError, ValueError, OverflowError) as e:
                    # Triton's name of the type (f32 -> fp32): the one the caller wrote.
                    raise LaunchError(f"argument '{slot.name}' must be a fp{slot.dtype[1:]} number: {e}") from None
        elif kind == GRID:
            items.append((_PUSH_INT, int(grid[slot.number])))
        else:
            assert kind == BASE
            items.append((_PUSH_INT, spans[slot.number][2]))
    return items


def vm_list(items: Sequence[tuple], extra: int = 0) -> rt.VmVariantList:
    """IREE's argument list of `items` (`argument_items`), with room for `extra` more values."""
    args = rt.VmVariantList(len(items) + extra)
    for push, value in items:
        push(args, value)
    return args


def build_arguments(dev, abi: Abi, values: Sequence[Any], grid: Sequence[int],
                    spans: Sequence[tuple[int, int, int]], copies: DeviceCopies | None = None) -> rt.VmVariantList:
    """IREE's argument list of `argument_items`."""
    return vm_list(argument_items(dev, abi, values, grid, spans, copies))

