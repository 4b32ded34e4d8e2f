"""Zero-copy launches: the kernel reads and writes the caller's memory; nothing is allocated."""
import torch

from triton_iree import runtime

import kernels as K


def _allocated(dev):
    s = dev.device.allocator.statistics
    return s["host_bytes_allocated"] + s["device_bytes_allocated"]


def test_launch_allocates_nothing_and_writes_in_place():
    n = 1 << 22                                   # 16 MiB per argument
    x, y = torch.rand(n), torch.rand(n)
    out = torch.zeros(n)
    K.run_add(x, y, out)                          # compile and load outside the measurement
    dev = runtime.get_device("local-task")
    before = _allocated(dev)
    out.zero_()
    ptr = out.data_ptr()
    K.run_add(x, y, out)
    assert _allocated(dev) == before, "the launch allocated device/host memory (a copy)"
    assert out.data_ptr() == ptr
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


def test_allocator_statistics_would_see_a_copy():
    # The measurement above can fail: an allocation of the same size is counted.
    import iree.runtime as rt
    dev = runtime.get_device("local-task")
    before = _allocated(dev)
    buf = dev.device.allocator.allocate_buffer(memory_type=rt.MemoryType.DEVICE_LOCAL,
                                               allowed_usage=rt.BufferUsage.DEFAULT,
                                               allocation_size=1 << 22)
    assert _allocated(dev) >= before + (1 << 22)
    del buf


def test_flat_view_covers_the_storage_from_an_aligned_base():
    base = torch.zeros(1000)
    t = base[37:500]
    view, lead = runtime.flat_view(t)
    assert view.data_ptr() % runtime.IMPORT_ALIGNMENT == 0
    assert view.data_ptr() + lead * 4 == t.data_ptr()
    assert view.data_ptr() + view.numel() * 4 == base.data_ptr() + base.numel() * 4
