"""Shared timing helpers for the benchmarks.

Shared, noisy machines make single timings meaningless, so candidates are measured side by
side: each round runs every candidate once, in alternating order, and we report per-candidate
medians, the 10th percentile (close to the uncontended time), and the median of the per-round
ratios against the first candidate (robust against slow phases that hit a whole round).
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]


def use_examples() -> None:
    """Puts examples/ (the kernel corpus) on sys.path."""
    p = str(ROOT / "examples")
    if p not in sys.path:
        sys.path.insert(0, p)


def side_by_side(fns: dict[str, Callable[[], object]], rounds: int, inner: int = 1,
                 warmup: int = 2) -> dict[str, dict[str, float]]:
    """Times each candidate `rounds` times (each sample averages `inner` calls), alternating.

    Returns {name: {"median": s, "p10": s, "ratio": median of per-round ratios to the first,
    "p10_ratio": ratio of the p10s}}.
    """
    names = list(fns)
    for f in fns.values():
        for _ in range(warmup):
            f()
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
