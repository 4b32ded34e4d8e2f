"""Records the launches of a test run, for replay on an NVIDIA GPU in native mode and through
IREE's code generation.

    PYTHONPATH=benchmarks/gpu TRITON_IREE_RECORD=OUT python -m pytest -p record tests/conformance

Every `kernel[grid](...)` the tests make on the CPU (through triton-iree's llvm-cpu target, whose
results the tests check against Triton's interpreter or torch) is recorded: the memory of its
tensor arguments before and after the launch (whole storages, so arguments that share memory
still do, and bytes the kernel must not touch are compared too), its scalars and grid, and the
kernel compiled ahead of time in native mode for CUDA from Triton's own specialization of that
launch. For IREE's code generation, each distinct compiled kernel's TTIR (Triton's own, of the
CPU launch's specialization) is saved with its num_warps as OUT/<name>.kernel.json, to be
lowered and compiled for CUDA later, as often as the lowering changes, by `pack_codegen.py OUT`.
`replay.py` runs each launch on the GPU from the same memory and compares with the CPU's.

Launches whose tensors' storages hold more than TRITON_IREE_RECORD_MAX_BYTES (default 128 KiB, in
all) are not recorded; OUT/skipped.txt names them.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.runtime.jit import JITFunction, TensorWrapper

from triton_iree import native
from triton_iree.compile import compile_module
from triton_iree.targets import make_target

OUT = Path(os.environ.get("TRITON_IREE_RECORD", "gpu-record"))
MAX_PER_TEST = 2   # launches recorded per test (parametrizations already vary the launch)
MAX_BYTES = int(os.environ.get("TRITON_IREE_RECORD_MAX_BYTES", 128 << 10))   # storages of one launch
_state = {"test": None, "count": 0, "n": 0}
_compiled: dict = {}
_kernels: dict = {}   # Triton's compile hash of the CPU kernel -> what pack_codegen.py lowers
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
            vmfb = compile_module(native.module(k), make_target("cuda"), name=k.name)
            name = f"{k.name}-{len(_compiled)}.vmfb"
            (OUT / name).write_bytes(vmfb)
            _compiled[key] = name
        except Exception as e:   # recorded: the replay reports which launches could not be compiled
            _compiled[key] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
    return _compiled[key]


def _codegen(kernel, shares_memory: bool) -> str:
    """The name under which the launched kernel's TTIR is saved (OUT/<name>.kernel.json), once per
    compiled kernel: pack_codegen.py lowers it for CUDA into OUT/<name>.codegen.vmfb."""
    src, md = kernel.src, kernel.metadata
    entry = _kernels.get(md.hash)
    new = entry is None
    if new:
        entry = _kernels[md.hash] = {
            "name": f"{md.name}-{len(_kernels)}", "kernel": md.name, "triton_hash": md.hash,
            "num_warps": md.num_warps, "num_stages": md.num_stages, "debug": md.debug,
            "signature": dict(src.signature),   # every parameter, 'constexpr' for the specialized ones
            "constants": {",".join(map(str, k)): repr(v) for k, v in src.constants.items()},
            "attrs": {",".join(map(str, k)): v for k, v in src.attrs.items() if v},
            "shares_memory": False, "ttir": kernel.asm["ttir"]}
    if new or shares_memory and not entry["shares_memory"]:
        entry["shares_memory"] |= shares_memory   # a launch whose tensors share storage: the aliasing variant
        (OUT / f"{entry['name']}.kernel.json").write_text(json.dumps(entry, indent=0))
    return entry["name"]


def _run(self, *args, grid, warmup, **kwargs):
    if warmup or _state["test"] is None or _state["count"] >= MAX_PER_TEST:
        return _original_run(self, *args, grid=grid, warmup=warmup, **kwargs)
    bound = self.signature.bind(*args, **{k: v for k, v in kwargs.items() if k in self.signature.parameters})
    bound.apply_defaults()
    values = dict(bound.arguments)
    tensors = {n: v for n, v in values.items() if isinstance(v, torch.Tensor) and v.device.type == "cpu"}
    if any(isinstance(v, TensorWrapper) for v in values.values()):
        return _original_run(self, *args, grid=grid, warmup=warmup, **kwargs)
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors.values()}
    if sum(storages.values()) > MAX_BYTES:
        with open(OUT / "skipped.txt", "a") as f:
            f.write(f"{_state['test']} {getattr(self, '__name__', '?')}: {sum(storages.values())} bytes\n")
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
    sids = [spec[1] for spec in arg_specs if spec[0] == "t"]
    torch.save({"test": _state["test"], "kernel": kernel.metadata.name, "vmfb": _vmfb(kernel),
                "codegen": _codegen(kernel, len(set(sids)) < len(sids)), "signature": sig,
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
