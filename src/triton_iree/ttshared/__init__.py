"""triton-shared input: its memref + linalg output, raised to the tile program.

iree-compile cannot take triton-shared's output as it is: memrefs cannot cross IREE's public
function boundary (the VM has no type for them), IREE wants linalg on tensors, and it does not
support unranked memrefs at all. Rather than patching the memref program, `prepare` reads it
back into the same tile program the Triton path builds (tile.py) and hands it to the one
emitter (`lowering.lower`), so both inputs share the analyses, the IREE input form and the runtime.

What triton-shared's memref ops mean in tile terms:

- A pointer argument (``memref<*xT>`` / ``memref<?xT>``) is a buffer parameter, with no base
  offset (the module's ABI: `abi`). The last six i32 arguments are num_programs x, y, z and
  program_id x, y, z.
- ``memref.reinterpret_cast`` (offset o, static sizes, strides st) is a strided view of a
  buffer; ``memref.subview`` narrows a view (its dynamic sizes are the mask).
- ``memref.alloc`` is a tile in registers (mem2reg): each alloc has a current tile value,
  which copies, fills and linalg ops on the alloc replace. An alloc changed inside ``scf.for``
  or ``scf.if`` becomes a loop-carried value or a result of the ``If``.
- ``memref.copy`` from a buffer view into an alloc is a Load at the alloc's shape, with offsets
  ``o + sum_d (range_d - origin_d) * st_d`` built from tile ops (so the pointer analysis finds
  the slice again) and mask ``origin_d <= range_d < origin_d + size_d``; the alloc's previous
  contents are the masked-off value. A copy the other way, or
  ``bufferization.materialize_in_destination`` into a buffer view, is a Store.
- linalg.generic / map / fill / transpose / broadcast become tile ops at the iteration shape;
  linalg.reduce becomes Reduce and linalg.matmul Dot. Tensors are tile values; ``index`` is i64.

Contents a program leaves undefined (``tensor.empty``, a fresh alloc) may be given any value;
the reader picks whichever keeps accesses structured (e.g. an alloc filled only on one side of
an ``scf.if`` holds the fill value on both sides).

The reader is one class assembled from one module per concern: `memory` (pointer views,
allocs, copies, element access, tensors), `linalg`, `control` (scf.for, scf.if), over `values`
(the state, the memref and tensor kinds above, shared helpers); this module is the driver.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from typing import Optional

from iree.compiler import ir

from .. import tile as t
from ..errors import InputError
from ..locations import source_loc
from .control import ControlReader
from .linalg import LinalgReader
from .memory import MemoryReader
from .values import BufView

__all__ = ["TTSharedReader", "prepare", "read_ttshared"]

GRID_ARGS = 6   # num_programs x, y, z, then program_id x, y, z
# Dialects of IREE's input form, which triton-shared never emits.
_IREE_DIALECTS = ("flow", "hal", "stream", "util", "iree_tensor_ext")

# Run by `_check_parses` in a child process: prints nothing when stdin parses as an MLIR module,
# else [the first error's message, its location].
_PARSE_CHILD = """
import json, sys
from iree.compiler import ir
with ir.Context() as ctx, ir.Location.unknown():
    ctx.allow_unregistered_dialects = True
    try:
        ir.Module.parse(sys.stdin.buffer.read().decode())
    except ir.MLIRError as e:
        d = e.error_diagnostics[0] if e.error_diagnostics else None
        print(json.dumps([d.message, str(d.location)] if d else [str(e), ""]))
