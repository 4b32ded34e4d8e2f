"""fp32 tl.sin, tl.cos and libdevice tan over the whole f32 range (f32_trig.py): IREE's own f32
sin / cos / tan reduce the argument in f32 with a short pi and are wrong beyond |x| of about 1e3.

The metric: |ours - ref| <= 2 ulp of ref, where ref is numpy's float64 result rounded to float32
and the ulp is np.spacing of |ref| in float32 (at least the smallest subnormal, so results near
the zeros of sin / cos are held to their own precision, not to an absolute floor); NaN exactly
where ref is NaN, and the sign of zero kept for sin and tan. (Measured: within 1 ulp.)"""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

BLOCK = 1024


@triton.jit
def trig_kernel(x_ptr, sin_ptr, cos_ptr, tan_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(sin_ptr + offs, tl.sin(x), mask=m)
    tl.store(cos_ptr + offs, tl.cos(x), mask=m)
    tl.store(tan_ptr + offs, libdevice.tan(x), mask=m)


def _inputs() -> np.ndarray:
    rng = np.random.default_rng(7)
    # Whole tiles below 2^24 (the short reduction runs on them alone) ...
    # (the first one with zeros, subnormals and tiny values, the last one with the largest
    # floats below 2^24) ...
    tiny = [0.0, -0.0, 1e-45, -1e-45, 1e-39, -1.17e-38, 2.0 ** -12, -(2.0 ** -12), 2.0 ** -13, -1e-5]
    below = [np.nextafter(np.float32(2.0 ** 24), np.float32(0)), -16777215.0, 16777213.0]
    small = np.concatenate([tiny, rng.uniform(-10, 10, 2 * BLOCK - len(tiny)), rng.uniform(-1e5, 1e5, 2 * BLOCK),
                            rng.uniform(-2.0 ** 24, 2.0 ** 24, BLOCK - len(below)), below])
    # ... the float32 nearest k pi/2 and its neighbours, for k up to 1e6 and a few huge k ...
    k = np.concatenate([np.arange(1, 1000), rng.integers(1000, 10 ** 6, 2000), [2 ** 30 + 3, 10 ** 15, 3 * 10 ** 25]])
    near = (k * (np.pi / 2)).astype(np.float32)
    near = np.concatenate([near, np.nextafter(near, np.float32(np.inf)), np.nextafter(near, np.float32(0))])
    # ... the floats closest to multiples of pi/2 in a few binades (16367173 * 2^72 is the
    # closest of all float32), random magnitudes from 2^-149 to 2^128, and the edges.
    worst = [16367173 * 2.0 ** 72, 16367173 * 2.0 ** 73, 10741887 * 2.0 ** 11, 16573937 * 2.0 ** -16,
             13176795 * 2.0 ** -23, 9882596 * 2.0 ** -21, 13444207 * 2.0 ** -8]
    mag = np.exp2(rng.uniform(-149, 128, 6 * BLOCK)) * rng.choice([-1, 1], 6 * BLOCK)
    edges = [0.0, -0.0, 1e-45, -1e-45, 1e-39, -1.17e-38, 2.0 ** -12, -(2.0 ** -12), 2.0 ** -13, 1e-5,
             np.inf, -np.inf, np.nan, 3.4028235e38, -3.4028235e38, 2.0 ** 24, -(2.0 ** 24)]
    x = np.concatenate([small, near, -near[::7], worst, mag, edges]).astype(np.float32)
    return x


@pytest.mark.construct("tl.extra.libdevice")
def test_f32_sin_cos_tan_whole_range():
    x = _inputs()
    n = len(x)
    xt = torch.from_numpy(x)
    outs = [torch.empty_like(xt) for _ in range(3)]
    trig_kernel[(triton.cdiv(n, BLOCK),)](xt, *outs, n, BLOCK=BLOCK)
    for name, out in zip(("sin", "cos", "tan"), outs):
        with np.errstate(invalid="ignore"):
            ref = getattr(np, name)(x.astype(np.float64)).astype(np.float32)
        got = out.numpy()
        assert np.array_equal(np.isnan(got), np.isnan(ref)), (name, x[np.isnan(got) != np.isnan(ref)][:8])
        fin = ~np.isnan(ref)
        ulp = np.maximum(np.spacing(np.abs(ref[fin])).astype(np.float64), 2.0 ** -149)
        err = np.abs(got[fin].astype(np.float64) - ref[fin].astype(np.float64)) / ulp
        worst = int(np.argmax(err))
        assert err[worst] <= 2, (name, x[fin][worst], got[fin][worst], ref[fin][worst], err[worst])
        if name != "cos":
            zeros = x == 0
            assert np.array_equal(np.signbit(got[zeros]), np.signbit(x[zeros])), name


@triton.jit
def narrow_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, libdevice.sin(x), mask=m)


@pytest.mark.construct("tl.extra.libdevice")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_narrow_sin_whole_range(dtype):
    # Computed in f32 and rounded once more to the narrow type: within one of its ulp of numpy.
    rng = np.random.default_rng(3)
    big = 60000.0 if dtype == torch.float16 else 3e38
    x = torch.from_numpy(rng.uniform(-big, big, 3 * BLOCK)).to(dtype)
    x[:4] = torch.tensor([0.0, -0.0, float("inf"), float("nan")])
    out = torch.empty_like(x)
    narrow_kernel[(3,)](x, out, 3 * BLOCK, BLOCK=BLOCK)
    with np.errstate(invalid="ignore"):
        ref = torch.from_numpy(np.sin(x.double().numpy())).to(dtype)
    torch.testing.assert_close(out, ref, atol=0, rtol=2 ** -7 if dtype == torch.bfloat16 else 2 ** -10,
                               equal_nan=True)
