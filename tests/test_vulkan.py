"""Vulkan: IREE's vulkan-spirv target and vulkan driver, on CPU tensors imported in place.

These tests run on any Vulkan device IREE's vulkan driver finds; on a machine without a GPU, on
Mesa's software driver lavapipe (`apt-get install mesa-vulkan-drivers libvulkan1`), which .ci/run
installs. Without a Vulkan device they are skipped, except in CI (CI=true), where they fail.
The SPIR-V is built for TRITON_IREE_TEST_VULKAN_ARCH (default `llvmpipe`, IREE's name for
lavapipe's features: subgroups of 8, 32 KiB of workgroup memory).

What they establish, with TRITON_IREE_UNVALIDATED_TARGETS=1 (vulkan stays behind that gate):

- For vulkan the GPU lowering gives each dispatch's root op a SPIR-V configuration (workgroup
  tile sizes 0: one Triton program is one workgroup; IREE's `BaseDistribute` pipeline spreads
  each op over the workgroup's threads, with a workgroup barrier before every op that reads
  tiles). The kernels below are compared with torch on sizes that are not block multiples,
  with the memory around every output checked untouched, both compiled ahead of time and
  through `kernel[grid]`.
- The runtime passes tensors as copies and writes back only their own storage, leaves tensors
  unchanged when a launch fails, and refuses non-CPU tensors and arguments that share memory.
"""
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from triton_iree import abi, aot, copies, kernels as K, runtime, targets
from triton_iree.errors import LaunchError
from triton_iree.targets.spirv import VECTOR_MATMUL_ARCHES

from helpers import program_versions

ARCH = os.environ.get("TRITON_IREE_TEST_VULKAN_ARCH", "llvmpipe")

@pytest.fixture(scope="module", autouse=True)
def vulkan():
    """The vulkan device, with GPU targets allowed; skips without one, fails in CI."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(targets.UNVALIDATED_TARGETS_VAR, "1")
        try:
            dev = runtime.get_device("vulkan")
        except LaunchError as e:
            why = (f"no usable Vulkan device ({e.message}); install a Vulkan driver, e.g. Mesa's lavapipe: "
                   f"apt-get install mesa-vulkan-drivers libvulkan1")
            if os.environ.get("CI") == "true":
                pytest.fail(f"CI=true: {why}", pytrace=False)
            pytest.skip(why)
        yield dev


# --- modules ------------------------------------------------------------------------------------

_modules: dict = {}


def vulkan_module(fn, signature: str, constexprs: dict) -> bytes:
    """`fn` compiled for vulkan (a .vmfb): the GPU lowering's SPIR-V configuration."""
    key = (fn.__name__, signature, tuple(sorted(constexprs.items())))
    if key not in _modules:
        _modules[key] = aot.compile_kernel(fn, signature, constexprs, target="vulkan", arch=ARCH).vmfb
    return _modules[key]


def launcher(fn, signature: str, constexprs: dict) -> aot.Launcher:
    """`fn` compiled for vulkan, loaded on the vulkan driver."""
    return aot.Launcher(vulkan_module(fn, signature, constexprs), fn.__name__, signature, target="vulkan")


def padded(shape, fill=-7.0, pad=37, dtype=torch.float32):
    """A tensor of `shape` inside a larger one filled with `fill`: (the view, the whole)."""
    whole = torch.full((pad + int(np.prod(shape)) + pad,), fill, dtype=dtype)
    return whole[pad:pad + int(np.prod(shape))].view(shape), whole


def untouched(whole, view, fill=-7.0):
    """Every element of `whole` outside `view` still holds `fill`."""
    mask = torch.ones(whole.numel(), dtype=torch.bool)
    start = view.storage_offset() - whole.storage_offset()
    mask[start:start + view.numel()] = False
    return bool((whole[mask] == fill).all())


ADD_SIG = "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n_elements=i32"


@pytest.mark.parametrize("n", [1, 1023, 1024, 1025, 5000])
def test_add(n):
    run = launcher(K.add_kernel, ADD_SIG, {"BLOCK_SIZE": 1024})
    x, y = torch.rand(n), torch.rand(n)
    out, whole = padded((n,))
    run(x, y, out, n, grid=(triton.cdiv(n, 1024),))
    assert torch.equal(out, x + y)
    assert untouched(whole, out)


@pytest.mark.parametrize("rows,cols", [(1, 1), (3, 1000), (17, 781), (9, 256), (2, 1024)])   # the last two: whole rows
def test_softmax(rows, cols):
    run = launcher(K.softmax_kernel, "out_ptr=*fp32,in_ptr=*fp32,in_row_stride=i32,out_row_stride=i32,"
                   "n_rows=i32,n_cols=i32", {"BLOCK_SIZE": triton.next_power_of_2(cols)})
    x = torch.randn(rows, cols)
    out, whole = padded((rows, cols + 5))
    run(out, x, x.stride(0), out.stride(0), rows, cols, grid=(rows,))
    torch.testing.assert_close(out[:, :cols], torch.softmax(x, -1), atol=1e-6, rtol=1e-5)
    assert untouched(whole, out) and bool((out[:, cols:] == -7).all())


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (33, 47, 70), (100, 65, 31)])
def test_matmul(m, n, k):
    run = launcher(K.matmul_kernel, K.matmul_signature(), {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32})
    a, b = torch.randn(m, k), torch.randn(k, n)
    c, whole = padded((m, n + 3))
    run(a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        grid=(triton.cdiv(m, 32), triton.cdiv(n, 32)))
    torch.testing.assert_close(c[:, :n], a @ b, atol=1e-4, rtol=1e-4)
    assert untouched(whole, c) and bool((c[:, n:] == -7).all())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_a_matmul_on_irees_spirv_matmul_pipeline(dtype):
    """A plain matmul's dot runs on IREE's SPIR-V MatmulPromoteVectorize pipeline
    (`SpirvTiling.vector_matmul`) on the arches it has run right on (VECTOR_MATMUL_ARCHES), with
    masked edges in M, N and K and the output's rows padded."""
    ty = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}[dtype]
    sig = K.matmul_signature(ty)
    consts = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}
    module = aot.compile_kernel(K.matmul_kernel, sig, consts, target="vulkan", arch=ARCH, vmfb=False).module
    assert ("MatmulPromoteVectorize" in module) == (ARCH in VECTOR_MATMUL_ARCHES)
    run = launcher(K.matmul_kernel, sig, consts)
    m, n, k = 70, 45, 77
    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    c, whole = padded((m, n + 3), dtype=dtype)
    run(a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        grid=(triton.cdiv(m, 32), triton.cdiv(n, 32)))
    want = (a.double() @ b.double()).to(dtype)
    torch.testing.assert_close(c[:, :n], want, atol=1e-4 if dtype == torch.float32 else 0.05, rtol=1e-2)
    assert untouched(whole, c) and bool((c[:, n:] == -7).all())


@pytest.mark.parametrize("n", [1, 127, 1000])
def test_gather(n):
    gather = launcher(K.gather_kernel, "x_ptr=*fp32,idx_ptr=*i32,out_ptr=*fp32,n=i32", {"BLOCK": 128})
    x, idx = torch.randn(n + 300), torch.randperm(n + 300)[:n].to(torch.int32)
    out, whole = padded((n,))
    gather(x, idx, out, n, grid=(triton.cdiv(n, 128),))
    assert torch.equal(out, x[idx.long()]) and untouched(whole, out)


@pytest.mark.parametrize("form", [0, 1, 2, 3])
def test_masks_in_every_comparison_form(form):
    run = launcher(K.mask_forms_kernel, "x_ptr=*fp32,out_ptr=*fp32,lo=i32,hi=i32", {"BLOCK": 128, "FORM": form})
    x = torch.randn(1000)
    out = torch.full((1000,), -7.0)
    run(x, out, 13, 901, grid=(triton.cdiv(1000, 128),))
    want = torch.full((1000,), -7.0)
    want[13:901] = x[13:901] + 1
    assert torch.equal(out, want)


