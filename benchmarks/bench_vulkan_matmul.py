"""A matmul's tl.dot on Vulkan: IREE's SPIR-V matmul pipeline against the register dot.

    TRITON_IREE_UNVALIDATED_TARGETS=1 python benchmarks/bench_vulkan_matmul.py [--arch ARCH] [--size N]
        [--blocks BM BN BK] [--dtype fp16|bf16|fp32] [--warps W] [--rounds N]

The corpus matmul (N x N x N, tiles of BM x BN x BK, f32 accumulator) compiled twice for IREE's
vulkan target ARCH: its dot on IREE's MatmulPromoteVectorize pipeline (`SpirvTiling.vector_matmul`,
allowed on the arch for this run by adding it to `spirv.VECTOR_MATMUL_ARCHES`) and as the register
dot (`DotEmitter._register_dot`, the arch taken out of it). Both are checked against torch, then
their launches on CPU tensors (copies included) are timed side by side (bench_util) with torch's
matmul on the CPU beside them. Default: lavapipe (`llvmpipe`), 512^3 f32 in tiles of 32; on an
NVIDIA GPU, `--arch ampere --dtype fp16 --size 4096 --blocks 64 64 64`.
"""
from __future__ import annotations

import argparse

from bench_util import report, side_by_side

import torch
import triton

from triton_iree import aot, kernels as K
from triton_iree.targets import spirv

_TYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="llvmpipe")
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--blocks", type=int, nargs=3, default=(32, 32, 32))
    ap.add_argument("--dtype", choices=_TYPES, default="fp32")
    ap.add_argument("--warps", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    n, (bm, bn, bk), ty = args.size, args.blocks, args.dtype
    sig = K.matmul_signature(ty)
    consts = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}
    others = tuple(a for a in spirv.VECTOR_MATMUL_ARCHES if a != args.arch)
    launchers = {}
    for name, arches in (("register dot", others), ("matmul pipeline", others + (args.arch,))):
        spirv.VECTOR_MATMUL_ARCHES = arches
        k = aot.compile_kernel(K.matmul_kernel, sig, consts, target="vulkan", arch=args.arch, num_warps=args.warps)
        if ("MatmulPromoteVectorize" in k.module) != (args.arch in arches):
            raise SystemExit(f"{name}: the {bm} x {bn} x {bk} tiles' dot is not on the form asked for "
                             f"(the pipeline takes plain matmuls whose tiles fit the arch's workgroup memory)")
        launchers[name] = aot.Launcher(k.vmfb, "matmul_kernel", sig, target="vulkan")
    dt = _TYPES[ty]
    a, b = torch.randn(n, n).to(dt), torch.randn(n, n).to(dt)
    c = torch.empty(n, n, dtype=dt)
    want = (a.float() @ b.float()).to(dt)

    def launch(run):
        return lambda: run(a, b, c, n, n, n, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                           c.stride(1), grid=(triton.cdiv(n, bm), triton.cdiv(n, bn)))
    for name, run in launchers.items():
        c.fill_(-7)
        launch(run)()
        torch.testing.assert_close(c, want, atol=1e-3 * n ** 0.5, rtol=1e-2, msg=lambda m: f"{name}: {m}")
    res = side_by_side({"torch (CPU)": lambda: a.float() @ b.float(),
                        **{name: launch(run) for name, run in launchers.items()}}, args.rounds)
    report(f"matmul {n}^3 {ty}, tiles {bm} x {bn} x {bk}, {args.warps} warps ({args.arch})", res)
    print(f"  register dot / matmul pipeline: x{res['register dot']['median'] / res['matmul pipeline']['median']:.2f}")


if __name__ == "__main__":
    main()
