"""Scans: tl.cumsum, tl.cumprod (forward and reverse) and tl.associative_scan with user combine
functions, multi-operand, along each axis of 1-D and 2-D tiles, against Triton's interpreter.

The interpreter scans sequentially (numpy's cumsum / cumprod, or its own loop), as triton-iree
does, so floating-point results agree to rounding of the same order of operations."""
import pytest
import torch
import triton
import triton.language as tl

from oracle import interpret

BLOCK = 64


def _tol(dtype):
    return {torch.float16: dict(rtol=2e-3, atol=2e-3), torch.float32: dict(rtol=1e-5, atol=1e-5)}.get(
        dtype, dict(rtol=0, atol=0))


def _inputs(shape, dtype, op, seed=0):
    torch.manual_seed(seed)
    shape = tuple(shape) if isinstance(shape, tuple) else (shape,)
    if op == "cumprod":
        # Factors near 1 (floats) or in {-1, 1, 2} (ints) keep products in range.
        if dtype.is_floating_point:
            return (1 + torch.rand(shape) * 0.05 - 0.025).to(dtype)
        return torch.randint(-1, 3, shape).masked_fill_(torch.randint(0, 2, shape) == 0, 1).to(dtype)
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    return torch.randint(-100, 100, shape).to(dtype)


