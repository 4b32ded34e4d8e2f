"""Replays the launches record.py recorded, on an NVIDIA GPU, in native mode (record.py's modules)
and through IREE's code generation (pack_codegen.py's modules), and compares the GPU's memory
after each launch with the CPU's (whose results the tests checked).

    python benchmarks/gpu/replay.py RECORD [--mode native|codegen|both] [--json OUT.json]
    python benchmarks/gpu/replay.py RECORD --check   # no GPU: every record loads, its modules exist

Needs torch with CUDA and iree-base-runtime; no Triton, no IREE compiler. Each mode starts from
the recorded memory again. A summary per mode: launches ok, wrong, not compiled (why, for code
generation: the first error line of pack_codegen.py, grouped), error (failed to import or run),
and the tests whose every recorded launch is correct. (Codegen modules that pack_codegen.py
compiled with `--target llvm-cpu` run on the CPU, without a GPU.)
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pack_codegen import MANIFEST, error_kind  # noqa: E402

from triton_iree import abi, runtime, targets  # noqa: E402
from triton_iree.aot import Launcher  # noqa: E402

# Tolerances per element type: the GPU's math functions and fused multiply-adds round
# differently from the CPU's.
_TOL = {torch.float32: (1e-4, 1e-5), torch.float64: (1e-10, 1e-12), torch.float16: (2e-2, 1e-2),
        torch.bfloat16: (3e-2, 2e-2)}
MODES = ("native", "codegen")


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


class NotCompiled(Exception):
    pass


class _Shared(runtime.SharedMemory):
    """The codegen module for pointer arguments that share memory, compiled by pack_codegen.py:
    the runtime picks it for a launch whose written buffer overlaps another, as the JIT does."""

    def __init__(self, entry: dict, pack: Path, kernel: str, driver: str):
        super().__init__("", entry.get("written", []), None)
        self.path = pack / entry["shared_vmfb"] if "shared_vmfb" in entry else None
        self.why = entry.get("shared_error", "no module for arguments that share memory (the recording saw none)")
        self.name, self.driver = kernel, driver

    def kernel(self, main):
        if self.loaded is None:
            if self.path is None:
                raise NotCompiled("shared-memory variant: " + self.why)
            self.loaded = runtime.LoadedKernel(self.path.read_bytes(), self.name, self.driver, aliasing=True)
        return self.loaded


class Replayer:
    def __init__(self, pack: Path):
        self.pack = pack
        self.found: dict = {}       # (mode, module name in the record) -> (path, shared)
        self.launchers: dict = {}   # path -> Launcher
        path = pack / MANIFEST
        self.codegen = json.loads(path.read_text()) if path.exists() else None
        # llvm-cpu: a check of this script and of pack_codegen.py on a machine without a GPU
        self.target = (self.codegen or {}).get("target", "cuda")

    def modules(self, rec: dict, mode: str):
        """(path, shared) of the launch's module in `mode` (shared: the codegen module for arguments
        that share memory, if the kernel writes memory); raises NotCompiled."""
        key = (mode, rec["vmfb"] if mode == "native" else rec["codegen"])
        if key in self.found:
            return self.found[key]
        if mode == "native":
            if rec["vmfb"].startswith("error:"):
                raise NotCompiled(rec["vmfb"][len("error:"):].strip())
            path, shared = self.pack / rec["vmfb"], None
        else:
            if self.codegen is None:
                raise NotCompiled(f"no {MANIFEST} (run pack_codegen.py)")
            entry = self.codegen["kernels"].get(rec["codegen"])
            if entry is None:
                raise NotCompiled(f"not in {MANIFEST} (run pack_codegen.py again)")
            if "error" in entry:
                raise NotCompiled(entry["error"])
            path = self.pack / entry["vmfb"]
            driver = targets.target_class(self.target).driver
            shared = _Shared(entry, self.pack, rec["kernel"], driver) if entry.get("written") else None
        if not path.exists():
            raise NotCompiled(f"{path.name} is missing")
        self.found[key] = (path, shared)
        return self.found[key]

    def device(self, mode: str) -> str:
        return "cpu" if mode == "codegen" and self.target == "llvm-cpu" else "cuda"

    def replay(self, rec: dict, mode: str) -> str:
        try:
            path, shared = self.modules(rec, mode)
        except NotCompiled as e:
            return f"not compiled: {e}"
        target = "cuda" if mode == "native" else self.target
        device = self.device(mode)
        launcher = self.launchers.get(path)
        if launcher is None:
            launcher = self.launchers[path] = Launcher(path, rec["kernel"], rec["signature"], target)
        storages = {sid: b.to(device) for sid, b in rec["pre"].items()}
        values, dtypes = [], {}
        for spec in rec["args"]:
            if spec[0] == "t":
                values.append(_view(storages[spec[1]].untyped_storage(), spec, device))
                dtypes.setdefault(spec[1], spec[5])
            else:
                values.append(spec[1])
        try:
            # with the module for arguments that share memory beside, as the JIT launches
            launcher.launch(values, rec["grid"], shared)
        except NotCompiled as e:
            return f"not compiled: {e}"
        if device == "cuda":
            torch.cuda.synchronize()
        for sid, want in rec["post"].items():
            err = _compare(storages[sid].cpu(), want, dtypes.get(sid, torch.uint8))
            if err:
                return "wrong: " + err
        return "ok"

    def check(self, rec: dict, mode: str) -> str:
        """Without a device: the launch's module exists and its arguments can be planned."""
        try:
            path, _ = self.modules(rec, mode)
        except NotCompiled as e:
            return f"not compiled: {e}"
        abi.of_signature(list(rec["signature"]), rec["signature"], rec["kernel"])
        tensors = [s for s in rec["args"] if s[0] == "t"]
        missing = {s[1] for s in tensors} - set(rec["pre"])
        if missing or set(rec["post"]) - set(rec["pre"]) or len(rec["args"]) != len(rec["signature"]):
            return "error: inconsistent record"
        return "ok (found)"


