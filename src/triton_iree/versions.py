"""The version plan: when masked tile accesses are wholly in bounds. Conditions computable at
program entry (`entry_values`), and per loop, the first iterations in which accesses whose
masks move with the induction variable are full (the loop can be split there: full iterations,
then a tail)."""
from __future__ import annotations

from typing import Optional

from . import tile as t
from .forms import Box, Bound, Facts, Peel, Poly, StructuredAccess, VersionPlan, in_i64


def full_bounds(box: Box, shape: tuple[int, ...]) -> list[Bound]:
    """Conditions that all hold exactly when every index of a `shape` tile is inside `box`."""
    out = []
    for d, n in enumerate(shape):
        out += [Bound(poly=p) for p in box.lo[d]]                       # lo <= 0
        out += [Bound(poly=Poly.const(n) - p) for p in box.hi[d]]       # n <= hi
    for c in box.conds:
        out.append(Bound(value=c.value) if c.kind == "val" else Bound(poly=c.poly + Poly.const(1)))
    return out


def entry_values(kernel: t.Kernel) -> set[int]:
    """Ids of the scalars computable at program entry: scalar parameters, and pure scalar ops of
    the top-level block (constants, program ids, arithmetic) on such values."""
    out = {p.value.id for p in kernel.scalars + kernel.base_offsets if p.value is not None}
    for op in kernel.body.ops:
        if isinstance(op, (t.Constant, t.ProgramId, t.NumPrograms)) and not op.result.is_tile:
            out.add(op.result.id)
        elif (isinstance(op, t.Elementwise) and not op.result.is_tile
              and all(a.id in out for a in op.args)):
            out.add(op.result.id)
    return out


def _enclosing_loops(kernel: t.Kernel) -> dict[int, list[t.For]]:
    """id(op) -> the scf.for ops around it, outermost first."""
    out: dict[int, list[t.For]] = {}

    def visit(b: t.Block, loops: list[t.For]) -> None:
        for op in b.ops:
            out[id(op)] = loops
            for r in op.regions():
                visit(r, loops + [op] if isinstance(op, t.For) else loops)

    visit(kernel.body, [])
    return out


def _peelable(loop: t.For) -> bool:
    """A positive constant step: the full iterations are a prefix, and where it ends can be
    computed before the loop (from its bounds and entry values)."""
    step = loop.step.owner
    return isinstance(step, t.Constant) and int(step.value) > 0


def version_plan(kernel: t.Kernel, facts: Facts) -> VersionPlan:
    """Which masked tile accesses a full version of the program can treat as unmasked."""
    plan = VersionPlan()
    loops_of = _enclosing_loops(kernel)
    for op in kernel.walk():
        if not isinstance(op, (t.Load, t.Store)):
            continue
        if isinstance(op, t.Load) and op.result.id not in facts.live:
            continue
        acc = facts.access(op)
        value = op.result if isinstance(op, t.Load) else op.value
        if (not isinstance(acc, StructuredAccess) or acc.box is None or acc.box.trivially_full
                or not value.is_tile):
            continue
        top: list[Bound] = []
        peel: Optional[tuple[t.For, list[tuple[Poly, int]]]] = None
        ok = True
        ivs = {lp.iv.id: lp for lp in loops_of[id(op)]}
        for b in full_bounds(acc.box, value.shape):
            if b.poly is not None and b.poly.is_const:
                ok = b.poly.const_value <= 0      # always or never full
                if not ok:
                    break
                continue
            if b.value is not None:
                ok = b.value.id in facts.entry
                top.append(b)
            elif facts.at_entry(b.poly):
                top.append(b)
            else:
                # c + d * iv with a constant d > 0, iv the induction variable of a loop around op.
                moving = {k: c for k, c in b.poly.terms.items()
                          if any(not (isinstance(b.poly.atoms[a], t.Value) and b.poly.atoms[a].id in facts.entry)
                                 for a in k)}
                rest = Poly({k: c for k, c in b.poly.terms.items() if k not in moving}, b.poly.atoms)
                ok = len(moving) == 1
                if ok:
                    (mono, d), = moving.items()
                    atom = b.poly.atoms[mono[0]] if len(mono) == 1 else None
                    loop = ivs.get(atom.id) if isinstance(atom, t.Value) else None
                    ok = loop is not None and d > 0 and _peelable(loop) and \
                        (peel is None or peel[0] is loop)
                    if ok:
                        peel = (loop, (peel[1] if peel else []) + [(rest, d)])
            if not ok:
                break
        if not ok:
            continue
        for p in [b.poly for b in top if b.poly is not None] + [c for c, _ in (peel[1] if peel else [])]:
            in_i64(p, op, kernel.name)   # the emitter computes these
        plan.top += top
        if peel is None:
            plan.full.add(id(op))
        else:
            pl = plan.peels.setdefault(id(peel[0]), Peel(peel[0]))
            pl.conds += peel[1]
            pl.accesses.add(id(op))
    return plan
