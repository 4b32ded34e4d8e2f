"""Zero-copy launches: the kernel reads and writes the caller's memory; nothing is allocated."""
import ctypes
import gc
import subprocess
import sys
import weakref

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from torch.profiler import ProfilerActivity, profile

from helpers import item_builds
from triton_iree import abi, arguments, runtime, targets
from triton_iree.errors import LaunchError


@triton.jit
def _axpy_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # Launched by this file only: its argument lists and buffer views are not cached yet.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def _launch(x, y, out, block=256):
    n = out.numel()
    _axpy_kernel[(triton.cdiv(n, block),)](x, y, out, n, BLOCK=block)


class _RecordingAllocator:
    """IREE's allocator, recording the host ranges it is asked to import."""

    def __init__(self, allocator, imports):
        self._allocator, self._imports = allocator, imports

    def import_host_allocation(self, mem, *args):
        self._imports.append((ctypes.addressof(mem), ctypes.sizeof(mem)))
        return self._allocator.import_host_allocation(mem, *args)

    def __getattr__(self, name):
        return getattr(self._allocator, name)


class _RecordingDevice:
    def __init__(self, device, imports):
        self._device, self.allocator = device, _RecordingAllocator(device.allocator, imports)

    def __getattr__(self, name):
        return getattr(self._device, name)


def _storage_range(t):
    s = t.untyped_storage()
    return s.data_ptr(), s.data_ptr() + s.nbytes()


@pytest.mark.parametrize("n", [1000, 1 << 21])     # runs inline (local-sync), on local-task
def test_launch_imports_the_tensors_own_memory_and_allocates_nothing(monkeypatch, n):
    _launch(torch.rand(777), torch.rand(777), torch.zeros(777))   # compile and load first
    imports = []
    for driver in ("local-task", runtime.INLINE_DRIVER):
        dev = runtime.get_device(driver)
        monkeypatch.setattr(dev, "device", _RecordingDevice(dev.device, imports))
    monkeypatch.setattr(arguments, "_views", {})
    base = torch.rand(n + 40)
    x, y = base[5:5 + n], torch.rand(n)            # x with a storage offset
    out = torch.full((n,), -1.0)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        _launch(x, y, out)
    allocated = sum(max(e.cpu_memory_usage, 0) for e in prof.events())
    assert allocated == 0, f"the launch allocated {allocated} bytes of torch memory"
    assert torch.equal(out, 2 * x + y)
    # One import per tensor: from the 64-byte aligned address at or before its first element
    # to the end of its own storage, and nothing else.
    assert len(imports) == 3, imports
    for t, (addr, nbytes) in zip((x, y, out), imports):
        lo, hi = _storage_range(t)
        assert lo <= addr <= t.data_ptr() and t.data_ptr() - addr < arguments.IMPORT_ALIGNMENT
        assert addr % arguments.IMPORT_ALIGNMENT == 0 and addr + nbytes == hi


def test_the_measurements_see_a_copy(monkeypatch):
    # The checks above can fail: a launch that clones its arguments allocates torch memory,
    # and then imports ranges that are not the tensors'.
    imports = []
    dev = runtime.get_device(runtime.INLINE_DRIVER)
    monkeypatch.setattr(dev, "device", _RecordingDevice(dev.device, imports))
    monkeypatch.setattr(arguments, "_views", {})
    x = torch.rand(333)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        c = x.clone()
        arguments.import_tensor(dev, c, "f32")
    assert sum(max(e.cpu_memory_usage, 0) for e in prof.events()) >= 333 * 4
    assert imports and imports[0][0] + imports[0][1] != _storage_range(x)[1]


def test_flat_view_covers_the_storage_from_an_aligned_base():
    base = torch.zeros(1000)
    t = base[37:500]
    view, lead = arguments.flat_view(t)
    assert view.data_ptr() % arguments.IMPORT_ALIGNMENT == 0
    assert view.data_ptr() + lead * 4 == t.data_ptr()
    assert view.data_ptr() + view.numel() * 4 == base.data_ptr() + base.numel() * 4


