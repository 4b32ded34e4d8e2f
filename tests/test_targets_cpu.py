"""The CPU target's rewrite of the tile program (`targets.cpu.sums_carried_as_scalars`): a loop
that only accumulates a tile for a sum after it carries the scalar sum, with the same results
(the layer norm's results: tests/test_kernels.py)."""
import pytest
import torch
import triton
import triton.language as tl

from triton_iree import tile as t
from triton_iree.targets.cpu import sums_carried_as_scalars

from helpers import tile_program
import kernels as K

LN_SIG = dict(X="*fp32", Y="*fp32", W="*fp32", B="*fp32", Mean="*fp32", Rstd="*fp32", stride="i32", N="i32",
              eps="fp32", BLOCK_SIZE="constexpr")


def carried(kernel):
    """The types each loop of the kernel carries."""
    return [[v.type for v in op.iter_args] for op in kernel.walk() if isinstance(op, t.For)]


def test_layer_norm_loops_carry_scalars():
    kernel = tile_program(K.layer_norm_fwd_kernel, LN_SIG, dict(BLOCK_SIZE=256))
    assert carried(kernel)[:2] == [[t.TileType((256,), "f32")]] * 2
    sums_carried_as_scalars(kernel)
    assert carried(kernel) == [[t.ScalarType("f32")], [t.ScalarType("f32")], []]
    assert not any(isinstance(op, t.Reduce) and op.srcs[0].owner.__class__ is t.For for op in kernel.walk())


@triton.jit
def _acc_kernel(x_ptr, out_ptr, tile_ptr, N, MODE: tl.constexpr, BLOCK: tl.constexpr):
    """Sums x in BLOCK chunks through a tile accumulator; MODE picks uses the rewrite must keep."""
    if MODE == 1:
        acc = tl.full([BLOCK], 1.0, tl.float32)      # not zero at the start
    else:
        acc = tl.zeros([BLOCK], tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + cols, mask=cols < N, other=0.0)
        if MODE == 2:
            tl.store(tile_ptr + tl.arange(0, BLOCK), acc)   # the tile is read in the loop
    if MODE == 3:
        tl.store(out_ptr, tl.max(acc, axis=0))               # not a sum
    else:
        tl.store(out_ptr, tl.sum(acc, axis=0))
    if MODE == 4:
        tl.store(tile_ptr + tl.arange(0, BLOCK), acc)        # the tile itself is used after the loop


ACC_SIG = dict(x_ptr="*fp32", out_ptr="*fp32", tile_ptr="*fp32", N="i32", MODE="constexpr", BLOCK="constexpr")


@pytest.mark.parametrize("mode, rewritten", [(0, True), (1, False), (2, False), (3, False), (4, False)])
def test_only_a_zero_started_accumulator_summed_after_the_loop_is_rewritten(mode, rewritten):
    kernel = tile_program(_acc_kernel, ACC_SIG, dict(MODE=mode, BLOCK=128))
    sums_carried_as_scalars(kernel)
    assert carried(kernel) == [[t.ScalarType("f32") if rewritten else t.TileType((128,), "f32")]]
    n = 1000
    x = torch.randn(n)
    out, tile = torch.zeros(1), torch.zeros(128)
    _acc_kernel[(1,)](x, out, tile, n, MODE=mode, BLOCK=128)
    chunks = torch.nn.functional.pad(x, (0, 1024 - n)).view(8, 128)
    acc = chunks.sum(0) + (1.0 if mode == 1 else 0.0)
    want = acc.max() if mode == 3 else acc.sum()
    torch.testing.assert_close(out[0], want, rtol=1e-5, atol=1e-4)
    if mode == 4:
        torch.testing.assert_close(tile, acc, rtol=1e-5, atol=1e-5)
