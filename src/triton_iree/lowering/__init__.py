"""Lowering: the tile program as an IREE input module (MLIR text, printed by MLIR).

The module has one public function, named after the kernel. Its ABI:

- each buffer as a flat ``tensor<?xT>`` (the whole buffer), in parameter order;
- each scalar parameter as its own type;
- the grid as three ``i32`` (gx, gy, gz).

It returns every buffer the kernel stores to, tied to its argument (``iree.abi.output``), so
callers that pass device buffers get in-place writes.

The body is one ``flow.dispatch.workgroups[gx, gy, gz]``: one Triton program instance per
IREE workgroup, ``tl.program_id`` = ``flow.dispatch.workgroup.id``. Inside it:

- structured loads and stores are ``iree_tensor_ext.dispatch.tensor.load/store`` of slices
  (a row loop for 2-D and higher tiles), with a static full-tile path beside the masked one
  (see `ModuleEmitter._program`: peeled loops, slab loads);
- gathers are ``tensor.extract`` inside ``linalg.generic``; scatters a per-element loop;
- elementwise expressions fuse into one ``linalg.generic`` (broadcasts become indexing
  maps); reductions are reduction generics; ``tl.dot`` is ``linalg.matmul``.

The emitter is one class assembled from one module per concern: `module` (host function,
dispatch skeleton, program versions), `memory` (loads, stores, memory order), `compute`
(elementwise, reductions), `dot`, `control` (loops, ifs), `shape` (join, split, cat, gather),
`scan`, `histogram`, `atomics`, over `values` (state and text helpers); per-target choices live in
`targets/`. The emitter writes MLIR text and marks the ops to configure; `configure` parses it
once with MLIR's Python bindings, sets each marked op's configuration, verifies and prints it.
"""
from __future__ import annotations

from .. import tile as t
from ..analysis import Facts, analyze
from .atomics import AtomicEmitter
from .compute import ComputeEmitter
from .configure import configure_module
from .control import ControlEmitter
from .dot import DotEmitter
from .histogram import HistogramEmitter
from .map_elementwise import MapElementwiseEmitter
from .memory import MemoryEmitter
from .module import ModuleEmitter
from .options import EmitOptions
from .scan import ScanEmitter
from .shape import ShapeEmitter
from .targets.cpu import CpuTiling, cpu_options
from .targets.gpu import GpuTiling, drop_shortcuts, gpu_options, sink_stored_reshapes

__all__ = ["CpuTiling", "EmitOptions", "Emitter", "GpuTiling", "cpu_options", "emit_module", "gpu_options",
           "lower"]


class Emitter(ModuleEmitter, MemoryEmitter, ComputeEmitter, DotEmitter, ControlEmitter, ShapeEmitter,
              ScanEmitter, HistogramEmitter, AtomicEmitter, MapElementwiseEmitter):
    """The whole emitter: see the modules of this package."""


def emit_module(kernel: t.Kernel, facts: Facts, options: EmitOptions = EmitOptions()) -> str:
    """The IREE input module (MLIR text) for `kernel`: emitted, configured (`configure`) and
    verified; an invalid one raises CompileError (a triton-iree bug)."""
    emitter = Emitter(kernel, facts, options)
    text = emitter.module()
    return configure_module(text, emitter.linalg_ops, options, emitter.gpu_row_length, bool(emitter.gpu_mma), kernel.name)


def lower(kernel: t.Kernel, options: EmitOptions = EmitOptions()) -> str:
    """Tile program -> verified IREE input module: the analyses, then the emitter."""
    if options.gpu_tiling is not None and not options.gpu_tiling.spirv:
        drop_shortcuts(kernel)
        sink_stored_reshapes(kernel)
    return emit_module(kernel, analyze(kernel), options)