class _DeviceTensor:
    """The parts of a GPU tensor that `import_span` and `launch_key` read: f32 elements at `ptr`,
    `offset` elements into a storage of `nbytes` bytes, on GPU `device`."""
    is_cpu = False

    def __init__(self, ptr, offset, nbytes, device=0):
        self.ptr, self.offset, self.nbytes, self.device = ptr, offset, nbytes, device

    def element_size(self):
        return 4

    def get_device(self):
        return self.device

    def data_ptr(self):
        return self.ptr

    def storage_offset(self):
        return self.offset

    def untyped_storage(self):
        return type("Storage", (), {"data_ptr": lambda s: self.ptr - 4 * self.offset,
                                    "nbytes": lambda s: self.nbytes})()


def test_import_span_covers_the_storage_before_the_first_element():
    # Host memory: from the aligned address at or before the storage's start.
    base = torch.zeros(1000)
    t = base[999:]
    start, nbytes, lead = arguments.import_span(t)
    assert start <= base.data_ptr() < start + 64 and start % 64 == 0
    assert start + nbytes == base.data_ptr() + 4000 and start + 4 * lead == t.data_ptr()
    view, lead = arguments.flat_view(base[37:500])
    assert view.data_ptr() == base.data_ptr() and lead == 37
    # Device memory cannot be imported from before its storage: from its first aligned address.
    s0 = 1 << 20
    assert arguments.import_span(_DeviceTensor(s0 + 4 * 999, 999, 4000)) == (s0, 4000, 999)
    assert arguments.import_span(_DeviceTensor(s0 + 16 + 4 * 999, 999, 4000)) == (s0 + 64, 4000 - 48, 999 - 12)
    # ... or, where the first element comes before that, the aligned address before it (which
    # flat_view refuses).
    assert arguments.import_span(_DeviceTensor(s0 + 16 + 4 * 3, 3, 400)) == (s0, 400 + 16, 7)


def _mapped_address(bv):
    """The host address IREE reads and writes for an f32 buffer view."""
    return bv.get_buffer().map().asarray(tuple(bv.shape), np.dtype(np.float32)).ctypes.data


def test_device_memory_import_path_is_zero_copy_and_runs():
    # GPU memory is imported through a DLPack capsule of the address range alone
    # (`borrowed.borrowed_view`). Run that path on the local-task device under another driver name.
    dev = runtime.get_device("local-task")
    dl = runtime.Device("dlpack", dev.instance, dev.device, dev.hal_module, targets.DEVICE, 64, dev.timeline)
    base = torch.rand(1000 + 16)
    x, y = base[16:], torch.rand(1000)
    out = torch.full((1000,), -1.0)
    for t in (x, y, out):
        bv = arguments.import_tensor(dl, t, "f32")
        view, lead = arguments.flat_view(t)
        assert _mapped_address(bv) == view.data_ptr() == t.data_ptr() - 4 * lead
        assert bv.shape == [view.numel()]
    n, block = out.numel(), 256
    compiled = _axpy_kernel[(triton.cdiv(n, block),)](x, y, out, n, BLOCK=block)
    compiled._init_handles()
    loaded = compiled.module
    kernel_abi = abi.of_signature(["x_ptr", "y_ptr", "out_ptr", "n"],
                                  dict(x_ptr="*fp32", y_ptr="*fp32", out_ptr="*fp32", n="i32"), "axpy")
    out.fill_(-1.0)
    values, grid = (x, y, out, n), (triton.cdiv(n, block), 1, 1)
    spans = arguments.check_arguments(dev, kernel_abi, values, grid, "axpy")   # dl's would refuse CPU tensors
    loaded._invoke(loaded.main, arguments.build_arguments(dl, kernel_abi, values, grid, spans))
    assert torch.equal(out, 2 * x + y)


