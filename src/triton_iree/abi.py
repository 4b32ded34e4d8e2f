"""The launch ABI: the argument list of a kernel's public function.

Every module triton-iree makes (the lowering's, and native mode's around Triton's PTX) has one
public function, named after the kernel. Its arguments (`Abi.slots`), in order:

1. the parameters (`Abi.params`), which the caller passes values for:
   - the kernel's own non-constexpr parameters in declaration order: each pointer as a buffer,
     a flat ``tensor<?xT>`` (the whole memory the runtime imports for it; T the element type,
     i8 for i1), each scalar as its own type (i1 ... i64, f32, f64; unsigned as signless);
   - then what instrumentation adds: the print logs (`print_params`, for `tl.device_print`,
     see `prints`), then checked mode's record buffer and bounds (`check_params`, see `checks`);
2. the grid: three i32 (gx, gy, gz);
3. one i64 per buffer, in the buffers' order (`Abi.bases`): the element offset at which the
   pointer starts inside its buffer (the runtime imports each buffer from a 64-byte aligned
   address: `arguments.import_span`). A kernel read from triton-shared's output has none (its
   pointers are whole buffers).

It returns every buffer the kernel writes, in parameter order, each tied to its argument
(``iree.abi.output``), so callers that pass device buffers get in-place writes. The lowering's
modules also list the written buffers' numbers in the function's reflection (`WRITTEN_KEY`):
a launcher that passes copies (vulkan) copies back only those.

CUDA modules are compiled with IREE's asynchronous execution model: each function takes a wait
and a signal fence after its arguments and returns once its work is queued. Each also has a twin,
`ordered_name(kernel)`, which orders its work with a torch stream on the GPU: it takes the
kernel's arguments, then two i64 flags in device memory (``tensor<2xi64>``, written in place) and
the launch's sequence number (i64), then the fences (`targets.cuda_streams`).

`Abi` is built once per kernel: from the tile program on the compile side (`of_kernel`), from
Triton's signature on the launch side (`of_signature`), extended there with what a kernel's
metadata says instrumentation added (`Abi.extended`). The places that convert values across
it, which a change of the ABI (say, every scalar in one i64 buffer) changes besides this module:

- `arguments.argument_items`: the caller's Python values -> the VM argument list (every launch,
  `aot.Launcher`'s too);
- `lowering.module.ModuleEmitter.module`: the function's arguments -> the operands of its
  dispatch (the lowering's modules);
- `native._host_function`: the function's arguments -> the bindings and 32-bit push constants
  of Triton's kernel (`Abi.push_constants`), whose PTX entry `native.rewrite_abi` rewrites to
  that order.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from .errors import LaunchError
from .types import POINTER_TYPES, SCALAR_TYPES

BUFFER, SCALAR, GRID, BASE = "buffer", "scalar", "grid", "base"

# Triton's pointer element types -> the MLIR element type of the buffer.
POINTER_DTYPES = {name: mlir for name, (mlir, _) in POINTER_TYPES.items()}

# The parameters `tl.device_print` adds (see `prints`): one log buffer per printed value, then these.
PRINT_SITES, PRINT_COUNTS, PRINT_CAPACITY = "print_sites", "print_counts", "print_capacity"
# Checked mode's record buffer (see `checks`).
CHECK_RECORDS = "checks"


def ordered_name(kernel: str) -> str:
    """The name of a CUDA module's function that orders the kernel's launch with a torch stream."""
    return f"{kernel}$ordered"


@dataclass(frozen=True)
class Slot:
    """One argument of the function."""
    kind: str              # BUFFER | SCALAR | GRID | BASE
    name: str              # the parameter's name; grid_x, grid_y, grid_z; a buffer's name + '_base'
    dtype: str             # a buffer's MLIR element type; the MLIR type of the others
    written: bool = False  # a buffer the kernel stores to: a result, tied to this argument
    number: int = 0        # among the slots of its kind; a grid slot's axis; a base's buffer's
    # The tile program's parameter it stands for (compile side; None on the launch side).
    param: Any = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def is_buffer(self) -> bool:
        return self.kind == BUFFER

    @property
    def mlir_type(self) -> str:
        return f"tensor<?x{self.dtype}>" if self.kind == BUFFER else self.dtype


def base_name(buffer: str) -> str:
    """The name of the base offset of buffer parameter `buffer`."""
    return f"{buffer}_base"


def print_value_name(i: int) -> str:
    """The name of the log buffer of the `i`th printed value."""
    return f"print{i}"


def extent_names(buffer: str) -> tuple[str, str]:
    """Checked mode's scalars bounding buffer `buffer`'s storage: its start and end."""
    return f"{buffer}_start", f"{buffer}_end"


class Abi:
    """The argument list of a kernel's public function (see the module docstring)."""

    def __init__(self, params: Sequence[Slot], bases: Optional[Sequence[Any]] = None):
        """`params` numbered here; `bases`: the tile program's base offset parameters (one per
        buffer, or none), by default a base offset per buffer."""
        counts = {BUFFER: 0, SCALAR: 0}
        numbered = []
        for s in params:
            numbered.append(dataclasses.replace(s, number=counts[s.kind]))
            counts[s.kind] += 1
        self.params = tuple(numbered)
        self.buffers = tuple(s for s in self.params if s.kind == BUFFER)
        self.scalars = tuple(s for s in self.params if s.kind == SCALAR)
        self.written = tuple(s for s in self.buffers if s.written)
        self.grid = tuple(Slot(GRID, f"grid_{axis}", "i32", number=i) for i, axis in enumerate("xyz"))
        if bases is None:
            self.bases = tuple(Slot(BASE, base_name(b.name), "i64", number=b.number) for b in self.buffers)
        else:
            assert len(bases) in (0, len(self.buffers)), (len(bases), len(self.buffers))
            self.bases = tuple(Slot(BASE, p.name, "i64", number=i, param=p) for i, p in enumerate(bases))
        self.slots = self.params + self.grid + self.bases
        # For the launch's hot path (`runtime.LoadedKernel.launch`): where the buffers and the
        # scalars are among the params, and the slots' kinds and types as one string, which
        # keys a loaded kernel's cached argument lists to the ABI that built them (a str
        # caches its hash).
        self.buffer_indices = tuple(i for i, s in enumerate(self.params) if s.kind == BUFFER)
        self.scalar_indices = tuple(i for i, s in enumerate(self.params) if s.kind == SCALAR)
        self.signature = ",".join(f"{s.kind}:{s.dtype}" for s in self.slots)

    @staticmethod
    def of_kernel(kernel, written: set[int]) -> "Abi":
        """The ABI of tile program `kernel` (instrumented, if it is), whose buffers with ids in
        `written` are stored to."""
        return Abi([Slot(BUFFER if p.is_buffer else SCALAR, p.name, p.dtype, id(p) in written, param=p)
                    for p in kernel.params], kernel.base_offsets)

    def extended(self, params: Sequence[Slot]) -> "Abi":
        """This ABI with `params` (instrumentation's, `print_params` or `check_params`) after its own."""
        return Abi([*self.params, *params])

    def arguments(self, ssa: Callable[[Slot], str]) -> list[str]:
        """The function's arguments as MLIR text, each slot's value named `ssa(slot)`."""
        out_index = {s: i for i, s in enumerate(self.written)}
        return [f"{ssa(s)}: {s.mlir_type}" + (f" {{iree.abi.output = {out_index[s]} : index}}" if s in out_index
                                              else "") for s in self.slots]

    def results(self) -> list[str]:
        """The function's result types: the written buffers."""
        return [s.mlir_type for s in self.written]

    def push_constants(self) -> tuple[Slot, ...]:
        """The slots a native kernel (`native`) takes as 32-bit push constants, after each buffer's
        binding in order: each scalar (64-bit ones as two words, low first), then each base offset
        (in bytes)."""
        return self.scalars + self.bases