def test_special_values():
    run = launcher(K.special_values_kernel, "x_ptr=*fp32,out_ptr=*fp32,k=i32,n=i32", {"BLOCK": 128})
    x = torch.tensor([1.0, -2.0, 0.0, 3.0] * 100)
    out, whole = padded((450,))
    run(x, out, 400, 450, grid=(triton.cdiv(450, 128),))
    want = torch.where(x > 0, float("inf"), torch.where(x < 0, float("-inf"), float("nan")))
    want = torch.cat([want, torch.full((50,), float("nan"))])
    assert torch.equal(out.isnan(), want.isnan()) and torch.equal(out[~want.isnan()], want[~want.isnan()])
    assert untouched(whole, out)


# Stores through arbitrary offsets (scatter_kernel: out[idx[i]] = 2 * x[i]; even_mask_kernel's
# mask that is not a bounds check) loop over the tile's elements in every invocation, after the
# invocations computed the values, offsets and mask together in workgroup memory. Without a
# barrier in between (the GPU lowering puts one there), they read values of an earlier launch
# and stored them at indices of an earlier launch, which could corrupt the process's heap:
# so in a process of its own.
SCATTER_SIG = "x_ptr=*fp32,idx_ptr=*i32,out_ptr=*fp32,n=i32"


def test_scatter(tmp_path):
    # Each launch prints whether it was correct, so a crash after a wrong result still counts as one.
    vmfb = tmp_path / "scatter.vmfb"
    vmfb.write_bytes(vulkan_module(K.scatter_kernel, SCATTER_SIG, {"BLOCK": 128}))
    code = textwrap.dedent(f"""
        import torch
        from triton_iree.aot import Launcher
        run = Launcher({str(vmfb)!r}, "scatter_kernel", {SCATTER_SIG!r}, target="vulkan")
        for n in [1, 127, 1024] + [1000] * 8:
            x, idx = torch.randn(n), torch.randperm(n + 300)[:n].to(torch.int32)
            out = torch.full((n + 300,), -7.0)
            run(x, idx, out, n, grid=((n + 127) // 128,))
            want = torch.full((n + 300,), -7.0)
            want[idx.long()] = x * 2
            print("correct" if torch.equal(out, want) else "wrong", flush=True)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    results = r.stdout.split()
    if not results or set(results) - {"correct", "wrong"}:
        raise RuntimeError(f"the scatter process ended before a result ({r.returncode}): {r.stderr[-3000:]}")
    assert "wrong" not in results, f"{results.count('wrong')} of {len(results)} launches wrong"


# Atomics and histograms read, combine and write memory element after element; on Vulkan on
# the workgroup's first thread only. Run on every thread (IREE's BaseDistribute leaves such a
# loop on each), every tl.atomic_add added its value once per thread, and the threads' increments
# of a histogram's bins raced.
@triton.jit
def atomic_add_kernel(target_ptr, val_ptr, old_ptr, count_ptr, n, m, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    old = tl.atomic_add(target_ptr + i % m, tl.load(val_ptr + i, mask=mask), mask=mask)
    tl.store(old_ptr + i, old, mask=mask)
    prev = tl.atomic_add(count_ptr, tl.program_id(0) + 1)   # the scalar form
    tl.store(old_ptr + n + tl.program_id(0), prev)


@pytest.mark.parametrize("dtype", [torch.int32, torch.float32])
def test_atomic_add_across_programs(dtype):
    ty = {torch.int32: "i32", torch.float32: "fp32"}[dtype]
    run = launcher(atomic_add_kernel, f"target_ptr=*{ty},val_ptr=*{ty},old_ptr=*{ty},count_ptr=*{ty},n=i32,m=i32",
                   {"BLOCK": 32})
    n, m, programs = 157, 39, 5          # programs hit the same targets; the last one partly masked
    target = torch.randint(-50, 50, (m,)).to(dtype)
    val = torch.randint(-50, 50, (n,)).to(dtype)
    old, count = torch.zeros(n + programs, dtype=dtype), torch.zeros(1, dtype=dtype)
    # The programs run one after another, each element in order: the old values are determined.
    want_target, want_old, want_count = target.clone(), torch.zeros(n + programs, dtype=dtype), torch.zeros(1, dtype=dtype)
    for p in range(programs):
        for i in range(p * 32, min(n, p * 32 + 32)):
            want_old[i] = want_target[i % m]
            want_target[i % m] += val[i]
        want_old[n + p] = want_count[0]
        want_count += p + 1
    run(target, val, old, count, n, m, grid=(programs,))
    assert torch.equal(target, want_target)
    assert torch.equal(count, want_count)
    assert torch.equal(old, want_old)


@triton.jit
def atomic_add_2d_kernel(target_ptr, val_ptr, old_ptr, m, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    i = tl.program_id(0) * R * C + r * C + c
    old = tl.atomic_add(target_ptr + i % m, tl.load(val_ptr + i))
    tl.store(old_ptr + i, old)


def test_a_2d_atomic_add_runs_once_in_a_workgroup_with_rows_of_threads():
    """A program whose ops are all 2-D and elementwise gets rows of threads
    (`SpirvTiling.thread_rows`: 16 x 8 for a 16-column tile of 4 warps); its atomics still run
    on the workgroup's one first thread, the first along every dimension, and add each value once."""
    sig = "target_ptr=*i32,val_ptr=*i32,old_ptr=*i32,m=i32"
    text = aot.compile_kernel(atomic_add_2d_kernel, sig, {"R": 8, "C": 16}, target="vulkan", arch=ARCH,
                              vmfb=False).module
    assert "workgroup_size = [16, 8, 1]" in text
    run = launcher(atomic_add_2d_kernel, sig, {"R": 8, "C": 16})
    m, programs = 77, 3
    target, val = torch.randint(-50, 50, (m,), dtype=torch.int32), torch.randint(-50, 50, (programs * 128,), dtype=torch.int32)
    old = torch.zeros(programs * 128, dtype=torch.int32)
    want_target, want_old = target.clone(), torch.zeros_like(old)
    for i in range(programs * 128):   # programs one after another, each tile's elements in order
        want_old[i] = want_target[i % m]
        want_target[i % m] += val[i]
    run(target, val, old, m, grid=(programs,))
    assert torch.equal(target, want_target)
    assert torch.equal(old, want_old)


@triton.jit
def histogram_kernel(x_ptr, out_ptr, BINS: tl.constexpr, BLOCK: tl.constexpr):
    h = tl.histogram(tl.load(x_ptr + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)), BINS)
    tl.store(out_ptr + tl.program_id(0) * BINS + tl.arange(0, BINS), h)


def test_histogram():
    run = launcher(histogram_kernel, "x_ptr=*i32,out_ptr=*i32", {"BINS": 16, "BLOCK": 256})
    x = torch.randint(0, 16, (3, 256), dtype=torch.int32)
    out = torch.zeros(3, 16, dtype=torch.int32)
    run(x, out, grid=(3,))
    want = torch.stack([torch.bincount(r.long(), minlength=16) for r in x]).to(torch.int32)
    assert torch.equal(out, want)


# tl.sort is a bitonic network: each stage gathers its partners from the tile the stage before
# computed (a tensor.extract inside a linalg.generic, which reads no tile as an input). Without a
# barrier before each gather, threads read partners other threads had not written yet.
@triton.jit
def sort_kernel(x_ptr, out_ptr, N: tl.constexpr, DESC: tl.constexpr):
    offs = tl.program_id(0) * N + tl.arange(0, N)
    tl.store(out_ptr + offs, tl.sort(tl.load(x_ptr + offs), descending=DESC))


@pytest.mark.parametrize("n", [16, 128])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("desc", [False, True])
def test_sort(n, dtype, desc):
    ty = {torch.float32: "fp32", torch.float16: "fp16"}[dtype]
    run = launcher(sort_kernel, f"x_ptr=*{ty},out_ptr=*{ty}", {"N": n, "DESC": desc})
    x = torch.randn(3, n).to(dtype)
    out = torch.zeros(3, n, dtype=dtype)
    run(x, out, grid=(3,))
    assert torch.equal(out, torch.sort(x, dim=1, descending=desc).values)


