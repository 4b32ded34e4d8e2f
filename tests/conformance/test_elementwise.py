"""Elementwise arithmetic and math, per dtype, against Triton's interpreter."""
import pytest
import torch
import triton
import triton.language as tl

from oracle import interpret

BLOCK = 128


@triton.jit
def binary_kernel(x_ptr, y_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    if OP == "add":
        r = x + y
    elif OP == "mul":
        r = x * y
    elif OP == "maximum":
        r = tl.maximum(x, y)
    else:
        r = tl.where(x > y, x - y, y - x)
    tl.store(out_ptr + offs, r, mask=m)


@pytest.mark.construct("arithmetic (+, *, tl.maximum, tl.where)")
@pytest.mark.parametrize("op", ["add", "mul", "maximum", "where"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_binary(op, dtype):
    n = 3 * BLOCK - 1
    torch.manual_seed(0)
    x = (torch.randn(n) * 10).to(dtype)
    y = (torch.randn(n) * 10).to(dtype)
    out = torch.empty(n, dtype=dtype)
    grid = (triton.cdiv(n, BLOCK),)
    binary_kernel[grid](x, y, out, n, OP=op, BLOCK=BLOCK)
    ref = interpret(binary_kernel, grid, [x, y, torch.empty(n, dtype=dtype), n], OP=op, BLOCK=BLOCK)[2]
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


@triton.jit
def large_constants_kernel(x_ptr, out_ptr):
    offs = tl.arange(0, 4)
    x = tl.load(x_ptr + offs)
    tl.store(out_ptr + offs, tl.where(x > 1e300, x * 1e-300, x + 1e20))


@pytest.mark.construct("arithmetic (+, *, tl.maximum, tl.where)")
def test_constants_written_with_an_exponent():
    """Python writes 1e300 as 1e+300, which MLIR does not read as a float."""
    x = torch.tensor([1e301, 1.0, -2.0, 5e-324], dtype=torch.float64)
    out = torch.empty_like(x)
    large_constants_kernel[(1,)](x, out)
    assert torch.equal(out, torch.where(x > 1e300, x * 1e-300, x + 1e20))
