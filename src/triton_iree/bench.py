"""`triton-iree bench`: the CPU workload suite, each workload against torch in the same run.

    triton-iree bench [--quick] [--only NAME,...] [--rounds N] [--json PATH] [--png PATH]

Every workload launches a kernel of the corpus (`triton_iree.kernels`) with `kernel[grid](...)`,
checks its result against torch, then times it side by side with the torch equivalent. Shared,
noisy machines make single timings meaningless, so each round runs both candidates once, in
alternating order; the report gives per-candidate medians and 10th percentiles (close to the
uncontended time) and the ratio torch / ours (above 1: ours is faster) as the median of the
per-round ratios, which is robust against slow phases that hit a whole round.

Goals are printed next to the ratios; they are benchmark targets, never unit-test assertions.
`--quick` runs small sizes and few rounds: a smoke test of the whole suite (CI runs it).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Callable


# --- side-by-side timing ----------------------------------------------------------------------

def side_by_side(fns: dict[str, Callable[[], object]], rounds: int, inner: int = 1,
                 warmup_s: float = 0.2, warmup_calls: int = 5) -> dict[str, dict[str, float]]:
    """Times each candidate `rounds` times (each sample averages `inner` calls), alternating.

    Each candidate first runs for `warmup_s` seconds and at least `warmup_calls` times: torch's
    first calls start its thread pool and fault in its outputs' pages, which a few calls do not
    absorb (a quick run once timed torch's 2^16-element add at 8 ms).

    Returns {name: {"median": s, "p10": s, "ratio": median of per-round ratios to the first,
    "p10_ratio": ratio of the p10s}}.
    """
    names = list(fns)
    for f in fns.values():
        end, calls = time.perf_counter() + warmup_s, 0
        while calls < warmup_calls or time.perf_counter() < end:
            f()
            calls += 1
    samples: dict[str, list[float]] = {k: [] for k in names}
    for r in range(rounds):
        for k in (names if r % 2 == 0 else names[::-1]):
            f = fns[k]
            t0 = time.perf_counter()
            for _ in range(inner):
                f()
            samples[k].append((time.perf_counter() - t0) / inner)
    base = samples[names[0]]
    base_p10 = sorted(base)[len(base) // 10]
    out = {}
    for k, v in samples.items():
        s = sorted(v)
        out[k] = {"median": statistics.median(v), "p10": s[len(s) // 10],
                  "ratio": statistics.median([a / b for a, b in zip(v, base)]),
                  "p10_ratio": s[len(s) // 10] / base_p10}
    return out


def fmt_time(s: float) -> str:
    if s < 1e-3:
        return f"{s * 1e6:8.1f} us"
    if s < 1:
        return f"{s * 1e3:8.3f} ms"
    return f"{s:8.3f} s "


def report(title: str, res: dict[str, dict[str, float]]) -> None:
    base = next(iter(res))
    print(f"{title}")
    for k, v in res.items():
        rel = "" if k == base else f"   x{v['ratio']:.2f} (p10 x{v['p10_ratio']:.2f}) vs {base}"
        print(f"  {k:<28} median {fmt_time(v['median'])}   p10 {fmt_time(v['p10'])}{rel}")
    sys.stdout.flush()


# --- the workloads ------------------------------------------------------------------------------

@dataclass
class Result:
    name: str
    what: str
    correct: bool
    max_error: float | None = None
    ours_s: float | None = None          # median
    ours_p10_s: float | None = None
    torch_s: float | None = None
    torch_p10_s: float | None = None
    ratio: float | None = None           # torch / ours: median of per-round ratios
    ratio_p10: float | None = None       # torch p10 / ours p10
    goal: str = ""
    goal_ratio: float | None = None      # the goal's torch / ours
    met: bool | None = None
    notes: dict = field(default_factory=dict)


def _check(got, want, rtol: float, atol: float) -> tuple[bool, float]:
    import torch
    got, want = (t.float() for t in (got, want))
    err = (got - want).abs().max().item() if got.numel() else 0.0
    try:
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol)
        return True, err
    except AssertionError:
        return False, err


def _vs_torch(name: str, what: str, ours: Callable, theirs: Callable, check: Callable[[], tuple[bool, float]],
              rounds: int, goal_ratio: float, inner: int = 1) -> Result:
    """Runs ours once, checks it, then times torch and ours side by side."""
    ours()
    ok, err = check()
    res = Result(name, what, ok, err, goal=f"torch/ours >= {goal_ratio:g}", goal_ratio=goal_ratio)
    if not ok:
        return res
    t = side_by_side({"torch": theirs, "ours": ours}, rounds=rounds, inner=inner)
    res.ours_s, res.ours_p10_s = t["ours"]["median"], t["ours"]["p10"]
    res.torch_s, res.torch_p10_s = t["torch"]["median"], t["torch"]["p10"]
    res.ratio = 1 / t["ours"]["ratio"]
    res.ratio_p10 = 1 / t["ours"]["p10_ratio"]
    res.met = res.ratio >= goal_ratio
    return res


def bench_vector_add(quick: bool, rounds: int) -> Result:
    import torch
    import triton
    from . import kernels as K
    n = 1 << (16 if quick else 24)
    x, y, out = torch.rand(n), torch.rand(n), torch.empty(n)
    grid = (triton.cdiv(n, 1024),)
    r = _vs_torch("vector_add", f"vector add 2^{n.bit_length() - 1} f32, BLOCK 1024",
                  lambda: K.add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024),
                  lambda: torch.add(x, y, out=out), lambda: _check(out, x + y, 0, 0), rounds, 1.0)
    if r.ours_s:
        moved = 3 * 4 * n
        r.notes["GB/s"] = round(moved / r.ours_s / 1e9, 1)
        r.notes["torch GB/s"] = round(moved / r.torch_s / 1e9, 1)
        # The second half of the goal: our best (p10) bandwidth against the best either side reached.
        share = min(r.torch_p10_s, r.ours_p10_s) / r.ours_p10_s
        r.notes["of the best bandwidth"] = round(share, 2)
        r.goal += ", >= 90% of the best bandwidth"
        r.met = r.met and share >= 0.9
    return r


def bench_softmax(quick: bool, rounds: int) -> Result:
    import torch
    from . import kernels as K
    rows, cols = (64, 1024) if quick else (4096, 1024)
    x = torch.randn(rows, cols)
    out, theirs = torch.empty_like(x), torch.empty_like(x)
    # Both write into an output allocated once (torch.softmax would allocate one per call).
    return _vs_torch("softmax", f"fused softmax {rows}x{cols} f32, one program per row",
                     lambda: K.run_softmax(x, out), lambda: torch.ops.aten._softmax.out(x, -1, False, out=theirs),
                     lambda: _check(out, torch.softmax(x, -1), 1e-5, 1e-6), rounds, 1.2)


def bench_layer_norm(quick: bool, rounds: int) -> Result:
    import torch
    from . import kernels as K
    rows, cols = (64, 1024) if quick else (4096, 1024)
    x, w, b = torch.randn(rows, cols), torch.randn(cols), torch.randn(cols)
    got = {}

    def ours():
        got["y"], got["mean"], got["rstd"] = K.run_layer_norm(x, w, b, BLOCK_SIZE=1024)

    def check():
        ry, rm, rr = K.ref_layer_norm(x, w, b)
        oks = [_check(got[k], ref, 1e-4, 1e-4) for k, ref in (("y", ry), ("mean", rm), ("rstd", rr))]
        return all(ok for ok, _ in oks), max(e for _, e in oks)
    return _vs_torch("layer_norm", f"layer norm forward {rows}x{cols} f32, column-chunk loop, BLOCK 1024",
                     ours, lambda: torch.native_layer_norm(x, (cols,), w, b, 1e-5), check, rounds, 1.2)


def bench_matmul(name: str, quick: bool, rounds: int, size: int, blocks: tuple[int, int, int],
                 goal: float) -> Result:
    import torch
    from . import kernels as K
    if quick:
        size = 128
    a, b = torch.randn(size, size), torch.randn(size, size)
    c, c_torch = torch.empty(size, size), torch.empty(size, size)
    bm, bn, bk = blocks
    r = _vs_torch(name, f"matmul {size}^3 f32, tiles {bm}x{bn}x{bk}",
                  lambda: K.run_matmul(a, b, c, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk),
                  lambda: torch.mm(a, b, out=c_torch),
                  lambda: _check(c, a @ b, 1e-4, 1e-3), rounds, goal)
    if r.ours_s:
        r.notes["GFLOP/s"] = round(2 * size ** 3 / r.ours_s / 1e9, 1)
        r.notes["torch GFLOP/s"] = round(2 * size ** 3 / r.torch_s / 1e9, 1)
    return r


LAUNCH_GOAL_S = 10e-6
COLD_GOAL_S = 0.4


def bench_launch(quick: bool, rounds: int) -> Result:
    """Warm launch overhead: a 16-element vector add, one program (absolute goal)."""
    import torch
    from . import kernels as K
    n = 16
    x, y, out = torch.rand(n), torch.rand(n), torch.empty(n)
    grid = (1,)
    r = _vs_torch("launch", "warm launch overhead, vector add n=16, one program",
                  lambda: K.add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024),
                  lambda: torch.add(x, y, out=out), lambda: _check(out, x + y, 0, 0),
                  rounds, 0.0, inner=20 if quick else 200)
    r.goal = f"ours <= {LAUNCH_GOAL_S * 1e6:g} us"
    if r.ours_s is not None:
        r.met = r.ours_s <= LAUNCH_GOAL_S
    return r


_COLD = r"""
import json, sys, time
import torch
import triton_iree
from triton_iree import kernels
from triton_iree import compile as ic
triton_iree.activate()   # the CPU, also where a GPU makes Triton's own driver the default
x, y = torch.rand(98432), torch.rand(98432)
t0 = time.perf_counter()
out = kernels.run_add(x, y)
t_first = time.perf_counter() - t0
ok = bool(torch.equal(out, x + y))
print(json.dumps({"first": t_first, "iree_compile": ic.COMPILE_STATS["seconds"],
                  "compiles": ic.COMPILE_STATS["compiles"], "correct": ok}))
"""


def bench_cold(quick: bool, runs: int) -> Result:
    """The first launch of vector add in a fresh process with an empty Triton cache: Triton's
    frontend, the TTIR reader, the emitter, iree-compile, loading the module and running it
    (the imports of torch and triton are not counted)."""
    rows = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="triton-iree-bench-") as cache:
            env = dict(os.environ, TRITON_CACHE_DIR=cache)
            env.pop("TRITON_IREE_DUMP_DIR", None)
            env.pop("TRITON_ALWAYS_COMPILE", None)
            p = subprocess.run([sys.executable, "-c", _COLD], env=env, capture_output=True, text=True)
            if p.returncode != 0:
                print(p.stderr[-3000:], file=sys.stderr)
                return Result("cold_compile", "cold compile", False, notes={"error": p.stderr[-500:]})
            rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
    first = statistics.median(r["first"] for r in rows)
    r = Result("cold_compile", f"cold compile + first launch, vector add (fresh process, empty cache, "
               f"median of {runs})", all(r["correct"] for r in rows), 0.0, ours_s=first,
               ours_p10_s=min(r["first"] for r in rows), goal=f"ours <= {COLD_GOAL_S:g} s")
    r.met = first <= COLD_GOAL_S
    r.notes["iree-compile s"] = round(statistics.median(r["iree_compile"] for r in rows), 3)
    return r


WORKLOADS = ("vector_add", "softmax", "layer_norm", "matmul_512", "matmul_1024", "launch", "cold_compile")


def run_suite(quick: bool = False, rounds: int | None = None, only: tuple[str, ...] = WORKLOADS,
              cold_runs: int | None = None) -> list[Result]:
    r = rounds or (3 if quick else 30)
    benches = {
        "vector_add": lambda: bench_vector_add(quick, r),
        "softmax": lambda: bench_softmax(quick, r),
        "layer_norm": lambda: bench_layer_norm(quick, r),
        "matmul_512": lambda: bench_matmul("matmul_512", quick, r, 512, (64, 64, 32), 1.0),
        "matmul_1024": lambda: bench_matmul("matmul_1024", quick, max(3, r // 3), 1024, (128, 128, 128), 1.2),
        "launch": lambda: bench_launch(quick, r),
        "cold_compile": lambda: bench_cold(quick, cold_runs or (1 if quick else 5)),
    }
    results = []
    for name in only:
        res = benches[name]()
        results.append(res)
        print_result(res)
    return results


def _fmt(s: float | None) -> str:
    return "-" if s is None else fmt_time(s).strip()


def print_result(r: Result) -> None:
    ratio = "-" if r.ratio is None else f"x{r.ratio:.2f} (p10 x{r.ratio_p10:.2f})"
    met = "" if r.met is None else ("ok" if r.met else "MISSED")
    notes = ", ".join(f"{k} {v}" for k, v in r.notes.items())
    print(f"{r.name:<13} ours {_fmt(r.ours_s):>10} (p10 {_fmt(r.ours_p10_s)})  torch {_fmt(r.torch_s):>10} "
          f"(p10 {_fmt(r.torch_p10_s)})  torch/ours {ratio}  goal {r.goal}: {met}"
          f"{'' if r.correct else '  WRONG RESULT'}{'  [' + notes + ']' if notes else ''}")
    sys.stdout.flush()


def markdown_table(results: list[Result]) -> str:
    rows = ["| workload | ours (median) | torch (median) | torch / ours (median, p10) | goal | met |",
            "|---|---|---|---|---|---|"]
    for r in results:
        ratio = "" if r.ratio is None else f"{r.ratio:.2f} ({r.ratio_p10:.2f})"
        met = "" if r.met is None else ("yes" if r.met else "no")
        rows.append(f"| {r.what} | {_fmt(r.ours_s)} | {_fmt(r.torch_s)} | {ratio} | {r.goal} | "
                    f"{met if r.correct else 'WRONG RESULT'} |")
    return "\n".join(rows)


def machine() -> dict:
    from importlib.metadata import version
    import torch
    from .host import host_cpu_info
    model, flags = host_cpu_info()
    cpu = model or platform.processor()

    def v(d):
        try:
            return version(d)
        except Exception:
            return None
    isa = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else platform.machine()
    return {"cpu": cpu, "isa": isa, "cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "triton-iree": v("triton-iree"), "triton": v("triton"), "iree": v("iree-base-compiler"),
            "torch": torch.__version__, "python": platform.python_version(),
            "target_cpu": os.environ.get("TRITON_IREE_CPU", "host")}


def write_png(results: list[Result], path: str, quick: bool = False) -> None:
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("triton-iree: error: --png needs matplotlib: pip install 'triton-iree[bench]'")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rel = [r for r in results if r.ratio is not None and r.name != "launch"]
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(rel) + 1.5))
    names = [r.what for r in rel]
    ax.barh(names, [r.ratio for r in rel], color=["tab:green" if r.met else "tab:red" for r in rel])
    for i, r in enumerate(rel):
        goal = r.goal_ratio
        ax.plot([goal, goal], [i - 0.4, i + 0.4], color="black", linewidth=2)
        ax.text(r.ratio, i, f" x{r.ratio:.2f}", va="center")
    ax.set_xscale("log")    # x0.5 and x2 are as far from parity
    ax.axvline(1.0, color="gray", linestyle=":")
    ax.invert_yaxis()
    ax.set_xlabel("torch time / triton-iree time (median of rounds, log scale; higher is better; black: goal)")
    extra = [f"{r.name}: {_fmt(r.ours_s)} (goal {r.goal})" for r in results
             if r.name in ("launch", "cold_compile") and r.ours_s is not None]
    ax.set_title(f"triton-iree on llvm-cpu vs torch, {'quick run (small sizes)' if quick else 'full run'}"
                 + ("\n" + "; ".join(extra) if extra else ""), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="triton-iree bench", description=__doc__.splitlines()[0])
    add_arguments(ap)
    return run(ap.parse_args(argv))


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--quick", action="store_true", help="small sizes and few rounds (a smoke test)")
    ap.add_argument("--only", default=",".join(WORKLOADS), help=f"workloads to run ({','.join(WORKLOADS)})")
    ap.add_argument("--rounds", type=int, default=None, help="side-by-side rounds (default 30, 3 with --quick)")
    ap.add_argument("--cold-runs", type=int, default=None, help="fresh processes for cold compile (default 5)")
    ap.add_argument("--json", metavar="PATH", help="write the results as JSON")
    ap.add_argument("--png", metavar="PATH", help="write a bar chart (needs matplotlib: the 'bench' extra)")
    ap.add_argument("--markdown", action="store_true", help="also print the table as Markdown")


def run(args) -> int:
    only = tuple(w.strip() for w in args.only.split(",") if w.strip())
    bad = [w for w in only if w not in WORKLOADS]
    if bad:
        raise SystemExit(f"triton-iree: error: unknown workload {', '.join(bad)} (have {', '.join(WORKLOADS)})")
    if args.png and importlib.util.find_spec("matplotlib") is None:
        raise SystemExit("triton-iree: error: --png needs matplotlib: pip install 'triton-iree[bench]'")
    if importlib.util.find_spec("torch") is None:
        raise SystemExit("triton-iree: error: bench needs torch: pip install 'triton-iree[torch]'")
    # A private Triton cache, removed afterwards: the in-process workloads compile once here,
    # never from a stale cache of another version.
    if "TRITON_CACHE_DIR" in os.environ:
        return _run(args, only)
    with tempfile.TemporaryDirectory(prefix="triton-iree-bench-") as cache:
        os.environ["TRITON_CACHE_DIR"] = cache
        try:
            return _run(args, only)
        finally:
            del os.environ["TRITON_CACHE_DIR"]


def _load() -> float | None:
    return round(os.getloadavg()[0], 1) if hasattr(os, "getloadavg") else None


def _run(args, only: tuple[str, ...]) -> int:
    from . import activate
    activate()   # the CPU target, also where a GPU makes Triton's own driver the default
    info = machine()
    load = _load()
    print(f"{info['cpu']} ({info['isa']}), {info['cpus']} CPUs, load average {load}; torch {info['torch']} "
          f"({info['torch_threads']} threads), triton {info['triton']}, iree {info['iree']}, target CPU "
          f"{info['target_cpu']}; {'quick' if args.quick else 'full'} run")
    results = run_suite(args.quick, args.rounds, only, args.cold_runs)
    # Other processes on the machine slow both sides, unevenly: the load averages say how busy it was.
    info["load_average_start"] = load
    info["load_average_end"] = _load()
    print(f"load average at the end: {info['load_average_end']}")
    if args.markdown:
        print()
        print(markdown_table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "quick": args.quick, "command": " ".join(["triton-iree", "bench", *sys.argv[2:]])
                       if sys.argv[1:2] == ["bench"] else None,
                       "workloads": [asdict(r) for r in results]}, f, indent=1)
    if args.png:
        write_png(results, args.png, args.quick)
    return 0 if all(r.correct for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
