"""Math on fp16 and fp64 that IREE's CPU code would compute with the C math library: fp16
tl.maximum / tl.minimum / tl.clamp, fp64 tl.exp / tl.log / ..., and fp64 tl.sin / tl.cos / tl.erf,
which triton-iree writes inline."""
import pytest
import torch
import triton
import triton.language as tl

from oracle import interpret

BLOCK = 64
SIZES = [BLOCK - 1, BLOCK + 1, 3 * BLOCK - 1]


@triton.jit
def min_max_kernel(x_ptr, y_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    if OP == "maximum":
        r = tl.maximum(x, y)
    elif OP == "minimum":
        r = tl.minimum(x, y)
    elif OP == "clamp":
        r = tl.clamp(x, -0.5, 0.75)
    else:   # a reduction whose combiner is maxnum
        r = tl.zeros_like(x) + tl.max(tl.where(m, x, -float("inf")), axis=0)
    tl.store(out_ptr + offs, r, mask=m)


@pytest.mark.construct("tl.maximum / tl.minimum / tl.clamp on fp16")
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op", ["maximum", "minimum", "clamp", "max"])
def test_fp16_min_max(op, n):
    g = torch.Generator().manual_seed(n)
    x, y = torch.randn(n, generator=g).half(), torch.randn(n, generator=g).half()
    out = torch.zeros(n, dtype=torch.float16)
    grid = (triton.cdiv(n, BLOCK),)
    min_max_kernel[grid](x, y, out, n, OP=op, BLOCK=BLOCK)
    ref = interpret(min_max_kernel, grid, [x, y, torch.zeros_like(out), n], OP=op, BLOCK=BLOCK)[2]
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


@pytest.mark.construct("tl.maximum / tl.minimum / tl.clamp on fp16")
def test_fp16_maximum_of_nan_is_the_number():
    x = torch.tensor([float("nan"), 1.0, float("nan"), -2.0] * 16, dtype=torch.float16)
    y = torch.tensor([3.0, float("nan"), float("nan"), -1.0] * 16, dtype=torch.float16)
    out = torch.zeros(64, dtype=torch.float16)
    min_max_kernel[(1,)](x, y, out, 64, OP="maximum", BLOCK=BLOCK)
    torch.testing.assert_close(out[:4], torch.tensor([3.0, 1.0, float("nan"), -1.0], dtype=torch.float16),
                               equal_nan=True, rtol=0, atol=0)


@triton.jit
def f64_math_kernel(x_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1.0)
    if OP == "exp":
        r = tl.exp(x)
    elif OP == "exp2":
        r = tl.exp2(x)
    elif OP == "log":
        r = tl.log(x)
    elif OP == "sqrt":
        r = tl.sqrt(x)
    elif OP == "rsqrt":
        r = tl.rsqrt(x)
    elif OP == "floor":
        r = tl.floor(x)
    elif OP == "sin":
        r = tl.sin(x)
    elif OP == "cos":
        r = tl.cos(x)
    elif OP == "log2":
        r = tl.log2(x)
    else:
        r = tl.math.erf(x)
    tl.store(out_ptr + offs, r, mask=m)


F64_REFS = {"exp": torch.exp, "exp2": torch.exp2, "log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
            "floor": torch.floor}


@pytest.mark.construct("tl.exp / tl.log / tl.sqrt ... on fp64")
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op", list(F64_REFS))
def test_f64_math(op, n):
    g = torch.Generator().manual_seed(n)
    x = torch.rand(n, generator=g, dtype=torch.float64) * 20 + 1e-3
    out = torch.zeros(n, dtype=torch.float64)
    f64_math_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, OP=op, BLOCK=BLOCK)
    # IREE computes these inline; its exp2 was measured within 5 ulp of fp64, the others within 1.
    torch.testing.assert_close(out, F64_REFS[op](x), rtol=2e-15, atol=0)


@pytest.mark.construct("tl.sin / tl.cos / tl.erf on fp64")
@pytest.mark.parametrize("op", ["sin", "cos", "erf"])
def test_f64_math_without_libm(op):
    # IREE's CPU code would call the C math library for these, which its executables cannot link;
    # triton-iree writes them inline (f64_math.py, f64_trig.py; measured within 1 ulp, see
    # test_f64_math.py).
    x = torch.rand(BLOCK, dtype=torch.float64) * 8 - 4
    out = torch.full((BLOCK,), 7.0, dtype=torch.float64)
    f64_math_kernel[(1,)](x, out, BLOCK, OP=op, BLOCK=BLOCK)
    torch.testing.assert_close(out, getattr(torch, op)(x), rtol=1e-15, atol=1e-16)
