"""Tensors passed to a device as copies (`targets.COPIED`: vulkan), staged through host memory."""
from __future__ import annotations

import ctypes
import threading

import iree.runtime as rt
import numpy as np


# Host memory the device can copy from and to, cached for the CPU (it reads what a launch wrote).
_STAGING_MEMORY = int(rt.MemoryType.HOST_LOCAL) | int(rt.MemoryType.HOST_CACHED) | int(rt.MemoryType.DEVICE_VISIBLE)
_STAGING, _DEVICE = "staging", "device"
# Each kind of buffer's memory type and usage.
_KINDS = {_STAGING: (_STAGING_MEMORY, rt.BufferUsage.TRANSFER | rt.BufferUsage.MAPPING),
          _DEVICE: (rt.MemoryType.DEVICE_LOCAL, rt.BufferUsage.DEFAULT)}
# The most bytes of buffers a device's `BufferPool` keeps between launches.
POOL_BYTES = 4 << 30


class BufferPool:
    """The staging and device buffers of a device's finished launches, kept for later launches
    of the same sizes, which then neither allocate memory nor fault in its pages. Keeps at most
    `limit` bytes, dropping the buffers given back longest ago first."""

    def __init__(self, limit: int = POOL_BYTES):
        self.limit = limit
        self.lock = threading.Lock()
        self.free: list[tuple[tuple[str, int], rt.HalBuffer]] = []   # ((kind, bytes), buffer), oldest first
        self.bytes = 0

    def take(self, kind: str, size: int):
        """A kept buffer of `kind` and `size` bytes (the most recently given back), or None."""
        with self.lock:
            for i in range(len(self.free) - 1, -1, -1):
                if self.free[i][0] == (kind, size):
                    self.bytes -= size
                    return self.free.pop(i)[1]
        return None

    def give(self, buffers: list) -> None:
        """Keeps `buffers` ((kind, bytes), buffer) that no queue operation uses any more."""
        with self.lock:
            kept = [b for b in buffers if b[0][1] <= self.limit]
            self.free += kept
            self.bytes += sum(size for (_, size), _ in kept)
            while self.bytes > self.limit:
                (_, size), _ = self.free.pop(0)
                self.bytes -= size

    def clear(self) -> None:
        with self.lock:
            self.free, self.bytes = [], 0


class DeviceCopies:
    """The tensors of one launch on a driver that takes copies (`targets.COPIED`: vulkan): `buffer`
    copies each tensor's bytes into a device buffer; `write_back` copies the bytes of each
    tensor's own storage that the launch changed back into it. Nothing is written back unless
    the launch finished, so a failed launch leaves every tensor as it was.

    Both ways go through a host-cached staging buffer and a queue copy: a discrete GPU's
    host-visible device memory is uncached for the CPU (reading it ran at about 10 MB/s on
    NVIDIA's driver), and only a small window of it may be host-visible at all. The buffers come
    from `pool` and go back to it once the launch has finished; a failed launch drops them."""

    def __init__(self, device: rt.HalDevice, pool: BufferPool):
        self.device = device
        self.pool = pool
        self.taken: list = []     # every buffer of the launch, for `pool`
        self.copies: list = []
        self.semaphore = device.create_semaphore(0)
        self.copied = 0   # queue copies submitted, signalled in order on `semaphore`

    def buffer(self, tensor, base: int, nbytes: int, element_type, element_bytes: int,
               written: bool = True) -> rt.HalBufferView:
        """A device buffer holding a copy of [base, base + nbytes), `tensor`'s import span, viewed
        as elements of IREE's `element_type`; copied back by `write_back` if the kernel may have
        `written` it."""
        host = np.frombuffer((ctypes.c_char * nbytes).from_address(base), dtype=np.uint8) if nbytes else \
            np.zeros(element_bytes, np.uint8)   # Vulkan has no empty bindings
        stage, buf = self._take(_STAGING, len(host)), self._take(_DEVICE, len(host))
        _write(stage, host)
        self._copy(stage, buf)
        if nbytes and written:
            # Written back: the bytes of the buffer that are the tensor's own storage (the buffer
            # may start before it, at the aligned address before the first element).
            start = max(base, tensor.untyped_storage().data_ptr())
            self.copies.append((buf, stage, base, nbytes, start, base + nbytes - start))
        return rt.HalBufferView(buf, (len(host) // element_bytes,), element_type)

    def _take(self, kind: str, size: int) -> rt.HalBuffer:
        buf = self.pool.take(kind, size)
        if buf is None:
            memory, usage = _KINDS[kind]
            buf = self.device.allocator.allocate_buffer(memory_type=memory, allowed_usage=usage, allocation_size=size)
        self.taken.append(((kind, size), buf))
        return buf

    def _copy(self, source, target) -> None:
        self.device.queue_copy(source, target, rt.HalFence.create_at(self.semaphore, self.copied),
                               rt.HalFence.create_at(self.semaphore, self.copied + 1))
        self.copied += 1

    def uploaded(self) -> None:
        """Waits until every buffer holds its tensor's bytes (before the launch reads them)."""
        self.semaphore.wait(self.copied)

    def write_back(self) -> None:
        for buf, stage, *_ in self.copies:
            self._copy(buf, stage)
        self.semaphore.wait(self.copied)
        for _, stage, base, nbytes, start, size in self.copies:
            mapping = stage.map()   # held while `got` is read: its array does not keep it
            got = mapping.asarray([nbytes], np.dtype("uint8"))[start - base:start - base + size]
            mine = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(start))
            if not np.array_equal(got, mine):
                np.copyto(mine, got)
            del got, mapping
        self.copies.clear()
        # The launch and every copy have finished: the buffers are free for later launches.
        self.pool.give(self.taken)
        self.taken = []


def _write(buffer: rt.HalBuffer, data: np.ndarray) -> None:
    """Writes `data` into the mappable `buffer`. The mapping is held while it is written (the
    array IREE makes of it does not keep it) and ends, flushing non-coherent memory, at return."""
    mapping = buffer.map()
    np.copyto(mapping.asarray([len(data)], np.dtype("uint8")), data)
