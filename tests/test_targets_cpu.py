"""The CPU target's rewrites of the tile program: a loop that only accumulates a tile for a sum
after it carries the scalar sum (`targets.cpu.sums_carried_as_scalars`), and sums of products
computed through fma (`targets.cpu.products_summed_through_fma`), each with the same results
(the layer norm's results: tests/test_kernels.py)."""
import pytest
import torch
import triton
import triton.language as tl

from triton_iree import tile as t
from triton_iree.targets.cpu import products_summed_through_fma, sums_carried_as_scalars

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


@triton.jit
def _sum_of_products_kernel(a_ptr, b_ptr, out_ptr, prod_ptr, n, MODE: tl.constexpr, BLOCK: tl.constexpr):
    """MODE 0: sum(a * a) of the masked elements through tl.where; 1: sum(a * b); 2: sum(a * b)
    with a * b also stored; 3: a max of a * b."""
    offs = tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m, other=0.0)
    b = tl.load(b_ptr + offs, mask=m, other=0.0)
    if MODE == 0:
        total = tl.sum(tl.where(m, a * a, 0.0), axis=0)
    elif MODE == 3:
        total = tl.max(a * b, axis=0)
    else:
        p = a * b
        total = tl.sum(p, axis=0)
        if MODE == 2:
            tl.store(prod_ptr + offs, p, mask=m)
    tl.store(out_ptr, total)


SOP_SIG = dict(a_ptr="*fp32", b_ptr="*fp32", out_ptr="*fp32", prod_ptr="*fp32", n="i32", MODE="constexpr",
               BLOCK="constexpr")


@pytest.mark.parametrize("mode, rewritten", [(0, True), (1, True), (2, False), (3, False)])
def test_products_summed_alone_are_computed_through_fma(mode, rewritten):
    kernel = tile_program(_sum_of_products_kernel, SOP_SIG, dict(MODE=mode, BLOCK=256))
    products_summed_through_fma(kernel)
    names = [op.opname for op in kernel.walk() if isinstance(op, t.Elementwise)]
    assert ("math.fma" in names) == rewritten and ("arith.mulf" in names) != rewritten
    n = 200
    a, b = torch.randn(n), torch.randn(n)
    a[:3], b[:3] = -0.0, 2.0                   # products of -0.0: stored with their sign
    out, prod = torch.zeros(1), torch.full((n,), 7.0)
    _sum_of_products_kernel[(1,)](a, b, out, prod, n, MODE=mode, BLOCK=256)
    p = (a * a) if mode == 0 else (a * b)
    want = p.max() if mode == 3 else p.double().sum().float()
    torch.testing.assert_close(out[0], want, rtol=1e-5, atol=1e-5)
    if mode == 2:
        assert torch.equal(prod, a * b) and torch.equal(torch.signbit(prod), torch.signbit(a * b))
