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
    map_kernel[(triton.cdiv(n, BLOCK),)](x, alpha, out, out, n, FN="selu", BLOCK=BLOCK)
    ref = torch.where(x > 0, x.float(), alpha.float() * (torch.exp(x.float()) - 1)).to(dtype)
    torch.testing.assert_close(out, ref, rtol=1e-3, atol=1e-3)


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
def early_return_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.map_elementwise(_early_return, tl.load(x_ptr + offs)))


@pytest.mark.construct("tl.map_elementwise")
def test_map_elementwise_early_return_refused():
    x = torch.randn(BLOCK)
    with pytest.raises(triton_iree.UnsupportedError, match=r"tl\.map_elementwise .*return inside an if") as e:
        early_return_kernel[(1,)](x, torch.zeros(BLOCK), BLOCK=BLOCK)
    assert f"test_map_elementwise.py:{early_return_kernel.fn.__code__.co_firstlineno + 3}:" in str(e.value)


@triton.jit
def _add_pairs(a0, a1, b0, b1):
    return a0 + b0, a1 + b1


@triton.jit
def pack_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.map_elementwise(_add_pairs, x, x, pack=2)[0])


@pytest.mark.construct("tl.map_elementwise")
def test_map_elementwise_pack_refused():
    x = torch.randn(BLOCK)
    with pytest.raises(triton_iree.UnsupportedError, match=r"tl\.map_elementwise with pack > 1") as e:
        pack_kernel[(1,)](x, torch.zeros(BLOCK), BLOCK=BLOCK)
    assert f"test_map_elementwise.py:{pack_kernel.fn.__code__.co_firstlineno + 4}:" in str(e.value)
