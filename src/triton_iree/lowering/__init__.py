"""Lowering: the tile program as an IREE input module (MLIR text, printed by MLIR).

The module has one public function, named after the kernel, whose ABI (arguments, results)
`triton_iree.abi` describes.

The body is one ``flow.dispatch.workgroups[gx, gy, gz]``: one Triton program instance per
IREE workgroup, ``tl.program_id`` = ``flow.dispatch.workgroup.id``. Inside it:

- structured loads and stores are ``iree_tensor_ext.dispatch.tensor.load/store`` of slices
  (a row loop for 2-D and higher tiles), with a static full-tile path beside the masked one
  (see `ModuleEmitter._program`: peeled loops, slab loads);
- gathers are ``tensor.extract`` inside ``linalg.generic``; scatters a per-element loop;
- elementwise expressions fuse into one ``linalg.generic`` (broadcasts become indexing
  maps); reductions are reduction generics; ``tl.dot`` is ``linalg.matmul``.

The emitter is one class assembled from one module per concern: `module` (host function,
dispatch skeleton, program versions), `loads`, `slabs` (2-D loads in place from one slab) and
`stores` (stores, scatters) over `memory` (what they share: access geometry, snapshots),
`compute` (elementwise expressions as linalg.generic, tiles), `arith` (scalar ops), `reductions`,
`dot`, `control` (loops, ifs), `shape` (join, split, cat, gather), `scan`, `histogram`,
`atomics`, over `values` (state and text helpers). Per-target choices come in `EmitOptions`,
made by the targets (`triton_iree.targets`), which this package never imports.
The emitter writes MLIR text and marks the ops to configure; `configure` parses it
once with MLIR's Python bindings, sets each marked op's configuration, verifies and prints it.
"""
from __future__ import annotations

from dataclasses import replace

from .. import tile as t
from ..analysis import analyze
from ..errors import CompileError
from ..forms import Facts
from .arith import ArithEmitter
from .atomics import AtomicEmitter
from .compute import ComputeEmitter
from .configure import configure_module
from .control import ControlEmitter
from .dot import DotEmitter
from .histogram import HistogramEmitter
from .loads import LoadEmitter
from .map_elementwise import MapElementwiseEmitter
from .module import ModuleEmitter
from .options import EmitOptions
from .reductions import ReductionEmitter
from .scan import ScanEmitter
from .shape import ShapeEmitter
from .slabs import SlabEmitter
from .stores import StoreEmitter

__all__ = ["EmitOptions", "Emitter", "emit_module", "lower"]


class Emitter(ModuleEmitter, LoadEmitter, SlabEmitter, StoreEmitter, ComputeEmitter, ArithEmitter, ReductionEmitter,
              DotEmitter, ControlEmitter, ShapeEmitter, ScanEmitter, HistogramEmitter, AtomicEmitter,
              MapElementwiseEmitter):
    """The whole emitter: see the modules of this package."""


def emit_module(kernel: t.Kernel, facts: Facts, options: EmitOptions = EmitOptions()) -> str:
    """The IREE input module (MLIR text) for `kernel`: emitted, configured (`configure`) and
    verified; an invalid one raises CompileError (a triton-iree bug)."""
    if options.gpu_tiling is not None:
        options = replace(options, gpu_tiling=options.gpu_tiling.for_kernel(kernel))
    emitter = Emitter(kernel, facts, options)
    text = emitter.module()
    return configure_module(text, emitter.linalg_ops, options, emitter.gpu_row_length, bool(emitter.gpu_mma), kernel.name)


def lower(kernel: t.Kernel, options: EmitOptions = EmitOptions()) -> str:
    """Tile program -> verified IREE input module: the analyses, then the emitter. The caller
    applies the target's rewrites of the tile program first (`Target.prepare`)."""
    return emit_module(kernel, analyze(kernel), options)
