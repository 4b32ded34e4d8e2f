"""Checked mode: bounds checks on every access (the `check_bounds` launch option), and
tl.device_assert (kept by Triton's debug switch)."""
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from triton_iree import DeviceError, LaunchError, runtime

import kernels as K

GUARD = 64   # elements of guard memory on each side of a tensor (keeps it 64-byte aligned)


def guarded(n: int, dtype=torch.float32, fill=-1):
    """(guard, t): `t` is n elements whose storage is exactly its own memory, with GUARD
    elements of `guard` (filled with `fill`) before and after it."""
    guard = torch.full((n + 2 * GUARD,), fill, dtype=dtype)
    t = torch.from_numpy(guard.numpy()[GUARD:GUARD + n])
    assert t.untyped_storage().nbytes() == n * t.element_size()
    return guard, t


def assert_guard_untouched(guard, n, fill=-1):
    assert (guard[:GUARD] == fill).all() and (guard[GUARD + n:] == fill).all()


@triton.jit
def load_shifted_kernel(x_ptr, out_ptr, n, shift, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs + shift), mask=offs < n)


@triton.jit
def store_unmasked_kernel(out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, offs.to(tl.float32))


@triton.jit
def tile_2d_kernel(out_ptr, stride, BM: tl.constexpr, BN: tl.constexpr):
    rows = tl.program_id(1) * BM + tl.arange(0, BM)
    cols = tl.program_id(0) * BN + tl.arange(0, BN)
    tl.store(out_ptr + rows[:, None] * stride + cols[None, :], 1.0)


@triton.jit
def loop_kernel(x_ptr, out_ptr, steps, BLOCK: tl.constexpr):
    """Sums `steps` consecutive blocks (the pointer is carried by the loop), then stores past
    the end of `out` as well: the load in the loop fails first."""
    offs = tl.arange(0, BLOCK)
    ptrs = x_ptr + offs
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for _ in range(steps):
        acc += tl.load(ptrs)
        ptrs += BLOCK
    tl.store(out_ptr + offs + BLOCK, acc)


@triton.jit
def if_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    if pid == 3:
        tl.store(out_ptr + pid * BLOCK + offs + 1, tl.load(x_ptr + offs))
    else:
        tl.store(out_ptr + pid * BLOCK + offs, tl.load(x_ptr + offs))


@triton.jit
def scalar_kernel(x_ptr, out_ptr, i):
    tl.store(out_ptr, tl.load(x_ptr + i))


@triton.jit
def assert_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.device_assert(x >= 0, "x must be non-negative")
    tl.device_assert(n > 0, "n must be positive")
    tl.store(out_ptr + offs, x * 2, mask=offs < n)


@triton.jit
def no_assert_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, x * 2, mask=offs < n)


@triton.jit
def strided_copy_kernel(x_ptr, o_ptr, n, sx, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o_ptr + offs, tl.load(x_ptr + offs * sx, mask=m), mask=m)


def _line(fn, text: str) -> str:
    """'file:line' of the line of `fn`'s source that contains `text`."""
    lines, first = inspect.getsourcelines(fn.fn)
    i = next(i for i, s in enumerate(lines) if text in s)
    return f"{inspect.getsourcefile(fn.fn)}:{first + i}:"


def test_in_bounds_vector_add_is_checked_and_right(seeded):
    n = 1000 + 5
    x, y, out = torch.rand(n), torch.rand(n), torch.empty(n)
    compiled = K.add_kernel[(triton.cdiv(n, 128),)](x, y, out, n, BLOCK_SIZE=128, check_bounds=True)
    assert [s["kind"] for s in compiled.metadata.checks["sites"]] == ["load", "load", "store"]
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


