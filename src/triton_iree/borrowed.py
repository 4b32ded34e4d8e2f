"""GPU memory as IREE buffer views that hold no reference to the tensor owning it.

IREE's runtime imports device memory through DLPack only (`HalDevice.from_dlpack_capsule`), and
a tensor's own capsule (`torch.Tensor.__dlpack__`) keeps the tensor alive until IREE releases the
buffer. A view kept between launches must not: it would keep the caller's memory from torch's
allocator. So the capsule here describes an address range alone: a DLManagedTensor in C memory
(`malloc`) whose deleter, which IREE calls when it releases the buffer, is C's `free`; no Python
code runs then, on whatever thread IREE releases it from.

A view names memory, not a tensor, as the pointers Triton's own launcher passes do: a launch
looks its views up by address range (`arguments.import_tensor`), and the tensor being launched
owns that range then. Launches are ordered with torch's stream (`targets.cuda_streams`), the
stream torch's allocator orders the range's reuse on.
"""
from __future__ import annotations

import ctypes
import ctypes.util

import iree.runtime as rt


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    """DLPack's DLManagedTensor, then the one-element shape its tensor points to (one block, so
    one `free` releases both)."""
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("length", ctypes.c_int64)]


_DL_UINT = 1
_CAPSULE_NAME = ctypes.create_string_buffer(b"dltensor")   # must outlive every capsule made here


class _C:
    """C's allocator and Python's capsule constructor, looked up at first use."""

    def __init__(self):
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        self.malloc = libc.malloc
        self.malloc.argtypes, self.malloc.restype = [ctypes.c_size_t], ctypes.c_void_p
        self.free = ctypes.cast(libc.free, ctypes.c_void_p).value
        self.capsule = ctypes.pythonapi.PyCapsule_New
        self.capsule.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.capsule.restype = ctypes.py_object


_c: _C | None = None


def borrowed_view(device: rt.HalDevice, address: int, nbytes: int, dl_device: tuple[int, int],
                  element_type, count: int) -> rt.HalBufferView:
    """A view of `count` elements of `element_type` over the `nbytes` bytes of device memory at
    `address` (on DLPack device `dl_device`: (type, ordinal)), owning nothing."""
    global _c
    if _c is None:
        _c = _C()
    block = _c.malloc(ctypes.sizeof(_Managed))
    if not block:
        raise MemoryError("no memory for a DLPack tensor")
    m = _Managed.from_address(block)
    t = m.dl_tensor
    t.data = address
    t.device.device_type, t.device.device_id = dl_device
    t.ndim = 1
    t.dtype.code, t.dtype.bits, t.dtype.lanes = _DL_UINT, 8, 1
    m.length = nbytes
    t.shape = block + _Managed.length.offset
    t.strides, t.byte_offset, m.manager_ctx = None, 0, None
    m.deleter = _c.free
    # IREE takes the block at once: it frees it if the import fails, or when it releases the buffer.
    raw = device.from_dlpack_capsule(_c.capsule(block, ctypes.addressof(_CAPSULE_NAME), None))
    return rt.HalBufferView(raw.get_buffer(), (count,), element_type)
