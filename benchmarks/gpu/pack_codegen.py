"""Compiles the kernels record.py recorded through IREE's own code generation for CUDA, on a
machine without a GPU, from the TTIR the recording saved (no test runs again): for each
RECORD/<name>.kernel.json, the GPU lowering of that TTIR (triton-iree's backend stages, as
`triton_iree.aot.compile_kernel(..., target="cuda")` runs them after Triton's frontend), compiled
by iree-compile into RECORD/<name>.codegen.vmfb; for kernels with a recorded launch whose tensors
share storage, also the variant for pointer arguments that share memory,
RECORD/<name>.codegen-shared.vmfb. Writes RECORD/codegen.json: per kernel, its files or the first
`error:` line of why it did not compile. replay.py runs them on the GPU.

    python benchmarks/gpu/pack_codegen.py RECORD [--arch sm_80] [--jobs N] [--only NAME ...]

Run it again whenever the GPU lowering changes; modules whose text did not change come from
triton-iree's compile cache. `--target llvm-cpu`, on a copy of RECORD, compiles the CPU's modules
from the same TTIR instead: `replay.py COPY --mode codegen` then runs them on the CPU, a check of
the recording, of this script and of replay.py where there is no GPU.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path


MANIFEST = "codegen.json"


def first_error(e: BaseException) -> str:
    """The first `error:` line of an exception's message (iree-compile's diagnostics), else its
    first line (for a crash of iree-compile: with its first assertion line, and where its input
    is kept); with the exception's type."""
    lines = [ln.strip() for ln in str(e).splitlines()]
    msg = next((ln for ln in lines if "error:" in ln), lines[0] if lines else "")
    if "killed by signal" in msg:
        head, _, kept = msg.partition("; the input is kept in ")
        why = next((ln for ln in lines if re.search(r"Assertion|LLVM ERROR|UNREACHABLE", ln)), "")
        msg = head + (f" | {why[:300]}" if why else "") + (f" (input kept in {kept.split(';')[0]})" if kept else "")
    return f"{type(e).__name__}: {msg[:500]}"


def error_kind(error: str) -> str:
    """An error message without what differs between kernels (the source location before
    `error:`, numbers), to count errors of one kind together."""
    kind, _, msg = error.partition(": ")
    if "error:" in msg:
        msg = msg[msg.index("error:") + len("error:"):].strip()
    msg = re.sub(r" \((input kept in|kernel) [^)]*\)$", "", msg)
    return f"{kind}: {re.sub(r'[0-9]+', 'N', msg)}"


