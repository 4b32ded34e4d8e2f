"""Workgroup memory shared between the tiles of a SPIR-V program whose uses do not overlap.

IREE's SPIR-V code generation gives every tile that a program keeps in workgroup memory a
variable of its own (on SPIR-V every tile between a program's ops is a buffer there), and
SPIR-V drivers lay them out side by side: layer norm in blocks of 1024 f32 took 9 variables of
4 KiB and 20 for its two sums, although its three loops each use a few of them. Tiles used one
after another can share memory, as a CPU's stack frames do.

`share_workgroup_memory` runs on the SPIR-V of a module (IREE's `executable-targets` phase, the
targets' `rewrite_executables`, read and written with MLIR's Python bindings). Each of a
function's workgroup variables is live from its first access (a load, store, atomic or copy
through a pointer into it) to its last, counted in the ops of the function's body: an access
inside a loop or a branch counts as the whole loop or branch. A variable takes over the memory of
an earlier one of the same type if a workgroup barrier of the function's body (executed by every
invocation: the body has one block and returns only at its end) lies between the earlier one's
last access and its own first: every invocation has finished with the old tile before any starts
on the new one, as between any two ops that the code generation separates with a barrier.
Workgroup memory starts undefined, so a tile that takes over another's memory is no different
from a fresh one. Variables used in any other way (a pointer passed to a call or a branch, or
used in two functions) keep their own memory.
"""
from __future__ import annotations

import re
from typing import Optional

# Ops that derive a pointer into a variable from a pointer into it (their first operand).
_POINTER_OPS = frozenset(("spirv.AccessChain", "spirv.PtrAccessChain", "spirv.InBoundsPtrAccessChain"))
# Ops that access memory through a pointer (their first operand; spirv.CopyMemory's first two).
_ACCESS_OPS = frozenset(("spirv.Load", "spirv.Store", "spirv.CopyMemory"))
_EXITS = frozenset(("spirv.Return", "spirv.ReturnValue", "spirv.Kill", "spirv.Unreachable",
                    "spirv.TerminateInvocation"))
_SCALAR_BYTES = {"i1": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "f16": 2, "bf16": 2, "f32": 4, "f64": 8}


def share_workgroup_memory(module) -> dict[str, tuple[Optional[int], Optional[int]]]:
    """Lets the workgroup variables of each function of every `spirv.module` in `module` (an
    `ir.Module`) share memory where their uses do not overlap (see the module docstring).
    Returns each function's workgroup memory in bytes before and after (None where the size of
    one of its variables is not known)."""
    sizes: dict[str, tuple[Optional[int], Optional[int]]] = {}
    for spirv_module in ops_named(module.operation, "spirv.module"):
        sizes.update(_share_in(spirv_module))
    return sizes


def ops_named(op, name: str):
    """The ops called `name` nested in `op`, outermost first (not looking inside them)."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                inner = inner.operation
                if inner.name == name:
                    yield inner
                else:
                    yield from ops_named(inner, name)


def _share_in(spirv_module) -> dict[str, tuple[Optional[int], Optional[int]]]:
    from iree.compiler import ir

    body = list(spirv_module.regions[0].blocks[0].operations)
    variables = {}   # name -> its type (the pointer's, as text), for the workgroup variables
    for op in body:
        op = op.operation
        if op.name == "spirv.GlobalVariable":
            kind = str(ir.TypeAttr(op.attributes["type"]).value)
            if kind.endswith(", Workgroup>") and "initializer" not in op.attributes:
                variables[ir.StringAttr(op.attributes["sym_name"]).value] = kind
    functions = [op.operation for op in body if op.operation.name == "spirv.func"]
    uses = [_live_ranges(f, variables) for f in functions]
    users: dict[str, int] = {}
    for ranges, _ in uses:
        for name in ranges:
            users[name] = users.get(name, 0) + 1
    merged: dict[str, str] = {}   # variable -> the one whose memory it takes
    for ranges, barriers in uses:
        slots: list[list] = []   # [variable, the last access to its memory]
        for name, span in sorted(((n, s) for n, s in ranges.items() if s is not None and users[n] == 1),
                                 key=lambda item: item[1]):
            first, last = span
            for slot in slots:
                if variables[slot[0]] == variables[name] and any(slot[1] < b < first for b in barriers):
                    merged[name], slot[1] = slot[0], last
                    break
            else:
                slots.append([name, last])
    if merged:
        _rename(spirv_module, body, merged)
    return {ir.StringAttr(f.attributes["sym_name"]).value:
            (_total(variables, ranges), _total(variables, {merged.get(n, n) for n in ranges}))
            for f, (ranges, _) in zip(functions, uses)}


def _live_ranges(func, variables) -> tuple[dict[str, Optional[tuple[int, int]]], list[int]]:
    """(each workgroup variable `func` uses -> the first and last index of the body's ops that
    access it, or None if it keeps its own memory; the indices of the body's workgroup
    barriers). An access nested in an op is at that op's index."""
    from iree.compiler import ir

    ranges: dict = {}   # variable -> (first, last); None: no access yet; False: keeps its memory
    blocks = list(func.regions[0].blocks)
    top = list(blocks[0].operations) if blocks else []
    pointers = {}   # value -> the variable it points into
    barriers: list[int] = []
    qualifies = len(blocks) == 1

    def visit(op, index: int, nested: bool) -> None:
        nonlocal qualifies
        name = op.name
        if name == "spirv.mlir.addressof":
            var = ir.FlatSymbolRefAttr(op.attributes["variable"]).value
            if var in variables:
                pointers[op.result] = var
                ranges.setdefault(var, None)
        elif name in _EXITS and (nested or index != len(top) - 1):
            qualifies = False
        elif not nested and name == "spirv.ControlBarrier" and _workgroup_barrier(op):
            barriers.append(index)
        for i, operand in enumerate(op.operands):
            var = pointers.get(operand)
            if var is None:
                continue
            if name in _POINTER_OPS and i == 0:
                for result in op.results:
                    pointers[result] = var
            elif name in _ACCESS_OPS and (i == 0 or name == "spirv.CopyMemory" and i == 1) \
                    or name.startswith("spirv.Atomic") and i == 0:
                span = ranges.get(var)
                if span is not False:
                    ranges[var] = (index, index) if span is None else (span[0], index)
            else:
                ranges[var] = False   # used otherwise: keeps its own memory
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    visit(inner.operation, index, True)

    for index, op in enumerate(top):
        visit(op.operation, index, False)
    return {n: (s if s and qualifies else None) for n, s in ranges.items()}, barriers


