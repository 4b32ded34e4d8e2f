"""`tl.device_print` (and `print` in a kernel), printed per program as Triton's interpreter
prints it: one line per printed value, `(x, y, z) prefix value`, the value as numpy prints it.

IREE's CPU code has no printf. So each program logs what it prints into extra output buffers,
and the launcher prints the logs after the launch, program by program in the interpreter's
order (program id 2 varying fastest), each program's prints in the order it ran them.

A program counts its prints in a scalar that is carried through loops and ifs (so a print in
a loop prints once an iteration). Its k-th print writes, at entry `slot * capacity + k` (slot:
the linear program id x + gx * (y + gy * z)), its site's number into the site log and each
printed value into that value's buffer; at its end the program stores its count. A program
that prints more than `capacity` times keeps its first `capacity` prints, and the launcher
says how many it did not keep. The launcher picks the capacity: the number of prints when
none is inside a loop or an if (each runs once), else as many as fit in
TRITON_IREE_PRINT_BUFFER_MB (default 64) for all programs, at most
TRITON_IREE_PRINTS_PER_PROGRAM (default 1000).

The parameters this adds to the kernel (their order: `abi.print_params`): one buffer per
printed value (the value's element type, i8 for booleans; `programs * capacity * numel`
elements), the site log (i32, `programs * capacity`), the counts (i64, one per program), and the
capacity (i64 scalar).
"""
from __future__ import annotations

import itertools
import json
import math
import os
import sys
from typing import Sequence

from . import abi, program_state
from .checks import launch as run_checked
from . import tile as t
from .errors import UnsupportedError
from .types import ELEMENT_BYTES, TORCH_DTYPES, UNSIGNED_TORCH_DTYPES

# Element types a printed value can have, and their torch / numpy names.
_TORCH = {m: TORCH_DTYPES[m] for m in ("i8", "i16", "i32", "i64", "f16", "bf16", "f32", "f64")}
I64 = t.ScalarType("i64")
# The module function's reflection entry that holds `instrument`'s result, as JSON.
REFLECTION_KEY = "triton_iree.prints"


def _has_prints(op_or_block) -> bool:
    blocks = op_or_block.regions() if isinstance(op_or_block, t.Op) else [op_or_block]
    return any(isinstance(op, t.Print) for b in blocks for op in b.walk())


