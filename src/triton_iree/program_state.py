"""What the instrumentation passes (`checks`, `prints`) share: the program's linear id, and
per-program state threaded through structured ops."""
from __future__ import annotations

from typing import Callable

from .tile import Block, Elementwise, For, If, NumPrograms, Op, ProgramId, ScalarType, Value, While


def program_slot(emit: Callable[[Op], Value], loc: str = "") -> Value:
    """The program's linear id x + gx * (y + gy * z), an i64 scalar, from ops added by `emit`:
    where a program keeps its own record in a buffer of one slot a program."""
    i64 = ScalarType("i64")

    def ext(op: Op) -> Value:
        return emit(Elementwise("arith.extsi", [emit(op)], i64, loc=loc))

    def ew(name: str, a: Value, b: Value) -> Value:
        return emit(Elementwise(name, [a, b], i64, loc=loc))

    x, y, z = (ext(ProgramId(a, loc)) for a in range(3))
    gx, gy = (ext(NumPrograms(a, loc)) for a in range(2))
    return ew("arith.addi", x, ew("arith.muli", gx, ew("arith.addi", y, ew("arith.muli", gy, z))))


def carry(op: "For | While | If", state: tuple, visit: Callable[[Block, tuple], tuple]) -> tuple:
    """Threads `state` (values a pass keeps per program) through the structured op `op`: each of
    its blocks takes the state as new arguments where it has arguments (else sees the state
    before `op`), `visit(block, state)` rewrites the block and returns the state at its end,
    which the block yields. Returns `op`'s new results: the state after `op`."""
    types = [v.type for v in state]

    def into(block: Block) -> None:
        args = [Value(ty, block, "st") for ty in types]
        block.args += args
        block.yields += visit(block, tuple(args))

    if isinstance(op, For):
        op.inits += state
        into(op.body)
    elif isinstance(op, While):
        op.inits += state
        into(op.before)
        into(op.after)
    else:
        op.then.yields += visit(op.then, state)
        op.otherwise.yields += visit(op.otherwise, state)
    new = [Value(ty, op) for ty in types]
    op.results += new
    return tuple(new)