# The function's reflection entry listing the written buffers' numbers among the buffers ("0,2").
WRITTEN_KEY = "triton_iree.written"


def written_of_reflection(reflection: dict) -> Optional[list[int]]:
    """The numbers of the buffers a loaded module's function writes, where its reflection says."""
    listed = reflection.get(WRITTEN_KEY)
    return None if listed is None else [int(n) for n in listed.split(",") if n]


def of_signature(names: Sequence[str], signature: dict, kernel: str,
                 written: Optional[Sequence[int]] = None) -> Abi:
    """The ABI of a compiled kernel from Triton's signature ('*fp32', 'i32', 'constexpr', ...) of
    parameters `names`. `written`: the numbers (among the pointer parameters) of the buffers the
    kernel stores to; None where that is not known (a .vmfb file), and then every buffer is."""
    params = []
    for name in names:
        ty = signature[name]
        if ty == "constexpr":
            continue
        if ty.startswith("*"):
            elt = ty[1:].lstrip("k")
            if elt not in POINTER_DTYPES:
                raise LaunchError(f"argument '{name}': pointers to {elt} are not supported", kernel=kernel)
            number = sum(p.kind == BUFFER for p in params)
            params.append(Slot(BUFFER, name, POINTER_DTYPES[elt], written is None or number in written))
        elif ty in SCALAR_TYPES:
            params.append(Slot(SCALAR, name, SCALAR_TYPES[ty]))
        else:
            raise LaunchError(f"argument '{name}': type {ty} is not supported", kernel=kernel)
    return Abi(params)


def print_params(dtypes: Sequence[str]) -> list[Slot]:
    """The parameters `tl.device_print` adds (`prints`), for printed values of element types
    `dtypes` in print order: each value's log, the site log, the counts, the capacity."""
    return [*(Slot(BUFFER, print_value_name(i), d, True) for i, d in enumerate(dtypes)),
            Slot(BUFFER, PRINT_SITES, "i32", True), Slot(BUFFER, PRINT_COUNTS, "i64", True),
            Slot(SCALAR, PRINT_CAPACITY, "i64")]


def check_params(buffers: Sequence[str]) -> list[Slot]:
    """The parameters checked mode adds (`checks`): the record buffer, then the extents of each
    of `buffers` (the buffer parameters' names; none without bounds checks)."""
    return [Slot(BUFFER, CHECK_RECORDS, "i64", True),
            *(Slot(SCALAR, e, "i64") for b in buffers for e in extent_names(b))]
