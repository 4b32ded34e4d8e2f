"""Tiles of several rows stored row by row (a layer norm that stores its output, mean and rstd):
the module iree-compile gets, and the results against torch."""

import pytest
import torch
import triton
import triton.language as tl
from iree.compiler import ir
from triton.language.extra import libdevice

from triton_iree import lowering
from triton_iree.targets import make_target

from helpers import nested_ops, tile_program


@triton.jit
def layer_norm_rows(x_ptr, w_ptr, b_ptr, out_ptr, mean_ptr, rstd_ptr, n_rows, stride_out,
                    N: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, N)[None, :]
    mask = rows < n_rows
    x = tl.load(x_ptr + rows * N + cols, mask, other=0.0)
    mean = tl.sum(x, 1)[:, None] / N
    d = x - mean
    rstd = libdevice.rsqrt(tl.sum(d * d, 1)[:, None] / N + 1e-5)
    y = d * rstd * tl.load(w_ptr + cols) + tl.load(b_ptr + cols)
    tl.store(mean_ptr + rows, mean, mask)
    tl.store(rstd_ptr + rows, rstd, mask)
    tl.store(out_ptr + rows * stride_out + cols, y, mask)


SIG = dict(x_ptr="*fp32", w_ptr="*fp32", b_ptr="*fp32", out_ptr="*fp32", mean_ptr="*fp32",
           rstd_ptr="*fp32", n_rows="i32", stride_out="i32", N="constexpr", ROWS="constexpr")


def test_a_computed_tile_stored_by_rows_is_stored_from_a_copy():
    """IREE moves the elementwise op computing a tile into the row loop of its store; with rstd
    also stored, its llvm-cpu tiling of that loop never finished (iree-compile ran until the
    time limit). Each row stored from a computed tile is a slice of a linalg.copy of it."""
    text = lowering.lower(tile_program(layer_norm_rows, SIG, dict(N=128, ROWS=8)), make_target("llvm-cpu").emit_options())
    with ir.Context():
        module = ir.Module.parse(text)
        row_stores = []     # the op computing each tile a row loop stores a slice of
        for op in nested_ops(module.operation):
            if op.name == "iree_tensor_ext.dispatch.tensor.store" and op.parent.name == "scf.for" and \
                    op.operands[0].owner.name == "tensor.extract_slice":
                tile = op.operands[0].owner.operands[0]
                if str(tile.type) == "tensor<8x128xf32>":
                    row_stores.append(tile.owner.name)
    assert row_stores, "no row loop storing the 8x128 tile"
    assert set(row_stores) == {"linalg.copy"}, row_stores


@pytest.mark.parametrize("rows", [1, 8])
def test_layer_norm_with_mean_and_rstd_several_rows_per_program(monkeypatch, rows):
    monkeypatch.setenv("TRITON_IREE_COMPILE_TIMEOUT", "120")   # a regression fails, not hangs
    torch.manual_seed(0)
    n, N = 37, 128
    x, w, b = torch.randn(n, N), torch.randn(N), torch.randn(N)
    out_base = torch.full((n, N + 32), -7.0)
    out = out_base[:, :N]
    mean, rstd = torch.full((n + 3,), -7.0), torch.full((n + 3,), -7.0)
    layer_norm_rows[(triton.cdiv(n, rows),)](x, w, b, out, mean, rstd, n, out.stride(0), N=N, ROWS=rows)
    torch.testing.assert_close(out, torch.nn.functional.layer_norm(x, (N,), w, b), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(mean[:n], x.mean(1), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(rstd[:n], torch.rsqrt(x.var(1, unbiased=False) + 1e-5), rtol=1e-5, atol=1e-5)
    assert (out_base[:, N:] == -7.0).all() and (mean[n:] == -7.0).all() and (rstd[n:] == -7.0).all()