# f64 exp and log: SPIR-V has them for 16- and 32-bit floats only; the target writes them, and
# the functions built on them, as inline f64 arithmetic (f64_exp_log; test_f64_exp_log.py
# measures it op by op). Here on the device, against mpmath, with C's special values.
@triton.jit
def f64_function_kernel(x_ptr, y_ptr, out_ptr, n, FN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    if FN == "pow":
        r = libdevice.pow(x, tl.load(y_ptr + offs, mask=m))
    elif FN == "tl.exp":
        r = tl.exp(x)
    elif FN == "tl.log":
        r = tl.log(x)
    else:
        r = getattr(libdevice, FN)(x)   # noqa: B009 (FN is a constexpr)
    tl.store(out_ptr + offs, r, mask=m)


F64_FUNCTIONS = {   # fn -> (numpy reference at the special values, finite inputs, the most ulp)
    "tl.exp": (np.exp, (-745, 709.7), 1), "exp2": (np.exp2, (-1075, 1023), 1), "expm1": (np.expm1, (-5, 5), 2),
    "tl.log": (np.log, (1e-300, 1e300), 1), "log1p": (np.log1p, (-0.9, 5), 2), "sinh": (np.sinh, (-20, 20), 2),
    "cosh": (np.cosh, (-20, 20), 1), "asinh": (np.arcsinh, (-1e3, 1e3), 2), "acosh": (np.arccosh, (1, 1e3), 2),
    "atanh": (np.arctanh, (-1, 1), 2), "tanh": (np.tanh, (-5, 5), 3), "log2": (np.log2, (1e-300, 1e300), 1),
}


def _c_pow(x: float, y: float) -> float:
    """C's pow (numpy's power differs at 1 ** -inf)."""
    try:
        return math.pow(x, y)
    except ValueError:
        return math.nan
    except OverflowError:
        return math.copysign(math.inf, x) if y % 2 == 1 else math.inf


@pytest.mark.parametrize("fn", sorted(F64_FUNCTIONS) + ["pow"])
def test_f64_exp_log_and_the_functions_built_on_them(fn):
    import mpmath
    if fn == "pow":
        ref_fn, lo_hi, most = np.vectorize(_c_pow), None, 14
    else:
        ref_fn, lo_hi, most = F64_FUNCTIONS[fn]
    mpmath.mp.prec = 200
    rng = np.random.default_rng(0)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 5e-324])
    if fn == "pow":
        x = np.concatenate([np.exp(rng.uniform(-700, 700, 300)), rng.uniform(0.01, 4, 200), special])
        y = np.concatenate([rng.uniform(-709, 709, 300) / np.log(x[:300]), rng.uniform(-3, 3, 200), special[::-1]])
    else:
        lo, hi = lo_hi
        spread = np.exp(rng.uniform(np.log(lo), np.log(hi), 300)) if lo > 0 else rng.uniform(lo, hi, 300)
        x, y = np.concatenate([spread, rng.uniform(lo, hi, 200) * 1e-6, special]), None
    with np.errstate(all="ignore"):
        ref = ref_fn(x, y) if fn == "pow" else ref_fn(x)
    mp = {"tl.exp": mpmath.exp, "exp2": lambda v: mpmath.power(2, v), "expm1": mpmath.expm1, "tl.log": mpmath.log,
          "log1p": mpmath.log1p, "sinh": mpmath.sinh, "cosh": mpmath.cosh, "asinh": mpmath.asinh,
          "acosh": mpmath.acosh, "atanh": mpmath.atanh, "tanh": mpmath.tanh, "log2": lambda v: mpmath.log(v, 2),
          "pow": mpmath.power}[fn]
    args = (x, y) if fn == "pow" else (x,)
    finite = np.isfinite(ref) & np.logical_and.reduce([np.isfinite(a) for a in args]) & ((x > 0) | (fn != "pow"))
    ref[finite] = [float(mp(*map(mpmath.mpf, v))) for v in zip(*(a[finite] for a in args))]
    run = launcher(f64_function_kernel, "x_ptr=*fp64,y_ptr=*fp64,out_ptr=*fp64,n=i32", {"FN": fn, "BLOCK": 128})
    out = torch.zeros(len(x), dtype=torch.float64)
    yt = torch.from_numpy(y if y is not None else x)
    run(torch.from_numpy(x), yt, out, len(x), grid=(triton.cdiv(len(x), 128),))
    got = out.numpy()
    assert np.array_equal(np.isnan(got), np.isnan(ref)), x[np.isnan(got) != np.isnan(ref)]
    assert np.array_equal(got[~finite & ~np.isnan(ref)], ref[~finite & ~np.isnan(ref)])
    ulps = np.abs(got[finite] - ref[finite]) / np.spacing(np.abs(ref[finite]))
    assert ulps.max() <= most, (x[finite][np.argmax(ulps)], ulps.max())


def test_row_sum_and_argmax():
    row_sum = launcher(K.row_sum_kernel, "x_ptr=*fp32,out_ptr=*fp32,M=i32,N=i32,stride_m=i32",
                       {"BLOCK_M": 8, "BLOCK_N": 64})
    argmax = launcher(K.argmax_kernel, "x_ptr=*fp32,out_idx_ptr=*i32,out_val_ptr=*fp32,N=i32,stride=i32",
                      {"BLOCK": 128})
    x = torch.randn(37, 50)
    out, whole = padded((37,))
    row_sum(x, out, 37, 50, x.stride(0), grid=(triton.cdiv(37, 8),))
    torch.testing.assert_close(out, x.sum(1))
    assert untouched(whole, out)
    idx, val = torch.zeros(37, dtype=torch.int32), torch.zeros(37)
    argmax(x, idx, val, 50, x.stride(0), grid=(37,))
    want_val, want_idx = x.max(1)
    assert torch.equal(val, want_val) and torch.equal(idx.long(), want_idx)


def test_integer_arithmetic_and_masks():
    where_int = launcher(K.where_int_kernel, "x_ptr=*i32,y_ptr=*i32,out_ptr=*i32,n=i32", {"BLOCK": 128})
    even_mask = launcher(K.even_mask_kernel, "x_ptr=*fp32,out_ptr=*fp32,n=i32", {"BLOCK": 128})
    n = 1001
    x, y = torch.randint(-50, 50, (n,), dtype=torch.int32), torch.randint(-5, 5, (n,), dtype=torch.int32)
    out = torch.zeros(n, dtype=torch.int32)
    where_int(x, y, out, n, grid=(triton.cdiv(n, 128),))
    r = torch.where(x > y, x - y, (x * 3) ^ y)
    want = torch.maximum(r, torch.tensor(-5, dtype=torch.int32)) + torch.div(x, torch.where(y == 0, 1, y),
                                                                           rounding_mode="trunc")
    assert torch.equal(out, want)
    xf, outf = torch.randn(n), torch.full((n,), -7.0)
    even_mask(xf, outf, n, grid=(triton.cdiv(n, 128),))
    want = torch.full((n,), -7.0)
    want[::2] = xf[::2]
    assert torch.equal(outf, want)


def test_loads_and_stores_of_one_buffer_keep_program_order():
    rmw = launcher(K.inplace_rmw_kernel, "x_ptr=*fp32,n=i32", {"BLOCK": 128})
    store_then_load = launcher(K.store_then_load_kernel, "x_ptr=*fp32,out_ptr=*fp32,n=i32", {"BLOCK": 128})
    n = 1000
    x, whole = padded((n,))
    x.copy_(torch.randn(n))
    want = x * 2 + 1
    rmw(x, n, grid=(triton.cdiv(n, 128),))
    assert torch.equal(x, want) and untouched(whole, x)
    x0 = torch.randn(n)
    x, out = x0.clone(), torch.zeros(n)
    store_then_load(x, out, n, grid=(triton.cdiv(n, 128),))
    assert torch.equal(out, x0 + 1)
    # Each program then writes its block of x reversed from what it stored to out (0 past n).
    i = torch.arange(n)
    rev = i // 128 * 128 + 127 - i % 128
    want = torch.where(rev < n, (x0 + 1)[rev.clamp(max=n - 1)], 0.0)
    assert torch.equal(x, want)


