"""The differences between the Triton versions triton-iree supports (3.6 to 3.9), in one place."""
from __future__ import annotations

import triton
from triton._C.libtriton import passes
from triton.runtime import jit

VERSION = tuple(int(p) for p in triton.__version__.split(".")[:2])


def add_block_pointer_rewrite(pm) -> None:
    """Adds Triton's rewrite of block pointers into pointer tensors, where the version has it.

    Block pointers (`tl.make_block_ptr`, `tl.advance`): Triton 3.6 builds tt.make_tensor_ptr /
    tt.advance and rewrites them in its 'ttir' stage; 3.7 and 3.8 build them as plain pointer
    arithmetic and dropped the pass; 3.9 removed block pointers from the language.
    """
    if hasattr(passes.ttir, "add_rewrite_tensor_pointer"):
        passes.ttir.add_rewrite_tensor_pointer(pm)


def drop_compiled_kernels() -> None:
    """Releases the kernels Triton has compiled, with the IREE modules they hold.

    Triton >= 3.7 keeps every @triton.jit function in a registry that Python frees at exit only
    after IREE's runtime bindings, which then report the modules still held as leaks. Registered
    with `atexit` by the driver; a no-op on 3.6, which has no such registry.
    """
    for fn in getattr(jit, "_triton_jit_function_registry", {}).values():
        fn.device_caches.clear()
