"""tl.map_elementwise: a scalar function with per-element control flow, mapped over tiles;
against torch (Triton 3.6's interpreter has no map_elementwise)."""
import pytest
import torch
import triton
import triton.language as tl

import triton_iree

BLOCK = 64


@triton.jit
def _selu(x, alpha):
    if x > 0:
        r = x
    else:
        r = alpha * (tl.exp(x) - 1)
    return r


@triton.jit
def _divmod(a, b):
    return a // b, a % b


@triton.jit
def map_kernel(x_ptr, y_ptr, o1_ptr, o2_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1)
    y = tl.load(y_ptr + offs, mask=m, other=1)
    if FN == "selu":
        tl.store(o1_ptr + offs, tl.map_elementwise(_selu, x, y), mask=m)
    else:
        q, r = tl.map_elementwise(_divmod, x, y)
        tl.store(o1_ptr + offs, q, mask=m)
        tl.store(o2_ptr + offs, r, mask=m)


@pytest.mark.construct("tl.map_elementwise")
@pytest.mark.parametrize("n", [BLOCK - 1, 3 * BLOCK + 1])
@pytest.mark.parametrize("dtype", [torch.float32])   # tl.exp takes fp32 / fp64 only
def test_map_elementwise_if(dtype, n):
    torch.manual_seed(0)
    x = torch.randn(n).to(dtype)
    alpha = torch.rand(n).to(dtype) + 1
    out = torch.zeros(n, dtype=dtype)
    unused = torch.full((4,), 7.0, dtype=dtype)   # selu's kernel writes o1 only
    map_kernel[(triton.cdiv(n, BLOCK),)](x, alpha, out, unused, n, FN="selu", BLOCK=BLOCK)
    ref = torch.where(x > 0, x.float(), alpha.float() * (torch.exp(x.float()) - 1)).to(dtype)
    torch.testing.assert_close(out, ref, rtol=1e-3, atol=1e-3)
    assert (unused == 7.0).all()