def test_in_bounds_masked_matmul_is_checked_and_right(seeded):
    M, N, Kd = 50, 70, 45
    a, b, c = torch.randn(M, Kd), torch.randn(Kd, N), torch.empty(M, N)
    grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
    compiled = K.matmul_kernel[grid](a, b, c, M, N, Kd, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                     c.stride(0), c.stride(1), BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, check_bounds=True)
    assert len(compiled.metadata.checks["sites"]) == 3
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)


def test_out_of_bounds_load_past_the_end():
    n = 1000
    _, x = guarded(n)
    x.copy_(torch.arange(n, dtype=torch.float32))
    out = torch.full((1024,), -2.0)
    with pytest.raises(DeviceError) as e:
        load_shifted_kernel[(8,)](x, out, n, 0, BLOCK=128, check_bounds=True)
    err = e.value
    assert (err.access, err.param, err.program_id, err.offset) == ("load", "x_ptr", (7, 0, 0), 1000)
    assert err.kernel == "load_shifted_kernel" and err.loc.startswith(_line(load_shifted_kernel, "tl.load"))
    assert "outside [0, 1000)" in str(err) and "'out_ptr' may have been written" in str(err)
    torch.testing.assert_close(out[:896], x[:896], rtol=0, atol=0)   # the other programs ran


def test_out_of_bounds_load_before_the_start_reports_the_lowest_offset():
    n = 256
    _, x = guarded(n)
    out = torch.empty(n)
    with pytest.raises(DeviceError) as e:
        load_shifted_kernel[(2,)](x, out, n, -3, BLOCK=128, check_bounds=True)
    assert (e.value.access, e.value.program_id, e.value.offset) == ("load", (0, 0, 0), -3)


def test_out_of_bounds_store_is_not_performed():
    n = 1000
    guard, out = guarded(n)
    with pytest.raises(DeviceError) as e:
        store_unmasked_kernel[(8,)](out, BLOCK=128, check_bounds=True)
    err = e.value
    assert (err.access, err.param, err.program_id, err.offset) == ("store", "out_ptr", (7, 0, 0), 1000)
    assert err.loc.startswith(_line(store_unmasked_kernel, "tl.store"))
    assert_guard_untouched(guard, n)
    torch.testing.assert_close(out[:896], torch.arange(896, dtype=torch.float32), rtol=0, atol=0)


def test_out_of_bounds_2d_store_names_the_first_program():
    guard, out = guarded(16 * 40)                   # 40 rows of 16; the grid covers 48
    with pytest.raises(DeviceError) as e:
        tile_2d_kernel[(2, 3)](out, 16, BM=16, BN=8, check_bounds=True)
    assert (e.value.program_id, e.value.offset) == ((0, 2, 0), 40 * 16)
    assert_guard_untouched(guard, 16 * 40)
    assert (out[:32 * 16] == 1).all() and (out[32 * 16:] == -1).all()   # failing stores: none of it


def test_out_of_bounds_gather():
    n = 300
    x = torch.rand(n)
    idx = torch.arange(n, dtype=torch.int32).flip(0)
    idx[200] = -7
    idx[210] = n + 5
    out = torch.zeros(n)
    with pytest.raises(DeviceError) as e:
        K.gather_kernel[(3,)](x, idx, out, n, BLOCK=128, check_bounds=True)
    err = e.value
    assert (err.access, err.param, err.program_id, err.offset) == ("load", "x_ptr", (1, 0, 0), -7)


def test_out_of_bounds_scatter_is_not_performed():
    n = 300
    x = torch.rand(n)
    idx = torch.arange(n, dtype=torch.int32)
    idx[5] = n + 2
    guard, out = guarded(n, fill=0)
    with pytest.raises(DeviceError) as e:
        K.scatter_kernel[(3,)](x, idx, out, n, BLOCK=128, check_bounds=True)
    err = e.value
    assert (err.access, err.param, err.program_id, err.offset) == ("store", "out_ptr", (0, 0, 0), n + 2)
    assert_guard_untouched(guard, n, fill=0)
    torch.testing.assert_close(out[128:], x[128:] * 2, rtol=0, atol=0)   # programs 1 and 2 ran


