"""Triton's interpreter as the reference. Kernels run there in one worker process per test
session (TRITON_INTERPRET=1 must be set before a kernel is defined; a process start costs
seconds), with the Python of TRITON_IREE_ORACLE_PYTHON when set (Triton 3.6's interpreter needs
numpy < 2 inside loops), else this one."""
import atexit
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

RUNNER = Path(__file__).with_name("interp_runner.py")
ORACLE_PYTHON = os.environ.get("TRITON_IREE_ORACLE_PYTHON") or sys.executable
MARK = "\x00oracle "

_worker: "subprocess.Popen | None" = None
_stderr = tempfile.TemporaryFile(mode="w+")


def _running_worker() -> subprocess.Popen:
    global _worker
    if _worker is None or _worker.poll() is not None:
        _worker = subprocess.Popen([ORACLE_PYTHON, str(RUNNER)], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=_stderr, text=True)
        atexit.register(_worker.kill)
    return _worker


def _worker_stderr() -> str:
    _stderr.seek(0)
    return _stderr.read()[-3000:]


def interpret(kernel, grid, args, **meta):
    """Runs `kernel[grid](*args, **meta)` in Triton's interpreter, on copies of `args`; returns
    the arguments as the interpreter left them."""
    worker = _running_worker()
    with tempfile.TemporaryDirectory() as d:
        job, out = Path(d) / "job.pt", Path(d) / "out.pt"
        torch.save({"file": kernel.fn.__code__.co_filename, "kernel": kernel.fn.__name__,
                    "grid": list(grid), "args": [a.clone() if isinstance(a, torch.Tensor) else a for a in args],
                    "meta": meta}, job)
        worker.stdin.write(f"{job}\t{out}\n")
        worker.stdin.flush()
        for line in worker.stdout:     # a kernel may print; the answer is the marked line
            if line.startswith(MARK):
                answer = line[len(MARK):].rstrip("\n")
                break
        else:
            raise AssertionError(f"the interpreter process died ({worker.wait()}): {_worker_stderr()}")
        assert answer == "ok", json.loads(answer[len("error "):])
        return torch.load(out)
