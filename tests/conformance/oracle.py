"""Triton's interpreter as the reference: kernels run there in a subprocess (TRITON_INTERPRET=1
must be set before a kernel is defined), with the Python of TRITON_IREE_ORACLE_PYTHON when set
(Triton 3.6's interpreter needs numpy < 2 inside loops), else this one."""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

RUNNER = Path(__file__).with_name("interp_runner.py")
ORACLE_PYTHON = os.environ.get("TRITON_IREE_ORACLE_PYTHON") or sys.executable


def interpret(kernel, grid, args, **meta):
    """Runs `kernel[grid](*args, **meta)` in Triton's interpreter in a subprocess, on copies of
    `args`; returns the arguments as the interpreter left them."""
    with tempfile.TemporaryDirectory() as d:
        job, out = Path(d) / "job.pt", Path(d) / "out.pt"
        torch.save({"file": kernel.fn.__code__.co_filename, "kernel": kernel.fn.__name__,
                    "grid": list(grid), "args": [a.clone() if isinstance(a, torch.Tensor) else a for a in args],
                    "meta": meta}, job)
        r = subprocess.run([ORACLE_PYTHON, str(RUNNER), str(job), str(out)], capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        return torch.load(out)