def summary(mode: str, results: dict, check: bool = False) -> None:
    statuses = [r[mode] for r in results.values() if mode in r]
    kinds = Counter(s.split(":")[0] for s in statuses)
    tests: dict = {}
    for r in results.values():
        if mode in r:
            tests.setdefault(r["test"], []).append(r[mode])
    ok = "ok (found)" if check else "ok"
    ok_tests = sum(all(s == ok for s in v) for v in tests.values())
    print(f"== {mode}: launches: {len(statuses)}; " + ", ".join(f"{k}: {v}" for k, v in sorted(kinds.items())))
    print(f"   tests: {ok_tests} of {len(tests)} with every launch " + (
        "ready to run (--check: nothing ran)" if check else "correct"))
    for prefix, title in (("not compiled: ", "not compiled, why"), ("error: ", "errors")):
        why = Counter(error_kind(s[len(prefix):]) for s in statuses if s.startswith(prefix))
        if why:
            print(f"   {title} (launches; top 10 of {len(why)} kinds):")
            for msg, n in why.most_common(10):
                print(f"   {n:5d}  {msg[:300]}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("record")
    p.add_argument("--mode", choices=("native", "codegen", "both"), default="both")
    p.add_argument("--check", action="store_true",
                   help="run nothing (no GPU needed): load every record and find its modules")
    p.add_argument("--json")
    p.add_argument("--start", help="replay from this launch on (a launch-NNNNN.pt name)")
    args = p.parse_args()
    pack = Path(args.record)
    modes = MODES if args.mode == "both" else (args.mode,)
    rep = Replayer(pack)
    results: dict = {}
    lost = None
    for path in sorted(pack.glob("launch-*.pt")):
        if args.start and path.name < args.start:
            continue
        rec = torch.load(path, weights_only=False)
        r = results[path.name] = {"test": rec["test"]}
        for mode in modes:
            try:
                status = rep.check(rec, mode) if args.check else rep.replay(rec, mode)
            except Exception as e:
                status = f"error: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
            r[mode] = status
            if status.split(":")[0] not in ("ok", "ok (found)", "not compiled"):
                print(f"{path.name} {mode} {rec['test']}: {status}", flush=True)
            if "ILLEGAL_ADDRESS" in status or "illegal memory access" in status:
                lost = path.name    # the CUDA context is unusable from here on: every later launch fails
                break
        if lost:
            break
        if len(results) % 100 == 0:
            print(f"... {len(results)} launches: " + "; ".join(
                f"{m} " + ", ".join(f"{k}: {v}" for k, v in sorted(
                    Counter(r[m].split(":")[0] for r in results.values()).items())) for m in modes), flush=True)
    for mode in modes:
        summary(mode, results, args.check)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    if lost:
        # A launch that accessed memory out of bounds leaves the process' CUDA context unusable;
        # a new process can go on from the next launch (--start).
        print(f"CUDA context lost at {lost}", flush=True)
        sys.exit(3)
    sys.exit(0)


if __name__ == "__main__":
    main()