def test_scalar_access():
    x, out = torch.arange(10, dtype=torch.float32), torch.zeros(1)
    scalar_kernel[(1,)](x, out, 9, check_bounds=True)
    assert out.item() == 9
    with pytest.raises(DeviceError) as e:
        scalar_kernel[(1,)](x, out, 10, check_bounds=True)
    assert (e.value.access, e.value.param, e.value.offset) == ("load", "x_ptr", 10)
    with pytest.raises(DeviceError) as e:                     # x_ptr - 1
        scalar_kernel[(1,)](x, out, -1, check_bounds=True)
    assert (e.value.access, e.value.param, e.value.offset) == ("load", "x_ptr", -1)


def test_first_failure_in_program_order_through_a_loop():
    x, out = torch.ones(3 * 32), torch.zeros(32)
    loop_kernel[(1,)](x, torch.zeros(64), 3, BLOCK=32, check_bounds=True)
    with pytest.raises(DeviceError) as e:
        loop_kernel[(1,)](x, out, 4, BLOCK=32, check_bounds=True)   # 4th load, then the store, fail
    assert (e.value.access, e.value.param, e.value.offset) == ("load", "x_ptr", 96)
    assert e.value.loc.startswith(_line(loop_kernel, "tl.load"))
    with pytest.raises(DeviceError) as e:
        loop_kernel[(1,)](x, out, 3, BLOCK=32, check_bounds=True)   # only the store fails
    assert (e.value.access, e.value.param, e.value.offset) == ("store", "out_ptr", 32)


def test_failure_inside_an_if():
    x, out = torch.rand(16), torch.zeros(4 * 16)
    with pytest.raises(DeviceError) as e:
        if_kernel[(4,)](x, out, BLOCK=16, check_bounds=True)
    assert (e.value.access, e.value.program_id, e.value.offset) == ("store", (3, 0, 0), 64)
    torch.testing.assert_close(out, torch.cat([x, x, x, torch.zeros(16)]), rtol=0, atol=0)


def test_device_assert_only_under_debug():
    n = 1000
    x, out = torch.rand(n), torch.empty(n)
    grid = (triton.cdiv(n, 128),)
    assert_kernel[grid](x, out, n, BLOCK=128, debug=True)           # holds everywhere
    torch.testing.assert_close(out, x * 2, rtol=0, atol=0)
    x[700] = -1.0
    with pytest.raises(DeviceError) as e:
        assert_kernel[grid](x, out, n, BLOCK=128, debug=True)
    err = e.value
    assert err.assert_message == "x must be non-negative" and err.program_id == (5, 0, 0)
    assert err.access is None and err.loc.startswith(_line(assert_kernel, "device_assert"))
    assert "device_assert failed in program (5, 0, 0): x must be non-negative" in str(err)
    with pytest.raises(DeviceError, match=r"program \(0, 0, 0\): n must be positive") as e:
        assert_kernel[(2,)](x, out, 0, BLOCK=128, debug=True)   # a scalar condition
    assert e.value.loc.startswith(_line(assert_kernel, "n must be positive"))
    with pytest.raises(DeviceError, match="x must be non-negative"):   # with bounds checks too
        assert_kernel[grid](x, out, n, BLOCK=128, debug=True, check_bounds=True)
    # Without debug, Triton drops the assert: no error, and the module is the assert-free one.
    off = assert_kernel[grid](x, out, n, BLOCK=128)
    torch.testing.assert_close(out, x * 2, rtol=0, atol=0)
    plain = no_assert_kernel[grid](x, out, n, BLOCK=128)
    assert off.asm["iree"] == plain.asm["iree"].replace("no_assert_kernel", "assert_kernel")


