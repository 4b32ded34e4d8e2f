"""Configuration of the emitted module: per-op tile sizes and pipelines for IREE's code generation.

The emitter marks each linalg op the lowering may configure with `OP_MARK` (its index in the
emitter's `_LinalgOp` records) and each linalg.copy before a store with `COPY_MARK`.
`configure_module` parses the module once with MLIR's Python bindings, chooses the root op and the other ops'
configurations from the records, sets them as `compilation_info` / `lowering_config` attributes
built by the target's tiling objects (`CpuTiling`, `GpuTiling`), drops the marks (and, where IREE
configures the dispatch itself, the store copies), names the target's device where it has one
(`EmitOptions.device_target`), verifies the module and prints it.
"""
from __future__ import annotations

from typing import Optional

from iree.compiler import ir

from ..errors import invalid_module
from .options import EmitOptions
from .values import _LinalgOp

OP_MARK = "triton_iree.op"
COPY_MARK = "triton_iree.store_copy"


def configure_module(text: str, ops: list[_LinalgOp], options: EmitOptions, row_length: Optional[int], mma: bool,
                     kernel: str) -> str:
    """The emitted module `text` configured, verified and printed. `ops`: the marked ops'
    records; `row_length`, `mma`: a GPU row program's length (`GpuTiling.row_length`), a
    tensor-core program (`GpuTiling.mma_program`)."""
    # Dialects load as the parser meets them: loading all of IREE's up front took most of the time.
    with ir.Context(load_on_create_dialects=[]):
        try:
            module = ir.Module.parse(text)
            marked, copies, reshaped = _marks(module)
            attrs, drop_copies = _choose(ops, options, row_length, mma, reshaped)
            parsed: dict[str, ir.Attribute] = {}
            for i, op in marked:
                del op.attributes[OP_MARK]
                if attrs[i]:
                    name, value = attrs[i].split(" = ", 1)
                    if value not in parsed:
                        parsed[value] = ir.Attribute.parse(value)
                    op.attributes[name] = parsed[value]
            for op in copies:
                if drop_copies:
                    op.result.replace_all_uses_with(op.operands[0])
                    op.erase()
                else:
                    del op.attributes[COPY_MARK]
            if options.device_target is not None:
                module.operation.attributes["hal.device.targets"] = ir.Attribute.parse(
                    f"[{options.device_target} : !hal.device]")
            module.operation.verify()
        except ir.MLIRError as e:
            raise invalid_module("module", text, e, kernel) from None
        # Without attribute aliases: each op's configuration and indexing maps on its own line.
        return module.operation.get_asm(use_local_scope=True, assume_verified=True)


def _marks(module: ir.Module) -> tuple[list[tuple[int, ir.Operation]], list[ir.Operation], bool]:
    """((index, op) of each op marked with OP_MARK, the store copies, whether the module
    reshapes a tensor with tensor.collapse_shape)."""
    marked: list[tuple[int, ir.Operation]] = []
    copies: list[ir.Operation] = []
    reshaped = False

    def visit(op: ir.Operation) -> ir.WalkResult:
        nonlocal reshaped
        attrs = op.attributes
        if OP_MARK in attrs:
            marked.append((ir.IntegerAttr(attrs[OP_MARK]).value, op))
        if COPY_MARK in attrs:
            copies.append(op)
        reshaped |= op.name == "tensor.collapse_shape"
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return marked, copies, reshaped


def _choose(ops: list[_LinalgOp], options: EmitOptions, row_length: Optional[int], mma: bool,
            reshaped: bool) -> tuple[list[str], bool]:
    """(the attribute of each op of `ops`, 'name = value' or '', whether to drop the store copies)."""
    tiling = options.cpu_tiling
    attrs = [""] * len(ops)
    candidates = [i for i, o in enumerate(ops) if o.loops]
    gpu = options.gpu_tiling
    if gpu is not None and any(o.iterators and "parallel" not in o.iterators for o in ops):
        # A reduction of a whole tile to a scalar: IREE takes it as the root, and a root with
        # no parallel loop is never split over workgroups, so IREE's own configuration is
        # kept: it computes such reductions correctly, where a TileAndFuse root on one is
        # much slower (softmax) or does not compile (layer norm).
        # The copies before stores (`_store_copy`) are for dispatches the lowering
        # configures; IREE's own configuration does without them.
        def reductions(part):
            row = gpu.row_reduction_configs(part, row_length) if row_length is not None else None
            return row if row is not None or not gpu.spirv else gpu.spirv_serial_reduction(part)
        _by_dispatch(ops, attrs, reductions)
        return attrs, True
    if mma:
        _by_dispatch(ops, attrs, gpu.mma_configs)
    elif gpu is not None and candidates:
        _gpu_configs(ops, candidates, gpu, attrs)
        # IREE's SPIR-V matmul pipeline spreads a copy between workgroup buffers over the
        # workgroup's threads again inside each thread's tile (GPUDistributeSharedMemoryCopy):
        # most of a stored tile was never copied. Stores read the tiles themselves.
        return attrs, gpu.spirv and gpu.vector_matmul is not None
    elif tiling is not None and tiling.configures(ops) and not reshaped:
        # (A reduction of a reshaped tile, `tl.reshape(x, (n,))`: IREE folds the reshape into
        # the reduction, which loses its configuration, and configuring the rest fails.)
        root = max(candidates, key=lambda i: (ops[i].heat(), -i))
        for i in candidates:
            o = ops[i]
            cfg = tiling.lowering_config(o.kind, o.loops, o.iterators, o.elt_bytes, o.math)
            attrs[i] = (f"compilation_info = {tiling.compilation_info(cfg)}" if i == root
                        else f"lowering_config = {cfg}")
    return attrs, False


