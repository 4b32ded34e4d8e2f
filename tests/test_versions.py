"""What differs between the supported Triton versions (3.6 to 3.9): block pointers, the IR
Triton's frontend produces, and the plugin API around compiled kernels."""
import gc
import subprocess
import sys

import pytest
import torch
import triton
import triton.language as tl

from triton_iree import analysis, compat, forms, reader, reader_shapes
from triton_iree.backend import compiler
from triton_iree import tile as t

import kernels as K
from helpers import MATMUL_CONSTS, MATMUL_SIG

ROOT_SIG = dict(x_ptr="*fp32", out_ptr="*fp32", M="i32", N="i32", sxm="i32", som="i32",
                BM="constexpr", BN="constexpr")


@triton.jit
def block_ptr_rows_plus_one(x_ptr, out_ptr, M, N, sxm, som, BM: tl.constexpr, BN: tl.constexpr):
    pm = tl.program_id(0)
    xb = tl.make_block_ptr(x_ptr, (M, N), (sxm, 1), (pm * BM, 0), (BM, BN), (1, 0))
    ob = tl.make_block_ptr(out_ptr, (M, N), (som, 1), (pm * BM, 0), (BM, BN), (1, 0))
    for _ in range(0, N, BN):
        v = tl.load(xb, boundary_check=(0, 1), padding_option="zero")
        tl.store(ob, v + 1.0, boundary_check=(0, 1))
        xb = tl.advance(xb, (0, BN))
        ob = tl.advance(ob, (0, BN))


@triton.jit
def reshape_index_copy(x_ptr, out_ptr, M, N, sxm, som, BM: tl.constexpr, BN: tl.constexpr):
    # Row and column index tiles built with tl.reshape instead of [:, None] / [None, :].
    rows = tl.reshape(tl.program_id(0) * BM + tl.arange(0, BM), (BM, 1))
    cols = tl.reshape(tl.arange(0, BN), (1, BN))
    mask = (rows < M) & (cols < N)
    v = tl.load(x_ptr + rows * sxm + cols, mask=mask)
    tl.store(out_ptr + rows * som + cols, v * 3.0, mask=mask)


def _structured(fn, sig, consts):
    k = reader.read_ttir(compiler.kernel_ttir(fn, sig, consts))
    facts = analysis.analyze(k)
    accesses = [op for op in k.walk() if isinstance(op, (t.Load, t.Store))]
    return accesses and all(isinstance(facts.access(op), forms.StructuredAccess) for op in accesses)


# Triton 3.8 warns that block pointers are deprecated.
ignore_block_ptr_deprecation = pytest.mark.filterwarnings("ignore:tl.make_block_ptr is deprecated")


@pytest.mark.skipif(compat.VERSION >= (3, 9), reason="Triton 3.9 removed block pointers")
@ignore_block_ptr_deprecation
def test_block_pointers_with_boundary_checks():
    torch.manual_seed(0)
    M, N = 45, 70
    x = torch.randn(M, 96)[:, :N]
    out = torch.full((M, 80), -5.0)
    block_ptr_rows_plus_one[(triton.cdiv(M, 16),)](x, out, M, N, x.stride(0), out.stride(0), BM=16, BN=32)
    torch.testing.assert_close(out[:, :N], x + 1.0)
    assert torch.all(out[:, N:] == -5.0)
    assert _structured(block_ptr_rows_plus_one, ROOT_SIG, dict(BM=16, BN=32))


def test_reshape_that_adds_unit_dims_is_a_structured_expand_dims():
    torch.manual_seed(1)
    M, N = 37, 50
    x = torch.randn(M, N)
    out = torch.zeros(M, 64)
    reshape_index_copy[(triton.cdiv(M, 8),)](x, out, M, N, x.stride(0), out.stride(0), BM=8, BN=64)
    torch.testing.assert_close(out[:, :N], x * 3.0)
    assert torch.all(out[:, N:] == 0.0)
    assert _structured(reshape_index_copy, ROOT_SIG, dict(BM=8, BN=64))


def test_inserted_unit_dims():
    assert reader_shapes._inserted_unit_dims((16,), (16, 1)) == [1]
    assert reader_shapes._inserted_unit_dims((16, 32), (1, 16, 1, 32, 1)) == [0, 2, 4]
    assert reader_shapes._inserted_unit_dims((16, 1), (16,)) is None
    assert reader_shapes._inserted_unit_dims((4, 8), (8, 4)) is None
    assert reader_shapes._inserted_unit_dims((32,), (4, 8)) is None


@ignore_block_ptr_deprecation
def test_ttir_of_loops_dots_and_block_pointers_is_generic():
    # generic_text raises unless Triton's printer produced generic form for every op.
    for fn, sig, consts in [(K.matmul_kernel, MATMUL_SIG, MATMUL_CONSTS),
                            (block_ptr_rows_plus_one if compat.VERSION < (3, 9) else reshape_index_copy,
                             ROOT_SIG, dict(BM=16, BN=32))]:
        text = compiler.kernel_ttir(fn, sig, consts)
        assert '"tt.func"' in text and '"tt.load"' in text and '"tt.store"' in text
        assert "tt.make_tensor_ptr" not in text and "tt.advance" not in text


def test_freeing_compiled_kernels_raises_nothing():
    # Triton >= 3.8 unloads a compiled kernel's module through the driver when it is freed.
    @triton.jit
    def twice(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    x = torch.ones(100)
    twice[(1,)](x, 100, BLOCK=128)
    assert torch.all(x == 2)
    errors = []
    hook, sys.unraisablehook = sys.unraisablehook, errors.append
    try:
        twice.device_caches.clear()
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert [e.exc_value for e in errors] == []


def test_exit_after_a_launch_is_quiet():
    # Triton >= 3.7 keeps compiled kernels alive until after IREE's bindings are torn down;
    # the driver releases them at exit, so the interpreter exits without leak reports.
    code = ("import torch, kernels as K\n"
            "x = torch.rand(1000); y = torch.rand(1000)\n"
            "assert torch.equal(K.run_add(x, y), x + y)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=K.__file__.rsplit("/", 1)[0])
    assert r.returncode == 0, r.stderr[-2000:]
    assert "leak" not in r.stderr, r.stderr[-2000:]


def test_version_names_triton_iree_and_torch():
    from importlib.metadata import version
    r = subprocess.run([sys.executable, "-m", "triton_iree.cli", "--version"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (f"triton-iree {version('triton-iree')} (triton {triton.__version__}, "
                                f"iree {version('iree-base-compiler')}, torch {version('torch')})")
