"""torch.compile on the CPU: Inductor's C++ backend against its Triton backend on triton-iree,
and eager mode, side by side in one process, on six small model families.

    python benchmarks/bench_inductor.py [--rounds N] [--only NAME,...]

For each model: the first call of each compiled version (compile time), then warm run times
(medians, p10, median per-round ratio to eager; see bench_util), after checking every result
against eager. The goal is parity of the Triton backend with the C++ one, geomean over models.
"""
from __future__ import annotations

import argparse
import math
import os
import tempfile
import time

os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-iree-bench-"))
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="inductor-bench-"))

from bench_util import fmt_time, report, side_by_side  # noqa: E402

import torch  # noqa: E402
import torch._inductor.config  # noqa: E402,F401


def models() -> dict:
    """name -> (callable, example args, rtol/atol)."""
    torch.manual_seed(0)
    x = torch.randn(512, 1024)

    def chain(x):
        y = torch.relu(x * 1.5 + 0.25)
        return (y * y).sum(-1) / y.shape[-1] + y.amax(-1)

    mlp = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 1024)).eval()
    norm = torch.nn.LayerNorm(1024).eval()

    def norm_softmax(x):
        return torch.softmax(norm(x) * 2.0, dim=-1)

    block = torch.nn.TransformerEncoderLayer(256, 4, 512, dropout=0.0, batch_first=True).eval()
    seq = torch.randn(8, 128, 256)

    def var_mean_cumsum(x):
        var, mean = torch.var_mean(x, dim=-1, keepdim=True)
        return torch.cumsum((x - mean) / torch.sqrt(var + 1e-5), dim=-1)

    emb = torch.nn.Embedding(50000, 256).eval()
    idx = torch.randint(0, 50000, (512, 16))
    src = torch.randn(512, 16, 256)

    def embed_gather_scatter(idx, src):
        e = emb(idx)                                          # [512, 16, 256]
        g = torch.gather(e, 1, idx[:, :4, None].remainder(16).expand(-1, -1, 256))
        out = torch.zeros(512, 16, 256).scatter_add(1, idx[:, :, None].remainder(16).expand(-1, -1, 256), src)
        return g.sum(1) + out.sum(1)

    return {
        "elementwise + reduction chain": (chain, (x,), 1e-4),
        "MLP with GELU": (mlp, (x,), 1e-3),
        "LayerNorm + softmax": (norm_softmax, (x,), 1e-4),
        "transformer block": (block, (seq,), 1e-3),
        "var_mean + cumsum": (var_mean_cumsum, (x,), 1e-3),
        "embedding + gather + scatter_add": (embed_gather_scatter, (idx, src), 1e-4),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--only", default="", help="comma-separated model names (default: all)")
    args = ap.parse_args()
    wanted = [s for s in args.only.split(",") if s]
    ratios = []
    with torch.no_grad():
        for name, (fn, inputs, tol) in models().items():
            if wanted and name not in wanted:
                continue
            ref = fn(*inputs)
            versions, first = {"eager": lambda: fn(*inputs)}, {}
            for backend in ("cpp", "triton"):
                compiled = torch.compile(fn, options={"cpu_backend": backend})
                t0 = time.perf_counter()
                out = compiled(*inputs)
                first[backend] = time.perf_counter() - t0
                torch.testing.assert_close(out, ref, rtol=tol, atol=tol)
                versions[f"inductor {backend}"] = lambda c=compiled: c(*inputs)
            res = side_by_side(versions, rounds=args.rounds)
            report(f"{name} (first call: cpp {fmt_time(first['cpp']).strip()}, "
                   f"triton {fmt_time(first['triton']).strip()})", res)
            ratios.append(res["inductor triton"]["median"] / res["inductor cpp"]["median"])
    if ratios:
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"triton-iree backend / C++ backend, geomean of medians over {len(ratios)} models: x{geo:.2f}")


if __name__ == "__main__":
    main()