class _Instrumenter:
    def __init__(self, kernel: t.Kernel):
        self.k = kernel
        self.records: list[dict] = []
        self.buffers: list[t.Param] = []     # one a printed value, in print order
        self.bases: dict[int, t.Param] = {}  # each buffer's base offset (an i64 scalar parameter)
        self.block, self.loc = kernel.body, kernel.loc

    def buffer(self, name: str, dtype: str) -> t.Param:
        """A new buffer parameter, with its base offset (numbered when they join the kernel)."""
        p = t.Param(-1, name, dtype, True)
        self.bases[id(p)] = base = t.Param(-1, abi.base_name(name), "i64", False)
        base.value = t.Value(I64, None, base.name)
        return p

    def base(self, p: t.Param) -> t.Value:
        return self.bases[id(p)].value

    def emit(self, op: t.Op) -> t.Value | None:
        self.block.ops.append(op)
        return op.results[0] if op.results else None

    def ew(self, name: str, a: t.Value, b: t.Value, dtype: str = "i64", **attrs) -> t.Value:
        return self.emit(t.Elementwise(name, [a, b], t.with_dtype(a.type, dtype), attrs, self.loc))

    def i64(self, value: int) -> t.Value:
        return self.emit(t.Constant(value, I64, self.loc))

    def run(self) -> dict:
        k = self.k
        for op in k.walk():
            if any(_has_prints(r) for r in op.regions()) and not isinstance(op, (t.For, t.While, t.If)):
                raise UnsupportedError(f"tl.device_print inside the combine function of a {op.name.lower()} is "
                                       "not supported by triton-iree", kernel=k.name, loc=op.loc)
        # Every print is at the top level when no loop or if holds one: each runs once.
        fixed = not any(_has_prints(op) for op in k.body.ops if op.regions())
        ops, k.body.ops = k.body.ops, []
        self.sites, self.counts = self.buffer(abi.PRINT_SITES, "i32"), self.buffer(abi.PRINT_COUNTS, "i64")
        self.capacity = t.Param(-1, abi.PRINT_CAPACITY, "i64", False)
        self.capacity.value = t.Value(I64, None, self.capacity.name)
        self.slot = program_state.program_slot(self.emit, k.loc)
        self.entry0 = self.ew("arith.muli", self.slot, self.capacity.value)
        k.body.ops += ops
        count = self.visit(k.body, (self.i64(0),))[0]
        self.block, self.loc = k.body, k.loc
        self.emit(t.Store(self.counts, self.ew("arith.addi", self.base(self.counts), self.slot), count, None, k.loc))
        added = {p.name: p for p in (*self.buffers, self.sites, self.counts, self.capacity)}
        for slot in abi.print_params([b.dtype for b in self.buffers]):
            p = added[slot.name]
            p.index = len(k.params) + len(k.base_offsets)
            k.params.append(p)
            if p.is_buffer:
                self.bases[id(p)].index = p.index + 1
                k.base_offsets.append(self.bases[id(p)])
        return {"sites": self.records, "fixed": len(self.records) if fixed else 0}

    def visit(self, block: t.Block, state: tuple) -> tuple:
        ops, block.ops = block.ops, []
        for op in ops:
            self.block, self.loc = block, op.loc
            if isinstance(op, t.Print):
                state = (self.print(op, state[0]),)
                continue
            if isinstance(op, (t.For, t.While, t.If)) and _has_prints(op):
                state = program_state.carry(op, state, self.visit)
            block.ops.append(op)
        return state

    def print(self, op: t.Print, k: t.Value) -> t.Value:
        """Logs `op` as this program's print number `k` (if `k` < capacity); the next number."""
        keep = self.ew("arith.cmpi", k, self.capacity.value, "i1", predicate="slt")
        entry = self.ew("arith.addi", self.entry0, k)
        site = self.emit(t.Constant(len(self.records), t.ScalarType("i32"), self.loc))
        self.emit(t.Store(self.sites, self.ew("arith.addi", self.base(self.sites), entry), site, keep, self.loc))
        values = []
        for v, signed in zip(op.values, op.signed + [True] * len(op.values)):
            dtype = "i8" if v.dtype == "i1" else v.dtype
            if dtype not in _TORCH:
                raise UnsupportedError(f"tl.device_print of {v.dtype} is not supported by triton-iree",
                                       kernel=self.k.name, loc=op.loc)
            buf = self.buffer(abi.print_value_name(len(self.buffers)), dtype)
            self.buffers.append(buf)
            numel = math.prod(v.shape)
            at = self.ew("arith.addi", self.base(buf), self.ew("arith.muli", entry, self.i64(numel)))
            mask = keep
            if v.is_tile:
                flat = self.emit(t.MakeRange(0, numel, op.loc))
                if len(v.shape) != 1:
                    flat = self.emit(t.Reshape(flat, t.TileType(v.shape, "i32"), op.loc))
                flat = self.emit(t.Elementwise("arith.extsi", [flat], t.with_dtype(flat.type, "i64"), loc=op.loc))
                at = self.ew("arith.addi", self.emit(t.Splat(at, flat.type, op.loc)), flat)
                mask = self.emit(t.Splat(keep, t.with_dtype(flat.type, "i1"), op.loc))
            value = v if v.dtype != "i1" else self.emit(
                t.Elementwise("arith.extui", [v], t.with_dtype(v.type, "i8"), loc=op.loc))
            self.emit(t.Store(buf, at, value, mask, op.loc))
            values.append({"dtype": dtype, "bool": v.dtype == "i1", "signed": signed, "shape": list(v.shape)})
        self.records.append({"prefix": op.prefix, "hex": op.hex, "values": values, "loc": op.loc})
        return self.ew("arith.addi", k, self.i64(1))


def instrument(kernel: t.Kernel) -> dict:
    """Replaces the kernel's Print ops by stores into new buffer parameters; returns what the
    launcher needs to print them (JSON-able; empty when the kernel prints nothing)."""
    if not any(isinstance(op, t.Print) for op in kernel.walk()):
        return {}
    info = _Instrumenter(kernel).run()
    # For a module compiled ahead of time: its launcher (aot.Launcher) reads it back.
    kernel.reflection[REFLECTION_KEY] = json.dumps(info)
    return info


