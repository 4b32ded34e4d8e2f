"""tl.sort and tl.topk: ascending and descending, f32 / f16 / i32 (and bf16, i64, i16), on 1-D
tiles and along the last axis of 2-D tiles, with masked tails and several programs, against
torch.sort / torch.topk; and against Triton's interpreter, bit for bit, on inputs with repeats,
signed zeros, infinities and NaNs (where the result depends on Triton's sorting network)."""
import pytest
import torch
import triton
import triton.language as tl

from oracle import interpret


@triton.jit
def sort_1d_kernel(x_ptr, out_ptr, n, N: tl.constexpr, DESC: tl.constexpr):
    offs = tl.program_id(0) * N + tl.arange(0, N)
    m = offs < n
    # Masked-off elements sort to the end: -inf / +inf (or the integer extremes) as `other`.
    x = tl.load(x_ptr + offs, mask=m, other=float("-inf") if DESC else float("inf"))
    tl.store(out_ptr + offs, tl.sort(x, descending=DESC), mask=m)


@triton.jit
def sort_1d_int_kernel(x_ptr, out_ptr, n, N: tl.constexpr, DESC: tl.constexpr, FILL: tl.constexpr):
    offs = tl.program_id(0) * N + tl.arange(0, N)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=FILL)
    tl.store(out_ptr + offs, tl.sort(x, descending=DESC), mask=m)


@triton.jit
def sort_rows_kernel(x_ptr, out_ptr, rows, R: tl.constexpr, N: tl.constexpr, DESC: tl.constexpr):
    r = tl.program_id(0) * R + tl.arange(0, R)
    c = tl.arange(0, N)
    m = (r < rows)[:, None] & (c < N)[None, :]
    p = r[:, None] * N + c[None, :]
    x = tl.load(x_ptr + p, mask=m, other=0)
    tl.store(out_ptr + p, tl.sort(x, descending=DESC), mask=m)


@triton.jit
def topk_kernel(x_ptr, out_ptr, rows, R: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    r = tl.program_id(0) * R + tl.arange(0, R)
    m = r < rows
    x = tl.load(x_ptr + r[:, None] * N + tl.arange(0, N)[None, :], mask=m[:, None], other=0)
    y = tl.topk(x, K)
    tl.store(out_ptr + r[:, None] * K + tl.arange(0, K)[None, :], y, mask=m[:, None])


@triton.jit
def topk_1d_kernel(x_ptr, out_ptr, N: tl.constexpr, K: tl.constexpr):
    y = tl.topk(tl.load(x_ptr + tl.arange(0, N)), K)
    tl.store(out_ptr + tl.arange(0, K), y)


@triton.jit
def sort_twice_kernel(x_ptr, a_ptr, b_ptr, N: tl.constexpr):
    """Two sorts in one kernel, one of them of a value computed from the other."""
    x = tl.load(x_ptr + tl.arange(0, N))
    a = tl.sort(x)
    b = tl.sort(a * -1.0 + 1.0, descending=True)
    tl.store(a_ptr + tl.arange(0, N), a)
    tl.store(b_ptr + tl.arange(0, N), b)


def _values(shape, dtype, seed=0):
    torch.manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    return torch.randint(-1000, 1000, (shape,) if isinstance(shape, int) else shape).to(dtype)


@pytest.mark.construct("tl.sort")
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("N", [2, 16, 128, 1024])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_sort_1d_float(dtype, N, descending):
    # Each program sorts its block; the last block is cut short by the mask.
    n = 3 * N - 1 if N > 2 else 3
    x = _values(n, dtype)
    out = torch.zeros(n, dtype=dtype)
    sort_1d_kernel[(triton.cdiv(n, N),)](x, out, n, N=N, DESC=descending)
    for start in range(0, n, N):
        block = x[start:start + N]
        ref = torch.sort(block, descending=descending).values
        assert torch.equal(out[start:start + N], ref), (start, out[start:start + N], ref)


@pytest.mark.construct("tl.sort")
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("N", [16, 256])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int16])
def test_sort_1d_int(dtype, N, descending):
    n = 2 * N - 3
    x = _values(n, dtype)
    out = torch.zeros(n, dtype=dtype)
    fill = -30000 if descending else 30000    # beyond the values (|x| < 1000), inside every dtype
    sort_1d_int_kernel[(triton.cdiv(n, N),)](x, out, n, N=N, DESC=descending, FILL=fill)
    for start in range(0, n, N):
        ref = torch.sort(x[start:start + N], descending=descending).values
        assert torch.equal(out[start:start + N], ref)


