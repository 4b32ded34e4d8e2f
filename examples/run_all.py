"""Runs every example kernel of the corpus on the active triton-iree target and prints the
max error of each against torch. Exits non-zero if any result is off."""
import sys
import time

import torch

import kernels as K


def main() -> int:
    torch.manual_seed(0)
    cases = []
    x, y = torch.rand(98437), torch.rand(98437)
    cases.append(("vector add (n=98437)", lambda: K.run_add(x, y), lambda: x + y, 0.0))
    s = torch.randn(1823, 781)
    cases.append(("fused softmax (1823x781)", lambda: K.run_softmax(s), lambda: torch.softmax(s, -1), 1e-6))
    a, b = torch.randn(257, 257), torch.randn(257, 257)
    cases.append(("matmul fp32 (257^3)", lambda: K.run_matmul(a, b), lambda: a @ b, 1e-3))
    ah, bh = a.half(), b.half()
    cases.append(("matmul fp16 -> fp32 acc (257^3)", lambda: K.run_matmul(ah, bh),
                  lambda: (ah.float() @ bh.float()).half(), 5e-2))
    bt = torch.randn(257, 257).t()
    cases.append(("matmul, B a transposed view", lambda: K.run_matmul(a, bt), lambda: a @ bt, 1e-3))
    xl, w, bb = torch.randn(64, 3000), torch.randn(3000), torch.randn(3000)
    cases.append(("layer norm forward (64x3000)", lambda: K.run_layer_norm(xl, w, bb)[0],
                  lambda: K.ref_layer_norm(xl, w, bb)[0], 1e-4))
    x2 = torch.randn(300, 170)
    cases.append(("2-D grid scale+shift (300x170)", lambda: K.run_scale_shift_2d(x2, 1.5, 0.25),
                  lambda: x2 * 1.5 + 0.25, 1e-6))
    bad = 0
    for name, run, ref, tol in cases:
        t0 = time.perf_counter()
        got = run()
        dt = time.perf_counter() - t0
        err = (got.float() - ref().float()).abs().max().item()
        ok = err <= tol
        bad += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name:36s} max error {err:.3g}  (first launch {dt:.2f} s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
