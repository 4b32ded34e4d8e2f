"""tl.gather (along an axis of a tile, by an index tile) and tl.histogram (with and without a
mask), against Triton's interpreter and torch."""
import pytest
import torch
import triton
import triton.language as tl
from triton.compiler.errors import CompilationError

from oracle import interpret

BLOCK = 64


@triton.jit
def gather_1d_kernel(x_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    i = tl.load(idx_ptr + offs, mask=m, other=0)
    tl.store(out_ptr + offs, tl.gather(x, i, 0), mask=m)


@pytest.mark.construct("tl.gather")
@pytest.mark.parametrize("n", [BLOCK - 1, 3 * BLOCK + 1])
@pytest.mark.parametrize("idx_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.int8])
def test_gather_1d(dtype, idx_dtype, n):
    torch.manual_seed(0)
    x = (torch.randn(n) * 50).to(dtype)
    grid = (triton.cdiv(n, BLOCK),)
    # Indices into the program's own block, within the valid part of the last block.
    starts = (torch.arange(n) // BLOCK) * BLOCK
    valid = torch.clamp(n - starts, max=BLOCK)
    idx = (torch.randint(0, 1 << 20, (n,)) % valid).to(idx_dtype)
    out = torch.zeros(n, dtype=dtype)
    gather_1d_kernel[grid](x, idx, out, n, BLOCK=BLOCK)
    torch.testing.assert_close(out, x[starts + idx.long()], rtol=0, atol=0)
    ref = interpret(gather_1d_kernel, grid, [x, idx, torch.zeros(n, dtype=dtype), n], BLOCK=BLOCK)[2]
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


@triton.jit
def gather_2d_kernel(x_ptr, idx_ptr, out_ptr, rows, AXIS: tl.constexpr, R: tl.constexpr, C: tl.constexpr,
                     IR: tl.constexpr, IC: tl.constexpr):
    # x is [rows, C], read R rows per program; idx is [rows // R * IR, IC] (one [IR, IC] tile
    # per program): out = gather(x tile, idx tile, AXIS).
    pid = tl.program_id(0)
    r = pid * R + tl.arange(0, R)
    c = tl.arange(0, C)
    x = tl.load(x_ptr + r[:, None] * C + c[None, :], mask=(r < rows)[:, None], other=0)
    ir = pid * IR + tl.arange(0, IR)
    ic = tl.arange(0, IC)
    i = tl.load(idx_ptr + ir[:, None] * IC + ic[None, :])
    tl.store(out_ptr + ir[:, None] * IC + ic[None, :], tl.gather(x, i, AXIS))


@pytest.mark.construct("tl.gather")
@pytest.mark.parametrize("axis", [0, 1])
def test_gather_2d(axis):
    # An index tile of another length along the gather axis than the source.
    R, C = 16, 8
    IR, IC = (32, C) if axis == 0 else (R, 4)
    rows = 3 * R - 1
    programs = triton.cdiv(rows, R)
    torch.manual_seed(0)
    x = torch.randn(rows, C)
    hi = R if axis == 0 else C
    idx = torch.randint(0, hi, (programs * IR, IC), dtype=torch.int32)
    if axis == 0:   # rows of the last, partial block hold `other` (0)
        idx[(programs - 1) * IR:] %= rows - (programs - 1) * R
    out = torch.zeros(programs * IR, IC)
    meta = dict(AXIS=axis, R=R, C=C, IR=IR, IC=IC)
    gather_2d_kernel[(programs,)](x, idx, out, rows, **meta)
    ref = interpret(gather_2d_kernel, (programs,), [x, idx, torch.zeros_like(out), rows], **meta)[2]
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


@triton.jit
def histogram_kernel(x_ptr, out_ptr, n, BINS: tl.constexpr, MASKED: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    if MASKED:
        h = tl.histogram(x, BINS, mask=m)
    else:
        h = tl.histogram(x, BINS)
    tl.store(out_ptr + tl.program_id(0) * BINS + tl.arange(0, BINS), h)


@pytest.mark.construct("tl.histogram")
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("n", [BLOCK - 1, 3 * BLOCK + 1])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int8])
def test_histogram(dtype, n, masked):
    BINS = 16
    torch.manual_seed(0)
    x = torch.randint(0, BINS, (n,)).to(dtype)
    grid = (triton.cdiv(n, BLOCK),)
    out = torch.zeros(grid[0] * BINS, dtype=torch.int32)
    if dtype != torch.int32 and tuple(map(int, triton.__version__.split(".")[:2])) >= (3, 9):
        # Triton 3.9's frontend takes only 32-bit integer inputs.
        with pytest.raises(CompilationError, match="32-bit"):
            histogram_kernel[grid](x, out, n, BINS=BINS, MASKED=masked, BLOCK=BLOCK)
        return
    histogram_kernel[grid](x, out, n, BINS=BINS, MASKED=masked, BLOCK=BLOCK)
    if dtype != torch.int64:   # the interpreter's histogram of i64 values fails (it counts in i64)
        ref = interpret(histogram_kernel, grid, [x, torch.zeros_like(out), n], BINS=BINS, MASKED=masked,
                        BLOCK=BLOCK)[1]
        torch.testing.assert_close(out, ref, rtol=0, atol=0)
    # Unmasked, the last block's masked-off lanes count as zeros.
    padded = torch.cat([x.long(), torch.zeros(grid[0] * BLOCK - n, dtype=torch.long)]).reshape(grid[0], BLOCK)
    if masked:
        padded[-1, n - (grid[0] - 1) * BLOCK:] = -1
    expect = torch.stack([torch.bincount(row[row >= 0], minlength=BINS) for row in padded]).reshape(-1)
    torch.testing.assert_close(out, expect.to(torch.int32), rtol=0, atol=0)


@pytest.mark.construct("tl.histogram")
def test_histogram_out_of_range():
    # Values outside [0, BINS) fall in no bin (here: negative values and values >= BINS).
    BINS, n = 8, BLOCK - 3
    torch.manual_seed(1)
    x = torch.randint(-5, 2 * BINS, (n,), dtype=torch.int32)
    out = torch.zeros(BINS, dtype=torch.int32)
    histogram_kernel[(1,)](x, out, n, BINS=BINS, MASKED=True, BLOCK=BLOCK)
    inside = x[(x >= 0) & (x < BINS)].long()
    torch.testing.assert_close(out, torch.bincount(inside, minlength=BINS).to(torch.int32), rtol=0, atol=0)
