"""Replays the launches record.py recorded, on an NVIDIA GPU in native mode, and compares the GPU's
memory after each launch with the CPU's (whose results the tests checked).

    python benchmarks/gpu/replay.py RECORD [--json OUT.json]

Needs torch with CUDA and iree-base-runtime; no Triton, no IREE compiler.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import torch

from triton_iree.aot import Launcher

# Tolerances per element type: the GPU's math functions and fused multiply-adds round
# differently from the CPU's.
_TOL = {torch.float32: (1e-4, 1e-5), torch.float64: (1e-10, 1e-12), torch.float16: (2e-2, 1e-2),
        torch.bfloat16: (3e-2, 2e-2)}


def _view(storage, spec, device):
    _, _, offset, shape, stride, dtype = spec
    return torch.empty(0, dtype=dtype, device=device).set_(storage, offset, shape, stride)


def _compare(got: torch.Tensor, want: torch.Tensor, dtype) -> str | None:
    """Both are whole storages as bytes; compared as `dtype` where the byte count allows."""
    if got.numel() % dtype.itemsize:
        dtype = torch.uint8
    g, w = got.view(dtype), want.view(dtype)
    if dtype.is_floating_point:
        rtol, atol = _TOL.get(dtype, (0, 0))
        ok = torch.isclose(g.float() if dtype.itemsize < 4 else g, w.float() if dtype.itemsize < 4 else w,
                           rtol=rtol, atol=atol, equal_nan=True)
        bad = (~ok).sum().item()
        if bad:
            i = int((~ok).nonzero()[0])
            return f"{bad} of {g.numel()} {dtype} elements differ (first at {i}: GPU {g[i].item()!r}, CPU {w[i].item()!r})"
        return None
    bad = (g != w).sum().item()
    return f"{bad} of {g.numel()} {dtype} elements differ" if bad else None


def replay(rec: dict, pack: Path, launchers: dict) -> str:
    if rec["vmfb"].startswith("error:"):
        return "not compiled: " + rec["vmfb"][7:]
    key = rec["vmfb"]
    if key not in launchers:
        launchers[key] = Launcher(pack / key, rec["kernel"], rec["signature"], "cuda")
    storages = {sid: b.cuda() for sid, b in rec["pre"].items()}
    values, dtypes = [], {}
    for spec in rec["args"]:
        if spec[0] == "t":
            values.append(_view(storages[spec[1]].untyped_storage(), spec, "cuda"))
            dtypes.setdefault(spec[1], spec[5])
        else:
            values.append(spec[1])
    launchers[key](*values, grid=rec["grid"])
    torch.cuda.synchronize()
    for sid, want in rec["post"].items():
        err = _compare(storages[sid].cpu(), want, dtypes.get(sid, torch.uint8))
        if err:
            return "wrong: " + err
    return "ok"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("record")
    p.add_argument("--json")
    args = p.parse_args()
    pack = Path(args.record)
    launchers: dict = {}
    results = {}
    for path in sorted(pack.glob("launch-*.pt")):
        rec = torch.load(path, weights_only=False)
        rec_test = rec["test"]
        try:
            status = replay(rec, pack, launchers)
        except Exception as e:
            status = f"error: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
        results[path.name] = {"test": rec_test, "status": status}
        if status != "ok" and not status.startswith("not compiled"):
            print(f"{path.name} {rec_test}: {status}", flush=True)
        if len(results) % 100 == 0:
            print(f"... {len(results)} launches: " + ", ".join(
                f"{k}: {v}" for k, v in sorted(Counter(r["status"].split(":")[0] for r in results.values()).items())),
                flush=True)
    kinds = Counter(r["status"].split(":")[0] for r in results.values())
    tests = {}
    for r in results.values():
        tests.setdefault(r["test"], []).append(r["status"])
    ok_tests = sum(all(s == "ok" for s in v) for v in tests.values())
    print(f"launches: {len(results)}; " + ", ".join(f"{k}: {v}" for k, v in sorted(kinds.items())))
    print(f"tests: {ok_tests} of {len(tests)} with every launch correct")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    sys.exit(0)


if __name__ == "__main__":
    main()
