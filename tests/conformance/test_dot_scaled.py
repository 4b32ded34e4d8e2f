"""tl.dot_scaled (microscaling formats) against torch: operands decoded with the OCP MX spec's
tables and torch's fp8 types, times their e8m0 scales, multiplied in float64. (Triton 3.6's
interpreter has no dot_scaled.)"""
import pytest
import torch
import triton
import triton.language as tl

BM, BN, BK = 16, 16, 64
E2M1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=torch.float64)
FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


@triton.jit
def dot_scaled_kernel(a_ptr, sa_ptr, b_ptr, sb_ptr, c_ptr, m, n, k_blocks, stride_am, stride_bk,
                      FA: tl.constexpr, FB: tl.constexpr, A_KPACK: tl.constexpr, A_SCALED: tl.constexpr,
                      FAST: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    PA: tl.constexpr = 2 if FA == "e2m1" else 1
    PB: tl.constexpr = 2 if FB == "e2m1" else 1
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    g = tl.arange(0, BK // 32)
    acc = tl.zeros([BM, BN], tl.float32)
    for kb in range(k_blocks):
        if A_KPACK:
            a = tl.load(a_ptr + rm[:, None] * stride_am + kb * (BK // PA) + tl.arange(0, BK // PA)[None, :],
                        mask=rm[:, None] < m, other=0)
        else:   # e2m1 packed along M
            rp = tl.arange(0, BM // 2)
            a = tl.load(a_ptr + rp[:, None] * stride_am + kb * BK + tl.arange(0, BK)[None, :],
                        mask=rp[:, None] < (m + 1) // 2, other=0)
        b = tl.load(b_ptr + (kb * (BK // PB) + tl.arange(0, BK // PB)[:, None]) * stride_bk + rn[None, :],
                    mask=rn[None, :] < n, other=0)
        sb = tl.load(sb_ptr + rn[:, None] * (k_blocks * BK // 32) + kb * (BK // 32) + g[None, :],
                     mask=rn[:, None] < n, other=127)
        if A_SCALED:
            sa = tl.load(sa_ptr + rm[:, None] * (k_blocks * BK // 32) + kb * (BK // 32) + g[None, :],
                         mask=rm[:, None] < m, other=127)
            acc = tl.dot_scaled(a, sa, FA, b, sb, FB, acc, fast_math=FAST, lhs_k_pack=A_KPACK)
        else:
            acc = tl.dot_scaled(a, None, FA, b, sb, FB, acc, fast_math=FAST, lhs_k_pack=A_KPACK)
    tl.store(c_ptr + rm[:, None] * n + rn[None, :], acc, mask=(rm[:, None] < m) & (rn[None, :] < n))


def _random(fmt, shape):
    if fmt in ("bf16", "fp16"):
        return torch.randn(shape).to(torch.bfloat16 if fmt == "bf16" else torch.float16)
    x = torch.randint(0, 256, shape, dtype=torch.uint8)
    if fmt in FP8:   # no NaN / inf codes
        x[(x & 0x7F) >= (0x7F if fmt == "e4m3" else 0x7C)] = 0x11
    return x


def _decode(x, fmt, packed_dim):
    if fmt == "e2m1":
        pair = torch.stack([E2M1[(x & 0xF).long()], E2M1[(x >> 4).long()]], dim=packed_dim + 1)
        return pair.flatten(packed_dim, packed_dim + 1)
    return (x.view(FP8[fmt]) if fmt in FP8 else x).double()


def _scales(s, k):
    f = torch.where(s == 255, torch.nan, torch.pow(2.0, s.double() - 127))
    return f.repeat_interleave(k // s.shape[1], dim=1)


@pytest.mark.construct("tl.dot_scaled")
@pytest.mark.parametrize("fa,fb,a_kpack,a_scaled", [
    ("e2m1", "e4m3", True, True), ("e4m3", "e5m2", True, True), ("e5m2", "e2m1", True, True),
    ("e2m1", "e2m1", False, True), ("bf16", "e2m1", True, False), ("fp16", "e4m3", True, True)])
@pytest.mark.parametrize("m,n", [(13, 9), (16, 15)])
def test_dot_scaled(fa, fb, a_kpack, a_scaled, m, n):
    torch.manual_seed(m * n)
    kb = 2
    k = kb * BK
    pa, pb = (2 if f == "e2m1" else 1 for f in (fa, fb))
    a_shape = (m, k // pa) if a_kpack else ((m + 1) // 2, k)
    a = _random(fa, (a_shape[0], a_shape[1] + 3))[:, :a_shape[1]]   # rows with a stride
    b = _random(fb, (k // pb, n))
    sa = torch.randint(118, 136, (m, k // 32), dtype=torch.uint8)
    sb = torch.randint(118, 136, (n, k // 32), dtype=torch.uint8)
    sb[n // 2, 1] = 255   # NaN: one column
    c = torch.full((m + 2, n), 7.0)
    dot_scaled_kernel[(1,)](a, sa, b, sb, c, m, n, kb, a.stride(0), b.stride(0), FA=fa, FB=fb, A_KPACK=a_kpack,
                            A_SCALED=a_scaled, FAST=False, BM=BM, BN=BN, BK=BK)
    x = _decode(a, fa, 1 if a_kpack else 0)[:m]
    if a_scaled:
        x = x * _scales(sa, k)
    y = _decode(b, fb, 0) * _scales(sb, k).T
    torch.testing.assert_close(c[:m], (x @ y).float(), rtol=1e-5, atol=1e-5, equal_nan=True)
    assert c[:m, n // 2].isnan().all() and not c[:m, :n // 2].isnan().any()
    assert (c[m:] == 7).all()


@triton.jit
def nvfp4_kernel(a_ptr, sa_ptr, b_ptr, sb_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    """e2m1 operands with e4m3 scales, one per 16 elements along K."""
    rm, rn, g = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K // 16)
    a = tl.load(a_ptr + rm[:, None] * (K // 2) + tl.arange(0, K // 2)[None, :])
    b = tl.load(b_ptr + tl.arange(0, K // 2)[:, None] * N + rn[None, :])
    sa = tl.load(sa_ptr + rm[:, None] * (K // 16) + g[None, :])
    sb = tl.load(sb_ptr + rn[:, None] * (K // 16) + g[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.dot_scaled(a, sa, "e2m1", b, sb, "e2m1"))


@pytest.mark.construct("tl.dot_scaled")
def test_dot_scaled_e4m3_scales():
    torch.manual_seed(0)
    m, n, k = 16, 32, 64
    a, b = _random("e2m1", (m, k // 2)), _random("e2m1", (k // 2, n))
    sa, sb = (torch.rand(r, k // 16).to(torch.float8_e4m3fn) for r in (m, n))
    c = torch.zeros(m, n)
    nvfp4_kernel[(1,)](a, sa, b, sb, c, M=m, N=n, K=k)
    x = _decode(a, "e2m1", 1) * sa.double().repeat_interleave(16, dim=1)
    y = _decode(b, "e2m1", 0) * sb.double().repeat_interleave(16, dim=1).T
    torch.testing.assert_close(c, (x @ y).float(), rtol=1e-5, atol=1e-5)


@triton.jit
def batched_kernel(a_ptr, c_ptr):
    a = tl.load(a_ptr + tl.arange(0, 2)[:, None, None] * 1024 + tl.arange(0, 16)[None, :, None] * 64
                + tl.arange(0, 64)[None, None, :])
    b = tl.load(a_ptr + tl.arange(0, 2)[:, None, None] * 1024 + tl.arange(0, 64)[None, :, None] * 16
                + tl.arange(0, 16)[None, None, :])
    c = tl.dot_scaled(a, None, "e4m3", b, None, "e4m3")
    tl.store(c_ptr + tl.arange(0, 2)[:, None, None] * 256 + tl.arange(0, 16)[None, :, None] * 16
             + tl.arange(0, 16)[None, None, :], c)


@pytest.mark.construct("tl.dot_scaled")
def test_batched_dot_scaled_refused():
    from triton_iree import UnsupportedError
    with pytest.raises(UnsupportedError, match=r"tl\.dot_scaled .*a 3-D \(batched\) dot") as e:
        batched_kernel[(1,)](torch.zeros(2048, dtype=torch.uint8), torch.zeros(512))
    assert f"test_dot_scaled.py:{batched_kernel.fn.__code__.co_firstlineno + 6}:" in str(e.value)
