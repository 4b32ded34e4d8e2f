"""Where a CUDA launch's host time goes: each step of `aot.Launcher`'s path timed alone, on a
machine with an NVIDIA GPU, with the vector add module of a pack (`pack.py`).

    python benchmarks/gpu/launch_profile.py PACK

Prints, for native mode and code generation, the median microseconds (of 3000, or PROFILE_REPS)
of the whole launch and of each step: the argument checks, building IREE's argument list, one
cached import (a launch's first time), the launch's key and its list from the items an earlier
launch kept (every later time), the DLPack path's steps (a strided view, its capsule, IREE's
import: what each tensor cost every launch before views were kept, and still costs where IREE's
import has no element type), torch's current stream as an object and as a handle, IREE's
invocation of the ordered function, one CUDA stream memory operation. Then the time of each of 20 launches made
back to back right after a synchronization (5 trials), for a short kernel (2^10 elements) and a
long one (2^26), and the time of each step of those launches; with the IREE compiler there, also
of 20 JIT launches (`kernel[grid]` through triton-iree's backend).
IREE runtime flags can be given in PROFILE_FLAGS (e.g. "--cuda_use_streams=false"), and how
CUDA's context waits for the GPU in PROFILE_CTX_SCHED (spin, yield or blocking).
"""
from __future__ import annotations

import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

import iree.runtime as rt

if os.environ.get("PROFILE_FLAGS"):
    rt.flags.parse_flags(*os.environ["PROFILE_FLAGS"].split())

if os.environ.get("PROFILE_CTX_SCHED"):
    # How CUDA's primary context (torch's and IREE's) waits for the GPU, set before either makes it.
    import ctypes
    cuda = ctypes.CDLL("libcuda.so.1")
    dev = ctypes.c_int()
    sched = {"spin": 1, "yield": 2, "blocking": 4}[os.environ["PROFILE_CTX_SCHED"]]
    for status in (cuda.cuInit(0), cuda.cuDeviceGet(ctypes.byref(dev), 0),
                   cuda.cuDevicePrimaryCtxSetFlags_v2(dev, sched)):
        assert status == 0, f"CUDA error {status} setting the context's flags"

import torch  # noqa: E402

from triton_iree import aot, arguments, runtime  # noqa: E402


# Timed repetitions of each step (PROFILE_REPS).
REPS = int(os.environ.get("PROFILE_REPS", 3000))


def median_us(fn, reps=REPS) -> float:
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
         "check_arguments": median_us(lambda: arguments.check_arguments(k.dev, abi, args, grid, k.name))}
    spans = arguments.check_arguments(k.dev, abi, args, grid, k.name)
    r["build_arguments"] = median_us(lambda: arguments.build_arguments(k.dev, abi, args, grid, spans))
    # What a launch like an earlier one does instead of the two above: its key, and the list
    # from the items the earlier one kept (`LoadedKernel.launch`).
    r["launch_key"] = median_us(lambda: arguments.launch_key(abi, args, grid, False))
    items = kept_items(k, abi, args, grid)
    r["vm_list_of_kept_items"] = median_us(lambda: arguments.vm_list(items, 4))
    r["import_tensor_cached"] = median_us(lambda: arguments.import_tensor(k.dev, x, "f32", spans[0]))
    r["dlpack_flat_view"] = median_us(lambda: arguments.flat_view(x))
    view, _ = arguments.flat_view(x)
    r["dlpack_capsule"] = median_us(lambda: view.__dlpack__())
    r["dlpack_capsule_and_import"] = median_us(lambda: k.dev.device.from_dlpack_capsule(view.__dlpack__()))
    r["torch_current_stream_object"] = median_us(lambda: torch.cuda.current_stream())
    r["torch_current_stream_handle"] = median_us(
        lambda: torch._C._cuda_getCurrentRawStream(torch._C._cuda_getDevice()))
    launch = OrderedSteps(launcher, args, grid)
    r["iree_invoke_ordered"] = round(statistics.median(launch()[2] for _ in range(REPS)), 2)
    torch.cuda.synchronize()
    order, flags = launch.order, launch.flags
    r["cuda_stream_write_value"] = median_us(lambda: order.cuda.write(launch.stream, flags.address, flags.seq, 0))
    return r


def kept_items(k, abi, args, grid) -> list:
    """The items that loaded kernel `k` keeps for a launch like this one (`LoadedKernel.launch`
    finds them by the launch's key and builds its list from them, with room for four values more:
    the order's flags and sequence number, the timeline's fences)."""
    return k._kept[arguments.launch_key(abi, args, grid, False)][2]


class OrderedSteps:
    """A launch of `launcher`'s ordered function taken apart as `StreamOrder.launch` makes it:
    a call returns the microseconds of its key and argument list, of the flag write on
    torch's stream, of IREE's invocation and of the wait on torch's stream."""

    def __init__(self, launcher: aot.Launcher, args, grid):
        self.k, self.abi, self.args, self.grid = launcher.kernel, launcher.abi, args, grid
        self.order = self.k.dev.order
        self.stream = torch.cuda.current_stream().cuda_stream
        self.flags = self.order._flags(self.stream, 0)

    def __call__(self) -> tuple[float, float, float, float]:
        k, flags, cuda = self.k, self.flags, self.order.cuda
        t0 = time.perf_counter()
        a = arguments.vm_list(kept_items(k, self.abi, self.args, self.grid), 4)
        flags.seq += 1
        t1 = time.perf_counter()
        cuda.write(self.stream, flags.address, flags.seq, 0)
        a.push_ref(flags.view)
        a.push_int(flags.seq)
        t2 = time.perf_counter()
        k.dev.timeline.invoke(k.main.context, k.main.ordered, a)
        t3 = time.perf_counter()
        cuda.wait(self.stream, flags.address + 8, flags.seq, 0)
        t4 = time.perf_counter()
        return tuple((b - e) * 1e6 for e, b in ((t0, t1), (t1, t2), (t2, t3), (t3, t4)))


