"""`kernel[grid](...)` on Vulkan with CPU tensors: what copying the tensors costs a launch.

    TRITON_IREE_UNVALIDATED_TARGETS=1 python benchmarks/bench_vulkan_copies.py [--arch ARCH] [--rounds N]

On the vulkan driver each tensor travels as a copy, and after the launch the tensors the kernel
stores to are copied back. Timed side by side (bench_util), for softmax, layer norm and a vector
add on inputs of 16 MiB (layer norm in blocks of 512: lavapipe's 32 KiB of workgroup memory
do not hold the tiles of blocks of 1024): torch on the CPU; the launch as it is; the launch
allocating its staging and device buffers, as it did before they were kept for later launches
(`copies.BufferPool`); the launch copying back every tensor, as it did before it knew which
ones the kernel writes. --arch is IREE's vulkan target (default llvmpipe, Mesa's software
driver; ampere for an NVIDIA GPU).
"""
from __future__ import annotations

import argparse

from bench_util import report, side_by_side, use_examples

use_examples()

import torch  # noqa: E402

import triton_iree  # noqa: E402
from triton_iree import copies, runtime  # noqa: E402

from kernels import ref_layer_norm, run_add, run_layer_norm, run_softmax  # noqa: E402


def every_tensor_copied_back(fn):
    """`fn` run with DeviceCopies.buffer told that the kernel writes every tensor."""
    buffer = copies.DeviceCopies.buffer

    def all_written(self, *args):
        return buffer(self, *args[:5], True)

    def run():
        copies.DeviceCopies.buffer = all_written
        try:
            fn()
        finally:
            copies.DeviceCopies.buffer = buffer
    return run


def buffers_allocated_each_launch(fn):
    """`fn` run with the device's pool of buffers keeping none, and then given back what it held
    (so the runs timed beside this one still find their buffers)."""
    pool = runtime.get_device("vulkan").pool

    def run():
        kept = pool.free, pool.bytes, pool.limit
        pool.free, pool.bytes, pool.limit = [], 0, 0
        try:
            fn()
        finally:
            pool.free, pool.bytes, pool.limit = kept
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="llvmpipe")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    triton_iree.activate("vulkan", args.arch)
    x, y = torch.rand(1 << 22), torch.rand(1 << 22)
    rows = torch.randn(2048, 2048)
    w, b = torch.randn(2048), torch.randn(2048)
    cases = {   # name: (ours, torch's, the reference ours must match)
        "vector add 2^22": (lambda: run_add(x, y), lambda: x + y, lambda: (x + y,)),
        "softmax 2048x2048": (lambda: run_softmax(rows), lambda: torch.softmax(rows, -1),
                              lambda: (torch.softmax(rows, -1),)),
        "layer norm 2048x2048": (lambda: run_layer_norm(rows, w, b, BLOCK_SIZE=512),
                                 lambda: torch.nn.functional.layer_norm(rows, (2048,), w, b),
                                 lambda: ref_layer_norm(rows, w, b)),
    }
    for name, (ours, theirs, reference) in cases.items():
        got = ours()
        for g, v in zip(got if isinstance(got, tuple) else (got,), reference()):
            torch.testing.assert_close(g, v, atol=1e-4, rtol=1e-4)
        res = side_by_side({"torch (CPU)": theirs, "triton-iree vulkan": ours,
                            "buffers allocated each launch": buffers_allocated_each_launch(ours),
                            "every tensor copied back": every_tensor_copied_back(ours)}, args.rounds)
        report(f"{name} ({args.arch})", res)
        now = res["triton-iree vulkan"]["median"]
        print(f"  keeping the buffers: x{res['buffers allocated each launch']['median'] / now:.2f}; "
              f"copying back only the written tensors: x{res['every tensor copied back']['median'] / now:.2f}")


if __name__ == "__main__":
    main()
