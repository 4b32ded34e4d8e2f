"""Records the launches of a test run, for replay on an NVIDIA GPU in native mode.

    PYTHONPATH=benchmarks/gpu TRITON_IREE_RECORD=OUT python -m pytest -p record tests/conformance

Every `kernel[grid](...)` the tests make on the CPU (through triton-iree's llvm-cpu target, whose
results the tests check against Triton's interpreter or torch) is recorded: the memory of its
tensor arguments before and after the launch (whole storages, so arguments that share memory
still do, and bytes the kernel must not touch are compared too), its scalars and grid, and the
kernel compiled ahead of time in native mode for CUDA from Triton's own specialization of that
launch. `replay.py` runs each one on the GPU from the same memory and compares with the CPU's.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.runtime.jit import JITFunction, TensorWrapper

from triton_iree import native
from triton_iree.compile import compile_module, make_target

OUT = Path(os.environ.get("TRITON_IREE_RECORD", "gpu-record"))
MAX_PER_TEST = 2   # launches recorded per test (parametrizations already vary the launch)
_state = {"test": None, "count": 0, "n": 0}
_compiled: dict = {}
_original_run = JITFunction.run


def _storage_bytes(t: torch.Tensor) -> torch.Tensor:
    return torch.empty(0, dtype=torch.uint8).set_(t.untyped_storage()).clone()


def _vmfb(kernel) -> str:
    """The native-mode module of a compiled launch (Triton's specialization), compiled once."""
    src, md = kernel.src, kernel.metadata
    key = (src.hash(), md.num_warps, md.num_stages)
    if key not in _compiled:
        try:
            compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                                      options={"num_warps": md.num_warps, "num_stages": md.num_stages})
            k = native.from_compiled(compiled, dict(src.signature))
            vmfb = compile_module(native.module(k), make_target("cuda", native=True), name=k.name)
            name = f"{k.name}-{len(_compiled)}.vmfb"
            (OUT / name).write_bytes(vmfb)
            _compiled[key] = name
        except Exception as e:   # recorded: the replay reports which launches could not be compiled
            _compiled[key] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
    return _compiled[key]


def _run(self, *args, grid, warmup, **kwargs):
    if warmup or _state["test"] is None or _state["count"] >= MAX_PER_TEST:
        return _original_run(self, *args, grid=grid, warmup=warmup, **kwargs)
    bound = self.signature.bind(*args, **{k: v for k, v in kwargs.items() if k in self.signature.parameters})
    bound.apply_defaults()
    values = dict(bound.arguments)
    tensors = {n: v for n, v in values.items() if isinstance(v, torch.Tensor) and v.device.type == "cpu"}
    if any(isinstance(v, TensorWrapper) for v in values.values()):
        return _original_run(self, *args, grid=grid, warmup=warmup, **kwargs)
    pre = {}
    for t in tensors.values():
        pre.setdefault(t.untyped_storage().data_ptr(), _storage_bytes(t))
    kernel = _original_run(self, *args, grid=grid, warmup=warmup, **kwargs)
    if kernel is None or not hasattr(kernel, "src"):
        return kernel
    post = {sid: _storage_bytes(t) for t in tensors.values()
            if (sid := t.untyped_storage().data_ptr()) in pre}
    g = grid(values) if callable(grid) else grid
    g = tuple(g) + (1,) * (3 - len(g))
    sig = {n: ty for n, ty in dict(kernel.src.signature).items() if ty != "constexpr"}
    arg_specs = []
    for name in sig:
        v = values[name]
        if isinstance(v, torch.Tensor):
            arg_specs.append(("t", v.untyped_storage().data_ptr(), v.storage_offset(), tuple(v.shape),
                              tuple(v.stride()), v.dtype))
        else:
            arg_specs.append(("s", v))
    _state["count"] += 1
    _state["n"] += 1
    torch.save({"test": _state["test"], "kernel": kernel.metadata.name, "vmfb": _vmfb(kernel), "signature": sig,
                "grid": [int(x) for x in g], "args": arg_specs, "pre": pre, "post": post},
               OUT / f"launch-{_state['n']:05d}.pt")
    return kernel


def pytest_configure(config):
    OUT.mkdir(parents=True, exist_ok=True)
    JITFunction.run = _run


def pytest_runtest_setup(item):
    _state["test"], _state["count"] = item.nodeid, 0


def pytest_runtest_teardown(item):
    _state["test"] = None