@pytest.mark.construct("tl.sort")
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("R,N", [(4, 32), (8, 64), (2, 512)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_sort_rows(dtype, R, N, descending):
    rows = 3 * R - 1
    x = _values((rows, N), dtype)
    out = torch.zeros(rows, N, dtype=dtype)
    sort_rows_kernel[(triton.cdiv(rows, R),)](x, out, rows, R=R, N=N, DESC=descending)
    assert torch.equal(out, torch.sort(x, dim=1, descending=descending).values)


@pytest.mark.construct("tl.topk")
@pytest.mark.parametrize("R,N,K", [(4, 16, 4), (8, 64, 8), (2, 256, 16), (4, 32, 32), (4, 32, 2)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_topk_rows(dtype, R, N, K):
    rows = 2 * R - 1
    x = _values((rows, N), dtype)
    out = torch.zeros(rows, K, dtype=dtype)
    topk_kernel[(triton.cdiv(rows, R),)](x, out, rows, R=R, N=N, K=K)
    assert torch.equal(out, torch.topk(x, K, dim=1).values)


@pytest.mark.construct("tl.topk")
@pytest.mark.parametrize("N,K", [(8, 2), (128, 16), (1024, 64)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_topk_1d(dtype, N, K):
    x = _values(N, dtype)
    out = torch.zeros(K, dtype=dtype)
    topk_1d_kernel[(1,)](x, out, N=N, K=K)
    assert torch.equal(out, torch.topk(x, K).values)


def _special(shape, dtype, seed=1):
    """Repeats, signed zeros, infinities and NaNs: where they end up is the network's choice."""
    torch.manual_seed(seed)
    x = torch.randint(-4, 5, shape).to(dtype)
    flat = x.view(-1)
    flat[torch.randint(0, flat.numel(), (flat.numel() // 6,))] = -0.0
    flat[torch.randint(0, flat.numel(), (flat.numel() // 10,))] = float("inf")
    flat[torch.randint(0, flat.numel(), (flat.numel() // 10,))] = float("-inf")
    flat[torch.randint(0, flat.numel(), (flat.numel() // 10,))] = float("nan")
    return x


@pytest.mark.construct("tl.sort")
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_sort_special_values_match_the_interpreter_bitwise(dtype, descending):
    R, N = 4, 64
    x = _special((R, N), dtype)
    out = torch.zeros(R, N, dtype=dtype)
    sort_rows_kernel[(1,)](x, out, R, R=R, N=N, DESC=descending)
    ref = interpret(sort_rows_kernel, (1,), [x, torch.zeros(R, N, dtype=dtype), R], R=R, N=N, DESC=descending)[1]
    assert torch.equal(out.view(torch.int16 if dtype == torch.float16 else torch.int32),
                       ref.view(torch.int16 if dtype == torch.float16 else torch.int32))


@pytest.mark.construct("tl.topk")
@pytest.mark.parametrize("K", [1, 4, 16])
def test_topk_special_values_match_the_interpreter_bitwise(K):
    R, N = 4, 64
    x = _special((R, N), torch.float32)
    out = torch.zeros(R, K)
    topk_kernel[(1,)](x, out, R, R=R, N=N, K=K)
    ref = interpret(topk_kernel, (1,), [x, torch.zeros(R, K), R], R=R, N=N, K=K)[1]
    assert torch.equal(out.view(torch.int32), ref.view(torch.int32))


@pytest.mark.construct("tl.sort")
def test_two_sorts_in_one_kernel():
    N = 64
    x = _values(N, torch.float32)
    a, b = torch.zeros(N), torch.zeros(N)
    sort_twice_kernel[(1,)](x, a, b, N=N)
    assert torch.equal(a, torch.sort(x).values)
    assert torch.equal(b, torch.sort(x.sort().values * -1.0 + 1.0, descending=True).values)
