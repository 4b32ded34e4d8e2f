"""Runs the modules pack.py compiled on a machine with an NVIDIA GPU, through IREE's CUDA runtime
(no IREE compiler needed), and checks and times them against native Triton on the same tensors
in the same process.

    python benchmarks/gpu/run.py PACK [--json OUT.json]

For every case: the reference (torch), Triton's own launch, then each IREE module (native mode,
codegen). Outputs must match the reference; guard elements around outputs must stay untouched.
Benchmark cases are timed four ways, for Triton and IREE alike: the device time of the kernels a
launch runs (the CUDA profiler's record, median of 20 launches); the wall time of a launch
followed by a device synchronization (`_call`, median of 7 x 5); the wall time until a launch
returns (`_return`, median of 7 x 20, synchronized between the trials only); and the wall time of
100 back-to-back launches and one synchronization (`_100`, median of 5).

Cases the pack has Vulkan modules for (`pack.py --target vulkan`) also run on IREE's vulkan
driver, on CPU tensors as Vulkan launches take them (copied to the GPU and back), checked against
torch on the CPU; benchmark cases are timed there as the wall time of an invocation on buffers
already on the GPU (`vulkan`, median of 20: the kernels plus IREE's submission and the wait on
its fence, no copies), and as 100 such invocations back to back, each ordered after the one
before by its fence, with one wait at the end (`vulkan_100`, median of 5).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import iree.runtime as rt  # noqa: E402
import torch  # noqa: E402

from cases import CASES, specialization  # noqa: E402
from triton_iree import aot, arguments  # noqa: E402
from triton_iree.copies import DeviceCopies  # noqa: E402


def guards_intact(t: torch.Tensor) -> bool:
    base = t._base
    if base is None or base.dim() != 1:
        return True
    covered = torch.zeros(base.numel(), dtype=torch.bool, device=base.device)
    covered.as_strided(t.shape, t.stride(), t.storage_offset() - base.storage_offset()).fill_(True)
    rest = base[~covered]
    return bool(torch.isnan(rest).all()) if rest.dtype.is_floating_point else bool((rest == -7).all())


def compare(got, want, case) -> str | None:
    for i, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape:
            return f"output {i}: shape {tuple(g.shape)} != {tuple(w.shape)}"
        if g.dtype.is_floating_point:
            if not torch.allclose(g.float(), w.float(), atol=case.atol, rtol=case.rtol, equal_nan=False):
                err = (g.float() - w.float()).abs().nan_to_num(float("inf")).max().item()
                return f"output {i}: max abs error {err:.3g}"
        elif not torch.equal(g, w):
            return f"output {i}: {(g != w).sum().item()} elements differ"
        if not guards_intact(g):
            return f"output {i}: elements outside the output were written"
    return None


def fresh(case, device="cuda"):
    torch.manual_seed(0)
    a, ce = case.make(device)
    return a, ce


class IreeModule:
    """A compiled module, launched the way users launch one: `triton_iree.aot.Launcher`."""

    def __init__(self, vmfb: bytes, name: str, sig: dict, target: str = "cuda"):
        names = list(sig)
        self.keep = [i for i, n in enumerate(names) if sig[n] != "constexpr"]
        self.launcher = aot.Launcher(vmfb, name, {n: t for n, t in sig.items() if t != "constexpr"}, target)

    def launch(self, args, grid):
        self.launcher(*[args[i] for i in self.keep], grid=grid)

    def invoke_ms(self, args, grid, n=20) -> tuple[float, float]:
        """Vulkan: wall milliseconds of one invocation on device buffers holding copies of
        `args` (uploaded once), median of n; and of 100 back-to-back invocations and one wait on
        the last one's fence, median of 5 (fenced modules only, else None)."""
        kernel, abi = self.launcher.kernel, self.launcher.abi
        values = [args[i] for i in self.keep]
        dev = kernel.dev
        copies = DeviceCopies(dev.device, dev.pool)   # kept: it holds the uploaded buffers
        spans = arguments.check_arguments(dev, abi, values, grid, kernel.name)
        items = arguments.argument_items(dev, abi, values, grid, spans, copies)
        copies.uploaded()
        ctx = kernel.main
        times = []
        for _ in range(n + 1):
            args = arguments.vm_list(items, 2)   # the invocation pushes its fences on it: a new one each time
            t0 = time.perf_counter()
            if ctx.fenced:
                dev.timeline.invoke(ctx.context, ctx.function, args).wait()
            else:
                ctx.context.invoke(ctx.function, args, rt.VmVariantList(1))
            times.append((time.perf_counter() - t0) * 1e3)
        if not ctx.fenced:
            return statistics.median(times[1:]), None
        hundred = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(100):
                fence = dev.timeline.invoke(ctx.context, ctx.function, arguments.vm_list(items, 2))
            fence.wait()
            hundred.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times[1:]), statistics.median(hundred)