def compile_one(path: str, arch: str, target: str = "cuda") -> dict:
    """Lowers and compiles one recorded kernel; a dict for the manifest (never raises)."""
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget

    from triton_iree.backend.compiler import IreeBackend
    from triton_iree.compile import compile_module

    rec = Path(path).parent
    entry = json.loads(Path(path).read_text())
    name = entry["name"]
    out = {"kernel": entry["kernel"], "num_warps": entry["num_warps"]}
    t0 = time.perf_counter()
    stage, shared = "lower", ""
    try:
        # As aot.compile_kernel for target="cuda": the backend's "iree" stage (reader, GPU emitter
        # options for num_warps, lowering) and its "vmfb" stage (iree-compile for cuda:<arch>),
        # on the TTIR Triton made for the recorded launch (its "ttir" stage already ran).
        backend = IreeBackend(GPUTarget("iree", f"cuda:{arch}", 32) if target == "cuda" else
                              GPUTarget("cpu", "llvm-cpu", 1))
        options = backend.parse_options({"num_warps": entry["num_warps"]})
        stages: dict = {}
        backend.add_stages(stages, options)
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        with tempfile.TemporaryDirectory() as tmp:   # Triton's parser reads a file
            ttir = Path(tmp) / f"{entry['kernel']}.ttir"
            ttir.write_text(entry["ttir"])
            mod = ir.parse_mlir_module(str(ttir), context)
        mod.context = context
        metadata = {"hash": entry["triton_hash"]}
        module = stages["iree"](mod, metadata)
        stage = "compile"
        vmfb = stages["vmfb"](module, metadata)
        (rec / f"{name}.codegen.vmfb").write_bytes(vmfb)
        out["vmfb"] = f"{name}.codegen.vmfb"
        out["written"] = metadata.get("iree_written", [])
        shared = metadata.get("iree_shared_memory_module", "")
    except Exception as e:   # recorded: replay.py reports it with the launches of this kernel
        out["stage"] = stage
        out["error"] = first_error(e)
        shared = ""
    if shared and entry.get("shares_memory"):
        try:   # the JIT compiles it on the first launch that needs it; replay.py's launches may
            (rec / f"{name}.codegen-shared.vmfb").write_bytes(
                compile_module(shared, backend.iree_target, name=metadata["name"]))
            out["shared_vmfb"] = f"{name}.codegen-shared.vmfb"
        except Exception as e:
            out["shared_error"] = first_error(e)
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("record")
    p.add_argument("--arch", default="sm_80", help="IREE's CUDA target (its PTX runs on newer GPUs)")
    p.add_argument("--target", choices=("cuda", "llvm-cpu"), default="cuda",
                   help="llvm-cpu: the CPU's modules instead, for a check of this script and of replay.py "
                        "(on the CPU, from a copy of RECORD) where there is no GPU")
    p.add_argument("--jobs", type=int, default=2, help="kernels compiled at once")
    p.add_argument("--only", nargs="*", help="kernel names (<name> of <name>.kernel.json) to compile again")
    args = p.parse_args()
    rec = Path(args.record)
    paths = sorted(rec.glob("*.kernel.json"))
    if args.only:
        paths = [q for q in paths if q.name[:-len(".kernel.json")] in args.only]
    if not paths:
        sys.exit(f"no *.kernel.json in {rec} (recorded by record.py?)")
    manifest_path = rec / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if args.only and manifest_path.exists() else {}
    if (manifest.get("target", args.target), manifest.get("arch", args.arch)) != (args.target, args.arch):
        sys.exit(f"{manifest_path} is for {manifest['target']} {manifest['arch']}: compile every kernel again")
    kernels = manifest.setdefault("kernels", {})
    manifest["target"], manifest["arch"] = args.target, args.arch
    for q in paths:   # stale modules of an earlier run must not be replayed
        name = q.name[:-len(".kernel.json")]
        for f in (rec / f"{name}.codegen.vmfb", rec / f"{name}.codegen-shared.vmfb"):
            f.unlink(missing_ok=True)
        kernels.pop(name, None)
    t0 = time.perf_counter()
    # Processes started afresh: each lowers in its own MLIR contexts.
    with ProcessPoolExecutor(max_workers=max(1, args.jobs), mp_context=multiprocessing.get_context("spawn")) as ex:
        futures = {ex.submit(compile_one, str(q), args.arch, args.target): q.name[:-len(".kernel.json")] for q in paths}
        for i, fut in enumerate(as_completed(futures), 1):
            name = futures[fut]
            try:
                kernels[name] = fut.result()
            except Exception as e:   # the worker process died
                kernels[name] = {"stage": "worker", "error": first_error(e)}
            r = kernels[name]
            print(f"[{i}/{len(paths)}] {name}: {'ok' if 'vmfb' in r else r['error']}", flush=True)
            if i % 20 == 0:
                manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    manifest["seconds"] = round(time.perf_counter() - t0, 1)
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    ok = sum("vmfb" in r for r in kernels.values())
    print(f"{ok} of {len(kernels)} kernels compiled for {args.target}"
          f"{':' + args.arch if args.target == 'cuda' else ''} "
          f"({sum('shared_vmfb' in r for r in kernels.values())} with the shared-memory variant)")
    for msg, n in Counter(error_kind(r["error"]) for r in kernels.values() if "error" in r).most_common(10):
        print(f"  {n:4d}  {msg}")


if __name__ == "__main__":
    main()
