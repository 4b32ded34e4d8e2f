"""Runs one corpus kernel in Triton's interpreter (TRITON_INTERPRET=1), in its own process.

usage: python interp_runner.py IN.pt OUT.pt  -- IN holds {kernel, grid, args, meta}; OUT gets
the arguments after the launch.
"""
import os
import sys
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import torch  # noqa: E402

import kernels  # noqa: E402

job = torch.load(sys.argv[1])
getattr(kernels, job["kernel"])[tuple(job["grid"])](*job["args"], **job["meta"])
torch.save(job["args"], sys.argv[2])