@triton.jit
def scan_1d_kernel(x_ptr, out_ptr, n, OP: tl.constexpr, REVERSE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    if OP == "cumsum":
        x = tl.load(x_ptr + offs, mask=m, other=0)
        y = tl.cumsum(x, 0, reverse=REVERSE)
    else:
        x = tl.load(x_ptr + offs, mask=m, other=1)
        y = tl.cumprod(x, 0, reverse=REVERSE)
    tl.store(out_ptr + offs, y, mask=m)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("n", [BLOCK - 1, 3 * BLOCK - 1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.int64])
@pytest.mark.parametrize("op", [pytest.param("cumsum", marks=pytest.mark.construct("tl.cumsum")),
                                pytest.param("cumprod", marks=pytest.mark.construct("tl.cumprod"))])
def test_scan_1d(op, dtype, n, reverse):
    x = _inputs(n, dtype, op)
    out = torch.zeros(n, dtype=dtype)
    grid = (triton.cdiv(n, BLOCK),)
    scan_1d_kernel[grid](x, out, n, OP=op, REVERSE=reverse, BLOCK=BLOCK)
    ref = interpret(scan_1d_kernel, grid, [x, torch.zeros(n, dtype=dtype), n], OP=op, REVERSE=reverse,
                    BLOCK=BLOCK)[1]
    torch.testing.assert_close(out, ref, **_tol(dtype))


@triton.jit
def scan_2d_kernel(x_ptr, out_ptr, rows, cols, OP: tl.constexpr, AXIS: tl.constexpr, REVERSE: tl.constexpr,
                   R: tl.constexpr, C: tl.constexpr):
    r = tl.program_id(0) * R + tl.arange(0, R)
    c = tl.program_id(1) * C + tl.arange(0, C)
    m = (r < rows)[:, None] & (c < cols)[None, :]
    p = r[:, None] * cols + c[None, :]
    if OP == "cumsum":
        x = tl.load(x_ptr + p, mask=m, other=0)
        y = tl.cumsum(x, AXIS, reverse=REVERSE)
    else:
        x = tl.load(x_ptr + p, mask=m, other=1)
        y = tl.cumprod(x, AXIS, reverse=REVERSE)
    tl.store(out_ptr + p, y, mask=m)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
@pytest.mark.parametrize("op", [pytest.param("cumsum", marks=pytest.mark.construct("tl.cumsum")),
                                pytest.param("cumprod", marks=pytest.mark.construct("tl.cumprod"))])
def test_scan_2d(op, dtype, axis, reverse):
    R, C = 16, 8
    rows, cols = 2 * R - 1, C + 1
    x = _inputs((rows, cols), dtype, op)
    out = torch.zeros(rows, cols, dtype=dtype)
    grid = (triton.cdiv(rows, R), triton.cdiv(cols, C))
    meta = dict(OP=op, AXIS=axis, REVERSE=reverse, R=R, C=C)
    scan_2d_kernel[grid](x, out, rows, cols, **meta)
    ref = interpret(scan_2d_kernel, grid, [x, torch.zeros(rows, cols, dtype=dtype), rows, cols], **meta)[1]
    torch.testing.assert_close(out, ref, **_tol(dtype))


@triton.jit
def _affine_combine(a1, b1, a2, b2):
    # Composition of x -> a1 * x + b1, then x -> a2 * x + b2: associative, not commutative.
    return a1 * a2, b1 * a2 + b2


@triton.jit
def _max_with_index(v1, i1, v2, i2):
    keep = v1 >= v2
    return tl.where(keep, v1, v2), tl.where(keep, i1, i2)


@triton.jit
def _max_with_index_if(v1, i1, v2, i2):
    # The same, with an if (an scf.if on scalars inside the combine function).
    if v2 > v1:
        v, i = v2, i2
    else:
        v, i = v1, i1
    return v, i


@triton.jit
def assoc_scan_kernel(a_ptr, b_ptr, oa_ptr, ob_ptr, rows, cols, FN: tl.constexpr, AXIS: tl.constexpr,
                      REVERSE: tl.constexpr, R: tl.constexpr, C: tl.constexpr):
    r = tl.program_id(0) * R + tl.arange(0, R)
    c = tl.arange(0, C)
    m = (r < rows)[:, None] & (c < cols)[None, :]
    p = r[:, None] * cols + c[None, :]
    a = tl.load(a_ptr + p, mask=m, other=1)
    b = tl.load(b_ptr + p, mask=m, other=0)
    if FN == "affine":
        x, y = tl.associative_scan((a, b), AXIS, _affine_combine, reverse=REVERSE)
    elif FN == "max_with_index":
        x, y = tl.associative_scan((a, b), AXIS, _max_with_index, reverse=REVERSE)
    else:
        x, y = tl.associative_scan((a, b), AXIS, _max_with_index_if, reverse=REVERSE)
    tl.store(oa_ptr + p, x, mask=m)
    tl.store(ob_ptr + p, y, mask=m)


@pytest.mark.construct("tl.associative_scan")
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("fn,dtype", [("affine", torch.float32), ("affine", torch.int32),
                                      ("max_with_index", torch.float32), ("max_with_index_if", torch.int32)])
def test_associative_scan(fn, dtype, axis, reverse):
    R, C = 8, 16
    rows, cols = 3 * R - 1, C - 1
    torch.manual_seed(0)
    if fn == "affine":
        a = (torch.rand(rows, cols) + 0.5).to(dtype) if dtype.is_floating_point else \
            torch.randint(-1, 2, (rows, cols), dtype=dtype)
        b = torch.randn(rows, cols).to(dtype) if dtype.is_floating_point else \
            torch.randint(-50, 50, (rows, cols), dtype=dtype)
    else:
        a = torch.randint(0, 10, (rows, cols)).to(dtype)      # ties: the earlier index wins
        b = torch.arange(rows * cols, dtype=dtype).reshape(rows, cols)
    oa, ob = torch.zeros_like(a), torch.zeros_like(b)
    meta = dict(FN=fn, AXIS=axis, REVERSE=reverse, R=R, C=C)
    grid = (triton.cdiv(rows, R),)
    assoc_scan_kernel[grid](a, b, oa, ob, rows, cols, **meta)
    ref = interpret(assoc_scan_kernel, grid, [a, b, torch.zeros_like(a), torch.zeros_like(b), rows, cols], **meta)
    torch.testing.assert_close(oa, ref[2], **_tol(dtype))
    torch.testing.assert_close(ob, ref[3], **_tol(dtype))


@triton.jit
def scan_in_loop_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # A running prefix sum over the whole vector, one block per iteration, the carry a scalar.
    carry = tl.zeros((), tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < n
        x = tl.load(x_ptr + offs, mask=m, other=0)
        y = tl.cumsum(x, 0) + carry
        tl.store(out_ptr + offs, y, mask=m)
        carry += tl.sum(x, 0)


@pytest.mark.construct("tl.cumsum")
@pytest.mark.parametrize("n", [BLOCK - 1, 3 * BLOCK + 1])
def test_cumsum_in_loop(n):
    x = torch.randn(n)
    out = torch.zeros(n)
    scan_in_loop_kernel[(1,)](x, out, n, BLOCK=BLOCK)
    torch.testing.assert_close(out, torch.cumsum(x.double(), 0).float(), rtol=1e-4, atol=1e-4)
