"""Where a CUDA launch's host time goes: each step of `aot.Launcher`'s path timed alone, on a
machine with an NVIDIA GPU, with the vector add module of a pack (`pack.py`).

    python benchmarks/gpu/launch_profile.py PACK

Prints, for native mode and code generation, the median microseconds (of 3000) of the whole
launch and of each step: the argument checks, building IREE's argument list, one cached import,
the DLPack path's steps (a strided view, its capsule, IREE's import: what each tensor cost every
launch before views were kept, and still costs where IREE's import has no element type), torch's
current stream as an object and as a handle, IREE's invocation of the ordered function, one CUDA
stream memory operation. Then the time of each of 20 launches made back to back right after a
synchronization (5 trials), for a short kernel (2^10 elements) and a long one (2^26).
IREE runtime flags can be given in PROFILE_FLAGS (e.g. "--cuda_use_streams=false").
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

import iree.runtime as rt

if os.environ.get("PROFILE_FLAGS"):
    rt.flags.parse_flags(*os.environ["PROFILE_FLAGS"].split())

import torch  # noqa: E402

from triton_iree import aot, runtime  # noqa: E402


def median_us(fn, reps=3000) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return round(statistics.median(times) * 1e6, 2)


def steps(launcher: aot.Launcher, n: int) -> dict[str, float]:
    x, y, out = (torch.randn(n, device="cuda") for _ in range(3))
    k, abi = launcher.kernel, launcher.abi
    args, grid = (x, y, out, n), ((n + 1023) // 1024, 1, 1)
    launcher(*args, grid=grid[:1])   # the first launch loads the kernels
    torch.cuda.synchronize()
    r = {"launcher_call": median_us(lambda: launcher(*args, grid=grid[:1])),
         "kernel_launch": median_us(lambda: k.launch(abi, args, grid)),
         "check_arguments": median_us(lambda: runtime.check_arguments(k.dev, abi, args, grid, k.name))}
    spans = runtime.check_arguments(k.dev, abi, args, grid, k.name)
    r["build_arguments"] = median_us(lambda: runtime.build_arguments(k.dev, abi, args, grid, spans))
    r["import_tensor_cached"] = median_us(lambda: runtime.import_tensor(k.dev, x, "f32", spans[0]))
    r["dlpack_flat_view"] = median_us(lambda: runtime.flat_view(x))
    view, _ = runtime.flat_view(x)
    r["dlpack_capsule"] = median_us(lambda: view.__dlpack__())
    r["dlpack_capsule_and_import"] = median_us(lambda: k.dev.device.from_dlpack_capsule(view.__dlpack__()))
    r["torch_current_stream_object"] = median_us(lambda: torch.cuda.current_stream())
    r["torch_current_stream_handle"] = median_us(
        lambda: torch._C._cuda_getCurrentRawStream(torch._C._cuda_getDevice()))
    order, ctx, timeline = k.dev.order, k.main, k.dev.timeline
    stream = torch.cuda.current_stream().cuda_stream
    flags = order._flags(stream, 0)

    def invoke() -> float:
        a = runtime.build_arguments(k.dev, abi, args, grid, spans)
        flags.seq += 1
        order.cuda.write(stream, flags.address, flags.seq, 0)
        a.push_ref(flags.view)
        a.push_int(flags.seq)
        t0 = time.perf_counter()
        timeline.invoke(ctx.context, ctx.ordered, a)
        t = time.perf_counter() - t0
        order.cuda.wait(stream, flags.address + 8, flags.seq, 0)
        return t
    r["iree_invoke_ordered"] = round(statistics.median(invoke() for _ in range(3000)) * 1e6, 2)
    torch.cuda.synchronize()
    r["cuda_stream_write_value"] = median_us(lambda: order.cuda.write(stream, flags.address, flags.seq, 0))
    return r


def after_sync(launcher: aot.Launcher, n: int) -> list[list[float]]:
    a = (*(torch.randn(n, device="cuda") for _ in range(3)), n)
    grid = ((n + 1023) // 1024,)
    launcher(*a, grid=grid)
    trials = []
    for _ in range(5):
        torch.cuda.synchronize()
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            launcher(*a, grid=grid)
            times.append(round((time.perf_counter() - t0) * 1e6, 1))
        trials.append(times)
    torch.cuda.synchronize()
    return trials


def main() -> None:
    pack = Path(sys.argv[1])
    entry = json.loads((pack / "manifest.json").read_text())["vector_add_67108864"]
    sig = {k: v for k, v in entry["signature"].items() if v != "constexpr"}
    print(f"device: {torch.cuda.get_device_name()}; flags: {os.environ.get('PROFILE_FLAGS', '')}")
    for mode in ("codegen", "native"):
        launcher = aot.Launcher((pack / entry[mode]).read_bytes(), entry["kernel"], sig, "cuda")
        print(mode, json.dumps(steps(launcher, 1 << 20)), flush=True)
        for n in (1 << 10, 1 << 26):
            print(mode, f"20 launches of {n} elements after a synchronization, us:",
                  json.dumps(after_sync(launcher, n)), flush=True)


if __name__ == "__main__":
    main()