def test_debug_asserts_are_checked_without_bounds_checks():
    n = 1000
    x, out = torch.rand(n), torch.empty(n)
    compiled = assert_kernel[(8,)](x, out, n, BLOCK=128, debug=True)
    assert [s["kind"] for s in compiled.metadata.checks["sites"]] == ["assert", "assert"]
    # No extents of the arguments' storage: only the records buffer and its base offset are added.
    assert "x_ptr_start" not in compiled.asm["iree"] and "out_ptr_end" not in compiled.asm["iree"]


def test_debug_does_not_check_bounds(monkeypatch):
    guard, out = guarded(1000)
    plain = store_unmasked_kernel[(8,)](out, BLOCK=128)
    sizes = _allocations(monkeypatch)
    debug = store_unmasked_kernel[(8,)](out, BLOCK=128, debug=True)   # 24 elements past the end
    # Not reported, and run as the unchecked kernel: the same module, nothing allocated. (Where
    # the stores past the end land is the target's: not checked.)
    assert torch.equal(guard[GUARD:GUARD + 1000], torch.arange(1000.0)) and sizes == []
    assert getattr(debug.metadata, "checks", None) is None and debug.asm["iree"] == plain.asm["iree"]
    with pytest.raises(DeviceError) as e:
        store_unmasked_kernel[(8,)](out, BLOCK=128, debug=True, check_bounds=True)
    assert (e.value.access, e.value.program_id, e.value.offset) == ("store", (7, 0, 0), 1000)


def test_a_kernel_compiled_without_bounds_checks_is_not_reused_with_them():
    for check_bounds in (False, True, False, True):
        guard, out = guarded(1000)
        if check_bounds:
            with pytest.raises(DeviceError):
                store_unmasked_kernel[(8,)](out, BLOCK=128, check_bounds=True)
            assert_guard_untouched(guard, 1000)
        else:
            compiled = store_unmasked_kernel[(8,)](out, BLOCK=128)
            assert getattr(compiled.metadata, "checks", None) is None
    checked = store_unmasked_kernel.warmup(out, BLOCK=128, check_bounds=True, grid=(8,))
    assert checked.hash != compiled.hash   # Triton's on-disk cache key


def _run_with_environment(tmp_path, code: str, **env) -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    code = ("import sys, torch, triton_iree; sys.path[:0] = [%r, %r]; import test_checked as T\n"
            % (here, os.path.join(os.path.dirname(here), "examples"))) + code
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path), **env)
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    return p.stdout.strip() + p.stderr[-2000:] * (p.returncode != 0)


_STORE_PAST_THE_END = ("g, t = T.guarded(1000)\n"
                       "try:\n    T.store_unmasked_kernel[(8,)](t, BLOCK=128); print('ran')\n"
                       "except triton_iree.DeviceError as e:\n    print('raised', e.program_id, e.offset)\n")


def test_triton_debug_environment_variable(tmp_path):
    code = (_STORE_PAST_THE_END + "x = torch.rand(1000); x[5] = -1\n"
            "try:\n    T.assert_kernel[(8,)](x, torch.empty(1000), 1000, BLOCK=128)\n"
            "except triton_iree.DeviceError as e:\n    print('raised', e.program_id, e.assert_message)\n")
    assert _run_with_environment(tmp_path, code, TRITON_DEBUG="1") == \
        "ran\nraised (0, 0, 0) x must be non-negative"


def test_check_bounds_environment_variable(tmp_path):
    code = _STORE_PAST_THE_END + "T.store_unmasked_kernel[(8,)](t, BLOCK=128, check_bounds=False); print('off')\n"
    assert _run_with_environment(tmp_path, code, TRITON_IREE_CHECK_BOUNDS="1") == "raised (7, 0, 0) 1000\noff"