def vulkan(case, entry, pack, sig, res) -> None:
    """The case on IREE's vulkan driver (see the module docstring): res["vulkan"], and for a
    benchmark case res["ms"]["vulkan"]."""
    try:
        a, _ = fresh(case, "cpu")
        want = case.ref(a)
        grid = case.grid(a)
        m = IreeModule((pack / entry["vulkan"]).read_bytes(), entry["kernel"], sig, "vulkan")
        b, _ = fresh(case, "cpu")
        t0 = time.perf_counter()
        m.launch(b, grid)
        res["vulkan_first_launch_s"] = round(time.perf_counter() - t0, 3)
        res["vulkan"] = compare([b[i] for i in case.outputs], want, case) or "ok"
        if case.bench and res["vulkan"] == "ok":
            res["ms"]["vulkan"], hundred = m.invoke_ms(b, grid)
            if hundred is not None:
                res["ms"]["vulkan_100"] = hundred
    except Exception as e:
        res["vulkan"] = f"{type(e).__name__}: {str(e)[:300]}"


def ordered_with_torch(m, case, grid) -> str:
    """A launch must see what torch queued before it and finish before torch reads its result:
    torch's stream is kept busy, then it changes an input, then the launch, then torch reads."""
    b, _ = fresh(case)
    torch.cuda._sleep(200_000_000)   # a few tens of ms of GPU time on torch's stream
    b[0].add_(1.0)
    m.launch(b, grid)
    return compare([b[i].clone() for i in case.outputs], case.ref(b), case) or "ok"


def wall_ms(fn, trials: int, calls: int, sync: str) -> float:
    """Median over `trials` of the wall-clock milliseconds per call of `calls` calls of fn(), with a
    device synchronization after each call (`sync="each"`, timed), after the calls ("end", timed)
    or after the trial's time is taken ("outside": the time until the calls return)."""
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(trials):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
            if sync == "each":
                torch.cuda.synchronize()
        if sync == "end":
            torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) / calls * 1e3)
        if sync == "outside":
            torch.cuda.synchronize()
    return statistics.median(out)


