"""Boolean tiles: comparisons, negation (xor with a constant true), and/or, stored as int8."""
import pytest
import torch
import triton
import triton.language as tl

BLOCK = 64


@triton.jit
def bool_ops_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    a = x > 0
    b = ~(y > x)
    r = (a & b) | ~(a | b)
    tl.store(out_ptr + offs, r.to(tl.int8), mask=m)


@pytest.mark.construct("boolean ops (not, and, or, comparisons)")
@pytest.mark.parametrize("n", [1, BLOCK - 1, BLOCK + 1, 3 * BLOCK - 1])
def test_bool_ops(n):
    torch.manual_seed(n)
    x, y = torch.randn(n), torch.randn(n)
    out = torch.full((n,), 7, dtype=torch.int8)
    bool_ops_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)
    a, b = x > 0, ~(y > x)
    ref = (a & b) | ~(a | b)
    assert torch.equal(out, ref.to(torch.int8))
