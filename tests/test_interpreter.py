"""The same kernels, launched through triton-iree and through Triton's own interpreter.

The interpreter runs in a separate process with TRITON_INTERPRET=1 (it must be enabled before
kernels are defined), on copies of the same inputs, with the Python of TRITON_IREE_ORACLE_PYTHON
when set (Triton 3.6's interpreter needs numpy < 2 inside loops), else this one.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton

import kernels as K
from helpers import assert_fp16_rounding_of

RUNNER = Path(__file__).with_name("interp_runner.py")
ORACLE_PYTHON = os.environ.get("TRITON_IREE_ORACLE_PYTHON") or sys.executable


def both(kernel, grid, make_args, tmp_path, **meta):
    """Runs `kernel` natively and in Triton's interpreter on identical copies of the inputs."""
    ours = make_args()
    job, out = tmp_path / "job.pt", tmp_path / "out.pt"
    torch.save({"kernel": kernel.fn.__name__, "grid": list(grid), "args": list(make_args()), "meta": meta}, job)
    r = subprocess.run([ORACLE_PYTHON, str(RUNNER), str(job), str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    kernel[grid](*ours, **meta)
    return ours, torch.load(out)


def _same(ours, ref, atol=0.0, rtol=0.0):
    for a, b in zip(ours, ref):
        if isinstance(a, torch.Tensor):
            torch.testing.assert_close(a, b, atol=atol, rtol=rtol)


def test_where_and_integer_ops_match_interpreter(tmp_path):
    torch.manual_seed(0)
    x = torch.randint(-1000, 1000, (3001,), dtype=torch.int32)
    y = torch.randint(-7, 7, (3001,), dtype=torch.int32)
    ours, ref = both(K.where_int_kernel, (triton.cdiv(3001, 512),),
                     lambda: (x.clone(), y.clone(), torch.zeros(3001, dtype=torch.int32), 3001), tmp_path, BLOCK=512)
    _same(ours, ref)


def test_div_mod_indexing_matches_interpreter(tmp_path):
    x = torch.randn(19, 41)
    n = x.numel()
    ours, ref = both(K.mod_div_index_kernel, (triton.cdiv(n, 128),),
                     lambda: (x.clone(), torch.zeros(n), n), tmp_path, COLS=19, XBLOCK=128)
    _same(ours, ref)


def test_layer_norm_matches_interpreter(tmp_path):
    torch.manual_seed(1)
    M, N = 6, 777
    x, w, b = torch.randn(M, N), torch.randn(N), torch.randn(N)

    def args():
        return (x.clone(), torch.zeros(M, N), w.clone(), b.clone(), torch.zeros(M), torch.zeros(M),
                x.stride(0), N, 1e-5)
    ours, ref = both(K.layer_norm_fwd_kernel, (M,), args, tmp_path, BLOCK_SIZE=256)
    _same(ours, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_matmul_matches_interpreter(dtype, tmp_path):
    torch.manual_seed(2)
    M, N, Kd = 45, 38, 70
    a, b = torch.randn(M, Kd).to(dtype), torch.randn(Kd, N).to(dtype)

    def args():
        c = torch.zeros(M, N, dtype=dtype)
        return (a.clone(), b.clone(), c, M, N, Kd, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                c.stride(0), c.stride(1))
    ours, ref = both(K.matmul_kernel, (triton.cdiv(M, 16), triton.cdiv(N, 16)), args, tmp_path,
                     BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)
    if dtype == torch.float16:
        assert_fp16_rounding_of(ours[2], ref[2].float())
    else:
        _same(ours, ref, atol=1e-4, rtol=1e-4)


def test_argmax_matches_interpreter(tmp_path):
    torch.manual_seed(3)
    x = torch.randn(9, 200)
    x[3, 17] = x[3, 150] = 50.0          # ties resolve to the lowest index in both
    ours, ref = both(K.argmax_kernel, (9,),
                     lambda: (x.clone(), torch.zeros(9, dtype=torch.int32), torch.zeros(9), 200, 200),
                     tmp_path, BLOCK=256)
    _same(ours, ref)


def test_philox_rand_and_clamp_match_interpreter(tmp_path):
    n = 1500
    ours, ref = both(K.rand_kernel, (triton.cdiv(n, 256),), lambda: (torch.zeros(n), 1234, n), tmp_path,
                     BLOCK=256)
    _same(ours, ref)
    assert 0.1 <= ours[0].min() and ours[0].max() <= 0.9 and ours[0].std() > 0.2


def test_runtime_if_matches_interpreter(tmp_path):
    torch.manual_seed(4)
    n = 3 * 128 - 1
    x = torch.randn(n)
    for mode in (2, -1):
        ours, ref = both(K.runtime_if_kernel, (triton.cdiv(n, 128),),
                         lambda: (x.clone(), torch.full((n,), 5.0), n, mode), tmp_path, BLOCK=128)
        _same(ours, ref)


def test_transposed_pointer_tiles_match_interpreter(tmp_path):
    torch.manual_seed(5)
    M, N = 31, 33
    x = torch.randn(M, N + 2)
    ours, ref = both(K.trans_pointer_kernel, (triton.cdiv(M, 16), triton.cdiv(N, 32)),
                     lambda: (x.clone(), torch.full((N, M), 5.0), M, N, x.stride(0)), tmp_path,
                     BLOCK_M=16, BLOCK_N=32)
    _same(ours, ref)