def test_device_memory_views_hold_no_reference_and_are_reused(monkeypatch):
    # A view kept between launches must not keep the caller's tensor (and its memory) alive; a
    # later tensor over the same memory gets the same view.
    dev = runtime.get_device("local-task")
    dl = runtime.Device("dlpack", dev.instance, dev.device, dev.hal_module, targets.DEVICE, 64, dev.timeline)
    monkeypatch.setattr(arguments, "_views", {})
    base = torch.rand(4096 + 16)
    t = base[16:]
    bv = arguments.import_tensor(dl, t, "f32")
    ref = weakref.ref(t)
    del t
    gc.collect()
    assert ref() is None
    assert arguments.import_tensor(dl, base[16:], "f32") is bv
    assert arguments.import_tensor(dl, base[16:], "i32") is not bv   # another element type
    assert _mapped_address(bv) == base.data_ptr()
    # A tensor whose first element lies before the storage's first aligned address is refused,
    # as memory before its storage is not the tensor's.
    odd = torch.from_numpy(_at_alignment(1000, np.float32, 4))   # its storage starts 4 bytes past
    with pytest.raises(LaunchError, match="storage does not start 64-byte aligned"):
        arguments.import_tensor(dl, odd[1:], "f32")


def _at_alignment(n, dtype, misalign):
    """n elements of `dtype` in a larger numpy array, at an address `misalign` bytes past a
    64-byte boundary (numpy's own allocations are often only 16-byte aligned)."""
    big = np.zeros(n + 128, dtype)
    step = big.itemsize
    k = next(k for k in range(128) if (big.ctypes.data + k * step) % 64 == misalign)
    return big[k:k + n]


@pytest.mark.parametrize("misalign", [16, 48])
def test_from_numpy_tensors_that_are_only_16_byte_aligned_are_used_in_place(misalign):
    n = 1000
    x, y, out = (_at_alignment(n, np.float32, misalign) for _ in range(3))
    x[:], y[:] = np.arange(n), 0.5
    out[:] = -1.0
    tx, ty, tout = (torch.from_numpy(a) for a in (x, y, out))
    assert tout.storage_offset() == 0 and tout.data_ptr() % 64 == misalign   # storage starts unaligned
    _launch(tx, ty, tout)
    # The kernel wrote the caller's numpy memory: nothing was copied.
    np.testing.assert_array_equal(out, 2 * x + y)


def test_dlpack_import_of_fp8_tensors():
    """IREE's DLPack import knows no fp8 types: fp8 tensors go through as bytes, retyped."""
    dev = runtime.get_device("local-task")
    dl = runtime.Device("dlpack", dev.instance, dev.device, dev.hal_module, targets.DEVICE, 64, dev.timeline)
    t = torch.arange(64, dtype=torch.float32).to(torch.float8_e5m2)
    bv = arguments.import_tensor(dl, t, "f8E5M2")
    assert int(bv.element_type) == int(runtime.rt.HalElementType.FLOAT_8_E5M2)
    view, _ = arguments.flat_view(t)
    mapped = bv.get_buffer().map().asarray([view.numel()], np.dtype(np.uint8))
    assert mapped.ctypes.data == view.data_ptr() and bv.shape == [view.numel()]   # zero-copy


@triton.jit
def _big_frame_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # A loop-carried 64x256 f32 tile (64 KiB), kept in several copies on the stack: its code
    # needs more stack than an inline launch may take from the caller's.
    rows = tl.arange(0, BLOCK)[:, None] * 256 + tl.arange(0, 256)[None, :]
    acc = tl.zeros((BLOCK, 256), tl.float32)
    for i in range(n):
        acc = acc * 0.5 + tl.load(x_ptr + rows + i)
    tl.store(out_ptr + rows, acc)


def _stack_of(kernel, sig, consts):
    from triton_iree import aot, compile as iree_compile, targets
    module = aot.compile_kernel(kernel, sig, consts, vmfb=False).module
    return iree_compile.build(module, targets.make_target(), name=kernel.__name__).stack_bytes


def test_iree_reports_the_stack_its_cpu_code_needs():
    small = _stack_of(_axpy_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                      {"BLOCK": 256})
    big = _stack_of(_big_frame_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}, {"BLOCK": 64})
    assert small is not None and 0 < small <= runtime.INLINE_MAX_STACK_BYTES
    assert big is not None and big > runtime.INLINE_MAX_STACK_BYTES, big