def test_negative_strides_reach_the_whole_storage_before_the_pointer():
    x, n = torch.arange(1000.0), 1000
    for check in (False, True):
        o = torch.full((n + 5,), -1.0)
        strided_copy_kernel[(triton.cdiv(n, 128),)](x[999:], o, n, -1, BLOCK=128, check_bounds=check)
        assert torch.equal(o[:n], x.flip(0)) and (o[n:] == -1).all()
    with pytest.raises(DeviceError) as e:   # one element before the storage
        strided_copy_kernel[(triton.cdiv(n + 1, 128),)](x[999:], o, n + 1, -1, BLOCK=128, check_bounds=True)
    assert (e.value.access, e.value.program_id, e.value.offset) == ("load", (7, 0, 0), -1000)
    assert "outside [-999, 1)" in str(e.value)
    out = torch.zeros(1)
    scalar_kernel[(1,)](x[5:], out, -5, check_bounds=True)
    assert out.item() == 0
    with pytest.raises(DeviceError) as e:
        scalar_kernel[(1,)](x[5:], out, -6, check_bounds=True)
    assert (e.value.access, e.value.param, e.value.offset) == ("load", "x_ptr", -6)


def test_before_storage_that_starts_inside_an_aligned_line():
    # The buffer imported for x starts at the 64-byte line before it; x[-1] is in that line but
    # not in x's storage.
    n = 100
    big = np.arange(n + 64, dtype=np.float32)
    k = next(k for k in range(16) if (big.ctypes.data + 4 * k) % 64 == 32)
    x = torch.from_numpy(big[k:k + n])
    assert x.data_ptr() % 64 == 32 and x.untyped_storage().data_ptr() == x.data_ptr()
    out = torch.zeros(1)
    with pytest.raises(DeviceError) as e:
        scalar_kernel[(1,)](x, out, -1, check_bounds=True)
    assert (e.value.access, e.value.param, e.value.offset) == ("load", "x_ptr", -1)
    assert f"outside [0, {n})" in str(e.value) and out.item() == 0
    o = torch.zeros(n)
    with pytest.raises(DeviceError) as e:
        load_shifted_kernel[(1,)](x, o, n, -1, BLOCK=128, check_bounds=True)
    assert (e.value.access, e.value.offset) == ("load", -1)
    with pytest.raises(DeviceError) as e:
        strided_copy_kernel[(1,)](x, o, 2, -1, BLOCK=128, check_bounds=True)
    assert (e.value.access, e.value.offset) == ("load", -1)


@pytest.mark.parametrize("check_bounds", [False, True])
def test_a_grid_axis_of_2_31_programs_is_refused_before_anything_runs(monkeypatch, check_bounds):
    out = torch.zeros(256)
    store_unmasked_kernel[(2,)](out, BLOCK=128, check_bounds=check_bounds)     # compiled; an allowed grid runs
    assert torch.equal(out, torch.arange(256.0))
    ran = []
    monkeypatch.setattr(runtime.LoadedKernel, "_invoke", lambda self, ctx, args: ran.append("launch"))

    def zeros(*args, **kwargs):   # the launch's own buffers (checked mode's records)
        ran.append("allocation")
        raise MemoryError("allocated for a refused grid")

    monkeypatch.setattr(torch, "zeros", zeros)
    for grid in [(2 ** 31,), (1, 2 ** 31), (1, 1, 2 ** 31)]:
        with pytest.raises(LaunchError, match=f"grid dimension {2 ** 31} is out of range"):
            store_unmasked_kernel[grid](out, BLOCK=128, check_bounds=check_bounds)
    assert ran == []


@triton.jit
def one_failing_program_kernel(out_ptr, bad):
    # Program `bad` stores out[0]; program bad + 1 stores out[1], past the end; the rest nothing.
    pid = tl.program_id(0)
    tl.store(out_ptr + pid - bad, 1.0, mask=(pid >= bad) & (pid <= bad + 1))


@triton.jit
def each_fails_kernel(out_ptr, n):
    pid = tl.program_id(0)
    tl.store(out_ptr + pid + n, 1.0)


