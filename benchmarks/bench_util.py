"""Shared timing helpers for the benchmarks (they live in `triton_iree.bench`, which runs the
workload suite as `triton-iree bench`).

Shared, noisy machines make single timings meaningless, so candidates are measured side by
side: each round runs every candidate once, in alternating order, and we report per-candidate
medians, the 10th percentile (close to the uncontended time), and the median of the per-round
ratios against the first candidate (robust against slow phases that hit a whole round).
"""
from __future__ import annotations

import sys
from pathlib import Path

from triton_iree.bench import fmt_time, report, side_by_side  # one copy, in the package

__all__ = ["ROOT", "use_examples", "side_by_side", "fmt_time", "report"]

ROOT = Path(__file__).resolve().parents[1]


def use_examples() -> None:
    """Puts examples/ (the kernel corpus) on sys.path."""
    p = str(ROOT / "examples")
    if p not in sys.path:
        sys.path.insert(0, p)
