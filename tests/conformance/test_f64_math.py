"""fp64 math that IREE's CPU code would take from the C math library (which its executables
cannot link), computed inline by triton-iree (src/triton_iree/f64_math.py, f64_trig.py): tl.log2,
tl.sin, tl.cos, tl.math.erf, % and, through tl.extra.libdevice, log2, log10, tanh, cbrt, atan, asin,
acos, sin, cos, tan, erf, atan2 and fmod. Compared with numpy's float64 results (math.erf's for erf)
in ulp over the whole range: random magnitudes from the smallest subnormal to the largest double,
values near 1, powers of two and ten, near multiples of pi/2 (sin / cos / tan; where numpy's own
results are off, with mpmath's), and C's results at 0, -0, +-inf, NaN and negative arguments;
fmod bit for bit."""
import math

import mpmath
import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

BLOCK = 1024
CONSTRUCT = ("tl.log2 / tl.sin / tl.cos / tl.math.erf / libdevice log2, log10, tanh, cbrt, atan, asin, acos, sin, "
             "cos, tan, erf on fp64 (inline, no libm)")


@triton.jit
def f64_kernel(x_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1.0)
    if OP == "tl.log2":
        y = tl.log2(x)
    elif OP == "log2":
        y = libdevice.log2(x)
    elif OP == "log10":
        y = libdevice.log10(x)
    elif OP == "tanh":
        y = libdevice.tanh(x)
    elif OP == "atan":
        y = libdevice.atan(x)
    elif OP == "asin":
        y = libdevice.asin(x)
    elif OP == "acos":
        y = libdevice.acos(x)
    elif OP == "tl.sin":
        y = tl.sin(x)
    elif OP == "tl.cos":
        y = tl.cos(x)
    elif OP == "sin":
        y = libdevice.sin(x)
    elif OP == "cos":
        y = libdevice.cos(x)
    elif OP == "tan":
        y = libdevice.tan(x)
    elif OP == "tl.erf":
        y = tl.math.erf(x)
    elif OP == "erf":
        y = libdevice.erf(x)
    else:
        y = libdevice.cbrt(x)
    tl.store(out_ptr + offs, y, mask=m)


REFS = {"tl.log2": np.log2, "log2": np.log2, "log10": np.log10, "tanh": np.tanh, "cbrt": np.cbrt,
        "atan": np.arctan, "asin": np.arcsin, "acos": np.arccos, "tl.sin": np.sin, "tl.cos": np.cos,
        "sin": np.sin, "cos": np.cos, "tan": np.tan, "tl.erf": np.vectorize(math.erf), "erf": np.vectorize(math.erf)}
# The most ulp measured over these inputs (x86-64, IREE 3.13).
MAX_ULP = {"tl.log2": 1, "log2": 1, "log10": 1, "tanh": 3, "cbrt": 3, "atan": 1, "asin": 2, "acos": 2,
           "tl.sin": 1, "tl.cos": 1, "sin": 1, "cos": 1, "tan": 1, "tl.erf": 1, "erf": 1}
TRIG = ("tl.sin", "tl.cos", "sin", "cos", "tan")


def _near_multiples_of_pi_over_2() -> np.ndarray:
    """The doubles nearest k pi/2 for k of every size up to 2^1020 (|x mod pi/2| down to about
    2^-60 of x), and the double whose reduction cancels most (about 2^-61)."""
    mpmath.mp.prec = 2400
    rng = np.random.default_rng(1)
    xs = [6381956970095103 * 2.0 ** 797]
    for e in range(1, 1020, 9):
        k = int(rng.integers(1, 2 ** min(e, 62))) << max(0, e - 62)
        xs.append(float(mpmath.mpf(k) * mpmath.pi / 2))
    x = np.array([v for v in xs if np.isfinite(v)])
    return np.concatenate([x, -x])


