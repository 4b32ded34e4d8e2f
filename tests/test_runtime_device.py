"""The runtime's IREE devices: created with the worker stack size Triton tiles need, even when
the program used iree.runtime on its own first."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_SCRIPT = """
import iree.runtime as rt
import torch
rt.Config("local-task")   # iree.runtime now caches a local-task driver with its default stacks
import kernels as K
torch.manual_seed(0)
q, k, v = (torch.randn(256, 64) for _ in range(3))
o = K.run_attention(q, k, v, 64, 64)   # 64x64 tiles: far more stack than 128 KiB
torch.testing.assert_close(o, K.ref_attention(q, k, v), rtol=1e-4, atol=1e-4)
print("ok")
"""


def test_large_tiles_after_iree_runtime_was_used_directly():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "examples"), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])
