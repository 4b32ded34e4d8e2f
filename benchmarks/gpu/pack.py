"""Compiles the GPU cases (cases.py) ahead of time, on a machine without a GPU: for each case, the
native-mode module (Triton's own PTX inside an IREE module) and the IREE-codegen module, for
CUDA. Writes OUT/manifest.json and the .vmfb files; run.py runs them where the GPU is.
`--target hip` compiles the codegen modules for AMD GPUs instead (no native mode there);
`--target vulkan` adds Vulkan modules (IREE's `ampere` Vulkan target by default) to OUT's manifest,
which run.py runs on IREE's vulkan driver beside the CUDA ones.

    python benchmarks/gpu/pack.py OUT [--target cuda|hip|vulkan] [--arch sm_80|gfx942|ampere] [--only NAME ...]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TRITON_IREE_UNVALIDATED_TARGETS", "1")   # for --target hip, vulkan (not validated yet)

from cases import CASES, specialization  # noqa: E402
from triton_iree import aot  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--target", choices=("cuda", "hip", "vulkan"), default="cuda")
    p.add_argument("--arch", help="IREE's GPU target for codegen (default sm_80, whose PTX runs on newer "
                                  "NVIDIA GPUs; gfx942 for hip; ampere for vulkan)")
    p.add_argument("--native-arch", type=int, default=90, help="Triton's CUDA compute capability in native mode")
    p.add_argument("--only", nargs="*")
    p.add_argument("--no-codegen", action="store_true")
    p.add_argument("--no-native", action="store_true")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "manifest.json"
    manifest = json.loads(path.read_text()) if path.exists() else {}
    for case in CASES:
        if args.only and case.name not in args.only:
            continue
        a, ce = case.make("cpu")
        sig, consts, attrs = specialization(case.fn, a, ce)
        entry = manifest.setdefault(case.name, {})
        entry.update(kernel=case.fn.__name__, signature=sig)
        # Vulkan modules go beside the CUDA ones, under their own key.
        key = "vulkan" if args.target == "vulkan" else "codegen"
        # The specialization as a user writes it for `triton-iree compile`: hints as ':16'.
        hinted = {name: ty + (":16" if (i,) in attrs else "") for i, (name, ty) in enumerate(sig.items())
                  if ty != "constexpr"}
        t0 = time.perf_counter()
        if args.target == "vulkan":
            pass   # native mode is CUDA's; the entry keeps what a CUDA pack put there
        elif args.no_native or args.target != "cuda":
            entry["native_error"] = "RuntimeError: " + ("not asked for (--no-native)" if args.no_native else "CUDA only")
        else:
            try:
                k = aot.compile_kernel(case.fn, hinted, consts, target="cuda", arch=f"sm_{args.native_arch}",
                                       native=True, num_warps=case.num_warps, num_stages=case.num_stages)
                (out / f"{case.name}.native.vmfb").write_bytes(k.vmfb)
                entry["native"] = f"{case.name}.native.vmfb"
            except Exception as e:   # recorded: run.py reports it
                entry["native_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:400]}"
        t1 = time.perf_counter()
        if not args.no_codegen:
            try:
                k = aot.compile_kernel(case.fn, hinted, consts, target=args.target, arch=args.arch,
                                       num_warps=case.num_warps)
                (out / f"{case.name}.{key}.vmfb").write_bytes(k.vmfb)
                entry[key] = f"{case.name}.{key}.vmfb"
                entry.pop(f"{key}_error", None)
            except Exception as e:
                msg = [ln for ln in str(e).splitlines() if "error:" in ln] or str(e).splitlines()[:1]
                entry[f"{key}_error"] = f"{type(e).__name__}: {msg[0][:400]}"
        t2 = time.perf_counter()
        entry.setdefault("compile_s", {})[key] = round(t2 - t1, 2)
        if args.target != "vulkan":
            entry["compile_s"]["native"] = round(t1 - t0, 2)
        print(f"{case.name}: native {'ok' if 'native' in entry else entry.get('native_error')}; "
              f"{key} {'ok' if key in entry else entry.get(f'{key}_error', 'skipped')}", flush=True)
    path.write_text(json.dumps(manifest, indent=1))


if __name__ == "__main__":
    main()