def timed_after_sync(launch) -> list[list[float]]:
    """Microseconds of each of 20 calls of `launch` made back to back right after a
    synchronization (5 trials), after a first call."""
    launch()
    trials = []
    for _ in range(5):
        torch.cuda.synchronize()
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            launch()
            times.append(round((time.perf_counter() - t0) * 1e6, 1))
        trials.append(times)
    torch.cuda.synchronize()
    return trials


def after_sync(launcher: aot.Launcher, n: int) -> list[list[float]]:
    a = (*(torch.randn(n, device="cuda") for _ in range(3)), n)
    return timed_after_sync(lambda: launcher(*a, grid=((n + 1023) // 1024,)))


def after_sync_steps(launcher: aot.Launcher, n: int) -> dict[str, list[float]]:
    """The launches of `after_sync`, each step timed: median microseconds over 5 trials of each
    of the 20 launches' key and argument list, torch-side flag write, IREE's invocation, and
    torch-side wait."""
    a = (*(torch.randn(n, device="cuda") for _ in range(3)), n)
    grid = ((n + 1023) // 1024, 1, 1)
    launcher(*a, grid=grid[:1])
    launch = OrderedSteps(launcher, a, grid)
    names = ("arguments", "write", "invoke", "wait")
    trials: dict[str, list[list[float]]] = {s: [] for s in names}
    for _ in range(5):
        torch.cuda.synchronize()
        times = [launch() for _ in range(20)]
        for s, column in zip(names, zip(*times)):
            trials[s].append(list(column))
    torch.cuda.synchronize()
    return {s: [round(statistics.median(t[i] for t in trials[s]), 1) for i in range(20)] for s in names}


def triton_after_sync(n: int) -> list[list[float]]:
    """`after_sync` for Triton's own launch of the same kernel (its CUDA backend)."""
    from triton_iree.kernels import add_kernel
    x, y, out = (torch.randn(n, device="cuda") for _ in range(3))
    return timed_after_sync(lambda: add_kernel[((n + 1023) // 1024,)](x, y, out, n, BLOCK_SIZE=1024))


def jit_after_sync(n: int) -> list[list[float]]:
    """`after_sync` for `add_kernel[grid](...)` through triton-iree's backend (`activate(target=
    "cuda")`: Triton's JIT launch, then code generation's ordered launch). Needs the IREE compiler."""
    import triton
    import triton_iree
    from triton_iree.kernels import add_kernel
    triton_iree.activate(target="cuda")
    try:
        x, y, out = (torch.randn(n, device="cuda") for _ in range(3))
        return timed_after_sync(lambda: add_kernel[((n + 1023) // 1024,)](x, y, out, n, BLOCK_SIZE=1024))
    finally:
        triton.runtime.driver.reset_active()


def host_after_sync(launcher: aot.Launcher, n: int) -> list[list[float]]:
    """A fixed piece of Python that touches no GPU (the launch's argument checks and list),
    timed 10 times right after a synchronization that waited for 20 launches (5 trials): how
    the host thread runs after waiting."""
    k, abi = launcher.kernel, launcher.abi
    a = (*(torch.randn(n, device="cuda") for _ in range(3)), n)
    grid = ((n + 1023) // 1024, 1, 1)
    trials = []
    for _ in range(5):
        for _ in range(20):
            launcher(*a, grid=grid[:1])
        torch.cuda.synchronize()
        times = []
        for _ in range(10):
            t0 = time.perf_counter()
            arguments.build_arguments(k.dev, abi, a, grid, arguments.check_arguments(k.dev, abi, a, grid, k.name))
            times.append(round((time.perf_counter() - t0) * 1e6, 1))
        trials.append(times)
    return trials


def main() -> None:
    if os.environ.get("PROFILE_WATCHDOG"):   # every thread's stack, and exit, if it hangs
        import faulthandler
        faulthandler.dump_traceback_later(float(os.environ["PROFILE_WATCHDOG"]), exit=True)
    pack = Path(sys.argv[1])
    entry = json.loads((pack / "manifest.json").read_text())["vector_add_67108864"]
    sig = {k: v for k, v in entry["signature"].items() if v != "constexpr"}
    print(f"device: {torch.cuda.get_device_name()}; flags: {os.environ.get('PROFILE_FLAGS', '')}; "
          f"context: {os.environ.get('PROFILE_CTX_SCHED', 'default')}")
    for n in (1 << 10, 1 << 26):
        print("triton", f"20 launches of {n} elements after a synchronization, us:",
              json.dumps(triton_after_sync(n)), flush=True)
    for mode in ("codegen", "native"):
        launcher = aot.Launcher((pack / entry[mode]).read_bytes(), entry["kernel"], sig, "cuda")
        print(mode, json.dumps(steps(launcher, 1 << 20)), flush=True)
        for n in (1 << 10, 1 << 26):
            print(mode, f"20 launches of {n} elements after a synchronization, us:",
                  json.dumps(after_sync(launcher, n)), flush=True)
            print(mode, f"each step of those launches ({n} elements), median us of 5 trials:",
                  json.dumps(after_sync_steps(launcher, n)), flush=True)
            print(mode, f"argument checks and list right after a synchronization ({n} elements), us:",
                  json.dumps(host_after_sync(launcher, n)), flush=True)
    if importlib.util.find_spec("iree.compiler") is not None:
        for n in (1 << 10, 1 << 26):
            print("jit", f"20 launches of {n} elements after a synchronization, us:",
                  json.dumps(jit_after_sync(n)), flush=True)


if __name__ == "__main__":
    main()