"""

# The index lists of linalg.reduce / linalg.broadcast (`dimensions = [...]`) and
# linalg.transpose (`permutation = [...]`) in their custom assembly forms.
_INDEX_LIST_KEY = re.compile(r"(?<![\w%@#^$.-])(?:dimensions|permutation)\s*=\s*")
_INT = re.compile(r"-?(?:0x[0-9a-fA-F]+|[0-9]+)")
_INDEX_LIST = re.compile(rf"\[\s*(?:{_INT.pattern}\s*(?:,\s*{_INT.pattern}\s*)*)?\]")


class TTSharedReader(MemoryReader, LinalgReader, ControlReader):
    """The whole reader: see the modules of this package."""

    # -- entry ------------------------------------------------------------------------
    def read(self) -> t.Kernel:
        self._check_index_lists()
        self._check_parses()
        with ir.Context() as ctx, ir.Location.unknown():
            ctx.allow_unregistered_dialects = True   # leftover tt.* ops get a proper error
            module = ir.Module.parse(self.text)
            ops = list(module.body.operations)
            self._refuse_prepared(ops)
            others = [op for op in ops if op.operation.name != "func.func"]
            if others:
                raise self._unsupported(others[0], "only func.func is supported at module level")
            # Declarations (external functions) may sit beside the kernel; calls to them fail later.
            funcs = [op for op in ops if op.operation.regions[0].blocks]
            if len(funcs) != 1:
                raise InputError(f"expected one func.func with a body in the module, found {len(funcs)}")
            return self._read_func(funcs[0])

    def _refuse_prepared(self, ops) -> None:
        """An IREE input module, as `prepare` and `triton-iree compile --emit-mlir` write them (IREE
        ops at module level or in a function's body: flow.dispatch.workgroups, a native kernel's
        hal.executable.source), is not triton-shared's output: say so rather than fail on its types."""
        for top in ops:
            inner = [op for r in top.operation.regions for b in r.blocks for op in b.operations] \
                if top.operation.name == "func.func" else []
            for op in (top, *inner):
                if op.operation.name.split(".", 1)[0] in _IREE_DIALECTS:
                    raise InputError("the input is already prepared: it is an IREE input module (as `triton-iree "
                                     "prepare` and `compile --emit-mlir` write them), not triton-shared's output; "
                                     "compile it with iree-compile (`triton-iree prepare --print-flags` prints the "
                                     "flags)", loc=self.loc(op) or None)

    def _check_parses(self) -> None:
        """Parses the text in a child process first: on some invalid inputs (a value used before
        it is defined in a nested region, LLVM issues 107121 and 127778) MLIR's parser frees
        memory it uses later, and the corrupted heap aborts this process long after the parse
        error. A text that parses there parses here; one that does not is refused with the
        parser's first error, and one that kills the child is refused as such."""
        child = subprocess.run([sys.executable, "-c", _PARSE_CHILD], input=self.text.encode(),
                               capture_output=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        if child.returncode < 0:
            raise InputError(f"input does not parse: MLIR's parser crashed on it (signal {-child.returncode})")
        if child.returncode != 0:
            last = (child.stderr.decode(errors="replace").strip().splitlines() or ["no output"])[-1]
            raise InputError(f"input does not parse: the parsing process failed (exit code {child.returncode}: {last})")
        if child.stdout:
            message, location = json.loads(child.stdout)
            where = self._fix_loc(source_loc(location))
            raise InputError(f"input does not parse: {' '.join(message.split())}", loc=where or None)

    def _check_index_lists(self) -> None:
        """MLIR's parser crashes (SIGSEGV) on a malformed index list of linalg.reduce,
        linalg.broadcast (`dimensions = [...]`) or linalg.transpose (`permutation = [...]`), or
        one holding an integer outside i64; refuse those before parsing."""
        for m in _INDEX_LIST_KEY.finditer(self.text):
            if self.text.startswith("array<", m.end()):
                continue   # the generic form's attribute: parsed safely
            lst = _INDEX_LIST.match(self.text, m.end())
            bad = lst is None or any(not -2 ** 63 <= int(n, 0) < 2 ** 63 for n in _INT.findall(lst.group()))
            if bad:
                line = self.text.count("\n", 0, m.start()) + 1
                raise InputError(f"input does not parse: '{m.group().strip()}' must be followed by a list "
                                 f"of 64-bit integers in brackets", loc=f"{self.filename or '-'}:{line}")

    # -- the function ----------------------------------------------------------------------
    def _read_func(self, func) -> t.Kernel:
        self.kernel_name = ir.StringAttr(func.attributes["sym_name"]).value
        if not func.regions[0].blocks:
            raise self._unsupported(func, "a declaration without a body")
        if len(func.regions[0].blocks) != 1:
            raise self._unsupported(func, "more than one block (unstructured control flow)")
        block = func.regions[0].blocks[0]
        args = list(block.arguments)
        if len(args) < GRID_ARGS or any(str(a.type) != "i32" for a in args[-GRID_ARGS:]):
            raise InputError("expected the last six arguments to be i32 (num_programs x, y, z, "
                             "program_id x, y, z), as triton-shared emits them",
                             kernel=self.kernel_name, loc=self.loc(func) or None)
        params: list[t.Param] = []
        for i, arg in enumerate(args[:-GRID_ARGS]):
            name = f"arg{i}"
            ty = arg.type
            if isinstance(ty, (ir.MemRefType, ir.UnrankedMemRefType)):
                if isinstance(ty, ir.MemRefType) and (ty.rank != 1 or not (isinstance(ty.layout, ir.AffineMapAttr)
                                                                    and ty.layout.value == ir.AffineMap.get_identity(1))):
                    raise self._unsupported(func, f"pointer argument {i} of type {ty} (expected "
                                                  f"memref<*xT> or memref<?xT>)")
                dtype = self._dtype(ty.element_type, func)
                if dtype == "i1":
                    raise self._unsupported(func, f"pointer argument {i} to i1")
                p = t.Param(i, name, dtype, True)
                self.env[arg] = BufView(p, 0, [-1], [1])
            else:
                dtype = self._dtype(ty, func)
                p = t.Param(i, name, dtype, False)
                p.value = t.Value(t.ScalarType(dtype), None, name)
                self.env[arg] = p.value
            params.append(p)
        loc = self.loc(func)
        grid = args[-GRID_ARGS:]
        body = t.Block()
        self.block = body
        for axis in range(3):
            self.env[grid[axis]] = self.emit(t.NumPrograms(axis, loc)).result
            self.env[grid[3 + axis]] = self.emit(t.ProgramId(axis, loc)).result
        rets = self._read_ops(block, body)
        if rets:
            raise self._unsupported(func, "a kernel that returns values")
        return t.Kernel(self.kernel_name, params, body, loc)


def read_ttshared(text: str, filename: Optional[str] = None) -> t.Kernel:
    """triton-shared's memref/linalg output (MLIR text) as a tile program."""
    return TTSharedReader(text, filename).read()


def prepare(text: str, filename: Optional[str] = None) -> str:
    """triton-shared's linalg + memref output -> an IREE input module (MLIR text).

    `filename` names the input in error locations (MLIR calls parsed text '-'). With
    TRITON_IREE_DUMP_DIR set, the input, the module and its llvm-cpu iree-compile script go to
    `<kernel>/<first digits of the input's sha256>/` there, the module also when it is invalid.
    """
    from .. import compile as iree_compile
    from .. import lowering
    from ..errors import CompileError
    from ..targets import make_target
    kernel = read_ttshared(text, filename)
    where = f"{kernel.name}/{hashlib.sha256(text.encode()).hexdigest()[:iree_compile.SPEC_DIGITS]}"
    iree_compile.dump(where, f"{kernel.name}.ttshared.mlir", text)
    try:
        module = lowering.lower(kernel)
    except CompileError as e:
        if hasattr(e, "module_text"):
            iree_compile.dump(where, f"{kernel.name}.iree.mlir", e.module_text)
        raise
    if iree_compile.dump_root() is not None:
        iree_compile.dump_module(where, kernel.name, module, make_target("llvm-cpu"),
                                 iree_compile.env_flags())
    return module