class Printer:
    """Passes the print logs of a kernel that prints, and prints them after the launch."""

    def __init__(self, info: dict):
        self.records, self.fixed = info["sites"], info["fixed"]
        self.values = [v for r in self.records for v in r["values"]]
        # Bytes a print entry takes in the logs: its site number and every value's buffer.
        self.entry_bytes = 4 + sum(ELEMENT_BYTES[v["dtype"]] * max(1, math.prod(v["shape"])) for v in self.values)
        self.params = abi.print_params([v["dtype"] for v in self.values])

    @staticmethod
    def of(metadata) -> "Printer | None":
        info = getattr(metadata, "prints", None)
        return Printer(info) if info else None

    @staticmethod
    def of_reflection(reflection: dict) -> "Printer | None":
        """The printer of a loaded module's function, from its reflection (`instrument`)."""
        info = reflection.get(REFLECTION_KEY)
        return Printer(json.loads(info)) if info else None

    def extend(self, kernel_abi: abi.Abi) -> abi.Abi:
        """The ABI of the kernel's function: the kernel's arguments (`kernel_abi`), then the logs."""
        return kernel_abi.extended(self.params)

    def capacity(self, programs: int) -> int:
        """Prints kept per program: all of them when each print runs once, else as many as the
        buffers' budget holds (at least 1, at most TRITON_IREE_PRINTS_PER_PROGRAM)."""
        if self.fixed:
            return self.fixed
        budget = float(os.environ.get("TRITON_IREE_PRINT_BUFFER_MB", "64")) * 2 ** 20
        most = int(os.environ.get("TRITON_IREE_PRINTS_PER_PROGRAM", "1000"))
        return max(1, min(most, int(budget // (programs * self.entry_bytes))))

    def launch(self, function, kernel_abi: abi.Abi, values: Sequence, grid: Sequence[int], checks, shared) -> None:
        import torch
        n = max(1, grid[0] * grid[1] * grid[2])
        cap = self.capacity(n)
        from .runtime import launch_device   # not at the top: runtime needs iree.runtime
        device = launch_device(values)
        logs = [torch.zeros(n * cap * max(1, math.prod(v["shape"])), dtype=getattr(torch, _TORCH[v["dtype"]]),
                            device=device) for v in self.values]
        sites = torch.zeros(n * cap, dtype=torch.int32, device=device)
        counts = torch.zeros(n, dtype=torch.int64, device=device)
        try:
            added = {abi.PRINT_SITES: sites, abi.PRINT_COUNTS: counts, abi.PRINT_CAPACITY: cap,
                     **{abi.print_value_name(i): b for i, b in enumerate(logs)}}
            run_checked(function, self.extend(kernel_abi), [*values, *(added[p.name] for p in self.params)],
                        grid, checks, shared)
        finally:   # what ran printed, also when checked mode raises
            self.print([b.cpu() for b in logs], sites.cpu(), counts.cpu(), cap, grid)

    def print(self, logs: list, sites, counts, cap: int, grid: Sequence[int]) -> None:
        import numpy as np
        arrays = []
        for v, b in zip(self.values, logs):
            if v["dtype"] == "bf16":
                b = b.float()
            a = b.numpy()
            if v["bool"]:
                a = a != 0
            elif not v["signed"] and v["dtype"] in UNSIGNED_TORCH_DTYPES:
                a = a.view(UNSIGNED_TORCH_DTYPES[v["dtype"]])
            arrays.append(a.reshape(-1, max(1, math.prod(v["shape"]))))
        # The first of each site's values among the value buffers.
        first = list(itertools.accumulate((len(r["values"]) for r in self.records), initial=0))
        sites, counts = sites.numpy(), counts.numpy()
        for x in range(grid[0]):
            for y in range(grid[1]):
                for z in range(grid[2]):
                    slot = x + grid[0] * (y + grid[1] * z)
                    for entry in range(slot * cap, slot * cap + min(cap, int(counts[slot]))):
                        site = int(sites[entry])
                        record = self.records[site]
                        msg = f"({x}, {y}, {z})" + (f" {record['prefix']}" if record["prefix"] else "")
                        if record["hex"]:
                            np.set_printoptions(formatter={"all": lambda e: f"0x{e:02x}"})
                        try:
                            for j, v in enumerate(record["values"]):
                                a = arrays[first[site] + j]
                                # A scalar prints as an array of one, as in the interpreter.
                                value = a[entry].reshape(v["shape"]) if v["shape"] else a[entry]
                                print(msg + f" {value}")
                        finally:
                            if record["hex"]:
                                np.set_printoptions(formatter=None)
                    if counts[slot] > cap:
                        print(f"triton-iree: program ({x}, {y}, {z}) printed {int(counts[slot])} times; the "
                              f"{int(counts[slot]) - cap} prints after its first {cap} were not kept (raise "
                              "TRITON_IREE_PRINTS_PER_PROGRAM or TRITON_IREE_PRINT_BUFFER_MB)", file=sys.stderr)
