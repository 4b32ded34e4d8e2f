"""Runs one kernel in Triton's interpreter (TRITON_INTERPRET=1), in its own process.

usage: python interp_runner.py IN.pt OUT.pt  -- IN holds {file, kernel, grid, args, meta}: the
kernel is the @triton.jit function `kernel` of the Python file `file`; OUT gets the arguments
after the launch.
"""
import importlib.util
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402

job = torch.load(sys.argv[1])
spec = importlib.util.spec_from_file_location("conformance_kernels", job["file"])
module = importlib.util.module_from_spec(spec)
sys.path.insert(0, os.path.dirname(job["file"]))
spec.loader.exec_module(module)
getattr(module, job["kernel"])[tuple(job["grid"])](*job["args"], **job["meta"])
torch.save(job["args"], sys.argv[2])
