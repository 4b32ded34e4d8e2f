"""Launch arguments: `triton.reinterpret` views (unsigned ints, fp8 storage), torch's unsigned and
bool tensors, all read and written in place; against numpy."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from triton_iree import LaunchError

BLOCK = 128
SIZES = [BLOCK - 1, BLOCK + 1, 3 * BLOCK - 1]
UNSIGNED = {tl.uint8: (torch.int8, np.uint8), tl.uint16: (torch.int16, np.uint16),
            tl.uint32: (torch.int32, np.uint32), tl.uint64: (torch.int64, np.uint64)}


@triton.jit
def unsigned_kernel(x_ptr, y_ptr, div_ptr, rem_ptr, shr_ptr, max_ptr, lt_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m, other=1)
    tl.store(div_ptr + offs, x // y, mask=m)
    tl.store(rem_ptr + offs, x % y, mask=m)
    tl.store(shr_ptr + offs, x >> 3, mask=m)
    tl.store(max_ptr + offs, tl.maximum(x, y), mask=m)
    tl.store(lt_ptr + offs, (x < y).to(tl.int32), mask=m)


def _bits(n, signed, seed):
    """n random values of the signed dtype over its whole range (half of them with the top bit
    set, which unsigned ops must read as large values), none zero."""
    g = torch.Generator().manual_seed(seed)
    info = torch.iinfo(signed)
    x = torch.randint(info.min, info.max, (n,), generator=g, dtype=torch.int64).to(signed)
    return torch.where(x == 0, torch.ones_like(x), x)


def _check_unsigned_ops(x, y, outs, lt, np_dtype):
    xs, ys = x.numpy().view(np_dtype), y.numpy().view(np_dtype)
    div, rem, shr, mx = (o.numpy().view(np_dtype) for o in outs)
    np.testing.assert_array_equal(div, xs // ys)
    np.testing.assert_array_equal(rem, xs % ys)
    np.testing.assert_array_equal(shr, xs >> np_dtype(3))
    np.testing.assert_array_equal(mx, np.maximum(xs, ys))
    np.testing.assert_array_equal(lt.numpy(), (xs < ys).astype(np.int32))


@pytest.mark.construct("triton.reinterpret (unsigned integers)")
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", list(UNSIGNED), ids=str)
def test_reinterpret_unsigned(dtype, n):
    signed, np_dtype = UNSIGNED[dtype]
    x, y = _bits(n, signed, 1), _bits(n, signed, 2)
    outs, lt = [torch.zeros(n, dtype=signed) for _ in range(4)], torch.zeros(n, dtype=torch.int32)
    wrap = lambda t: triton.reinterpret(t, dtype)  # noqa: E731
    unsigned_kernel[(triton.cdiv(n, BLOCK),)](wrap(x), wrap(y), *map(wrap, outs), lt, n, BLOCK=BLOCK)
    _check_unsigned_ops(x, y, outs, lt, np_dtype)


@pytest.mark.construct("unsigned and bool tensor arguments")
@pytest.mark.parametrize("dtype", [torch.uint8, torch.uint16, torch.uint32, torch.uint64], ids=str)
def test_torch_unsigned_tensors(dtype):
    n = 3 * BLOCK - 1
    signed, np_dtype = UNSIGNED[getattr(tl, str(dtype).split(".")[1])]
    x, y = _bits(n, signed, 3), _bits(n, signed, 4)
    outs, lt = [torch.zeros(n, dtype=dtype) for _ in range(4)], torch.zeros(n, dtype=torch.int32)
    unsigned_kernel[(triton.cdiv(n, BLOCK),)](x.view(dtype), y.view(dtype), *outs, lt, n, BLOCK=BLOCK)
    _check_unsigned_ops(x, y, [o.view(signed) for o in outs], lt, np_dtype)


@triton.jit
def bool_kernel(x_ptr, y_ptr, out_ptr, count_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, (x ^ y) | (x & ~y), mask=m)
    tl.store(count_ptr + offs, x.to(tl.int32) + y.to(tl.int32), mask=m)


@pytest.mark.construct("unsigned and bool tensor arguments")
@pytest.mark.parametrize("n", SIZES)
def test_bool_tensors(n):
    g = torch.Generator().manual_seed(n)
    x, y = torch.rand(n, generator=g) < 0.5, torch.rand(n, generator=g) < 0.5
    out, count = torch.ones(n + 1, dtype=torch.bool), torch.zeros(n, dtype=torch.int32)
    bool_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, count, n, BLOCK=BLOCK)
    xn, yn = x.numpy(), y.numpy()
    np.testing.assert_array_equal(out[:n].numpy(), (xn ^ yn) | (xn & ~yn))
    assert bool(out[n]), "an element past n was written"
    np.testing.assert_array_equal(count.numpy(), xn.astype(np.int32) + yn.astype(np.int32))


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m), mask=m)


@pytest.mark.construct("triton.reinterpret (fp8 storage)")
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [tl.float8e5, tl.float8e4nv], ids=str)
def test_reinterpret_fp8_storage(dtype, n):
    x = _bits(n, torch.int8, n)
    out = torch.full((n + 1,), 7, dtype=torch.int8)
    copy_kernel[(triton.cdiv(n, BLOCK),)](triton.reinterpret(x, dtype), triton.reinterpret(out, dtype), n,
                                          BLOCK=BLOCK)
    assert torch.equal(out[:n], x) and out[n] == 7


@pytest.mark.construct("torch fp8 tensor arguments")
@pytest.mark.parametrize("dtype", [torch.float8_e5m2, torch.float8_e4m3fn], ids=str)
def test_torch_fp8_tensors(dtype):
    n = BLOCK + 1
    x = _bits(n, torch.int8, 5).view(dtype)
    out = torch.zeros(n, dtype=dtype)
    copy_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    assert torch.equal(out.view(torch.int8), x.view(torch.int8))


@triton.jit
def abs_bits_kernel(x_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    bits = tl.load(x_ptr + offs * stride, mask=m)
    tl.store(x_ptr + offs * stride, bits & 0x7FFFFFFF, mask=m)


@pytest.mark.construct("triton.reinterpret (unsigned integers)")
def test_reinterpret_is_zero_copy():
    # A strided float32 view with a storage offset, read and written in place as uint32 bits.
    n = BLOCK + 1
    base = torch.randn(2 * n + 3)
    before = base.clone()
    view = base[3::2]
    abs_bits_kernel[(triton.cdiv(n, BLOCK),)](triton.reinterpret(view, tl.uint32), n, view.stride(0), BLOCK=BLOCK)
    assert torch.equal(view, before[3::2].abs())
    untouched = torch.ones_like(base, dtype=torch.bool)
    untouched[3::2] = False
    assert torch.equal(base[untouched], before[untouched])


@pytest.mark.construct("triton.reinterpret (unsigned integers)")
def test_reinterpret_to_a_wider_type():
    # Four int8 elements read as one uint32: the kernel sees the bytes as the wrapper's dtype.
    n = BLOCK + 1
    x = _bits(4 * n, torch.int8, 6)
    out = torch.zeros(n, dtype=torch.int32)
    copy_kernel[(triton.cdiv(n, BLOCK),)](triton.reinterpret(x, tl.uint32), out, n, BLOCK=BLOCK)
    assert torch.equal(out, x.view(torch.int32))


@pytest.mark.construct("triton.reinterpret (unsigned integers)")
def test_reinterpret_that_cannot_be_viewed_is_refused():
    x = torch.zeros(4 * BLOCK + 2, dtype=torch.int8)[1::2]   # a strided view: not one of 4-byte elements
    out = torch.full((BLOCK,), 5, dtype=torch.int32)
    with pytest.raises(LaunchError, match="argument 'x_ptr'.*cannot be read as uint32 in place"):
        copy_kernel[(1,)](triton.reinterpret(x, tl.uint32), out, BLOCK, BLOCK=BLOCK)
    assert (out == 5).all()


@pytest.mark.construct("num_warps / num_stages launch options")
@pytest.mark.parametrize("num_warps", [1, 2, 8, 32])
def test_num_warps_powers_of_two_run(num_warps):
    n = BLOCK + 1
    x, out = torch.randn(n), torch.zeros(n)
    copy_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK, num_warps=num_warps, num_stages=3)
    assert torch.equal(out, x)


@pytest.mark.construct("num_warps / num_stages launch options")
@pytest.mark.parametrize("num_warps", [3, 0, 6])
def test_num_warps_not_a_power_of_two_is_refused(num_warps):
    # As Triton's own backends refuse it: an AssertionError, before anything compiles or runs.
    x, out = torch.randn(BLOCK), torch.zeros(BLOCK)
    with pytest.raises(AssertionError, match=f"num_warps must be a power of 2, got {num_warps}"):
        copy_kernel[(1,)](x, out, BLOCK, BLOCK=BLOCK, num_warps=num_warps)
    assert not out.any()