def _reference(op: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        ref = REFS[op](x)
    if op in TRIG:
        # numpy's own sin / cos / tan are off by up to 14 ulp where the reduction cancels most:
        # those arguments are compared with mpmath.
        hard = _near_multiples_of_pi_over_2()
        at = np.isin(x, hard)
        mpmath.mp.prec = 2400
        f = getattr(mpmath, op.removeprefix("tl."))
        ref[at] = [float(f(mpmath.mpf(float(v)))) for v in x[at]]
    if op == "log10":
        # numpy's log10 is not correctly rounded, and how far off it is depends on the CPU (on
        # an AMD EPYC up to 1.5 ulp of the exact value, 2 ulp from ours): the correctly rounded
        # value instead.
        mpmath.mp.prec = 120
        at = np.isfinite(x) & (x > 0)
        ref[at] = [float(mpmath.log10(mpmath.mpf(float(v)))) for v in x[at]]
    return ref


def _inputs(op: str) -> np.ndarray:
    rng = np.random.default_rng(0)
    x = np.concatenate([
        np.exp(rng.uniform(-744, 709, 6000)),          # subnormals to near the largest double
        rng.uniform(0.5, 2.0, 3000), 1 + rng.uniform(-1e-8, 1e-8, 500),
        2.0 ** np.arange(-1074, 1024), 10.0 ** np.arange(-300, 301),
        [0.0, np.inf, np.nan, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1 + 2 ** -52, 1 - 2 ** -53]])
    if op in ("asin", "acos"):
        x = np.concatenate([x[x <= 1], -x[x <= 1], rng.uniform(-1, 1, 6000), 1 - rng.uniform(0, 1e-6, 500),
                            -1 + rng.uniform(0, 1e-6, 500), [1.0, -1.0, 1.5, -1.5, np.inf, np.nan]])
    elif op in ("tl.erf", "erf"):
        x = np.concatenate([x, -x, rng.uniform(-7, 7, 4000), rng.uniform(0.8, 1.3, 1000),
                            [0.84375, 1.25, 1 / 0.35, 6.0, 2.0 ** -28]])
    elif op in ("tanh", "cbrt", "atan"):
        x = np.concatenate([x, -x, rng.uniform(-25, 25, 3000), rng.uniform(-1e-4, 1e-4, 1000)])
    elif op in TRIG:
        x = np.concatenate([x, -x, rng.uniform(-25, 25, 3000), np.arange(-200, 200) * (np.pi / 4),
                            rng.uniform(-2.0 ** 20, 2.0 ** 20, 1000), _near_multiples_of_pi_over_2()])
    else:
        x = np.concatenate([x, [-0.0, -1.0, -np.inf, -5e-324]])
    return x


def _ulps(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    same = (got == ref) | (np.isnan(got) & np.isnan(ref))
    with np.errstate(invalid="ignore"):
        return np.where(same, 0.0, np.abs(got - ref) / np.spacing(np.abs(ref)))


@pytest.mark.construct(CONSTRUCT)
@pytest.mark.parametrize("op", list(REFS))
def test_f64_function_within_a_few_ulp(op):
    x = _inputs(op)
    out = torch.full((len(x),), 7.0, dtype=torch.float64)
    f64_kernel[(triton.cdiv(len(x), BLOCK),)](torch.from_numpy(x), out, len(x), OP=op, BLOCK=BLOCK)
    ref = _reference(op, x)
    got = out.numpy()
    ulps = _ulps(got, ref)
    worst = int(np.argmax(ulps))
    assert ulps.max() <= MAX_ULP[op], (x[worst], got[worst], ref[worst], ulps.max())
    # Signs of zeros and C's special values exactly.
    special = ~np.isfinite(ref) | (ref == 0)
    assert np.array_equal(got[special].view(np.int64) >> 63, ref[special].view(np.int64) >> 63) or \
        np.isnan(ref[special]).any()
    assert np.array_equal(np.isnan(got), np.isnan(ref)) and np.array_equal(got[np.isinf(ref)], ref[np.isinf(ref)])
    assert np.array_equal(np.signbit(got[ref == 0]), np.signbit(ref[ref == 0]))


@pytest.mark.construct(CONSTRUCT)
def test_f64_log2_is_exact_at_powers_of_two():
    x = 2.0 ** np.arange(-1074, 1024)
    out = torch.zeros(len(x), dtype=torch.float64)
    f64_kernel[(triton.cdiv(len(x), BLOCK),)](torch.from_numpy(x), out, len(x), OP="tl.log2", BLOCK=BLOCK)
    assert np.array_equal(out.numpy(), np.arange(-1074, 1024, dtype=np.float64))


@triton.jit
def f64_kernel2(x_ptr, y_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1.0)
    y = tl.load(y_ptr + offs, mask=m, other=1.0)
    if OP == "%":
        r = x % y
    elif OP == "fmod":
        r = libdevice.fmod(x, y)
    else:
        r = libdevice.atan2(x, y)
    tl.store(out_ptr + offs, r, mask=m)


def _pairs() -> tuple[np.ndarray, np.ndarray]:
    """Random magnitudes and signs over the whole range (exponent differences up to 2097), large
    over subnormal, near multiples, and every pair of C's special values."""
    rng = np.random.default_rng(0)

    def mags(n):
        return np.exp(rng.uniform(-744, 709, n)) * rng.choice([-1.0, 1.0], n)
    mult = rng.uniform(1, 2, 1000) * 2.0 ** -500
    x = [mags(6000), rng.uniform(-10, 10, 1000), 1.7976931348623157e308 * rng.uniform(0.5, 1, 1000),
         mult * rng.integers(1, 2 ** 40, 1000), np.nextafter(mult * 7, 0), np.nextafter(mult * 7, 1)]
    y = [mags(6000), rng.uniform(-10, 10, 1000), rng.integers(1, 2 ** 52, 1000) * 5e-324, mult, mult, mult]
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 5e-324, -5e-324, 1e-310, 2.5, -2.5,
                        1.7976931348623157e308, -2.0 ** 1000])
    sx, sy = np.meshgrid(special, special)
    return np.concatenate(x + [sx.ravel()]), np.concatenate(y + [sy.ravel()])


