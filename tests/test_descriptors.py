"""Tensor descriptors (`tl.make_tensor_descriptor`, `.load` / `.store`), compared with torch.

Triton's 'ttir' stage rewrites descriptor accesses into pointer tiles with bounds masks; those
must stay structured slices, and elements outside the descriptor's shape read as its padding
(zero, or NaN) and are never written.
"""
import pytest
import torch
import triton
import triton.language as tl

from triton_iree import analysis, forms, reader
from triton_iree.backend import compiler
from triton_iree import tile as t


@triton.jit
def scale_2d(x_ptr, out_ptr, M, N, sxm, som, BM: tl.constexpr, BN: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    xd = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[sxm, 1], block_shape=[BM, BN])
    od = tl.make_tensor_descriptor(out_ptr, shape=[M, N], strides=[som, 1], block_shape=[BM, BN])
    v = xd.load([pm * BM, pn * BN])
    od.store([pm * BM, pn * BN], v * 2.0 + 1.0)


@triton.jit
def matmul_desc(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    ad = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    bd = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    cd = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        acc += tl.dot(ad.load([pm * BM, k]), bd.load([k, pn * BN]))
    cd.store([pm * BM, pn * BN], acc)


@triton.jit
def row_sum_desc(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    # Zero padding: the column tail of the last block adds nothing.
    pm = tl.program_id(0)
    xd = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    od = tl.make_tensor_descriptor(out_ptr, shape=[M], strides=[1], block_shape=[BM])
    acc = tl.zeros((BM,), dtype=tl.float32)
    for n in range(0, N, BN):
        acc += tl.sum(xd.load([pm * BM, n]), axis=1)
    od.store([pm * BM], acc)


@triton.jit
def nan_padding_1d(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # Reads past `n` with NaN padding and records which elements were padding in a plain
    # (unmasked) pointer store over whole blocks.
    pid = tl.program_id(0)
    xd = tl.make_tensor_descriptor(x_ptr, shape=[n], strides=[1], block_shape=[BLOCK],
                                   padding_option="nan")
    v = xd.load([pid * BLOCK])
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.where(v != v, -1.0, v))


@triton.jit
def copy_3d(x_ptr, out_ptr, A, B, C, BA: tl.constexpr, BB: tl.constexpr, BC: tl.constexpr):
    pa, pb = tl.program_id(0), tl.program_id(1)
    xd = tl.make_tensor_descriptor(x_ptr, shape=[A, B, C], strides=[B * C, C, 1], block_shape=[BA, BB, BC])
    od = tl.make_tensor_descriptor(out_ptr, shape=[A, B, C], strides=[B * C, C, 1], block_shape=[BA, BB, BC])
    for c in range(0, C, BC):
        od.store([pa * BA, pb * BB, c], xd.load([pa * BA, pb * BB, c]) - 3.0)


def test_2d_load_store_on_a_strided_view_leaves_the_rest_untouched():
    torch.manual_seed(0)
    M, N = 37, 53
    base = torch.randn(M, 64)
    x = base[:, :N]                                  # row stride 64: a view, not a copy
    out = torch.full((M, 80), -7.0)
    grid = (triton.cdiv(M, 16), triton.cdiv(N, 32))
    scale_2d[grid](x, out, M, N, x.stride(0), out.stride(0), BM=16, BN=32)
    torch.testing.assert_close(out[:, :N], x * 2.0 + 1.0)
    assert torch.all(out[:, N:] == -7.0)


def test_descriptor_accesses_are_structured_slices():
    sig = dict(x_ptr="*fp32", out_ptr="*fp32", M="i32", N="i32", sxm="i32", som="i32",
               BM="constexpr", BN="constexpr")
    k = reader.read_ttir(compiler.kernel_ttir(scale_2d, sig, dict(BM=16, BN=32)))
    facts = analysis.analyze(k)
    accesses = [op for op in k.walk() if isinstance(op, (t.Load, t.Store))]
    assert len(accesses) == 2
    for op in accesses:
        acc = facts.access(op)
        assert isinstance(acc, forms.StructuredAccess), op
        assert len(acc.form.strides) == 2


@pytest.mark.parametrize("M,N,K", [(45, 38, 70), (64, 64, 64)])
def test_matmul_through_descriptors_pads_the_k_tail_with_zeros(M, N, K):
    torch.manual_seed(1)
    a, b = torch.randn(M, K), torch.randn(K, N)
    c = torch.zeros(M, N)
    matmul_desc[(triton.cdiv(M, 16), triton.cdiv(N, 16))](a, b, c, M, N, K, BM=16, BN=16, BK=32)
    torch.testing.assert_close(c, a @ b, atol=1e-4, rtol=1e-4)


def test_row_sum_over_column_blocks():
    torch.manual_seed(2)
    M, N = 29, 300
    x = torch.randn(M, N)
    out = torch.full((M + 5,), -1.0)
    row_sum_desc[(triton.cdiv(M, 8),)](x, out, M, N, BM=8, BN=64)
    torch.testing.assert_close(out[:M], x.sum(dim=1), atol=1e-4, rtol=1e-4)
    assert torch.all(out[M:] == -1.0)


def test_nan_padding_reads_nan_past_the_shape():
    n, block = 100, 32
    x = torch.arange(n, dtype=torch.float32)
    out = torch.zeros(triton.cdiv(n, block) * block)
    nan_padding_1d[(triton.cdiv(n, block),)](x, out, n, BLOCK=block)
    assert torch.equal(out[:n], x)
    assert torch.all(out[n:] == -1.0)


def test_3d_descriptor_copy():
    torch.manual_seed(3)
    A, B, C = 5, 7, 19
    x = torch.randn(A, B, C)
    out = torch.zeros(A, B, C)
    copy_3d[(triton.cdiv(A, 2), triton.cdiv(B, 4))](x, out, A, B, C, BA=2, BB=4, BC=8)
    torch.testing.assert_close(out, x - 3.0)