def test_only_kernels_whose_stack_fits_run_inline():
    x = torch.rand(64 * 256 + 3)
    out = torch.empty(64 * 256)
    big = _big_frame_kernel[(1,)](x, out, 3, BLOCK=64)   # kernel[grid](...) returns the CompiledKernel
    want = torch.zeros(64, 256)
    for i in range(3):
        want = want * 0.5 + x[i:i + 64 * 256].view(64, 256)
    torch.testing.assert_close(out.view(64, 256), want)
    x, y = torch.rand(100), torch.rand(100)
    out = torch.zeros(100)
    small = _axpy_kernel[(1,)](x, y, out, 100, BLOCK=128)
    assert torch.equal(out, 2 * x + y)
    assert small.function.inline_ok and not big.function.inline_ok


# -- the host launch's cache of argument lists (`arguments.launch_key`) ------------------------

@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    # Launched by this file only, like _axpy_kernel.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * alpha, mask=m)


def _scale(x, out, alpha, n=None, block=1024):
    n = out.numel() if n is None else n
    return _scale_kernel[(triton.cdiv(n, block),)](x, out, n, alpha, BLOCK=block)


def test_a_repeated_launch_reuses_its_argument_list(monkeypatch):
    x, out = torch.rand(100), torch.zeros(100)
    _scale(x, out, 2.0)
    built = item_builds(monkeypatch)
    for _ in range(3):
        out.zero_()
        _scale(x, out, 2.0)
        assert torch.equal(out, 2 * x)
    assert built == []
    _scale(x, out, 3.0)                       # another scalar value: another list
    assert torch.equal(out, 3 * x) and built == [1]


def test_new_tensors_in_the_freed_memory_of_old_ones_see_their_own_data():
    # Same shapes, likely the same addresses (the list's buffer views are of the memory, not the
    # tensors): each launch reads and writes the tensors it is given.
    for i in range(20):
        x, out = torch.full((64,), float(i)), torch.zeros(64)
        _scale(x, out, 2.0)
        assert torch.equal(out, torch.full((64,), 2.0 * i)), i
        del x, out


def test_a_tensor_resized_or_viewed_differently_gets_a_new_argument_list():
    x = torch.arange(16.0)
    out = torch.zeros(16)
    _scale(x, out, 2.0)
    x.resize_(4096).copy_(torch.arange(4096.0))   # in place: a larger storage elsewhere
    out.resize_(4096).zero_()
    _scale(x, out, 2.0)
    assert torch.equal(out, 2 * torch.arange(4096.0))
    base = torch.zeros(4096)
    _scale(x[7:], base[7:], 1.0)                   # other offsets in the same storages
    assert torch.equal(base[7:], torch.arange(7.0, 4096.0)) and torch.equal(base[:7], torch.zeros(7))
    other = torch.zeros(4096)
    out.set_(other.untyped_storage(), 0, (4096,), (1,))   # the same tensor over other memory
    _scale(x, out, 1.0)
    assert torch.equal(other, torch.arange(4096.0))


def test_a_view_at_another_offset_gets_a_new_argument_list(monkeypatch):
    x, out = torch.arange(32.0), torch.zeros(32)
    _scale(x[:16], out[:16], 1.5)
    built = item_builds(monkeypatch)
    _scale(x[8:24], out[8:24], 1.5)     # the same storages, lengths and scalars
    assert built == [1] and torch.equal(out[8:24], 1.5 * x[8:24])


def test_the_same_address_with_a_larger_storage_gets_a_new_argument_list(monkeypatch):
    # Tensors over the same numpy memory: the same address and length, storages of different
    # lengths. A list built for the short storage has buffer views of its 64 bytes only, while
    # a kernel may reach every element of the storage.
    src, dst = np.arange(64, dtype=np.float32), np.zeros(64, dtype=np.float32)
    _scale(torch.from_numpy(src[:16]), torch.from_numpy(dst[:16]), 2.5)
    built = item_builds(monkeypatch)
    _scale(torch.from_numpy(src)[:16], torch.from_numpy(dst)[:16], 2.5)
    assert built == [1]
    np.testing.assert_array_equal(dst[:16], 2.5 * src[:16])
    # The same address and storage length, the storage starting 64 bytes earlier.
    _scale(torch.from_numpy(src[16:48])[:16], torch.from_numpy(dst[16:48])[:16], 2.5)
    _scale(torch.from_numpy(src[:32])[16:], torch.from_numpy(dst[:32])[16:], 2.5)
    assert built == [1, 1, 1]
    np.testing.assert_array_equal(dst[16:32], 2.5 * src[16:32])


