"""`tl.device_print` (and `print` in a kernel), printed per program as Triton's interpreter
prints it: one line per printed value, `(x, y, z) prefix value`, the value as numpy prints it.

IREE's CPU code has no printf. So each printed value becomes a store into an extra output
buffer, one slot per program (its linear program id x + gx * (y + gy * z)), and the launcher
prints the slots after the launch, program by program in the interpreter's order (program id
2 varying fastest), each program's prints in program order.

Launch ABI added after the kernel's own arguments: one buffer per printed value (the value's
element type, i8 for booleans; `programs * numel` elements), whose base offsets come last.

Prints run where they are: at the kernel's top level. A print inside a loop or an `if` (how
many times it prints depends on the data) is refused, and so is a print in checked mode
(Triton's debug switch), whose extra arguments this ABI does not combine with.
"""
from __future__ import annotations

import math
from typing import Sequence

from . import tile as t
from .errors import UnsupportedError

# Element types a printed value can have, and their torch / numpy names.
_TORCH = {"i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "f16": "float16", "bf16": "bfloat16",
          "f32": "float32", "f64": "float64"}
_UNSIGNED = {"i8": "uint8", "i16": "uint16", "i32": "uint32", "i64": "uint64"}


def instrument(kernel: t.Kernel, debug: bool) -> list[dict]:
    """Replaces the kernel's Print ops by stores into new buffer parameters; returns what the
    launcher needs to print them (JSON-able)."""
    nested = [op for op in kernel.body.ops for region in op.regions() for op in region.walk() if isinstance(op, t.Print)]
    if nested:
        raise UnsupportedError("tl.device_print inside a loop or an if is not supported by triton-iree (only at the "
                               "kernel's top level)", kernel=kernel.name, loc=nested[0].loc)
    prints = [op for op in kernel.body.ops if isinstance(op, t.Print)]
    if not prints:
        return []
    if debug:
        raise UnsupportedError("tl.device_print in checked mode (TRITON_DEBUG=1 / debug=True) is not supported by "
                               "triton-iree", kernel=kernel.name, loc=prints[0].loc)
    records, ops = [], []
    slot = None
    for op in kernel.body.ops:
        if not isinstance(op, t.Print):
            ops.append(op)
            continue

        def emit(o: t.Op) -> t.Value:
            ops.append(o)
            return o.results[0]

        def i64(v: t.Value) -> t.Value:
            return emit(t.Elementwise("arith.extsi", [v], t.with_dtype(v.type, "i64"), loc=op.loc))

        def ew(name: str, a: t.Value, b: t.Value) -> t.Value:
            return emit(t.Elementwise(name, [a, b], a.type, loc=op.loc))

        if slot is None:
            x, y, z = (i64(emit(t.ProgramId(a, op.loc))) for a in range(3))
            nx, ny = (i64(emit(t.NumPrograms(a, op.loc))) for a in range(2))
            slot = ew("arith.addi", x, ew("arith.muli", nx, ew("arith.addi", y, ew("arith.muli", ny, z))))
        values = []
        for v, signed in zip(op.values, op.signed + [True] * len(op.values)):
            dtype = "i8" if v.dtype == "i1" else v.dtype
            if dtype not in _TORCH:
                raise UnsupportedError(f"tl.device_print of {v.dtype} is not supported by triton-iree",
                                       kernel=kernel.name, loc=op.loc)
            numel = math.prod(v.shape)
            index = len(kernel.params) + len(kernel.base_offsets)
            buf = t.Param(index, f"print{len(kernel.params)}", dtype, True)
            base = t.Param(index + 1, f"{buf.name}_base", "i64", False)
            base.value = t.Value(t.ScalarType("i64"), None, base.name)
            kernel.params.append(buf)
            kernel.base_offsets.append(base)
            at = ew("arith.addi", base.value, ew("arith.muli", slot, emit(t.Constant(numel, t.ScalarType("i64"), op.loc))))
            if v.is_tile:
                flat = emit(t.MakeRange(0, numel, op.loc))
                if len(v.shape) != 1:
                    flat = emit(t.Reshape(flat, t.TileType(v.shape, "i32"), op.loc))
                at = ew("arith.addi", emit(t.Splat(at, t.TileType(v.shape, "i64"), op.loc)), i64(flat))
            value = v if v.dtype != "i1" else emit(t.Elementwise("arith.extui", [v], t.with_dtype(v.type, "i8"),
                                                                 loc=op.loc))
            ops.append(t.Store(buf, at, value, None, op.loc))
            values.append({"dtype": dtype, "bool": v.dtype == "i1", "signed": signed, "shape": list(v.shape)})
        records.append({"prefix": op.prefix, "hex": op.hex, "values": values, "loc": op.loc})
    kernel.body.ops = ops
    return records


class Printer:
    """Passes the print buffers of a kernel that prints, and prints them after the launch."""

    def __init__(self, records: list[dict]):
        from .runtime import ArgPlan
        self.records = records
        self.values = [v for r in records for v in r["values"]]
        self.plans = [ArgPlan(f"print{i}", True, v["dtype"]) for i, v in enumerate(self.values)]

    @staticmethod
    def of(metadata) -> "Printer | None":
        records = getattr(metadata, "prints", None)
        return Printer(records) if records else None

    def launch(self, function, plans: Sequence, values: Sequence, grid: Sequence[int], shared) -> None:
        import torch
        n = grid[0] * grid[1] * grid[2]
        bufs = [torch.zeros(max(n, 1) * max(1, math.prod(v["shape"])), dtype=getattr(torch, _TORCH[v["dtype"]]))
                for v in self.values]
        function.launch([*plans, *self.plans], [*values, *bufs], grid, None, shared)
        self.print(bufs, grid)

    def print(self, bufs: list, grid: Sequence[int]) -> None:
        import numpy as np
        arrays = []
        for v, b in zip(self.values, bufs):
            if v["dtype"] == "bf16":
                b = b.float()
            a = b.numpy()
            if v["bool"]:
                a = a != 0
            elif not v["signed"] and v["dtype"] in _UNSIGNED:
                a = a.view(_UNSIGNED[v["dtype"]])
            arrays.append(a.reshape(-1, max(1, math.prod(v["shape"]))))
        for x in range(grid[0]):
            for y in range(grid[1]):
                for z in range(grid[2]):
                    slot = x + grid[0] * (y + grid[1] * z)
                    it = iter(zip(self.values, arrays))
                    for record in self.records:
                        msg = f"({x}, {y}, {z})" + (f" {record['prefix']}" if record["prefix"] else "")
                        if record["hex"]:
                            np.set_printoptions(formatter={"all": lambda e: f"0x{e:02x}"})
                        try:
                            for _ in record["values"]:
                                v, a = next(it)
                                # A scalar prints as an array of one, as in the interpreter.
                                value = a[slot].reshape(v["shape"]) if v["shape"] else a[slot]
                                print(msg + f" {value}")
                        finally:
                            if record["hex"]:
                                np.set_printoptions(formatter=None)
