"""Vector add through kernel[grid](...): warm launch overhead, bandwidth at n = 2^24, the cost
of checked mode, cold compile.

    python benchmarks/bench_vector_add.py [--rounds N] [--strict]

Everything is measured in one run, side by side with torch (see bench_util): medians, 10th
percentiles and median per-round ratios. Targets are printed next to the ratios; --strict makes
a missed target the exit status. Targets live here, never in the unit tests.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from bench_util import ROOT, fmt_time, report, side_by_side, use_examples

use_examples()

import torch  # noqa: E402
import triton  # noqa: E402

from kernels import add_kernel  # noqa: E402

# The warm launch target is absolute (torch.add on 16 elements is a ~1 us C++ call, so a ratio
# says little); the bandwidth target is a ratio to torch.add(out=) measured alongside.
LAUNCH_TARGET_S = 25e-6
ADD_TARGET_RATIO = 1.3


def bench_launch(rounds: int) -> dict:
    n = 16
    x, y, out = torch.rand(n), torch.rand(n), torch.empty(n)
    grid = (1,)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024)
    assert torch.equal(out, x + y)
    res = side_by_side({
        "torch.add(out=)": lambda: torch.add(x, y, out=out),
        "add_kernel[(1,)] n=16": lambda: add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024),
    }, rounds=rounds, inner=200)
    report("warm launch, n = 16 (one program)", res)
    return res


def bench_add(rounds: int, n: int = 1 << 24) -> dict:
    x, y, out = torch.rand(n), torch.rand(n), torch.empty(n)
    grid = (triton.cdiv(n, 1024),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024)
    assert torch.equal(out, x + y)
    res = side_by_side({
        "torch.add(out=)": lambda: torch.add(x, y, out=out),
        "add_kernel BLOCK 1024": lambda: add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024),
    }, rounds=rounds)
    gb = 3 * 4 * n / 1e9
    report(f"vector add, n = 2^{n.bit_length() - 1} f32 ({gb * 1e3:.0f} MB moved per call)", res)
    for k, v in res.items():
        print(f"  {k:<28} {gb / v['median']:6.1f} GB/s at the median, {gb / v['p10']:6.1f} GB/s at p10")
    return res


def bench_checked(rounds: int, n: int = 1 << 24) -> dict:
    """The cost of checked mode (`check_bounds=True`: bounds checks on every access)."""
    x, y, out = torch.rand(n), torch.rand(n), torch.empty(n)
    grid = (triton.cdiv(n, 1024),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024, check_bounds=True)
    assert torch.equal(out, x + y)
    res = side_by_side({
        "add_kernel": lambda: add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024),
        "add_kernel check_bounds=True": lambda: add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024, check_bounds=True),
    }, rounds=rounds)
    report(f"checked mode, vector add n = 2^{n.bit_length() - 1} f32", res)
    return res


_COLD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import torch
t0 = time.perf_counter()
import kernels
from triton_iree import compile as ic
t_import = time.perf_counter() - t0
x, y = torch.rand(98432), torch.rand(98432)
t0 = time.perf_counter()
out = kernels.run_add(x, y)
t_first = time.perf_counter() - t0
assert torch.equal(out, x + y)
kernels.run_add(x, y, out)
t0 = time.perf_counter()
kernels.run_add(x, y, out)
t_warm = time.perf_counter() - t0
print(json.dumps({"first": t_first, "warm": t_warm, "iree_compile": ic.COMPILE_STATS["seconds"],
                  "compiles": ic.COMPILE_STATS["compiles"], "import": t_import}))
"""


def bench_cold(runs: int) -> dict:
    """First launch in a fresh process with an empty Triton cache: Triton frontend + TTIR
    reader + emitter + iree-compile + module load + run."""
    rows = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="triton-iree-bench-") as cache:
            env = dict(os.environ, TRITON_CACHE_DIR=cache)
            env.pop("TRITON_IREE_DUMP_DIR", None)
            p = subprocess.run([sys.executable, "-c", _COLD, str(ROOT / "examples")], env=env,
                               capture_output=True, text=True, check=True)
            rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(f"cold compile (fresh process, empty TRITON_CACHE_DIR, {runs} runs, medians)")
    print(f"  first add_kernel launch       {fmt_time(med['first'])}"
          f"   of which iree-compile {fmt_time(med['iree_compile'])} ({med['compiles']:.0f} module)")
    print(f"  third launch (warm)           {fmt_time(med['warm'])}")
    print(f"  import torch+triton+kernels   {fmt_time(med['import'])}")
    return med


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=60, help="side-by-side rounds per comparison")
    ap.add_argument("--cold-runs", type=int, default=3)
    ap.add_argument("--strict", action="store_true", help="exit non-zero when a target is missed")
    a = ap.parse_args()
    print(f"torch {torch.__version__}, triton {triton.__version__}, {os.cpu_count()} CPUs, "
          f"torch threads {torch.get_num_threads()}\n")
    launch = bench_launch(a.rounds)
    print()
    add = bench_add(max(a.rounds // 2, 10))
    print()
    bench_checked(max(a.rounds // 2, 10))
    print()
    bench_cold(a.cold_runs)
    print()
    t_launch = list(launch.values())[1]["median"]
    r_add = list(add.values())[1]["ratio"]
    checks = [(f"warm launch {t_launch * 1e6:.1f} us (target <= {LAUNCH_TARGET_S * 1e6:.0f} us)",
               t_launch <= LAUNCH_TARGET_S),
              (f"vector add 2^24 x{r_add:.2f} vs torch (target <= x{ADD_TARGET_RATIO:.2f})",
               r_add <= ADD_TARGET_RATIO)]
    for what, ok in checks:
        print(f"target: {what}: {'ok' if ok else 'MISSED'}")
    return 1 if (a.strict and not all(ok for _, ok in checks)) else 0


if __name__ == "__main__":
    raise SystemExit(main())