def _workgroup_barrier(op) -> bool:
    """A control barrier of the workgroup that orders its workgroup memory both ways."""
    scope = str(op.attributes["execution_scope"])
    semantics = str(op.attributes["memory_semantics"])
    both = "AcquireRelease" in semantics or ("Acquire" in semantics and "Release" in semantics)
    return scope == "#spirv.scope<Workgroup>" and "WorkgroupMemory" in semantics and both


def _rename(spirv_module, body, merged: dict[str, str]) -> None:
    """Points every use of each merged variable at the one whose memory it takes, drops it from
    the entry points' interfaces and erases it."""
    from iree.compiler import ir

    def visit(op) -> None:
        if op.name == "spirv.mlir.addressof":
            var = ir.FlatSymbolRefAttr(op.attributes["variable"]).value
            if var in merged:
                op.attributes["variable"] = ir.FlatSymbolRefAttr.get(merged[var])
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    visit(inner.operation)

    for op in body:
        op = op.operation
        if op.name == "spirv.func":
            visit(op)
        elif op.name == "spirv.EntryPoint":
            kept = [a for a in ir.ArrayAttr(op.attributes["interface"])
                    if ir.FlatSymbolRefAttr(a).value not in merged]
            op.attributes["interface"] = ir.ArrayAttr.get(kept)
        elif op.name == "spirv.GlobalVariable" and ir.StringAttr(op.attributes["sym_name"]).value in merged:
            op.erase()


def _total(variables: dict[str, str], names) -> Optional[int]:
    total = 0
    for name in names:
        size = _bytes(variables[name][len("!spirv.ptr<"):-len(", Workgroup>")])
        if size is None:
            return None
        total += size
    return total


_ARRAY = re.compile(r"!spirv\.array<(\d+) x (.+?)(?:, stride=(\d+))?>$")
_VECTOR = re.compile(r"vector<(\d+)x(\w+)>$")
_STRUCT = re.compile(r"!spirv\.struct<\((.+?)(?: \[\d+\])?\)>$")


def _bytes(kind: str) -> Optional[int]:
    """The size of a variable's type as its text writes it: a scalar, a vector, an array (by
    its stride, if it has one) or a struct of one member; None for another."""
    if kind in _SCALAR_BYTES:
        return _SCALAR_BYTES[kind]
    m = _VECTOR.match(kind)
    if m:
        return int(m.group(1)) * _SCALAR_BYTES[m.group(2)] if m.group(2) in _SCALAR_BYTES else None
    m = _ARRAY.match(kind)
    if m:
        element = int(m.group(3)) if m.group(3) else _bytes(m.group(2))
        return None if element is None else int(m.group(1)) * element
    m = _STRUCT.match(kind)
    if m and not _has_top_level_comma(m.group(1)):
        return _bytes(m.group(1))
    return None


def _has_top_level_comma(text: str) -> bool:
    depth = 0
    for c in text:
        depth += c in "<(["
        depth -= c in ">)]"
        if c == "," and depth == 0:
            return True
    return False
