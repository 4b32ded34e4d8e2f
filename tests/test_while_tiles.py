"""While loops whose condition computes on the loop's tiles (`while tl.sum(tl.abs(v), 0) > 4.0`:
a reduction, a 2-D reduction, a dot, a scan in the condition), on llvm-cpu against torch, and
compiled for CUDA."""
import pytest
import torch
import triton
import triton.language as tl

from triton_iree import aot


@triton.jit
def halve_while_sum(x_ptr, out_ptr, iters_ptr, n, LIMIT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m, other=0.0)
    i = 0
    while tl.sum(tl.abs(v), 0) > LIMIT:
        v = v * 0.5
        i += 1
    tl.store(out_ptr + offs, v, mask=m)
    tl.store(iters_ptr + tl.program_id(0), i)


@triton.jit
def halve_while_2d(x_ptr, out_ptr, iters_ptr, rows, stride, LIMIT: tl.constexpr, R: tl.constexpr,
                   C: tl.constexpr, KIND: tl.constexpr):
    r = tl.program_id(0) * R + tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    m = r < rows
    v = tl.load(x_ptr + r * stride + c, mask=m, other=0.0)
    w = tl.load(x_ptr + tl.arange(0, C)[:, None] * stride + c)   # the first C rows
    i = 0
    if KIND == 0:
        while tl.sum(tl.abs(v)) > LIMIT:
            v = v * 0.5
            i += 1
    elif KIND == 1:
        while tl.sum(tl.abs(tl.dot(v, w, input_precision="ieee"))) > LIMIT:
            v = v * 0.5
            i += 1
    else:
        while tl.max(tl.max(tl.cumsum(tl.abs(v), 1), 1), 0) > LIMIT:
            v = v * 0.5
            i += 1
    tl.store(out_ptr + r * stride + c, v, mask=m)
    tl.store(iters_ptr + tl.program_id(0), i)


def _halve(v: torch.Tensor, measure, limit: float) -> tuple[torch.Tensor, int]:
    i = 0
    while measure(v) > limit:
        v, i = v * 0.5, i + 1
    return v, i


def test_while_reduction_condition_runs_zero_and_several_times():
    torch.manual_seed(0)
    n, B, limit = 100, 32, 4.0
    # per program: far below the limit (0 iterations), around it, far above (several)
    scale = torch.tensor([0.001, 0.3, 30.0, 2.0]).repeat_interleave(B)[:n]
    x = torch.randn(n) * scale
    out, iters = torch.full((n + 5,), -7.0), torch.full((4,), -1, dtype=torch.int32)
    halve_while_sum[(triton.cdiv(n, B),)](x, out, iters, n, LIMIT=limit, BLOCK=B)
    want = [_halve(x[p * B:(p + 1) * B], lambda v: v.abs().sum(), limit) for p in range(4)]
    assert iters.tolist() == [i for _, i in want] and iters[0] == 0 and iters.max() > 1
    torch.testing.assert_close(out[:n], torch.cat([v for v, _ in want]), rtol=0, atol=0)
    assert (out[n:] == -7.0).all()


@pytest.mark.parametrize("kind, measure", [
    (0, lambda v, w: v.abs().sum()),
    (1, lambda v, w: (v @ w).abs().sum()),
    (2, lambda v, w: v.abs().cumsum(1).max()),
], ids=["sum-2d", "dot", "cumsum"])
def test_while_condition_on_2d_tiles(kind, measure):
    torch.manual_seed(1)
    rows, R, C, limit = 37, 16, 16, 64.0
    base = torch.randn(rows, C + 3)
    base[:R] *= 0.01          # program 0: 0 iterations (also w, which the dot reads)
    base[R:] *= 40.0
    x = base[:, :C]           # row stride C + 3
    out_base = torch.full((rows, C + 3), -7.0)
    iters = torch.full((3,), -1, dtype=torch.int32)
    halve_while_2d[(triton.cdiv(rows, R),)](x, out_base, iters, rows, x.stride(0), LIMIT=limit, R=R, C=C,
                                            KIND=kind)
    w = x[:C]
    want = []
    for p in range(3):
        v = torch.zeros(R, C)
        v[:min(R, rows - p * R)] = x[p * R:(p + 1) * R]
        want.append(_halve(v, lambda t: measure(t, w), limit))
    assert iters.tolist() == [i for _, i in want] and iters[0] == 0 and iters.max() > 1
    torch.testing.assert_close(out_base[:, :C], torch.cat([v for v, _ in want])[:rows], rtol=0, atol=0)
    assert (out_base[:, C:] == -7.0).all()


@pytest.mark.parametrize("fn, consts", [
    (halve_while_sum, {"LIMIT": 4.0, "BLOCK": 256}),
    (halve_while_2d, {"LIMIT": 4.0, "R": 16, "C": 16, "KIND": 0}),
    (halve_while_2d, {"LIMIT": 4.0, "R": 16, "C": 16, "KIND": 1}),
    (halve_while_2d, {"LIMIT": 4.0, "R": 16, "C": 16, "KIND": 2}),
], ids=["sum", "sum-2d", "dot", "cumsum"])
def test_while_condition_on_tiles_compiles_for_cuda(fn, consts):
    """(Compiled only: the results on a GPU are not checked here.)"""
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32", "iters_ptr": "*i32"}
    sig.update({"n": "i32"} if fn is halve_while_sum else {"rows": "i32", "stride": "i32"})
    k = aot.compile_kernel(fn, sig, consts, target="cuda", arch="sm_80")
    assert k.vmfb and "scf.while" in k.module
