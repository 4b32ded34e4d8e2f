"""tl.join, tl.split, tl.interleave and tl.cat, per dtype, against Triton's interpreter; tl.reshape of
pointer offsets against torch."""
import pytest
import torch
import triton
import triton.language as tl

from oracle import interpret

BLOCK = 64
DTYPES = [torch.float32, torch.float16, torch.int32, torch.int8]


def _inputs(n, dtype, seed=0):
    torch.manual_seed(seed)
    return (torch.randn(n) * 50).to(dtype)


@triton.jit
def join_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    y = tl.load(y_ptr + offs, mask=m, other=0)
    z = tl.join(x, y)                                           # [BLOCK, 2]
    pair = tl.arange(0, 2)[None, :]
    tl.store(out_ptr + 2 * offs[:, None] + pair, z, mask=m[:, None])


@pytest.mark.construct("tl.join")
@pytest.mark.parametrize("n", [BLOCK - 1, 3 * BLOCK - 1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_join(dtype, n):
    x, y = _inputs(n, dtype), _inputs(n, dtype, seed=1)
    out = torch.zeros(2 * n, dtype=dtype)
    grid = (triton.cdiv(n, BLOCK),)
    join_kernel[grid](x, y, out, n, BLOCK=BLOCK)
    torch.testing.assert_close(out, torch.stack([x, y], dim=-1).reshape(-1), rtol=0, atol=0)


@triton.jit
def split_kernel(z_ptr, a_ptr, b_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    pair = tl.arange(0, 2)[None, :]
    z = tl.load(z_ptr + 2 * offs[:, None] + pair, mask=m[:, None], other=0)
    a, b = tl.split(z)
    tl.store(a_ptr + offs, a * 2, mask=m)
    tl.store(b_ptr + offs, b - a, mask=m)


@pytest.mark.construct("tl.split")
@pytest.mark.parametrize("n", [BLOCK + 1, 3 * BLOCK - 1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_split(dtype, n):
    z = _inputs(2 * n, dtype)
    a, b = torch.zeros(n, dtype=dtype), torch.zeros(n, dtype=dtype)
    grid = (triton.cdiv(n, BLOCK),)
    split_kernel[grid](z, a, b, n, BLOCK=BLOCK)
    ref = interpret(split_kernel, grid, [z, torch.zeros(n, dtype=dtype), torch.zeros(n, dtype=dtype), n],
                    BLOCK=BLOCK)
    torch.testing.assert_close(a, ref[1], rtol=0, atol=0)
    torch.testing.assert_close(b, ref[2], rtol=0, atol=0)


@triton.jit
def split_2d_kernel(z_ptr, out_ptr, rows, C: tl.constexpr, R: tl.constexpr):
    # z is [rows, C, 2]; out[r, c] = z[r, c, 1] - z[r, c, 0]
    r = tl.program_id(0) * R + tl.arange(0, R)
    c = tl.arange(0, C)
    p = tl.arange(0, 2)
    m = (r < rows)[:, None, None]
    z = tl.load(z_ptr + r[:, None, None] * (2 * C) + c[None, :, None] * 2 + p[None, None, :], mask=m, other=0)
    lo, hi = tl.split(z)
    tl.store(out_ptr + r[:, None] * C + c[None, :], hi - lo, mask=(r < rows)[:, None])


@pytest.mark.construct("tl.split")
@pytest.mark.parametrize("rows", [7, 17])
def test_split_3d(rows):
    C, R = 8, 8
    z = _inputs(rows * C * 2, torch.float32).reshape(rows, C, 2)
    out = torch.zeros(rows, C)
    split_2d_kernel[(triton.cdiv(rows, R),)](z, out, rows, C=C, R=R)
    torch.testing.assert_close(out, z[..., 1] - z[..., 0], rtol=0, atol=0)


@triton.jit
def interleave_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    y = tl.load(y_ptr + offs, mask=m, other=0)
    z = tl.interleave(x, y)                                     # [2 * BLOCK]
    o = tl.program_id(0) * 2 * BLOCK + tl.arange(0, 2 * BLOCK)
    tl.store(out_ptr + o, z, mask=o < 2 * n)


@pytest.mark.construct("tl.interleave")
@pytest.mark.parametrize("n", [BLOCK - 1, 3 * BLOCK + 1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_interleave(dtype, n):
    x, y = _inputs(n, dtype), _inputs(n, dtype, seed=1)
    out = torch.zeros(2 * n, dtype=dtype)
    grid = (triton.cdiv(n, BLOCK),)
    interleave_kernel[grid](x, y, out, n, BLOCK=BLOCK)
    ref = interpret(interleave_kernel, grid, [x, y, torch.zeros(2 * n, dtype=dtype), n], BLOCK=BLOCK)[2]
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


@triton.jit
def interleave_2d_kernel(x_ptr, y_ptr, out_ptr, rows, C: tl.constexpr, R: tl.constexpr):
    r = tl.program_id(0) * R + tl.arange(0, R)
    c = tl.arange(0, C)
    m = (r < rows)[:, None]
    x = tl.load(x_ptr + r[:, None] * C + c[None, :], mask=m, other=0)
    y = tl.load(y_ptr + r[:, None] * C + c[None, :], mask=m, other=0)
    z = tl.interleave(x, y)                                     # [R, 2 * C]
    c2 = tl.arange(0, 2 * C)
    tl.store(out_ptr + r[:, None] * (2 * C) + c2[None, :], z, mask=m)


@pytest.mark.construct("tl.interleave")
@pytest.mark.parametrize("rows", [7, 17])
def test_interleave_2d(rows):
    C, R = 16, 8
    x, y = _inputs(rows * C, torch.float32).reshape(rows, C), _inputs(rows * C, torch.float32, 1).reshape(rows, C)
    out = torch.zeros(rows, 2 * C)
    interleave_2d_kernel[(triton.cdiv(rows, R),)](x, y, out, rows, C=C, R=R)
    torch.testing.assert_close(out, torch.stack([x, y], dim=-1).reshape(rows, 2 * C), rtol=0, atol=0)


@triton.jit
def cat_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    y = tl.load(y_ptr + offs, mask=m, other=0)
    z = tl.cat(x, y, can_reorder=True)                          # [2 * BLOCK]
    o = tl.arange(0, 2 * BLOCK)
    src = pid * BLOCK + o % BLOCK
    tl.store(out_ptr + pid * 2 * BLOCK + o, z, mask=src < n)


@pytest.mark.construct("tl.cat")
@pytest.mark.parametrize("n", [BLOCK - 1, 3 * BLOCK + 1])
@pytest.mark.parametrize("dtype", DTYPES)
def test_cat(dtype, n):
    # can_reorder=True lets Triton return the elements in any order; triton-iree and the
    # interpreter both concatenate, and the multiset of elements must match in any case.
    x, y = _inputs(n, dtype), _inputs(n, dtype, seed=1)
    grid = (triton.cdiv(n, BLOCK),)
    size = 2 * BLOCK * grid[0]
    out = torch.zeros(size, dtype=dtype)
    cat_kernel[grid](x, y, out, n, BLOCK=BLOCK)
    ref = interpret(cat_kernel, grid, [x, y, torch.zeros(size, dtype=dtype), n], BLOCK=BLOCK)[2]
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
    assert torch.equal(out.sort().values, torch.cat([x, y, torch.zeros(size - 2 * n, dtype=dtype)]).sort().values)


@triton.jit
def join_scalars_kernel(x_ptr, out_ptr):
    x = tl.load(x_ptr)
    y = tl.load(x_ptr + 1)
    z = tl.join(x * 3, y)                                       # two scalars: shape [2]
    tl.store(out_ptr + tl.arange(0, 2), z)


@pytest.mark.construct("tl.join")
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_join_scalars(dtype):
    x = torch.tensor([5, 11], dtype=dtype)
    out = torch.zeros(2, dtype=dtype)
    join_scalars_kernel[(1,)](x, out)
    torch.testing.assert_close(out, torch.tensor([15, 11], dtype=dtype), rtol=0, atol=0)


@triton.jit
def split_scalars_kernel(x_ptr, out_ptr):
    a, b = tl.split(tl.load(x_ptr + tl.arange(0, 2)))           # shape [2] to two scalars
    tl.store(out_ptr, b - a)


@pytest.mark.construct("tl.split")
def test_split_to_scalars():
    x = torch.tensor([5.0, 11.0])
    out = torch.zeros(1)
    split_scalars_kernel[(1,)](x, out)
    torch.testing.assert_close(out, torch.tensor([6.0]), rtol=0, atol=0)


@triton.jit
def join_ptr_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # tl.join of two pointer tiles into one argument, then a load through the joined pointers.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    p = tl.join(x_ptr + offs, x_ptr + n + offs)
    v = tl.load(p, mask=tl.join(m, m), other=0)
    tl.store(out_ptr + offs, tl.sum(v, axis=1), mask=m)


@pytest.mark.construct("tl.join")
@pytest.mark.parametrize("n", [BLOCK - 1, 3 * BLOCK + 1])
def test_join_pointers(n):
    x = _inputs(2 * n, torch.float32)
    out = torch.zeros(n)
    join_ptr_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    torch.testing.assert_close(out, x[:n] + x[n:], rtol=0, atol=0)


@triton.jit
def reshaped_offsets_kernel(x_ptr, out_ptr, stride_x, OUT_STRIDE: tl.constexpr, R: tl.constexpr, C: tl.constexpr):
    r, c = tl.arange(0, R)[:, None], tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + tl.reshape(r * stride_x + c, [R * C]))
    y = tl.reshape(x * 2 + 1, [R * C // 4, 4])
    tl.store(out_ptr + tl.reshape(r * OUT_STRIDE + c, [R * C // 4, 4]), y)


@pytest.mark.construct("tl.reshape")
@pytest.mark.parametrize("out_stride", [8, 11])   # rows of the output contiguous, or 3 apart
def test_store_through_reshaped_offsets(out_stride):
    R, C = 4, 8
    torch.manual_seed(0)
    x = torch.randn(R, C + 5)[:, :C]   # rows with a stride
    out = torch.full((R * out_stride + 5,), 7.0)
    reshaped_offsets_kernel[(1,)](x, out, x.stride(0), OUT_STRIDE=out_stride, R=R, C=C)
    ref = torch.full_like(out, 7.0)
    ref[:R * out_stride].view(R, out_stride)[:, :C] = x * 2 + 1
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
