"""Tensors passed to a device as copies (`targets.COPIED`: vulkan), staged through host memory."""
from __future__ import annotations

import ctypes

import iree.runtime as rt
import numpy as np


# Host memory the device can copy from and to, cached for the CPU (it reads what a launch wrote).
_STAGING_MEMORY = int(rt.MemoryType.HOST_LOCAL) | int(rt.MemoryType.HOST_CACHED) | int(rt.MemoryType.DEVICE_VISIBLE)


class DeviceCopies:
    """The tensors of one launch on a driver that takes copies (`targets.COPIED`: vulkan): `buffer`
    copies each tensor's bytes into a device buffer; `write_back` copies the bytes of each
    tensor's own storage that the launch changed back into it. Nothing is written back unless
    the launch finished, so a failed launch leaves every tensor as it was.

    Both ways go through a host-cached staging buffer and a queue copy: a discrete GPU's
    host-visible device memory is uncached for the CPU (reading it ran at about 10 MB/s on
    NVIDIA's driver), and only a small window of it may be host-visible at all."""

    def __init__(self, device: rt.HalDevice):
        self.device = device
        self.copies: list = []
        # Every staging buffer until its upload has finished: a buffer the kernel only reads is
        # not in `copies`, and the queue copy must not depend on IREE keeping its source alive.
        self.uploading: list = []
        self.semaphore = device.create_semaphore(0)
        self.copied = 0   # queue copies submitted, signalled in order on `semaphore`

    def buffer(self, tensor, base: int, nbytes: int, element_type, element_bytes: int,
               written: bool = True) -> rt.HalBufferView:
        """A device buffer holding a copy of [base, base + nbytes), `tensor`'s import span, viewed
        as elements of IREE's `element_type`; copied back by `write_back` if the kernel may have
        `written` it."""
        host = np.frombuffer((ctypes.c_char * nbytes).from_address(base), dtype=np.uint8) if nbytes else \
            np.zeros(element_bytes, np.uint8)   # Vulkan has no empty bindings
        allocator = self.device.allocator
        stage = allocator.allocate_buffer_copy(
            memory_type=_STAGING_MEMORY, allowed_usage=rt.BufferUsage.TRANSFER | rt.BufferUsage.MAPPING,
            device=self.device, buffer=host)
        buf = allocator.allocate_buffer(memory_type=rt.MemoryType.DEVICE_LOCAL,
                                        allowed_usage=rt.BufferUsage.DEFAULT, allocation_size=len(host))
        self._copy(stage, buf)
        self.uploading.append(stage)
        if nbytes and written:
            # Written back: the bytes of the buffer that are the tensor's own storage (the buffer
            # may start before it, at the aligned address before the first element).
            start = max(base, tensor.untyped_storage().data_ptr())
            self.copies.append((buf, stage, base, nbytes, start, base + nbytes - start))
        return rt.HalBufferView(buf, (len(host) // element_bytes,), element_type)

    def _copy(self, source, target) -> None:
        self.device.queue_copy(source, target, rt.HalFence.create_at(self.semaphore, self.copied),
                               rt.HalFence.create_at(self.semaphore, self.copied + 1))
        self.copied += 1

    def uploaded(self) -> None:
        """Waits until every buffer holds its tensor's bytes (before the launch reads them)."""
        self.semaphore.wait(self.copied)
        self.uploading.clear()

    def write_back(self) -> None:
        for buf, stage, *_ in self.copies:
            self._copy(buf, stage)
        self.semaphore.wait(self.copied)
        for _, stage, base, nbytes, start, size in self.copies:
            got = stage.map().asarray([nbytes], np.dtype("uint8"))[start - base:start - base + size]
            mine = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(start))
            if not np.array_equal(got, mine):
                np.copyto(mine, got)
        self.copies.clear()
