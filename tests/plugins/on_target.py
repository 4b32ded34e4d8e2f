"""Runs the test suite itself on a GPU target, through the JIT path that users take:
`triton_iree.activate(target=...)`, then every `kernel[grid](...)` of the tests compiles with
iree-compile for that target and launches on the GPU.

    TRITON_IREE_TEST_TARGET=cuda PYTHONPATH=tests/plugins PYTEST_ADDOPTS="-p on_target" \\
        python -m pytest tests/conformance

(PYTEST_ADDOPTS, so that tests marked `isolated`, which run in a pytest process of their own,
load it too.) Needs torch with CUDA, Triton, iree-base-compiler and iree-base-runtime. A target
not validated yet (hip, vulkan) needs TRITON_IREE_UNVALIDATED_TARGETS=1; this run is what
validated cuda.

The tests make CPU tensors and check them on the CPU. Each launch's CPU tensors are moved to the
GPU here, as a user's CUDA tensors would be: each distinct storage is copied to one GPU storage
of the same size, and each tensor argument becomes the same view (offset, shape, strides) of
that copy, so arguments that share memory still share it, and bytes outside the views come back
as the kernel left them. After the launch, also one that raised, the GPU storages are copied
back over the CPU ones (a launch that did not run left its copies as they were).
"""
from __future__ import annotations

import os

import torch
from triton.runtime.jit import JITFunction, TensorWrapper

TARGET = os.environ.get("TRITON_IREE_TEST_TARGET", "cuda")
ARCH = os.environ.get("TRITON_IREE_TEST_ARCH") or None
_original_run = JITFunction.run


class _Staging:
    """The GPU copies of one launch's CPU storages, keyed by the CPU storage's address."""

    def __init__(self, device: torch.device):
        self.device = device
        self.copies: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}   # address -> (cpu bytes, gpu bytes)

    def tensor(self, t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key not in self.copies:
            host = torch.empty(0, dtype=torch.uint8).set_(storage)
            self.copies[key] = (host, host.to(self.device, copy=True))
        gpu = self.copies[key][1].untyped_storage()
        return torch.empty(0, dtype=t.dtype, device=self.device).set_(gpu, t.storage_offset(), t.shape, t.stride())

    def value(self, v):
        if isinstance(v, torch.Tensor) and v.device.type == "cpu":
            return self.tensor(v)
        if isinstance(v, TensorWrapper) and v.base.device.type == "cpu":   # triton.reinterpret
            return TensorWrapper(self.tensor(v.base), v.dtype)
        return v

    def copy_back(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        for host, gpu in self.copies.values():
            host.copy_(gpu)


def _device() -> torch.device:
    """Where the launch's tensors go: the current CUDA device for cuda and hip (torch's ROCm
    build calls its GPUs cuda too); for the other targets, which take host memory, copies in host
    memory (with llvm-cpu, that checks this staging itself on a machine without a GPU)."""
    if TARGET in ("cuda", "hip"):
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _run(self, *args, grid, warmup, **kwargs):
    if warmup:
        return _original_run(self, *args, grid=grid, warmup=warmup, **kwargs)
    staging = _Staging(_device())
    args = tuple(staging.value(a) for a in args)
    kwargs = {k: staging.value(v) for k, v in kwargs.items()}
    try:
        return _original_run(self, *args, grid=grid, warmup=warmup, **kwargs)
    finally:   # also after a DeviceError (checked mode), whose launch ran
        staging.copy_back()


def pytest_configure(config):
    import triton_iree
    triton_iree.activate(target=TARGET, arch=ARCH)
    JITFunction.run = _run


def pytest_report_header(config):
    return f"triton-iree test target: {TARGET}{':' + ARCH if ARCH else ''} (GPU launches from CPU tensors)"
