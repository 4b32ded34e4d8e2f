"""Tiles loaded in a kernel loop and read across the program's elements: stored transposed
(through block pointers, pointer tiles, or pointers whose fast dim is the tile's first), or reduced
along their first axis. On GPUs each element of such a tile is loaded by one thread and read by
another; the tile must be one the threads share (tests/test_lowering_gpu.py checks the machine
code). Checked against torch, with sizes that are not multiples of the blocks, a strided input
view and an output whose untouched elements must keep their values."""
import pytest
import torch
import triton
import triton.language as tl

from triton_iree import compat

from test_versions import ignore_block_ptr_deprecation


@triton.jit
def block_ptr_transpose(x_ptr, o_ptr, M, K, sxm, sxk, som, sok, BM: tl.constexpr, BK: tl.constexpr,
                        COLUMN_MAJOR: tl.constexpr):
    pid = tl.program_id(0)
    xb = tl.make_block_ptr(x_ptr, (M, K), (sxm, sxk), (pid * BM, 0), (BM, BK), (1, 0))
    if COLUMN_MAJOR:
        ob = tl.make_block_ptr(o_ptr, (K, M), (som, sok), (0, pid * BM), (BK, BM), (0, 1))
    else:
        ob = tl.make_block_ptr(o_ptr, (K, M), (som, sok), (0, pid * BM), (BK, BM), (1, 0))
    for _ in range(0, K, BK):
        t = tl.load(xb, boundary_check=(0, 1), padding_option="zero")
        tl.store(ob, tl.trans(t), boundary_check=(0, 1))
        xb = tl.advance(xb, (0, BK))
        ob = tl.advance(ob, (BK, 0))


@triton.jit
def pointer_transpose(x_ptr, o_ptr, M, K, sxm, sxk, som, sok, BM: tl.constexpr, BK: tl.constexpr,
                      COLUMN_MAJOR: tl.constexpr):
    pid = tl.program_id(0)
    rm = pid * BM + tl.arange(0, BM)
    for k in range(0, K, BK):
        rk = k + tl.arange(0, BK)
        t = tl.load(x_ptr + rm[:, None] * sxm + rk[None, :] * sxk, mask=(rm[:, None] < M) & (rk[None, :] < K))
        if COLUMN_MAJOR:   # the tile as loaded, through pointers whose fast dim is its first
            tl.store(o_ptr + rk[None, :] * som + rm[:, None] * sok, t, mask=(rk[None, :] < K) & (rm[:, None] < M))
        else:
            tl.store(o_ptr + rk[:, None] * som + rm[None, :] * sok, tl.trans(t),
                     mask=(rk[:, None] < K) & (rm[None, :] < M))


@triton.jit
def column_sums(x_ptr, o_ptr, M, K, sxm, sxk, som, sok, BM: tl.constexpr, BK: tl.constexpr,
                COLUMN_MAJOR: tl.constexpr):
    # o[0, k] = sum over this program's rows m of x[m, k], one BK block of columns an iteration
    pid = tl.program_id(0)
    rm = pid * BM + tl.arange(0, BM)
    for k in range(0, K, BK):
        rk = k + tl.arange(0, BK)
        t = tl.load(x_ptr + rm[:, None] * sxm + rk[None, :] * sxk, mask=(rm[:, None] < M) & (rk[None, :] < K),
                    other=0.0)
        tl.store(o_ptr + pid * som + rk * sok, tl.sum(t, axis=0), mask=rk < K)


def _launch(fn, M, K, BM, BK, column_major):
    torch.manual_seed(0)
    x = torch.randn(M, 2 * K + 3)[:, 1:2 * K:2]              # column stride 2, row stride 2K + 3
    rows = triton.cdiv(M, BM) if fn is column_sums else K
    cols = K if fn is column_sums else M
    out = torch.full((rows, cols + 5), -7.0)                  # 5 untouched columns per row
    fn[(triton.cdiv(M, BM),)](x, out, M, K, x.stride(0), x.stride(1), out.stride(0), out.stride(1),
                              BM=BM, BK=BK, COLUMN_MAJOR=column_major)
    if fn is column_sums:
        want = torch.stack([x[i:i + BM].sum(0) for i in range(0, M, BM)])
        torch.testing.assert_close(out[:, :cols], want)
    else:
        assert torch.equal(out[:, :cols], x.t())
    assert torch.all(out[:, cols:] == -7.0)


SHAPES = [(70, 100, 16, 32), (300, 257, 128, 64), (45, 9, 32, 8), (64, 64, 64, 64)]


@pytest.mark.parametrize("M, K, BM, BK", SHAPES)
@pytest.mark.parametrize("fn, column_major", [(pointer_transpose, False), (pointer_transpose, True),
                                              (column_sums, False)])
def test_tiles_loaded_in_a_loop_and_read_across_elements(fn, column_major, M, K, BM, BK):
    _launch(fn, M, K, BM, BK, column_major)


@pytest.mark.skipif(compat.VERSION >= (3, 9), reason="Triton 3.9 removed block pointers")
@ignore_block_ptr_deprecation
@pytest.mark.parametrize("M, K, BM, BK", SHAPES)
@pytest.mark.parametrize("column_major", [True, False])
def test_block_pointer_tiles_stored_transposed_in_a_loop(column_major, M, K, BM, BK):
    _launch(block_ptr_transpose, M, K, BM, BK, column_major)
