"""Softmax and matmul from the kernel corpus against torch, side by side in one process.

    python benchmarks/bench_kernels.py [--sizes 512,1000,1024] [--blocks 32,64,128] [--rounds N]

For each kernel: compile time of its first launch (with a fresh, private Triton cache) and
warm run time against the torch equivalent (medians, p10, median per-round ratio; see
bench_util). 1000 is not a multiple of the blocks: edge programs and a K tail.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-iree-bench-"))

from bench_util import fmt_time, report, side_by_side, use_examples  # noqa: E402

use_examples()

import torch  # noqa: E402

import kernels as K  # noqa: E402
from triton_iree import compile as iree_compile  # noqa: E402


def first_launch(fn) -> tuple[float, float]:
    """(wall seconds of the first call, seconds of it spent in iree-compile)."""
    c0 = iree_compile.COMPILE_STATS["seconds"]
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0, iree_compile.COMPILE_STATS["seconds"] - c0


def bench_softmax(rounds: int, rows: int = 4096, cols: int = 1024) -> None:
    x = torch.randn(rows, cols)
    out = torch.empty_like(x)
    t, tc = first_launch(lambda: K.run_softmax(x, out))
    torch.testing.assert_close(out, torch.softmax(x, -1), rtol=1e-5, atol=1e-6)
    res = side_by_side({"torch.softmax": lambda: torch.softmax(x, -1),
                        "softmax_kernel": lambda: K.run_softmax(x, out)}, rounds=rounds)
    report(f"softmax {rows}x{cols} f32 (first launch {fmt_time(t).strip()}, "
           f"iree-compile {fmt_time(tc).strip()})", res)


def bench_matmul(rounds: int, size: int, blocks: list[int]) -> None:
    a, b = torch.randn(size, size), torch.randn(size, size)
    c = torch.empty(size, size)
    ref = a @ b
    fns = {"torch.mm(out=)": lambda: torch.mm(a, b, out=c)}
    notes = []
    for bs in blocks:
        run = (lambda bs: lambda: K.run_matmul(a, b, c, BLOCK_M=bs, BLOCK_N=bs, BLOCK_K=bs))(bs)
        t, tc = first_launch(run)
        torch.testing.assert_close(c, ref, rtol=1e-4, atol=1e-3)
        fns[f"matmul_kernel BLOCK {bs}"] = run
        notes.append(f"BLOCK {bs}: first launch {fmt_time(t).strip()}, iree-compile {fmt_time(tc).strip()}")
    res = side_by_side(fns, rounds=max(5, int(rounds * (512 / size) ** 2)))
    flop = 2 * size ** 3
    report(f"matmul {size}^3 f32 ({'; '.join(notes)})", res)
    for k, v in res.items():
        print(f"  {k:<28} {flop / v['median'] / 1e9:6.1f} GFLOP/s at the median")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--sizes", default="512,1000,1024")
    ap.add_argument("--blocks", default="32,64,128")
    a = ap.parse_args()
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}\n")
    bench_softmax(a.rounds)
    for s in (int(v) for v in a.sizes.split(",")):
        print()
        bench_matmul(a.rounds, s, [int(v) for v in a.blocks.split(",")])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