@pytest.mark.construct("tl.map_elementwise")
@pytest.mark.parametrize("n", [BLOCK - 1, 3 * BLOCK + 1])
def test_map_elementwise_two_results(n):
    torch.manual_seed(0)
    a = torch.randint(0, 1000, (n,), dtype=torch.int32)
    b = torch.randint(1, 30, (n,), dtype=torch.int32)
    q, r = torch.zeros_like(a), torch.zeros_like(a)
    map_kernel[(triton.cdiv(n, BLOCK),)](a, b, q, r, n, FN="divmod", BLOCK=BLOCK)
    torch.testing.assert_close(q, a // b, rtol=0, atol=0)
    torch.testing.assert_close(r, a % b, rtol=0, atol=0)


@triton.jit
def _early_return(x):
    if x > 0:
        return x
    return -x


@triton.jit
def _nested_returns(x, y):
    if x > 2:
        if y > 0:
            return x * y, y
        return x + 1.0, x
    elif x < -1:
        return x - y, y + 1.0
    r = x * 2.0
    if y < 0.5:
        return r, -r
    return r + y, y


@triton.jit
def early_return_kernel(x_ptr, y_ptr, o1_ptr, o2_ptr, o3_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(o1_ptr + offs, tl.map_elementwise(_early_return, x), mask=m)
    a, b = tl.map_elementwise(_nested_returns, x, y)
    tl.store(o2_ptr + offs, a, mask=m)
    tl.store(o3_ptr + offs, b, mask=m)


@pytest.mark.construct("tl.map_elementwise")
@pytest.mark.parametrize("n", [BLOCK - 1, 3 * BLOCK + 1])
def test_map_elementwise_early_return(n):
    torch.manual_seed(0)
    x, y = torch.randn(n) * 3, torch.randn(n)
    o1, o2, o3 = (torch.full((n + 5,), 7.0) for _ in range(3))
    early_return_kernel[(triton.cdiv(n, BLOCK),)](x, y, o1, o2, o3, n, BLOCK=BLOCK)
    torch.testing.assert_close(o1[:n], x.abs(), rtol=0, atol=0)
    r = x * 2
    ref_a = torch.where(x > 2, torch.where(y > 0, x * y, x + 1), torch.where(x < -1, x - y,
                                                                               torch.where(y < 0.5, r, r + y)))
    ref_b = torch.where(x > 2, torch.where(y > 0, y, x), torch.where(x < -1, y + 1, torch.where(y < 0.5, -r, y)))
    torch.testing.assert_close(o2[:n], ref_a, rtol=0, atol=0)
    torch.testing.assert_close(o3[:n], ref_b, rtol=0, atol=0)
    assert (o1[n:] == 7).all() and (o2[n:] == 7).all() and (o3[n:] == 7).all()


@triton.jit
def _divmod_pack2(a0, a1, b0, b1):
    return a0 // b0, a1 // b1, a0 % b0, a1 % b1


@triton.jit
def _lanes_pack4(a0, a1, a2, a3, b0, b1, b2, b3):
    # Each lane its own formula, and results of two types: lanes and results must not be mixed up.
    if a0 > 50:
        r0 = a0 - b0
    else:
        r0 = a0 + b0
    return (r0, a1 * 2 + b1, a2 * 3 + b2, a3 * 4 + b3,
            a0.to(tl.float32) * 0.5, a1.to(tl.float32) * 1.5, a2.to(tl.float32) * 2.5, a3.to(tl.float32) * 3.5)


@triton.jit
def pack_kernel(a_ptr, b_ptr, q_ptr, r_ptr, e_ptr, f_ptr, stride, R: tl.constexpr, C: tl.constexpr):
    offs = tl.arange(0, R)[:, None] * stride + tl.arange(0, C)[None, :]
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + tl.arange(0, C))[None, :]   # broadcast to the tile's shape by map_elementwise
    q, r = tl.map_elementwise(_divmod_pack2, a, b, pack=2)
    e, f = tl.map_elementwise(_lanes_pack4, a, b, pack=4)
    out = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    tl.store(q_ptr + out, q)
    tl.store(r_ptr + out, r)
    tl.store(e_ptr + out, e)
    tl.store(f_ptr + out, f)


@pytest.mark.construct("tl.map_elementwise")
@pytest.mark.parametrize("R, C", [(4, 8), (2, 4), (8, 1)])
def test_map_elementwise_pack(R, C):
    """pack > 1: the function takes `pack` consecutive elements (row-major) of each argument."""
    torch.manual_seed(0)
    a = torch.randint(1, 100, (R, C + 3), dtype=torch.int32)[:, :C]   # rows with a stride
    b = torch.randint(1, 10, (C,), dtype=torch.int32)
    q, r, e = (torch.zeros(R, C, dtype=torch.int32) for _ in range(3))
    f = torch.zeros(R, C)
    pack_kernel[(1,)](a, b, q, r, e, f, a.stride(0), R=R, C=C)
    bb = b.expand(R, C)
    torch.testing.assert_close(q, a // bb, rtol=0, atol=0)
    torch.testing.assert_close(r, a % bb, rtol=0, atol=0)
    lane = (torch.arange(R * C) % 4).view(R, C)
    first = a.reshape(-1, 4)[:, :1].expand(-1, 4).reshape(R, C)   # lane 0 of each group of 4
    ref_e = torch.where(lane == 0, torch.where(first > 50, a - bb, a + bb), a * (lane + 1) + bb)
    torch.testing.assert_close(e, ref_e.int(), rtol=0, atol=0)
    torch.testing.assert_close(f, a.float() * (lane + 0.5), rtol=0, atol=0)


@triton.jit
def _add4(a0, a1, a2, a3):
    return a0 + a1, a1, a2 + a3, a3


@triton.jit
def pack4_kernel(x_ptr, out_ptr):
    offs = tl.arange(0, 2)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.map_elementwise(_add4, x, pack=4)[0])


@pytest.mark.construct("tl.map_elementwise")
def test_map_elementwise_pack_not_dividing_refused():
    x = torch.randn(2)
    with pytest.raises(triton_iree.UnsupportedError, match=r"tl\.map_elementwise with pack=4 over tensor<2xf32>") as e:
        pack4_kernel[(1,)](x, torch.zeros(2))
    assert f"test_map_elementwise.py:{pack4_kernel.fn.__code__.co_firstlineno + 4}:" in str(e.value)