def _by_dispatch(ops: list[_LinalgOp], attrs: list[str], configs) -> None:
    """Sets `attrs` of each dispatch's ops to `configs(those ops)` (a list of attributes, or
    None for none): the kernel's dispatches (`ModuleEmitter._parts`) are configured apart."""
    for d in {o.dispatch for o in ops}:
        mine = [i for i, o in enumerate(ops) if o.dispatch == d]
        for i, a in zip(mine, configs([ops[i] for i in mine]) or []):
            attrs[i] = a


def _gpu_configs(ops: list[_LinalgOp], candidates: list[int], gpu, attrs: list[str]) -> None:
    """The root's compilation_info and other ops' lowering_configs of a GPU dispatch the
    lowering configures with thread tile sizes (TileAndFuse, or BaseDistribute on Vulkan)."""
    if gpu.spirv:
        root = max(candidates, key=lambda i: (ops[i].kind != "fill", ops[i].kind == "matmul",
                                              1 not in ops[i].loops, ops[i].heat(), -i))
    else:
        # Of equally hot ops the last: IREE's TileAndFuse fuses the root's producers
        # into its loop over the threads, but not always its consumers (a store's copy
        # after a chain of elementwise ops with several uses, as in f64 math, fp8 casts and
        # 1-D sorts, was left outside: 'memref.copy' op write affecting operations on
        # global resources are restricted to workgroup distributed contexts).
        root = max(candidates, key=lambda i: (ops[i].kind != "fill", ops[i].heat(), i))
        copies = [i for i in candidates if i > root and ops[i].kind == "copy"]
        if "reduction" in ops[root].iterators and ops[root].kind == "generic" and copies:
            # A reduction along some dims of a tile, stored: the store's copy is the root
            # and the reduction keeps its tiling. As the root, the reduction would leave
            # its result in each thread's private memory, and the copy, which IREE does
            # not fuse into the reduction's loop over the threads, would store other
            # threads' elements from it: wrong wherever a thread has more than one row
            # to reduce (tl.join of pointers).
            red = ops[root]
            attrs[root] = f"lowering_config = {gpu.lowering_config(red.loops, red.iterators)}"
            root = max(copies, key=lambda i: (ops[i].heat(), i))
    if not gpu.spirv:
        attrs[root] = f"compilation_info = {gpu.compilation_info(ops[root].loops, ops[root].iterators)}"
        # Fills of a scalar store's element, or into workgroup memory, spread over the
        # threads on their own: IREE fuses into the root's loop over the threads its
        # producers and some consumers only, and left such a fill undistributed ('failed
        # to distribute' after a tile op or an atomic; 'write affecting operations on
        # shared resources are restricted to lane or thread distributed contexts').
        for i in candidates:
            if ops[i].spread and i != root:
                attrs[i] = f"lowering_config = {gpu.lowering_config(ops[i].loops, ops[i].iterators)}"
        return
    # IREE's SPIR-V pipeline tiles every op with one configuration and requires all
    # the ops' to be equal: the ops of the root's rank carry the root's, the others
    # none. A root with a size-1 loop loses its configuration when IREE drops that
    # loop, so one without is preferred.
    info = gpu.compilation_info(ops[root].loops, ops[root].iterators, gpu.thread_rows(ops, ops[root]))
    attrs[root] = f"compilation_info = {info}"
    cfg = gpu.spirv_lowering_config(ops[root].loops, ops[root].iterators)
    for i in candidates:
        if i != root and len(ops[i].loops) == len(ops[root].loops):
            attrs[i] = f"lowering_config = {cfg}"