def _allocations(monkeypatch) -> list[int]:
    """The bytes of each torch.zeros call from now on."""
    sizes, real = [], torch.zeros

    def zeros(*args, **kwargs):
        t = real(*args, **kwargs)
        sizes.append(t.numel() * t.element_size())
        return t

    monkeypatch.setattr(torch, "zeros", zeros)
    return sizes


def test_records_do_not_grow_with_the_grid(monkeypatch):
    out = torch.zeros(1)
    sizes = _allocations(monkeypatch)
    programs, bad = 1 << 24, (1 << 24) - 1000
    with pytest.raises(DeviceError) as e:
        one_failing_program_kernel[(programs,)](out, bad, check_bounds=True)
    assert 0 < sum(sizes) <= 64 << 10
    assert (e.value.access, e.value.program_id, e.value.offset) == ("store", (bad + 1, 0, 0), 1)
    assert "share one record" in str(e.value) and out.item() == 1


def test_more_failing_programs_than_records():
    n = 3000
    out = torch.zeros(n)
    with pytest.raises(DeviceError) as e:
        each_fails_kernel[(n,)](out, n, check_bounds=True)
    # A failing program, with its own offset: the record is one program's.
    assert e.value.access == "store" and e.value.offset == e.value.program_id[0] + n
    with pytest.raises(DeviceError) as e:   # fewer programs than records: the first, exactly
        each_fails_kernel[(1000,)](out, n, check_bounds=True)
    assert (e.value.program_id, e.value.offset) == ((0, 0, 0), n) and "share" not in str(e.value)


def test_a_checked_grid_past_its_records_tags_is_refused_before_anything_runs(monkeypatch):
    out = torch.zeros(1)
    one_failing_program_kernel[(1,)](out, 0, check_bounds=True)
    sizes = _allocations(monkeypatch)
    monkeypatch.setattr(runtime.LoadedKernel, "_invoke", lambda self, ctx, args: sizes.append(-1))
    with pytest.raises(LaunchError, match="checked mode launches at most"):
        one_failing_program_kernel[(2 ** 31 - 1, 2 ** 31 - 1)](out, 0, check_bounds=True)
    assert sizes == []


@triton.jit
def assert_then_scatter_kernel(x_ptr, idx_ptr, out_ptr, n, steps, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    idx = tl.load(idx_ptr + offs, mask=m, other=0)
    tl.device_assert((idx >= 0) & (idx < n), "index out of bounds")
    tl.store(out_ptr + idx, tl.load(x_ptr + idx, mask=m), mask=m)
    for i in range(steps):   # accesses in a loop after the assert
        tl.store(out_ptr + idx, i + 1.0, mask=m)


def test_a_program_that_failed_an_assert_performs_no_later_access():
    # Without bounds checks, an index the assert refused is never used (Inductor's indirect
    # indexing asserts its indices, then loads or stores through them).
    n = 300
    x, idx = torch.rand(n), torch.randperm(n)
    storage = torch.full((n + 64,), -1.0)
    out = storage[:n]   # what lies past `out` is its storage: the kernel could write it
    assert_then_scatter_kernel[(3,)](x, idx, out, n, 0, BLOCK=128, debug=True)
    torch.testing.assert_close(out, x, rtol=0, atol=0)
    idx[200] = n + 40   # program 1 fails
    storage.fill_(-1.0)
    with pytest.raises(DeviceError, match="index out of bounds") as e:
        assert_then_scatter_kernel[(3,)](x, idx, out, n, 2, BLOCK=128, debug=True)
    assert e.value.program_id == (1, 0, 0)
    assert e.value.loc.startswith(_line(assert_then_scatter_kernel, "device_assert"))
    done = torch.zeros(n, dtype=torch.bool)
    done[idx[:128]] = True
    done[idx[256:]] = True
    assert (out[done] == 2).all() and (out[~done] == -1).all()   # programs 0 and 2 ran on
    assert (storage[n:] == -1).all()
