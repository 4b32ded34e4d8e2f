"""The integer f32 <-> fp8 conversions emitted for CUDA/HIP codegen (lowering/fp8_bits.py), their
op lists evaluated with numpy, against torch's float8 conversions (round to nearest even) and
IEEE's overflow (infinity for f8E5M2, NaN for f8E4M3FN)."""
import numpy as np
import pytest
import torch

from triton_iree.lowering.fp8_bits import FP8, evaluate, extf_ops, truncf_ops

TORCH = {"f8E4M3FN": torch.float8_e4m3fn, "f8E5M2": torch.float8_e5m2}
TOP = {"f8E4M3FN": 448.0, "f8E5M2": 57344.0}


def _all(dtype):
    return torch.arange(256, dtype=torch.int32).to(torch.uint8).view(TORCH[dtype]).float().numpy()


@pytest.mark.parametrize("dtype", list(FP8))
def test_extf_of_every_fp8_value(dtype):
    got = evaluate(extf_ops(dtype), np.arange(256, dtype=np.uint8))
    ref = _all(dtype)
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), ref[~nan].view(np.uint32))


@pytest.mark.parametrize("dtype", list(FP8))
def test_truncf_rounds_to_nearest_even(dtype):
    vals = np.unique(_all(dtype)[np.isfinite(_all(dtype))].astype(np.float64))
    grid = np.concatenate([vals, (vals[1:] + vals[:-1]) / 2]).astype(np.float32)    # values and ties
    grid = np.concatenate([grid, np.nextafter(grid, np.float32(np.inf)), np.nextafter(grid, np.float32(-np.inf))])
    rand = np.random.default_rng(0).integers(0, 2 ** 32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    special = np.array([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 1e-45, -1e-45, 3e38, -3e38], np.float32)
    x = np.concatenate([grid, rand, special])
    got = evaluate(truncf_ops(dtype), x)
    back = evaluate(extf_ops(dtype), got)
    nan = np.isnan(x)
    assert np.isnan(back[nan]).all()
    ref = torch.from_numpy(x.copy()).to(TORCH[dtype])
    top = TOP[dtype]
    # From half a step above the largest finite value, IEEE overflows (the tie there rounds to
    # even: down for f8E4M3FN, whose largest mantissa is even, up for f8E5M2).
    half = (top - vals[-2]) / 2
    with np.errstate(invalid="ignore"):
        mag = np.abs(x.astype(np.float64))
    over = ~nan & ((mag > top + half) if dtype == "f8E4M3FN" else (mag >= top + half))
    ok = ~nan & ~over
    assert np.array_equal(got[ok], ref.view(torch.uint8).numpy()[ok])
    assert (np.isnan(back[over]) if dtype == "f8E4M3FN" else np.isinf(back[over])).all()
    assert np.array_equal(np.signbit(back[over]), np.signbit(x[over]))
