"""Batched (3-D) `tl.dot`, fp16 accumulators, and `tl.assume`, against torch."""
import pytest
import torch
import triton
import triton.language as tl


@triton.jit
def batched_dot_kernel(a_ptr, b_ptr, c_ptr, nb, m, n, k,
                       BB: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C[i] = A[i] @ B[i] for a block of batch indices; the K loop carries the 3-D accumulator."""
    tl.assume(nb > 0)
    tl.assume(k >= 0)
    bi = tl.program_id(0) * BB + tl.arange(0, BB)[:, None, None]
    rm = tl.arange(0, BM)[None, :, None]
    rn = tl.arange(0, BN)[None, None, :]
    rk_col = tl.arange(0, BK)[None, None, :]
    rk_row = tl.arange(0, BK)[None, :, None]
    acc = tl.zeros([BB, BM, BN], dtype=c_ptr.dtype.element_ty)
    for k0 in range(0, k, BK):
        a = tl.load(a_ptr + bi * m * k + rm * k + k0 + rk_col,
                    mask=(bi < nb) & (rm < m) & (k0 + rk_col < k), other=0)
        b = tl.load(b_ptr + bi * k * n + (k0 + rk_row) * n + rn,
                    mask=(bi < nb) & (k0 + rk_row < k) & (rn < n), other=0)
        acc = tl.dot(a, b, acc, out_dtype=acc.dtype)
    tl.store(c_ptr + bi * m * n + rm * n + rn, acc, mask=(bi < nb) & (rm < m) & (rn < n))


@pytest.mark.construct("tl.dot (batched, 3-D)")
@pytest.mark.parametrize("shape", [(3, 15, 17, 31), (5, 16, 31, 33), (1, 17, 15, 47)])
@pytest.mark.parametrize("dtype,acc", [(torch.float32, torch.float32), (torch.float16, torch.float32),
                                       (torch.int8, torch.int32)])
def test_batched_dot(dtype, acc, shape):
    nb, m, n, k = shape
    torch.manual_seed(k)
    if dtype.is_floating_point:
        a, b = torch.randn(nb, m, k).to(dtype), torch.randn(nb, k, n).to(dtype)
    else:
        a, b = torch.randint(-8, 8, (nb, m, k), dtype=dtype), torch.randint(-8, 8, (nb, k, n), dtype=dtype)
    c = torch.full((nb, m, n), 7, dtype=acc)
    BB = 2
    batched_dot_kernel[(triton.cdiv(nb, BB),)](a, b, c, nb, m, n, k, BB=BB, BM=32, BN=32, BK=16)
    want = torch.bmm(a.double(), b.double())
    if acc.is_floating_point:
        torch.testing.assert_close(c.double(), want, rtol=1e-4, atol=1e-4)
    else:
        assert torch.equal(c, want.to(acc))


@triton.jit
def narrow_acc_dot_kernel(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    acc = tl.load(c_ptr + rm[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot(a, b, acc, out_dtype=c_ptr.dtype.element_ty))


@pytest.mark.construct("tl.dot (batched, 3-D)")
def test_fp16_accumulator_rounds_once():
    """out_dtype=fp16 (Triton refuses bf16 there): the products are summed exactly enough and rounded once (summed
    in fp16 along K = 64 they drifted by 0.03, beyond Triton's own tests' 0.01)."""
    dtype = torch.float16
    g = torch.Generator().manual_seed(3)
    a, b = torch.rand(32, 64, generator=g).to(dtype), torch.rand(64, 32, generator=g).to(dtype)
    c = torch.randn(32, 32, generator=g).to(dtype)
    want = (a.double() @ b.double() + c.double()).to(dtype)
    narrow_acc_dot_kernel[(1,)](a, b, c, M=32, N=32, K=64)
    # Within one unit in the last place of the exact result's rounding.
    torch.testing.assert_close(c, want, rtol=torch.finfo(dtype).eps, atol=0)


@triton.jit
def assume_kernel(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    tl.assume(n > 0)
    tl.assume(stride % 2 == 0)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs * stride, mask=offs < n) + 1, mask=offs < n)


@pytest.mark.construct("tl.assume")
@pytest.mark.parametrize("n", [15, 17, 47])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_assume_is_a_hint(dtype, n):
    x = torch.arange(2 * n).to(dtype)
    out = torch.zeros(n, dtype=dtype)
    assume_kernel[(triton.cdiv(n, 16),)](x, out, n, 2, BLOCK=16)
    assert torch.equal(out, x[::2] + 1)