def test_a_gpu_launch_key_names_the_memory_of_tensors_on_gpu_0():
    kernel_abi = abi.of_signature(["x", "n"], {"x": "*fp32", "n": "i32"}, "k")
    grid = (3, 1, 1)
    s0 = 1 << 40

    def key(x, n=7, on_host=False):
        return arguments.launch_key(kernel_abi, (x, n), grid, on_host)

    k = key(_DeviceTensor(s0 + 4 * 5, 5, 4000))
    assert k is not None and key(_DeviceTensor(s0 + 4 * 5, 5, 4000)) == k   # another tensor, the same memory
    for other in (_DeviceTensor(s0 + 4 * 6, 6, 4000),     # another offset in the storage
                  _DeviceTensor(s0 + 4 * 5, 5, 8000)):    # a larger storage
        assert key(other) not in (None, k)
    assert key(_DeviceTensor(s0 + 4 * 5, 5, 4000), n=8) != k
    assert key(_DeviceTensor(s0 + 4 * 5, 5, 4000, device=1)) is None   # refused on the full path
    cpu = torch.rand(16)
    assert key(cpu) is None and key(cpu, on_host=True) is not None
    assert key(_DeviceTensor(s0, 0, 4000), on_host=True) is None


def test_a_negative_zero_scalar_is_not_taken_for_zero():
    x, out = torch.ones(8), torch.zeros(8)
    _scale(x, out, 0.0)
    assert not out.signbit().any()
    _scale(x, out, -0.0)
    assert out.signbit().all()


def test_after_a_cached_launch_bad_arguments_are_still_refused(monkeypatch):
    x, out = torch.rand(32), torch.zeros(32)
    ck = _scale(x, out, 2.0)
    launcher, function = ck.run, ck.function
    ran = []
    monkeypatch.setattr(runtime.LoadedKernel, "_invoke", lambda self, ctx, args: ran.append(1))
    values = (x, out, 32, 2.0)
    function.launch(launcher.abi, values, (1, 1, 1), launcher.shared)
    assert ran == [1]                                      # the cached list
    bad = {"an int parameter given a float": ((x, out, 32.0, 2.0), (1, 1, 1), "argument 'n'"),
           "a float parameter given a word": ((x, out, 32, "two"), (1, 1, 1), "argument 'alpha'"),
           "a buffer given a list": (([0.0] * 32, out, 32, 2.0), (1, 1, 1), "must be a torch tensor"),
           "a grid out of range": (values, (2 ** 31, 1, 1), "out of range")}
    for what, (vals, grid, message) in bad.items():
        with pytest.raises(runtime.LaunchError, match=message):
            function.launch(launcher.abi, vals, grid, launcher.shared)
    assert ran == [1]


def test_launches_from_several_threads_at_once():
    # They share the kernel's cached lists and its spare result lists.
    import threading
    _scale(torch.rand(8), torch.zeros(8), 1.0)
    failures = []

    def work(k):
        x, out = torch.full((256,), float(k)), torch.zeros(256)
        for i in range(200):
            _scale(x, out, float(i))
            if not torch.equal(out, torch.full((256,), float(k * i))):
                failures.append((k, i))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_exit_is_quiet_while_a_kernel_is_still_held():
    # A daemon thread's frame is never freed, so the compiled kernel it holds outlives IREE's
    # bindings; the runtime drops its IREE objects at exit, and nanobind reports no leaks.
    code = ("import threading, time, torch\n"
            "from triton_iree import kernels as K\n"
            "x = torch.rand(1000); y = torch.rand(1000); out = torch.empty(1000)\n"
            "compiled = K.add_kernel[(1,)](x, y, out, 1000, BLOCK_SIZE=1024)\n"
            "assert torch.equal(out, x + y)\n"
            "threading.Thread(target=lambda k: time.sleep(3600), args=(compiled,), daemon=True).start()\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "leak" not in r.stderr, r.stderr[-2000:]