def kernel_ms(fn, n=20) -> tuple[float, list]:
    """Device milliseconds per call of fn(), from the CUDA kernels the profiler saw run during
    n calls (whoever launched them: Triton, or IREE's runtime): the median of each kernel that
    ran n times, summed; with the kernels' names."""
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
    times: dict[str, list] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            times.setdefault(e.name, []).append(e.time_range.elapsed_us())
    per = {name: statistics.median(ts) for name, ts in times.items() if len(ts) >= n}
    return sum(per.values()) / 1e3, sorted(f"{name} x{len(times[name])}" for name in times)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("pack")
    p.add_argument("--json")
    p.add_argument("--only", nargs="*", help="the cases to run (default: all the pack has)")
    p.add_argument("--vulkan", nargs="*", help="the cases to run on Vulkan too (default: all the pack has "
                                                "Vulkan modules for)")
    args = p.parse_args()
    pack = Path(args.pack)
    manifest = json.loads((pack / "manifest.json").read_text())
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}")
    results = {}
    for case in CASES:
        entry = manifest.get(case.name)
        if entry is None or args.only and case.name not in args.only:
            continue
        if args.vulkan is not None and case.name not in args.vulkan:
            entry = {k: v for k, v in entry.items() if not k.startswith("vulkan")}
        res = results[case.name] = {}
        a, ce = fresh(case)
        sig, _, _ = specialization(case.fn, a, ce)
        grid = case.grid(a)
        want = case.ref(a)
        case.fn[grid](*a, **ce, num_warps=case.num_warps, num_stages=case.num_stages)
        torch.cuda.synchronize()
        res["triton"] = compare([a[i] for i in case.outputs], want, case) or "ok"
        triton_out = [a[i].clone() for i in case.outputs]
        modules = {}
        for mode in ("native", "codegen"):
            if mode not in entry:
                res[mode] = entry.get(f"{mode}_error", "not compiled")
                continue
            try:
                m = modules[mode] = IreeModule((pack / entry[mode]).read_bytes(), entry["kernel"], sig)
                b, _ = fresh(case)
                m.launch(b, grid)
                torch.cuda.synchronize()
                got = [b[i] for i in case.outputs]
                res[mode] = compare(got, want, case) or "ok"
                # The same machine code as Triton's launch: the same bits.
                res[f"{mode}_bitwise_equal_to_triton"] = all(
                    torch.equal(g.nan_to_num(), t.nan_to_num()) and torch.equal(g.isnan(), t.isnan())
                    for g, t in zip(got, triton_out))
                if case.name.startswith("vector_add") and not case.bench:
                    res[f"{mode}_stream_order"] = ordered_with_torch(m, case, grid)
            except Exception as e:
                res[mode] = f"{type(e).__name__}: {str(e)[:300]}"
        if case.bench:
            b, ce = fresh(case)

            def triton_launch(b=b, ce=ce):
                case.fn[grid](*b, **ce, num_warps=case.num_warps, num_stages=case.num_stages)
            launches = {"triton": triton_launch}
            launches.update((mode, lambda m=m, b=b: m.launch(b, grid)) for mode, m in modules.items()
                            if res.get(mode) == "ok")
            res["ms"], res["kernels"] = {}, {}
            for mode, fn in launches.items():
                res["ms"][f"{mode}_call"] = wall_ms(fn, 7, 5, "each")
                res["ms"][f"{mode}_return"] = wall_ms(fn, 7, 20, "outside")
                res["ms"][f"{mode}_100"] = wall_ms(fn, 5, 100, "end") * 100
                res["ms"][mode], res["kernels"][mode] = kernel_ms(fn)
        if "vulkan" in entry:
            res.setdefault("ms", {})
            vulkan(case, entry, pack, sig, res)
        elif "vulkan_error" in entry:
            res["vulkan"] = entry["vulkan_error"]
        if case.bench:
            work = case.flops or case.nbytes
            res["rate"] = {k: round(work / (v * 1e-3) / (1e12 if case.flops else 1e9), 1)
                           for k, v in res["ms"].items() if "_" not in k}
            res["rate_unit"] = "TFLOP/s" if case.flops else "GB/s"
        print(f"{case.name}: " + json.dumps(res), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    for mode in ("native", "codegen", "vulkan"):
        ran = [n for n in results if mode in manifest[n]]
        ok = [n for n in ran if results[n][mode] == "ok"]
        same = [n for n in ran if results[n].get(f"{mode}_bitwise_equal_to_triton")]
        print(f"{mode}: {len(ok)}/{len(ran)} compiled cases correct, {len(same)} bitwise equal to Triton's "
              f"launch; {len(results) - len(ran)} cases did not compile")


if __name__ == "__main__":
    main()