@pytest.mark.construct("% / libdevice fmod on fp64 (exact, inline, no libm)")
@pytest.mark.parametrize("op", ["%", "fmod"])
def test_f64_fmod_is_exact(op):
    x, y = _pairs()
    out = torch.full((len(x),), 7.0, dtype=torch.float64)
    f64_kernel2[(triton.cdiv(len(x), BLOCK),)](torch.from_numpy(x), torch.from_numpy(y), out, len(x), OP=op,
                                               BLOCK=BLOCK)
    with np.errstate(all="ignore"):
        ref = np.fmod(x, y)
    got = out.numpy()
    # Bit for bit (signs of zeros included), NaN where C gives NaN.
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(got), nan)
    bad = np.flatnonzero(got[~nan].view(np.int64) != ref[~nan].view(np.int64))
    assert not len(bad), [(x[~nan][i], y[~nan][i], got[~nan][i], ref[~nan][i]) for i in bad[:5]]


@pytest.mark.construct("libdevice atan2 on fp64 (inline, no libm)")
def test_f64_atan2_within_1_ulp():
    y, x = _pairs()
    out = torch.full((len(x),), 7.0, dtype=torch.float64)
    f64_kernel2[(triton.cdiv(len(x), BLOCK),)](torch.from_numpy(y), torch.from_numpy(x), out, len(x), OP="atan2",
                                               BLOCK=BLOCK)
    ref = np.arctan2(y, x)
    got = out.numpy()
    ulps = _ulps(got, ref)    # subnormal results (|y / x| below 2^-1022, x > 0) included
    worst = int(np.argmax(ulps))
    assert ulps.max() <= 1, (y[worst], x[worst], got[worst], ref[worst], ulps.max())
    # C's special cases exactly: signed zeros, +-pi, +-pi/2, +-pi/4, +-3pi/4 and NaN.
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    special = (~np.isfinite(x) | ~np.isfinite(y) | (x == 0) | (y == 0)) & ~np.isnan(ref)
    assert np.array_equal(got[special].view(np.int64), ref[special].view(np.int64))