def test_matmul_stepped_and_transposed_pointers():
    stepped = launcher(K.matmul_stepped_kernel, K.matmul_signature(), {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32})
    trans = launcher(K.trans_pointer_kernel, "x_ptr=*fp32,out_ptr=*fp32,M=i32,N=i32,stride_x=i32",
                     {"BLOCK_M": 16, "BLOCK_N": 32})
    mod_div = launcher(K.mod_div_index_kernel, "x_ptr=*fp32,out_ptr=*fp32,xnumel=i32", {"COLS": 16, "XBLOCK": 128})
    a, b = torch.randn(45, 33), torch.randn(33, 70)
    c = torch.zeros(45, 70)
    stepped(a, b, c, 45, 70, 33, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            grid=(2, 3))
    torch.testing.assert_close(c, a @ b, atol=1e-4, rtol=1e-4)
    x = torch.randn(20, 40)
    out = torch.zeros(40, 20)
    trans(x, out, 20, 40, x.stride(0), grid=(2, 2))
    assert torch.equal(out, x.t() + 1)
    x = torch.randn(16, 50)
    out = torch.zeros(50, 16)
    mod_div(x, out, 50 * 16, grid=(triton.cdiv(50 * 16, 128),))
    assert torch.equal(out, x.t())


# Stores of a tile through slices (a row loop, a mask, a stride): the GPU lowering stores them
# from a linalg.copy, so that IREE keeps one program per workgroup (see `_gpu_store_copy`).

@pytest.mark.parametrize("m,n", [(1, 1), (20, 40), (37, 70)])
def test_scale_shift_2d(m, n):
    run = launcher(K.scale_shift_2d_kernel, "x_ptr=*fp32,out_ptr=*fp32,M=i32,N=i32,stride_xm=i32,stride_xn=i32,"
                   "stride_om=i32,stride_on=i32,scale=fp32,shift=fp32", {"BLOCK_M": 16, "BLOCK_N": 32})
    x = torch.randn(n, m).t()                    # column-major: the fast dim is rows
    out, whole = padded((m, n + 3))
    run(x, out, m, n, x.stride(0), x.stride(1), out.stride(0), out.stride(1), 2.5, -1.0,
        grid=(triton.cdiv(m, 16), triton.cdiv(n, 32)))
    assert torch.equal(out[:, :n], x * 2.5 - 1.0)
    assert untouched(whole, out) and bool((out[:, n:] == -7).all())


@pytest.mark.parametrize("n", [1, 127, 1000])
def test_reversed_strided_and_guarded_copies(n):
    reversed_copy = launcher(K.reversed_copy_kernel, "x_ptr=*fp32,out_ptr=*fp32,n=i32", {"BLOCK": 128})
    strided = launcher(K.strided_copy_kernel, "x_ptr=*fp32,out_ptr=*fp32,n=i32,stride=i32", {"BLOCK": 128})
    guarded = launcher(K.guarded_copy_kernel, "x_ptr=*fp32,out_ptr=*fp32,n=i32,limit=i32", {"BLOCK": 128})
    grid = (triton.cdiv(n, 128),)
    x = torch.randn(3 * n + 1)
    out, whole = padded((n,))
    reversed_copy(x[:n], out, n, grid=grid)
    assert torch.equal(out, x[:n].flip(0)) and untouched(whole, out)
    for stride in (0, 1, 3):
        out, whole = padded((n,))
        strided(x, out, n, stride, grid=grid)
        assert torch.equal(out, x[0].expand(n) if stride == 0 else x[::stride][:n]) and untouched(whole, out)
    out, whole = padded((n,))
    guarded(x[:n], out, n, 3, grid=(grid[0] + 4,))   # programs 0..2 only, and some past n
    want = torch.full((n,), -7.0)
    want[:3 * 128] = x[:min(n, 3 * 128)]
    assert torch.equal(out, want) and untouched(whole, out)


def test_masks_on_size_one_and_broadcast_dims():
    row_tile = launcher(K.row_tile_copy_kernel, "x_ptr=*fp32,out_ptr=*fp32,M=i32,N=i32,stride=i32", {"BLOCK_N": 64})
    bcast = launcher(K.broadcast_masked_kernel, "x_ptr=*fp32,out_ptr=*fp32,M=i32,N=i32", {"BLOCK_M": 8, "BLOCK_N": 32})
    M, N, stride = 5, 50, 64
    x = torch.randn(8, stride)
    out = torch.full((8, stride), -7.0)
    row_tile(x, out, M, N, stride, grid=(8,))        # rows 5..7 masked off
    want = torch.full((8, stride), -7.0)
    want[:M, :N] = x[:M, :N] + 1
    assert torch.equal(out, want)
    x = torch.randn(40)
    out, whole = padded((7 * 29,))
    bcast(x, out, 7, 29, grid=(1,))
    assert torch.equal(out, x[:29].repeat(7)) and untouched(whole, out)


