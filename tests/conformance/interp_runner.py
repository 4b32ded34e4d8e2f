"""A worker that runs kernels in Triton's interpreter (TRITON_INTERPRET=1), started once per test
session by `oracle.interpret`.

Each line on stdin is `JOB OUT`: JOB (a torch.save file) holds {file, kernel, grid, args, meta},
the kernel being the @triton.jit function `kernel` of the Python file `file` (imported once);
the worker saves the arguments after the launch to OUT and answers one line on stdout that
starts with `MARK`: `ok`, or `error` and the traceback as a JSON string.
"""
import importlib.util
import json
import os
import sys
import traceback

os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402

MARK = "\x00oracle "
_modules = {}


def _kernel(path: str, name: str):
    if path not in _modules:
        spec = importlib.util.spec_from_file_location(f"oracle_kernels_{len(_modules)}", path)
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, os.path.dirname(path))
        spec.loader.exec_module(module)
        _modules[path] = module
    return getattr(_modules[path], name)


for line in sys.stdin:
    job_path, out_path = line.rstrip("\n").split("\t")
    try:
        job = torch.load(job_path)
        _kernel(job["file"], job["kernel"])[tuple(job["grid"])](*job["args"], **job["meta"])
        torch.save(job["args"], out_path)
        answer = "ok"
    except Exception:
        answer = "error " + json.dumps(traceback.format_exc())
    print(MARK + answer, flush=True)
