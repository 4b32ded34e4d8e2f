"""Reductions to a scalar, with keep_dims, over bool, with an accumulation dtype; tensors of one
element as scalars; against torch and Triton's interpreter."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from oracle import interpret

BLOCK = 64
SIZES = [BLOCK - 1, BLOCK + 1, 3 * BLOCK - 1]
DTYPES = [torch.float32, torch.float16, torch.int32]


@triton.jit
def block_minmax_kernel(x_ptr, max_ptr, min_ptr, n, LO: tl.constexpr, HI: tl.constexpr, BLOCK: tl.constexpr):
    # One scalar per program: the max and min of its block (masked-off lanes are neutral).
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(max_ptr + tl.program_id(0), tl.max(tl.load(x_ptr + offs, mask=m, other=LO)))
    tl.store(min_ptr + tl.program_id(0), tl.min(tl.load(x_ptr + offs, mask=m, other=HI)))


def _bounds(dtype):
    if dtype.is_floating_point:
        return -float("inf"), float("inf")
    return torch.iinfo(dtype).min, torch.iinfo(dtype).max


def _random(n, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.randn(n, generator=g) * 100).to(dtype)
    return torch.randint(-1000, 1000, (n,), generator=g, dtype=dtype)


@pytest.mark.construct("tl.max / tl.min to a scalar")
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_max_min_to_scalar(dtype, n):
    x = _random(n, dtype, n)
    programs = triton.cdiv(n, BLOCK)
    mx, mn = torch.zeros(programs, dtype=dtype), torch.zeros(programs, dtype=dtype)
    lo, hi = _bounds(dtype)
    block_minmax_kernel[(programs,)](x, mx, mn, n, LO=lo, HI=hi, BLOCK=BLOCK)
    pad = torch.nn.functional.pad
    blocks = pad(x.float(), (0, programs * BLOCK - n), value=float("nan")).view(programs, BLOCK)
    assert torch.equal(mx.float(), torch.stack([b[~b.isnan()].max() for b in blocks]))
    assert torch.equal(mn.float(), torch.stack([b[~b.isnan()].min() for b in blocks]))


@pytest.mark.construct("tl.max / tl.min to a scalar")
def test_max_of_zeros_is_zero():
    x, z = torch.zeros(BLOCK), torch.ones(1)
    block_minmax_kernel[(1,)](x, z, torch.ones(1), BLOCK, LO=-float("inf"), HI=float("inf"), BLOCK=BLOCK)
    assert z.item() == 0.0


@triton.jit
def keep_dims_kernel(x_ptr, out_ptr, rows, cols, OP: tl.constexpr, AXIS: tl.constexpr, R: tl.constexpr,
                     C: tl.constexpr):
    r = tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    m = (r < rows) & (c < cols)
    x = tl.load(x_ptr + r * cols + c, mask=m, other=0.0)
    if OP == "sum":
        z = tl.sum(x, axis=AXIS, keep_dims=True)
    else:
        z = tl.max(tl.where(m, x, -float("inf")), axis=AXIS, keep_dims=True)
    if AXIS == 0:
        tl.store(out_ptr + c, z, mask=c < cols)
    elif AXIS == 1:
        tl.store(out_ptr + r, z, mask=r < rows)
    else:
        tl.store(out_ptr + r * 0 + c * 0, z)   # z has shape (1, 1)


@pytest.mark.construct("keep_dims reductions")
@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("axis", [0, 1, None])
def test_keep_dims(op, axis):
    rows, cols, R, C = 5, 2 * 16 - 1, 8, 32
    x = _random(rows * cols, torch.float32, 7)
    out = torch.zeros(max(rows, cols))
    keep_dims_kernel[(1,)](x, out, rows, cols, OP=op, AXIS=axis, R=R, C=C)
    ref = interpret(keep_dims_kernel, (1,), [x, torch.zeros_like(out), rows, cols], OP=op, AXIS=axis, R=R, C=C)[1]
    torch.testing.assert_close(out, ref, rtol=1e-6, atol=1e-4)


@triton.jit
def xor_sum_kernel(x_ptr, out_ptr, rows, cols, AXIS: tl.constexpr, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    m = (r < rows) & (c < cols)
    x = tl.load(x_ptr + r * cols + c, mask=m, other=0).to(tl.int1)
    if AXIS == 0:
        tl.store(out_ptr + tl.arange(0, C), tl.xor_sum(x, axis=0), mask=tl.arange(0, C) < cols)
    elif AXIS == 1:
        tl.store(out_ptr + tl.arange(0, R), tl.xor_sum(x, axis=1), mask=tl.arange(0, R) < rows)
    else:
        tl.store(out_ptr, tl.xor_sum(tl.xor_sum(x, axis=1), axis=0))


@pytest.mark.construct("tl.xor_sum")
@pytest.mark.parametrize("axis", [0, 1, None])
@pytest.mark.parametrize("shape", [(3, 31), (7, 17)])
def test_xor_sum_bool(shape, axis):
    rows, cols = shape
    g = torch.Generator().manual_seed(rows * cols)
    x = torch.randint(0, 3, (rows, cols), generator=g, dtype=torch.int32)
    out = torch.zeros(max(rows, cols), dtype=torch.bool)
    xor_sum_kernel[(1,)](x, out, rows, cols, AXIS=axis, R=8, C=32)
    bits = (x != 0).int()
    ref = (bits.sum() % 2).view(1) if axis is None else bits.sum(axis) % 2
    assert torch.equal(out[:ref.numel()], ref.bool())


@triton.jit
def sum_dtype_kernel(x_ptr, out_ptr, n, OUT_DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.store(out_ptr + tl.program_id(0), tl.sum(x, axis=0, dtype=OUT_DTYPE))


@pytest.mark.construct("tl.sum(dtype=)")
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("in_dtype, out_dtype", [(torch.int8, tl.int8), (torch.int8, tl.int32),
                                                 (torch.float16, tl.float32), (torch.int32, tl.int64),
                                                 (torch.float32, tl.float64)], ids=str)
def test_sum_dtype(in_dtype, out_dtype, n):
    x = _random(n, in_dtype, n) if in_dtype != torch.int8 else torch.randint(-128, 127, (n,), dtype=torch.int8)
    programs = triton.cdiv(n, BLOCK)
    tdtype = getattr(torch, str(out_dtype).replace("fp", "float"))
    out = torch.zeros(programs, dtype=tdtype)
    sum_dtype_kernel[(programs,)](x, out, n, OUT_DTYPE=out_dtype, BLOCK=BLOCK)
    blocks = torch.nn.functional.pad(x, (0, programs * BLOCK - n)).view(programs, BLOCK)
    if tdtype.is_floating_point:
        torch.testing.assert_close(out, blocks.to(tdtype).sum(1), rtol=1e-5, atol=1e-3)
    else:   # integers wrap around at the accumulation type's width
        assert torch.equal(out, blocks.long().sum(1).to(tdtype))


@triton.jit
def sum_rows_kernel(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :])
    tl.store(out_ptr + tl.arange(0, R), tl.sum(x, axis=1))
    tl.store(out_ptr + R, tl.sum(tl.sum(x, axis=0), axis=0))


@pytest.mark.construct("tl.sum(dtype=)")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_fp16_and_bf16_sums_do_not_stop_growing(dtype):
    """1024 ones sum to 1024 (added along the row in bf16 they stop at 256); random rows give the
    exact sum, rounded."""
    ones = torch.ones(4, 1024, dtype=dtype)
    out = torch.zeros(5, dtype=dtype)
    sum_rows_kernel[(1,)](ones, out, R=4, C=1024)
    assert out.tolist() == [1024.0] * 4 + [4096.0]
    x = torch.rand(4, 1024, generator=torch.Generator().manual_seed(0)).to(dtype)
    sum_rows_kernel[(1,)](x, out, R=4, C=1024)
    want = torch.cat([x.double().sum(1), x.double().sum().reshape(1)]).to(dtype)
    # Within one unit in the last place of the exact sum's rounding.
    torch.testing.assert_close(out, want, rtol=torch.finfo(dtype).eps, atol=0)


@triton.jit
def sum_full_kernel(out_ptr, init, IN_DTYPE: tl.constexpr, OUT_DTYPE: tl.constexpr):
    x = tl.full((32, 32), init, dtype=IN_DTYPE)
    tl.store(out_ptr, tl.sum(x, dtype=OUT_DTYPE).to(tl.int32))


@pytest.mark.construct("tl.sum(dtype=)")
@pytest.mark.parametrize("init, in_dtype, out_dtype, expected", [
    (1, tl.int1, None, 32 * 32),            # bools sum as int32
    (1, tl.int1, tl.int1, 0),               # in i1: 1024 ones add up to 0
    (7, tl.int8, tl.int8, (7 * 32 * 32) % 256),
    (3, tl.int8, None, 3 * 32 * 32),        # int8 sums as int32
], ids=str)
def test_sum_dtype_of_full(init, in_dtype, out_dtype, expected):
    out = torch.full((1,), -1, dtype=torch.int32)
    sum_full_kernel[(1,)](out, init, IN_DTYPE=in_dtype, OUT_DTYPE=out_dtype)
    assert out.item() == expected


@triton.jit
def unsplat_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    first = tl.load(x_ptr + pid * BLOCK + tl.arange(0, 1)).item()            # tensor<1> -> scalar
    tile = tl.load(x_ptr + pid * BLOCK + tl.arange(0, 2)[:, None] + tl.arange(0, 1)[None, :])
    top = tl.reshape(tl.max(tile, axis=0, keep_dims=True), ())               # tensor<1x1> -> scalar
    dst = tl.reshape(out_ptr + pid + tl.arange(0, 1), ())                   # a pointer, too
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(dst, tl.sum(x * first) + top)


@pytest.mark.construct("tensor of one element to a scalar (.item(), tl.reshape(x, ()))")
@pytest.mark.parametrize("n", SIZES)
def test_unsplat(n):
    x = _random(n + 1, torch.float32, n) / 100
    programs = triton.cdiv(n, BLOCK)
    out = torch.zeros(programs)
    unsplat_kernel[(programs,)](x, out, n, BLOCK=BLOCK)
    ref = interpret(unsplat_kernel, (programs,), [x, torch.zeros(programs), n], BLOCK=BLOCK)[1]
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


@triton.jit
def loop_variable_after_loop_kernel(x_ptr, out_ptr, last_ptr, n):
    acc = 0.0
    for i in range(n):
        acc += tl.load(x_ptr + i)
    tl.store(out_ptr, acc)
    tl.store(last_ptr, i)   # compiled Triton leaves `i` undefined here (ub.poison)


@pytest.mark.construct("loop variable read after its loop (undefined value)")
def test_loop_variable_after_loop():
    n = BLOCK + 1
    x = torch.randn(n)
    out, last = torch.zeros(1), torch.full((1,), -5, dtype=torch.int32)
    loop_variable_after_loop_kernel[(1,)](x, out, last, n)
    torch.testing.assert_close(out, x.sum().view(1), rtol=1e-5, atol=1e-5)
    assert last.item() != -5, "the store of the undefined value did not happen"


@triton.jit
def reduce_all_2d_kernel(x_ptr, out_ptr, OP: tl.constexpr, M: tl.constexpr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    if OP == "min":
        z = tl.min(x, axis=None)
    elif OP == "max":
        z = tl.max(x, axis=None)
    else:
        z = tl.sum(x, axis=None)
    tl.store(out_ptr, z)


@pytest.mark.construct("tl.max / tl.min to a scalar")
@pytest.mark.parametrize("op", ["min", "max", "sum"])
def test_2d_tile_to_a_scalar(op):
    """axis=None reshapes the tile to 1-D first (IREE folded that reshape into a configured
    reduction and failed to compile)."""
    x = torch.randn(16, 32, generator=torch.Generator().manual_seed(1))
    out = torch.zeros(1)
    reduce_all_2d_kernel[(1,)](x, out, OP=op, M=16, N=32)
    torch.testing.assert_close(out[0], getattr(x, op)(), rtol=1e-5, atol=1e-5)


@triton.jit
def _unsigned(x, BITS: tl.constexpr):
    if BITS == 8:
        return x.to(tl.uint8, bitcast=True)
    elif BITS == 16:
        return x.to(tl.uint16, bitcast=True)
    elif BITS == 32:
        return x.to(tl.uint32, bitcast=True)
    else:
        return x.to(tl.uint64, bitcast=True)


@triton.jit
def unsigned_reduce_kernel(x_ptr, out_ptr, n, BITS: tl.constexpr, BLOCK: tl.constexpr):
    # Program 0: a whole block; program 1: a block masked at n. Results as int64 bits.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    lo = _unsigned(tl.load(x_ptr + offs, mask=m, other=0), BITS)    # masked-off: 0
    hi = _unsigned(tl.load(x_ptr + offs, mask=m, other=-1), BITS)   # masked-off: all ones
    out = out_ptr + tl.program_id(0) * 5
    tl.store(out, tl.min(hi).to(tl.uint64).to(tl.int64, bitcast=True))
    tl.store(out + 1, tl.max(lo).to(tl.uint64).to(tl.int64, bitcast=True))
    tl.store(out + 2, tl.sum(lo).to(tl.uint64).to(tl.int64, bitcast=True))
    tl.store(out + 3, tl.argmin(hi, axis=0).to(tl.int64))
    tl.store(out + 4, tl.argmax(lo, axis=0).to(tl.int64))


@pytest.mark.construct("tl.max / tl.min to a scalar")
@pytest.mark.parametrize("bits", [8, 16, 32, 64])
def test_unsigned_reductions_match_interpreter(bits):
    n = BLOCK + 37
    rng = np.random.default_rng(bits)
    # Distinct values, none 0 or all ones; about half have the top bit set (negative as signed).
    u = rng.choice((1 << min(bits, 16)) - 2, n, replace=False).astype(np.uint64) + np.uint64(1)
    if bits > 16:
        u = u << np.uint64(bits - 16) | rng.integers(0, 1 << 16, n, dtype=np.uint64)
    x = torch.from_numpy(u.astype(f"u{bits // 8}").view(f"i{bits // 8}"))
    args = [x, torch.full((10,), 7, dtype=torch.int64), n]
    ref = interpret(unsigned_reduce_kernel, (2,), args, BITS=bits, BLOCK=BLOCK)
    unsigned_reduce_kernel[(2,)](*args, BITS=bits, BLOCK=BLOCK)
    assert torch.equal(args[1], ref[1])
    for p, block in enumerate((u[:BLOCK], u[BLOCK:n])):   # and against numpy
        total = int(block.sum(dtype="u8")) % (1 << max(bits, 32))   # tl.sum widens narrow ints to 32 bits
        want = [block.min(), block.max(), total, block.argmin(), block.argmax()]
        assert args[1][p * 5:p * 5 + 5].numpy().view("u8").tolist() == [int(w) for w in want]


@triton.jit
def _nan_max(a, b):   # torch Inductor's triton_helpers.maximum: NaN from either side wins
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def _nan_min(a, b):
    return tl.where((a < b) | (a != a), a, b)


@triton.jit
def _where_max(a, b):
    return tl.where(a > b, a, b)


@triton.jit
def _where_min_swapped(a, b):
    return tl.where(b > a, a, b)


@triton.jit
def select_reduce_kernel(x_ptr, out_ptr, rows, cols, stride, IDENT: tl.constexpr, OP: tl.constexpr,
                         R: tl.constexpr, C: tl.constexpr):
    r = tl.program_id(0) * R + tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + r * stride + c, mask=(r < rows) & (c < cols), other=IDENT)
    if OP == "nan_max":
        y = tl.reduce(x, 1, _nan_max)
    elif OP == "nan_min":
        y = tl.reduce(x, 1, _nan_min)
    elif OP == "max":
        y = tl.reduce(x, 1, _where_max)
    else:
        y = tl.reduce(x, 1, _where_min_swapped)
    rows_out = tl.program_id(0) * R + tl.arange(0, R)
    tl.store(out_ptr + rows_out, y, mask=rows_out < rows)


@pytest.mark.construct("tl.reduce with a custom combiner")
@pytest.mark.parametrize("op, dtype", [("nan_max", torch.float32), ("nan_min", torch.float32),
                                       ("nan_max", torch.float16), ("max", torch.int32), ("min", torch.int32),
                                       ("max", torch.uint8), ("min", torch.int64)])
def test_compare_and_select_reductions(op, dtype):
    """Max / min written as `tl.where` (Inductor's amax), with NaNs in some rows, on rows that are
    not a multiple of the block, columns read through a stride that is not the row length."""
    rows, cols = 37, 100
    g = torch.Generator().manual_seed(7)
    if dtype.is_floating_point:
        full = torch.randn(rows, cols + 3, generator=g).to(dtype)
        full[3, 10] = full[20, 99] = full[36, 0] = float("nan")
        full[5, :cols] = -0.0
        ident = float("-inf") if op.endswith("max") else float("inf")
    else:
        info = torch.iinfo(dtype)
        full = torch.randint(info.min, info.max, (rows, cols + 3), generator=g, dtype=torch.int64).to(dtype)
        ident = info.min if op == "max" else info.max
    x = full[:, :cols]
    out = torch.full((rows + 5,), 3, dtype=dtype)
    select_reduce_kernel[(triton.cdiv(rows, 8),)](x, out, rows, cols, full.stride(0), IDENT=ident, OP=op,
                                                   R=8, C=128)
    want = (torch.amax if op.endswith("max") else torch.amin)(x.float() if dtype == torch.uint8 else x, dim=1)
    torch.testing.assert_close(out[:rows], want.to(dtype), equal_nan=True, rtol=0, atol=0)
    assert (out[rows:] == 3).all()


@triton.jit
def _or(a, b):
    return a | b


@triton.jit
def _and(a, b):
    return a & b


@triton.jit
def any_all_kernel(x_ptr, out_ptr, rows, cols, stride, AXIS: tl.constexpr, OP: tl.constexpr,
                   R: tl.constexpr, C: tl.constexpr):
    """Or / and of a boolean tile (which elements are not finite) along AXIS; masked-off
    elements are the op's identity."""
    r = tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    m = (r < rows) & (c < cols)
    x = tl.load(x_ptr + r * stride + c, mask=m, other=0.0)
    bad = (x != x) | (tl.abs(x) == float("inf"))
    if OP == "any":
        y = tl.reduce(bad & m, AXIS, _or)
    else:
        y = tl.reduce(bad | ~m, AXIS, _and)
    if AXIS == 1:
        tl.store(out_ptr + tl.arange(0, R), y.to(tl.int8), mask=tl.arange(0, R) < rows)
    else:
        tl.store(out_ptr + tl.arange(0, C), y.to(tl.int8), mask=tl.arange(0, C) < cols)


@pytest.mark.construct("tl.reduce with a custom combiner")
@pytest.mark.parametrize("op", ["any", "all"])
@pytest.mark.parametrize("axis", [0, 1])
def test_any_all_of_booleans(op, axis):
    rows, cols = 13, 70
    full = torch.randn(rows, cols + 5)
    full[2, 5] = float("nan")
    full[7, :cols] = float("inf")            # a row of which all are not finite
    full[:, 11] = float("-inf")              # a column of which all are
    full[9, 40] = float("inf")
    x = full[:, :cols]
    out = torch.full((max(rows, cols) + 3,), 5, dtype=torch.int8)
    any_all_kernel[(1,)](x, out, rows, cols, full.stride(0), AXIS=axis, OP=op, R=16, C=128)
    bad = ~torch.isfinite(x)
    want = (bad.any if op == "any" else bad.all)(dim=axis).to(torch.int8)
    n = want.numel()
    assert torch.equal(out[:n], want), (out[:n], want)
    assert (out[n:] == 5).all()
