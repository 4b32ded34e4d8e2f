"""`other` of a masked `tl.load`: Triton's frontend converts it to the pointer's element type
(a float to an int, unsigned or bool pointer; an int to a float or narrower int pointer), out of
range and NaN included; against Triton's interpreter, and an int32 argmax over masked rows
against torch."""
import pytest
import torch
import triton
import triton.language as tl

from oracle import interpret

BLOCK = 64
DTYPES = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint64,
          torch.bool, torch.float16, torch.float32, torch.float64]
OTHERS = [-float("inf"), float("inf"), float("nan"), -1.5, 3.7, 1e10, -1e10, 300, -1, 2 ** 40 + 3, True]


@triton.jit
def load_other_kernel(x_ptr, y_ptr, n, n_out, OTHER: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n, other=OTHER)
    tl.store(y_ptr + offs, v, mask=offs < n_out)


@triton.jit
def load_scalar_other_kernel(x_ptr, y_ptr, n, n_out, other, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n, other=other)
    tl.store(y_ptr + offs, v, mask=offs < n_out)


@triton.jit
def full_to_kernel(y_ptr, n, VALUE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.full([BLOCK], VALUE, tl.float32).to(y_ptr.dtype.element_ty)
    tl.store(y_ptr + offs, v, mask=offs < n)


def _same(a, b):
    """Equal, NaN matching NaN."""
    if a.dtype.is_floating_point:
        return bool(((a == b) | (a.isnan() & b.isnan())).all())
    return torch.equal(a, b)


def _check(kernel, x, n_out, *args, **meta):
    out = torch.zeros(n_out + 5, dtype=x.dtype)      # the last 5 are past the store's mask
    grid = (triton.cdiv(n_out, BLOCK),)
    kernel[grid](x, out, x.numel(), n_out, *args, BLOCK=BLOCK, **meta)
    want = interpret(kernel, grid, [x, torch.zeros_like(out), x.numel(), n_out, *args], BLOCK=BLOCK, **meta)[1]
    assert _same(out, want), (out[x.numel():n_out], want[x.numel():n_out])
    assert not out[n_out:].any()


@pytest.mark.construct("tl.load other (converted to the pointer's element type)")
@pytest.mark.parametrize("other", OTHERS, ids=repr)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_load_other_converts_like_triton(dtype, other):
    n = BLOCK + 7
    x = (torch.arange(n) % 11 - 5).to(dtype)
    _check(load_other_kernel, x, 2 * BLOCK + 3, OTHER=other)


@pytest.mark.construct("tl.load other (converted to the pointer's element type)")
@pytest.mark.parametrize("other", [-1.5, 3.7, 300, -1, 2 ** 40 + 3, True], ids=repr)
def test_load_other_converts_like_triton_to_uint32(other):
    # Out of range, numpy's float to uint32 cast (the interpreter's) gives other values for an
    # array than for one element, and the CPU's vector cast other values still: no reference.
    x = torch.arange(BLOCK + 7, dtype=torch.int32).to(torch.uint32)
    _check(load_other_kernel, x, 2 * BLOCK + 3, OTHER=other)


@pytest.mark.construct("tl.load other (converted to the pointer's element type)")
@pytest.mark.parametrize("other", [-float("inf"), float("nan"), -1.5, 3.7, 1e10, 300, -1, 2 ** 40 + 3, True], ids=repr)
def test_load_other_converts_to_bfloat16_like_torch(other):
    # (Triton's interpreter converts ints to bfloat16 as bits, and floats rounding toward zero.)
    n, n_out = BLOCK + 7, 2 * BLOCK + 3
    x = torch.arange(n).to(torch.bfloat16)
    out = torch.zeros(n_out + 5, dtype=torch.bfloat16)
    load_other_kernel[(triton.cdiv(n_out, BLOCK),)](x, out, n, n_out, OTHER=other, BLOCK=BLOCK)
    src = torch.float32 if isinstance(other, float) else torch.int64
    want = torch.cat([x, torch.tensor(other, dtype=src).to(torch.bfloat16).expand(n_out - n), torch.zeros(5)])
    assert _same(out, want.to(torch.bfloat16))


@pytest.mark.construct("tl.load other (converted to the pointer's element type)")
@pytest.mark.parametrize("dtype, other", [(dtype, other) for dtype in (torch.int8, torch.int32, torch.int64, torch.uint8)
                                          for other in (-1.5, 3.7, 100.9, -100.9)
                                          if dtype != torch.uint8 or other > 0], ids=str)
def test_load_other_from_a_float_argument(dtype, other):
    # A float known only at run time converts as the target's cast does: out of the integer's
    # range (inf, NaN, 1e10, negative to unsigned) that is undefined in Triton too (x86 gives
    # INT_MIN, NVIDIA GPUs saturate), so only values inside the range are compared.
    x = (torch.arange(BLOCK - 3) % 11 - 5).to(dtype)
    _check(load_scalar_other_kernel, x, BLOCK + 9, other)


@pytest.mark.construct("tl.load other (converted to the pointer's element type)")
@pytest.mark.parametrize("value", [-float("inf"), float("inf"), float("nan"), -1.5, 1e10, -1e10])
@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8], ids=str)
def test_float_constant_to_int(dtype, value):
    n = BLOCK + 3
    out = torch.zeros(n + 5, dtype=dtype)
    grid = (triton.cdiv(n, BLOCK),)
    full_to_kernel[grid](out, n, VALUE=value, BLOCK=BLOCK)
    want = interpret(full_to_kernel, grid, [torch.zeros_like(out), n], VALUE=value, BLOCK=BLOCK)[0]
    assert torch.equal(out, want)


@triton.jit
def row_argmax_kernel(x_ptr, out_ptr, n, stride_row, stride_col, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride_row + offs * stride_col, mask=offs < n, other=-float("inf"))
    tl.store(out_ptr + row, tl.argmax(x, axis=0))


@pytest.mark.construct("tl.load other (converted to the pointer's element type)")
@pytest.mark.parametrize("n", [1000, 1023])
def test_int32_row_argmax_with_minus_inf_other(n):
    torch.manual_seed(n)
    rows = 5
    # Negative, distinct values: a masked lane filled with anything above INT_MIN wins the argmax.
    base = -1 - torch.stack([torch.randperm(2 * n, dtype=torch.int32)[:n] for _ in range(rows)])
    x = base.t().contiguous().t()                     # column-major: strides (1, rows)
    out = torch.full((rows + 2,), -7, dtype=torch.int32)
    row_argmax_kernel[(rows,)](x, out, n, x.stride(0), x.stride(1), BLOCK=1024)
    assert torch.equal(out[:rows], torch.argmax(x, dim=1).to(torch.int32))
    assert torch.equal(out[rows:], torch.full((2,), -7, dtype=torch.int32))