@pytest.mark.parametrize("r,c,stride", [(40, 50, 7), (13, 33, 40), (8, 32, 32)])
def test_window_rows_overlapping(r, c, stride):
    run = launcher(K.window_kernel, "x_ptr=*fp32,out_ptr=*fp32,R=i32,C=i32,stride=i32", {"BLOCK_R": 8, "BLOCK_C": 32})
    x = torch.randn((r - 1) * stride + c)
    out, whole = padded((r, c))
    # One program more than needed along each axis: their tiles are wholly masked off.
    run(x, out, r, c, stride, grid=(triton.cdiv(r, 8) + 1, triton.cdiv(c, 32) + 1))
    assert torch.equal(out, x.as_strided((r, c), (stride, 1)) * 2) and untouched(whole, out)


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (33, 47, 70), (64, 32, 100)])
def test_int8_matmul(m, n, k):
    # Contiguous operands: on vulkan the GPU lowering loads 2-D tiles by rows, not as one slab.
    run = launcher(K.int8_matmul_kernel, "a_ptr=*i8,b_ptr=*i8,c_ptr=*i32,M=i32,N=i32,K=i32",
                   {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32})
    a = torch.randint(-128, 128, (m, k), dtype=torch.int8)
    b = torch.randint(-128, 128, (k, n), dtype=torch.int8)
    c, whole = padded((m, n), dtype=torch.int32)
    run(a, b, c, m, n, k, grid=(triton.cdiv(m, 32), triton.cdiv(n, 32)))
    assert torch.equal(c, a.int() @ b.int()) and untouched(whole, c)


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (33, 47, 70)])
def test_two_dots_and_a_row_sum(m, n, k):
    run = launcher(K.two_dots_rowsum_kernel, "a_ptr=*fp32,b_ptr=*fp32,d_ptr=*fp32,c_ptr=*fp32,e_ptr=*fp32,"
                   "s_ptr=*fp32,M=i32,N=i32,K=i32", {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32})
    a, b, d = torch.randn(m, k), torch.randn(k, n), torch.randn(k, n)
    c, c_whole = padded((m, n))
    e, e_whole = padded((m, n))
    grid = (triton.cdiv(m, 32), triton.cdiv(n, 32))
    s, s_whole = padded((grid[1], m))
    run(a, b, d, c, e, s, m, n, k, grid=grid)
    torch.testing.assert_close(c, a @ b, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(e, a @ d, atol=1e-4, rtol=1e-4)
    want = torch.stack([(a @ b)[:, j * 32:(j + 1) * 32].sum(1) for j in range(grid[1])])
    torch.testing.assert_close(s, want, atol=1e-4, rtol=1e-4)
    assert untouched(c_whole, c) and untouched(e_whole, e) and untouched(s_whole, s)


@pytest.mark.parametrize("mode", [1, 0])
def test_runtime_if(mode):
    # On vulkan, tiles cross scf.if and scf.for as tensors, not as vectors.
    run = launcher(K.runtime_if_kernel, "x_ptr=*fp32,out_ptr=*fp32,n=i32,mode=i32", {"BLOCK": 128})
    for n in (1, 127, 1000):
        x = torch.randn(n)
        out, whole = padded((n,))
        run(x, out, n, mode, grid=(triton.cdiv(n, 128),))
        sign = 1 - 2 * ((torch.arange(n) // 128) % 2)
        assert torch.equal(out, (x * 2 if mode > 0 else x - 1) * sign) and untouched(whole, out)


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (33, 47, 70)])
def test_decayed_dot(m, n, k):
    # The accumulator has another use than the dot: on vulkan it crosses the K loop as a tensor
    # the loop updates in place, not as a vector.
    run = launcher(K.decayed_dot_kernel, "a_ptr=*fp32,b_ptr=*fp32,c_ptr=*fp32,M=i32,N=i32,K=i32,decay=fp32",
                   {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32})
    a, b = torch.randn(m, k), torch.randn(k, n)
    c, whole = padded((m, n))
    run(a, b, c, m, n, k, 0.5, grid=(triton.cdiv(m, 32), triton.cdiv(n, 32)))
    want = torch.zeros(m, n)
    for k0 in range(0, k, 32):
        want = want * 0.5 + a[:, k0:k0 + 32] @ b[k0:k0 + 32]
    torch.testing.assert_close(c, want, atol=1e-4, rtol=1e-4)
    assert untouched(whole, c)


# Scalar loads and stores: the GPU lowering stores a scalar from a one-element linalg.fill.

def test_scalar_loads_and_stores():
    scalar_io = launcher(K.scalar_io_kernel, "x_ptr=*fp32,out_ptr=*fp32,scale=fp32,offset_i64=i64", {"FLAG": True})
    masked = launcher(K.masked_scalar_kernel, "x_ptr=*fp32,out_ptr=*fp32,loaded_ptr=*fp32,n=i32", {})
    x = torch.randn(24)
    out, whole = padded((24,))
    scalar_io(x, out, 1.5, 2 ** 40 + 3, grid=(2, 3, 4))
    assert torch.equal(out, x * 1.5 + float(2 ** 40 + 3)) and untouched(whole, out)
    for n in (1, 5, 16):
        x = torch.randn(n)
        out, loaded = torch.full((n + 4,), -7.0), torch.zeros(n + 4)
        masked(x, out, loaded, n, grid=(n + 4,))
        assert torch.equal(loaded, torch.cat([x, torch.full((4,), -1.0)]))
        assert torch.equal(out, torch.cat([x * 2, torch.full((4,), -7.0)]))


@pytest.mark.parametrize("n", [1, 127, 1000])
def test_fp16_arithmetic_and_a_sum_per_program(n):
    """fp16 loads under a mask, fp16 arithmetic, an f32 sum per program. (Its masked rows as
    slices failed in iree-compile: 'failed to legalize operation memref.subview'.)"""
    run = launcher(K.low_precision_kernel, "x_ptr=*fp16,y_ptr=*fp16,out_ptr=*fp16,sum_ptr=*fp32,n=i32",
                   {"BLOCK": 128})
    x, y = torch.randn(n).half(), torch.randn(n).half()
    out, whole = padded((n,), dtype=torch.float16)
    sums, swhole = padded((triton.cdiv(n, 128),))
    run(x, y, out, sums, n, grid=(triton.cdiv(n, 128),))
    z = x * 3 + y / 7 - x * y                       # each op rounded to fp16, as the kernel does
    torch.testing.assert_close(out, z, atol=2e-3, rtol=2e-3)
    # Each z the sums add may differ from torch's by about an fp16 ulp (a Vulkan driver may
    # round a division to 2.5 ulp; lavapipe keeps some fp16 results in f32 precision), and 128
    # of them add up: allowed per block, 1 ulp (2^-10 relative) of each element's |z|.
    want, ulps = torch.zeros(triton.cdiv(n, 128) * 128), torch.zeros(triton.cdiv(n, 128) * 128)
    want[:n], ulps[:n] = z.float(), z.float().abs() * 2 ** -10
    assert ((sums - want.view(-1, 128).sum(1)).abs() <= ulps.view(-1, 128).sum(1) + 1e-4).all()
    assert untouched(whole, out) and untouched(swhole, sums)


LAYER_NORM_SIG = "X=*fp32,Y=*fp32,W=*fp32,B=*fp32,Mean=*fp32,Rstd=*fp32,stride=i32,N=i32,eps=fp32"


@pytest.mark.parametrize("block", [256, 1024])
@pytest.mark.parametrize("m,n", [(1, 1), (3, 300), (5, 1000), (2, 256), (3, 2049)])
def test_layer_norm(m, n, block):
    """256-element blocks in kernel loops, a sum to a scalar after each, by combining neighbours
    (`spirv.pairwise_reductions`). (IREE's own configuration of these blocks failed in
    iree-compile: 'failed to legalize operation', vector<256xf32> ops; one thread per workgroup
    ran at 0.01 of Triton's speed on CUDA.) Blocks of 1024 took 44 KiB of workgroup memory, more
    than lavapipe's 32 KiB, while each tile had its own; tiles used one after another now share
    it (`spirv_memory`), and they run."""
    run = launcher(K.layer_norm_fwd_kernel, LAYER_NORM_SIG, {"BLOCK_SIZE": block})
    x, w, b = torch.randn(m, n) * 3 + 1, torch.randn(n), torch.randn(n)
    y, ywhole = padded((m, n))
    mean, mwhole = padded((m,))
    rstd, rwhole = padded((m,))
    run(x, y, w, b, mean, rstd, x.stride(0), n, 1e-5, grid=(m,))
    for got, want in zip((y, mean, rstd), K.ref_layer_norm(x, w, b)):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert untouched(ywhole, y) and untouched(mwhole, mean) and untouched(rwhole, rstd)


@pytest.mark.parametrize("length", [1, 31, 33, 100])
def test_attention(length):
    """Two dots (one of a transposed tile), row reductions, exp, accumulators rescaled in the
    loop: a workgroup barrier before every op, results written over dead inputs and the
    transposed tile read through the matmul's indexing map, so that the dispatch's tiles fit
    lavapipe's 32 KiB of workgroup memory (they took 45 KiB: 'uses 45696 bytes of shared
    memory; exceeded the limit of 32768 bytes'; and without the barriers the results were
    wrong). Lavapipe compiles its shader in about a minute at the first launch (Mesa's shader
    cache keeps it)."""
    run = launcher(K.attention_kernel, "q_ptr=*fp32,k_ptr=*fp32,v_ptr=*fp32,o_ptr=*fp32,L=i32,scale=fp32",
                   {"D": 32, "BLOCK_M": 32, "BLOCK_N": 32})
    q, k, v = (torch.randn(length, 32) for _ in range(3))
    o, whole = padded((length, 32))
    run(q, k, v, o, length, 32 ** -0.5, grid=(triton.cdiv(length, 32),))
    torch.testing.assert_close(o, K.ref_attention(q, k, v), atol=1e-5, rtol=1e-4)
    assert untouched(whole, o)


# A constant tile stored under a mask: IREE folds a copy of a linalg.fill, and a slice of one,
# into a fill, and the store's configuration with them; it then configured the dispatch itself,
# over workgroups ('workgroup_count_hint' op failed to resolve). The tile is copied from a
# linalg.generic yielding the constant.
@triton.jit
def constant_store_kernel(y_ptr, n, VALUE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.full([BLOCK], VALUE, tl.float32).to(y_ptr.dtype.element_ty), mask=offs < n)


@pytest.mark.parametrize("dtype, value", [(torch.int8, -1.5), (torch.int32, 1e3), (torch.float32, 2.5)])
def test_a_constant_tile_stored_under_a_mask(dtype, value):
    ty = {torch.int8: "i8", torch.int32: "i32", torch.float32: "fp32"}[dtype]
    run = launcher(constant_store_kernel, f"y_ptr=*{ty},n=i32", {"VALUE": value, "BLOCK": 64})
    out, whole = padded((67,), dtype=dtype)
    run(out, 67, grid=(2,))
    assert torch.equal(out, torch.full((67,), value).to(dtype)) and untouched(whole, out)


# A boolean tile read by an elementwise op that writes over its other input (a linalg.map):
# IREE stores i1 tensors as i8 and retypes a linalg.generic's block arguments to match, not a
# linalg.map's ('expected element type of input 'i8' to match bbArg type 'i1''): the map
# reads boolean tiles in its body.
@triton.jit
def masked_atomic_kernel(x_ptr, out_ptr, old_ptr, n, step, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = (offs < n) & (offs % step != 0)
    old = tl.atomic_add(out_ptr + offs // 2, tl.load(x_ptr + offs, mask=mask), mask=mask)
    tl.store(old_ptr + offs, tl.where(mask, old, -1.0), mask=offs < n)


def test_a_boolean_tile_read_beside_the_tile_it_selects_from():
    run = launcher(masked_atomic_kernel, "x_ptr=*fp32,out_ptr=*fp32,old_ptr=*fp32,n=i32,step=i32", {"BLOCK": 16})
    x, out, old = torch.arange(1.0, 11), torch.zeros(5), torch.zeros(10)
    run(x, out, old, 10, 2, grid=(1,))
    assert torch.equal(out, x[1::2])
    assert torch.equal(old, torch.tensor([-1.0, 0] * 5))


# While loops carrying a tile, with a scalar condition: on SPIR-V the tile crosses the loop as a
# tensor (as a vector of 16 elements it failed to legalize: 'vector.from_elements'). The second
# loop carries a scalar it does not forward (`total` is dead after it).
@triton.jit
def halve_until_kernel(x_ptr, out_ptr, count_ptr, n, limit, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    big = tl.max(tl.abs(x), axis=0)
    steps = 0
    while big > limit:
        x = x * 0.5
        big = big * 0.5
        steps += 1
    tl.store(out_ptr + offs, x, mask=m)
    tl.store(count_ptr + tl.program_id(0), steps)


@triton.jit
def grow_until_kernel(x_ptr, out_ptr, n, limit, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    total = tl.sum(x, axis=0)
    while total < limit:
        x = x + 1
        total = tl.sum(tl.where(m, x, 0), axis=0)
    tl.store(out_ptr + offs, x, mask=m)


def test_while_loops_carrying_a_tile():
    run = launcher(halve_until_kernel, "x_ptr=*fp32,out_ptr=*fp32,count_ptr=*i32,n=i32,limit=i32", {"BLOCK": 16})
    x = torch.tensor([float(2 ** (i % 13)) * (-1) ** i for i in range(37)])
    out, count = torch.zeros(37), torch.full((3,), -1, dtype=torch.int32)
    run(x, out, count, 37, 3, grid=(3,))
    want_count = torch.tensor([max(0, math.ceil(math.log2(x[p * 16:p * 16 + 16].abs().max() / 3)))
                               for p in range(3)], dtype=torch.int32)
    assert torch.equal(count, want_count)
    assert torch.equal(out, x * torch.pow(0.5, want_count.float()).repeat_interleave(16)[:37])
    run = launcher(grow_until_kernel, "x_ptr=*i32,out_ptr=*i32,n=i32,limit=i32", {"BLOCK": 16})
    x, out = torch.arange(-20, 17, dtype=torch.int32), torch.zeros(37, dtype=torch.int32)
    run(x, out, 37, 100, grid=(3,))
    rows = [x[p * 16:p * 16 + 16] for p in range(3)]
    steps = [max(0, -(-(100 - int(r.sum())) // len(r))) for r in rows]
    assert torch.equal(out, torch.cat([r + s for r, s in zip(rows, steps)]))


# A runtime `if` whose branches run the same ops on different values: IREE's SPIR-V
# canonicalization merged the two branches into one block whose arguments pick the values, which
# SPIR-V serializes as an OpPhi with both values from the same block, and the then branch's
# values were taken always. Such an `if` is emitted as two one-branch ifs.
@triton.jit
def same_shaped_branches_kernel(x_ptr, y_ptr, out_ptr, sum_ptr):
    pid = tl.program_id(0)
    x = tl.load(x_ptr + pid)
    y = tl.load(y_ptr + pid)
    if x > y:
        z = x * 3
    else:
        z = y * 5
    tl.store(out_ptr + pid, z)
    if x > y:
        tl.store(sum_ptr + pid, x + 1)
    else:
        tl.store(sum_ptr + pid, y + 2)


def test_a_runtime_if_whose_branches_run_the_same_ops():
    run = launcher(same_shaped_branches_kernel, "x_ptr=*i32,y_ptr=*i32,out_ptr=*i32,sum_ptr=*i32", {})
    x = torch.tensor([1, 5, -3, 7, 0], dtype=torch.int32)
    y = torch.tensor([4, 2, -3, 0, 9], dtype=torch.int32)
    out, total = torch.zeros(5, dtype=torch.int32), torch.zeros(5, dtype=torch.int32)
    run(x, y, out, total, grid=(5,))
    assert torch.equal(out, torch.where(x > y, x * 3, y * 5))
    assert torch.equal(total, torch.where(x > y, x + 1, y + 2))


# Vulkan lets a driver assume that no NaN reaches a float instruction (unless the shader
# declares SignedZeroInfNanPreserve, which IREE's SPIR-V does not): NVIDIA's driver returned
# numbers for f32 exp, tanh and pow of NaN. On SPIR-V each math function's result is selected
# from a NaN argument, tested on its bits (one test per argument; lavapipe gives C's results
# either way, so the emitted form is checked too).
@triton.jit
def nan_math_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, tl.exp(x), mask=m)
    tl.store(out_ptr + n + offs, libdevice.tanh(x), mask=m)
    tl.store(out_ptr + 2 * n + offs, libdevice.pow(x, y), mask=m)


def test_math_functions_of_nan_are_nan():
    sig, consts = "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n=i32", {"BLOCK": 16}
    module = aot.compile_kernel(nan_math_kernel, sig, consts, target="vulkan", arch="ampere", vmfb=False).module
    versions = program_versions(module)   # the full-tile version and the masked one
    assert len(versions) == 2 and all(v.count("arith.cmpi ugt") == 4 for v in versions), module   # exp, tanh, pow's 2
    run = launcher(nan_math_kernel, sig, consts)
    nan = float("nan")
    x = torch.tensor([nan, 1.0, nan, 2.0, 1.0, 0.5])
    y = torch.tensor([2.0, nan, 0.0, 3.0, 0.5, nan])
    out = torch.zeros(18)
    run(x, y, out, 6, grid=(1,))
    torch.testing.assert_close(out[:6], torch.exp(x), equal_nan=True)
    torch.testing.assert_close(out[6:12], torch.tanh(x), equal_nan=True)
    torch.testing.assert_close(out[12:], torch.pow(x, y), equal_nan=True)   # 1 ** nan = nan ** 0 = 1


# A runtime `if` yielding a tile: its branches' tiles were buffers of different kinds, which
# IREE's bufferization refused to yield from one `if` ('incompatible buffer types on then/else
# branches'); each branch copies its tile into one destination made before the `if`.
@triton.jit
def tile_if_kernel(x_ptr, y_ptr, out_ptr, mode, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    if mode > 0:
        z = x * 3
    else:
        z = y * 5
    tl.store(out_ptr + offs, z)


@pytest.mark.parametrize("mode", [1, 0])
def test_a_runtime_if_yielding_a_tile(mode):
    run = launcher(tile_if_kernel, "x_ptr=*i32,y_ptr=*i32,out_ptr=*i32,mode=i32", {"BLOCK": 16})
    x, y = torch.arange(16, dtype=torch.int32), torch.arange(100, 116, dtype=torch.int32)
    out, whole = padded((16,), dtype=torch.int32)
    run(x, y, out, mode, grid=(1,))
    assert torch.equal(out, x * 3 if mode else y * 5) and untouched(whole, out)


# A reduction along some dims beside one to a scalar: IREE's own configuration tiled the root
# as a partial reduction and refused the other ('tiling parallel dimensions is not supported
# with partial reduction tiling strategies'); such a dispatch runs on one thread.
@triton.jit
def keep_dims_beside_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    pair = tl.load(x_ptr + pid * BLOCK + tl.arange(0, 2)[:, None] + tl.arange(0, 1)[None, :])
    top = tl.reshape(tl.max(pair, axis=0, keep_dims=True), ())
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + pid, tl.sum(x) + top)


def test_a_reduction_along_some_dims_beside_one_to_a_scalar():
    run = launcher(keep_dims_beside_sum_kernel, "x_ptr=*fp32,out_ptr=*fp32,n=i32", {"BLOCK": 64})
    x, out = torch.randn(150), torch.zeros(3)
    run(x, out, 150, grid=(3,))
    want = torch.stack([x[p * 64:p * 64 + 64].sum() + x[p * 64:p * 64 + 2].max() for p in range(3)])
    torch.testing.assert_close(out, want)


# libdevice.clz of an int64: SPIR-V's FindUMsb, which IREE lowers math.ctlz to, takes 32-bit
# integers only ('failed to legalize operation 'math.ctlz''); it counts on the two halves.
@triton.jit
def clz_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, libdevice.clz(tl.load(x_ptr + offs)))


def test_leading_zeros_of_int64():
    run = launcher(clz_kernel, "x_ptr=*i64,out_ptr=*i32", {"BLOCK": 8})
    x = torch.tensor([0, 1, -1, 1 << 31, 1 << 32, (1 << 40) + 5, 12345, (1 << 62) + 3], dtype=torch.int64)
    out = torch.zeros(8, dtype=torch.int32)
    run(x, out, grid=(1,))
    want = [64 - int(v).bit_length() if v >= 0 else 0 for v in x.tolist()]
    assert out.tolist() == want



# tl.join is computed in the ops that read it: as two tensor.insert_slice it left no linalg op
# of its rank to carry the configuration ('failed to get lowering configuration'), and as a
# linalg.generic of its own IREE fused it into its reader, which lost its configuration (a
# load through joined pointers: 'contains conflicting lowering configuration').
@triton.jit
def join_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    z = tl.join(tl.load(x_ptr + offs, mask=m), tl.load(x_ptr + n + offs, mask=m))
    tl.store(out_ptr + 2 * offs[:, None] + tl.arange(0, 2)[None, :], z, mask=m[:, None])


@triton.jit
def joined_pointers_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(tl.join(x_ptr + offs, x_ptr + n + offs), mask=tl.join(m, m), other=0)
    tl.store(out_ptr + offs, tl.sum(v, axis=1), mask=m)


def test_join_stored_and_loaded_through():
    x = torch.randn(200)
    (out, whole), (sums, swhole) = padded((200,)), padded((100,))
    launcher(join_kernel, "x_ptr=*fp32,out_ptr=*fp32,n=i32", {"BLOCK": 64})(x, out, 100, grid=(2,))
    launcher(joined_pointers_kernel, "x_ptr=*fp32,out_ptr=*fp32,n=i32", {"BLOCK": 64})(x, sums, 100, grid=(2,))
    assert torch.equal(out, torch.stack([x[:100], x[100:]], dim=-1).reshape(-1)) and untouched(whole, out)
    assert torch.equal(sums, x[:100] + x[100:]) and untouched(swhole, sums)


# A 2-D tile reduced to a scalar, in a dispatch IREE configures: below 512 elements IREE's
# SubgroupReduce pipeline failed on a tile assembled row by row and reshaped to 1-D ('failed to
# legalize unresolved source materialization'); such tiles are read element by element.
@triton.jit
def tile_to_scalar_kernel(x_ptr, out_ptr, rows, cols, R: tl.constexpr, C: tl.constexpr):
    r, c = tl.arange(0, R)[:, None], tl.arange(0, C)[None, :]
    m = (r < rows) & (c < cols)
    x = tl.load(x_ptr + r * cols + c, mask=m, other=0.0)
    tl.store(out_ptr, tl.sum(x))
    tl.store(out_ptr + 1 + r * 0 + c * 0, tl.max(tl.where(m, x, -float("inf")), axis=None, keep_dims=True))


@pytest.mark.parametrize("r, c", [(8, 32), (4, 16), (32, 32)])
def test_a_2d_tile_reduced_to_a_scalar(r, c):
    run = launcher(tile_to_scalar_kernel, "x_ptr=*fp32,out_ptr=*fp32,rows=i32,cols=i32", {"R": r, "C": c})
    rows, cols = r - 3, c - 1
    x, (out, whole) = torch.randn(rows * cols), padded((2,))
    run(x, out, rows, cols, grid=(1,))
    # The sum in any order: within the bound of f32 summation of n terms (n ulp of sum |x|).
    bound = x.numel() * 2.0 ** -24 * x.abs().sum().item()
    assert abs(out[0].item() - x.double().sum().item()) <= bound, (out[0].item(), x.double().sum().item(), bound)
    assert out[1] == x.max() and untouched(whole, out)


# A reduction's result broadcast to a tile and stored under a mask, in a dispatch IREE
# configures: the slice of a linalg.fill became a fill of the masked size written into the
# buffer, which IREE's SPIR-V SubgroupReduce pipeline left unlowered ('failed to legalize
# operation memref.subview'); the tile is a linalg.generic yielding the scalar.
@triton.jit
def broadcast_max_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, tl.zeros_like(x) + tl.max(tl.where(m, x, -float("inf")), axis=0), mask=m)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_a_reduction_broadcast_and_stored_under_a_mask(dtype):
    ty = {torch.float16: "fp16", torch.float32: "fp32"}[dtype]
    run = launcher(broadcast_max_kernel, f"x_ptr=*{ty},out_ptr=*{ty},n=i32", {"BLOCK": 64})
    x, (out, whole) = torch.randn(150).to(dtype), padded((150,), dtype=dtype)
    run(x, out, 150, grid=(3,))
    assert torch.equal(out, torch.cat([b.max().expand(len(b)) for b in x.split(64)])) and untouched(whole, out)

# --- kernel[grid] through the Triton backend ---------------------------------------------------

@pytest.fixture
def vulkan_active():
    """Triton's active driver compiles for vulkan during the test, for llvm-cpu again after it."""
    import triton_iree
    triton_iree.activate(target="vulkan", arch=ARCH)
    try:
        yield
    finally:
        triton_iree.activate(target="llvm-cpu")


# Dispatches that reduce a whole tile to a scalar keep IREE's own configuration (no
# compilation_info from the GPU lowering), and those compile and run on vulkan as they are,
# unless they have linalg ops in kernel loops (layer norm: one thread per workgroup).
@pytest.mark.parametrize("rows,cols", [(1, 1), (3, 1000), (17, 781), (9, 256), (2, 1024)])   # the last two: whole rows
def test_softmax_through_triton(vulkan_active, rows, cols):
    x = torch.randn(rows, cols)
    out, whole = padded((rows, cols + 5))
    K.run_softmax(x, out=out[:, :cols])
    torch.testing.assert_close(out[:, :cols], torch.softmax(x, -1), atol=1e-6, rtol=1e-5)
    assert untouched(whole, out) and bool((out[:, cols:] == -7).all())


def test_argmax_through_triton(vulkan_active):
    x = torch.randn(9, 100)
    idx, val = torch.zeros(9, dtype=torch.int32), torch.zeros(9)
    K.argmax_kernel[(9,)](x, idx, val, 100, x.stride(0), BLOCK=128)
    want_val, want_idx = x.max(1)
    assert torch.equal(val, want_val) and torch.equal(idx.long(), want_idx)


def _run_add():
    x, y = torch.rand(3000), torch.rand(3000)
    torch.testing.assert_close(K.run_add(x, y), x + y)


def _run_matmul():
    a, b = torch.randn(40, 50), torch.randn(50, 30)
    torch.testing.assert_close(K.run_matmul(a, b), a @ b, atol=1e-4, rtol=1e-4)


def _run_layer_norm():
    x, w, b = torch.randn(4, 300), torch.randn(300), torch.randn(300)
    for got, want in zip(K.run_layer_norm(x, w, b), K.ref_layer_norm(x, w, b)):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def _run_scale_shift():
    x = torch.randn(20, 40)
    torch.testing.assert_close(K.run_scale_shift_2d(x, 2.0, 0.5), x * 2.0 + 0.5)


def _run_row_sum():
    x, out = torch.randn(37, 50), torch.zeros(37)
    K.row_sum_kernel[(5,)](x, out, 37, 50, x.stride(0), BLOCK_M=8, BLOCK_N=64)
    torch.testing.assert_close(out, x.sum(1))


def _run_gather():
    x, idx, out = torch.randn(777), torch.randint(0, 777, (1000,), dtype=torch.int32), torch.zeros(1000)
    K.gather_kernel[(8,)](x, idx, out, 1000, BLOCK=128)
    assert torch.equal(out, x[idx.long()])


# The matmul as Triton's launcher specializes it (unit strides become constants) loads its
# contiguous tiles by rows on vulkan, as int8_matmul_kernel does. Layer norm as run_layer_norm
# launches it (512-element blocks, 8 warps) gets one thread per workgroup, as the ahead-of-time
# module with 256-element blocks does (test_layer_norm).
@pytest.mark.parametrize("run", [_run_add, _run_row_sum, _run_gather, _run_scale_shift, _run_matmul,
                                 _run_layer_norm], ids=lambda f: f.__name__[5:])
def test_kernel_launch_through_triton(vulkan_active, run):
    run()


# --- the runtime: tensors passed as copies -------------------------------------------------------

def test_a_launch_writes_back_only_what_it_changed_in_the_tensors_own_storage(vulkan):
    """Tensors travel as copies (imported host pages were corrupted on lavapipe); the launch
    writes back each tensor's own storage, where the kernel changed it."""
    run = launcher(K.add_kernel, ADD_SIG, {"BLOCK_SIZE": 1024})
    n = 3000
    base = torch.rand(n + 40)
    x, y = base[5:5 + n], torch.rand(n)          # x: a view with a storage offset
    out, whole = padded((n,))
    x_before = base.clone()
    run(x, y, out, n, grid=(triton.cdiv(n, 1024),))
    assert torch.equal(out, x + y) and untouched(whole, out)
    assert torch.equal(base, x_before)


@pytest.mark.parametrize("through", ["triton", "vmfb"])
def test_only_tensors_the_kernel_may_store_to_are_copied_back(vulkan, vulkan_active, monkeypatch, through):
    """The compile records which pointer arguments the kernel stores to, by tl.store or by an
    atomic (in the launch's metadata, and in the .vmfb's reflection): only those are copied
    back after the launch. Where a module does not say (native mode's), every tensor is."""
    backs = []
    write_back = copies.DeviceCopies.write_back
    monkeypatch.setattr(copies.DeviceCopies, "write_back",
                        lambda self: backs.append(sorted(c[4] for c in self.copies)) or write_back(self))
    n, m = 157, 39
    target, val, count = torch.zeros(m, dtype=torch.int32), torch.ones(n, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    old = torch.zeros(n + 5, dtype=torch.int32)
    x, y, out = torch.rand(3000), torch.rand(3000), torch.zeros(3000)
    if through == "triton":
        K.add_kernel[(3,)](x, y, out, 3000, BLOCK_SIZE=1024)
        atomic_add_kernel[(5,)](target, val, old, count, n, m, BLOCK=32)
    else:
        launcher(K.add_kernel, ADD_SIG, {"BLOCK_SIZE": 1024})(x, y, out, 3000, grid=(3,))
        launcher(atomic_add_kernel, "target_ptr=*i32,val_ptr=*i32,old_ptr=*i32,count_ptr=*i32,n=i32,m=i32",
                 {"BLOCK": 32})(target, val, old, count, n, m, grid=(5,))
    assert torch.equal(out, x + y)
    assert torch.equal(target, torch.bincount(torch.arange(n) % m, minlength=m).int())
    assert int(count) == 15 and bool((old[n:] == torch.tensor([0, 1, 3, 6, 10], dtype=torch.int32)).all())
    assert backs == [[out.data_ptr()], sorted(t.data_ptr() for t in (target, old, count))]
    unsaid = abi.of_signature(["x", "out"], {"x": "*fp32", "out": "*fp32"}, "k", written=None)
    assert all(s.written for s in unsaid.buffers)


def test_numpy_memory_that_is_only_16_byte_aligned(vulkan):
    run = launcher(K.add_kernel, ADD_SIG, {"BLOCK_SIZE": 1024})
    raw = np.zeros(4 * 4096 + 64, dtype=np.uint8)
    start = (-raw.ctypes.data) % 64 + 16               # 16 bytes past a 64-byte boundary
    arr = raw[start:start + 4 * 1500].view(np.float32)
    arr[:] = -7.0
    out = torch.from_numpy(arr)[:1100]
    x, y = torch.rand(1100), torch.rand(1100)
    run(x, y, out, 1100, grid=(2,))
    assert torch.equal(out, x + y)                                 # the numpy array sees it
    assert bool((torch.from_numpy(arr)[1100:] == -7).all())


def test_vulkan_modules_are_launched_with_fences(vulkan):
    # Compiled for IREE's asynchronous execution model: each launch waits on its own fence
    # (IREE's synchronous wrapper cost a launch 0.3 ms more on an H100's Vulkan driver).
    run = launcher(K.add_kernel, ADD_SIG, {"BLOCK_SIZE": 1024})
    assert run.kernel.main.fenced
    x, y, out = torch.rand(3000), torch.rand(3000), torch.zeros(3000)
    for _ in range(3):
        out.zero_()
        run(x, y, out, 3000, grid=(3,))
        assert torch.equal(out, x + y)


def test_a_failed_launch_changes_no_tensor(monkeypatch, vulkan):
    run = launcher(K.add_kernel, ADD_SIG, {"BLOCK_SIZE": 1024})
    x, y, out = torch.rand(2000), torch.rand(2000), torch.full((2000,), -7.0)
    before = [t.clone() for t in (x, y, out)]

    def fail(self, ctx, args):
        ctx.dev.timeline.invoke(ctx.context, ctx.function, args).wait()       # the kernel runs ...
        raise LaunchError("failed after the kernel ran (test)")               # ... and the launch fails
    monkeypatch.setattr(runtime.LoadedKernel, "_invoke", fail)
    kept = {id(b) for _, b in vulkan.pool.free}
    with pytest.raises(LaunchError, match="failed after the kernel ran"):
        run(x, y, out, 2000, grid=(2,))
    assert all(torch.equal(a, b) for a, b in zip((x, y, out), before))
    assert {id(b) for _, b in vulkan.pool.free} <= kept      # the failed launch's buffers are dropped


def test_a_launch_reuses_the_buffers_of_an_earlier_one_and_nothing_of_its_data(vulkan):
    # The second launch takes the first one's staging and device buffers (the same objects come
    # back to the pool), and writes back its own tensors' bytes where the kernel stores nothing.
    run = launcher(K.add_kernel, ADD_SIG, {"BLOCK_SIZE": 1024})
    vulkan.pool.clear()                     # nothing kept from earlier tests
    x, y, out = torch.rand(3001), torch.rand(3001), torch.full((3001,), -1.0)
    run(x, y, out, 2500, grid=(3,))
    first = {id(b) for (_, size), b in vulkan.pool.free if size == 3001 * 4}
    assert len(first) == 6                  # a staging and a device buffer for each tensor
    x2, y2, out2 = torch.rand(3001), torch.rand(3001), torch.full((3001,), -2.0)
    run(x2, y2, out2, 2500, grid=(3,))
    assert torch.equal(out2[:2500], x2[:2500] + y2[:2500]) and bool((out2[2500:] == -2).all())
    assert torch.equal(out[:2500], x[:2500] + y[:2500]) and bool((out[2500:] == -1).all())
    assert {id(b) for (_, size), b in vulkan.pool.free if size == 3001 * 4} == first


def test_arguments_that_share_memory_are_refused(vulkan):
    import triton_iree
    triton_iree.activate(target="vulkan", arch=ARCH)
    try:
        x = torch.rand(1000)
        with pytest.raises(LaunchError, match="share memory are not supported on vulkan"):
            K.add_kernel[(1,)](x, x, x, 1000, BLOCK_SIZE=1024)
    finally:
        triton_iree.activate(target="llvm-cpu")


def test_tensors_not_in_host_memory_are_refused(vulkan):
    run = launcher(K.add_kernel, ADD_SIG, {"BLOCK_SIZE": 1024})
    x, out = torch.rand(10), torch.zeros(10)
    with pytest.raises(LaunchError, match="runs on vulkan, which imports CPU tensors"):
        run(x, torch.empty(10, device="meta"), out, 10, grid=(1,))
    assert bool((out == 0).all())


def test_empty_tensors(vulkan):
    run = launcher(K.add_kernel, ADD_SIG, {"BLOCK_SIZE": 1024})
    x, out = torch.rand(0), torch.empty(0)
    run(x, x, out, 0, grid=(0,))


def test_a_process_that_launched_on_vulkan_exits_cleanly(vulkan, tmp_path):
    # Imported buffers that outlive the vulkan device crash the interpreter at exit (a HAL
    # buffer does not keep its device alive); the runtime releases them after each launch.
    vmfb = tmp_path / "add.vmfb"
    vmfb.write_bytes(vulkan_module(K.add_kernel, ADD_SIG, {"BLOCK_SIZE": 1024}))
    code = textwrap.dedent(f"""
        import torch
        from triton_iree.aot import Launcher
        x, out = torch.rand(100), torch.zeros(100)
        Launcher({str(vmfb)!r}, "add_kernel", {ADD_SIG!r}, target="vulkan")(x, x, out, 100, grid=(1,))
        assert torch.equal(out, x + x)
        print("launched")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "launched" in r.stdout, (r.returncode, r.stdout[-2000:], r.stderr[-3000:])
