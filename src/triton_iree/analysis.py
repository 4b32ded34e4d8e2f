"""Analyses on the tile program: pointer (affine) analysis, mask analysis, liveness.

They return facts; they never change the program.

- Pointer analysis writes each offset tile as ``offset + sum_d index_d * stride_d`` where
  `offset` and the strides are polynomials over scalar SSA values (runtime values allowed).
- Mask analysis writes a mask as a box: per dim, ``lo <= index < hi``, plus scalar predicates.
- An access whose offsets and mask both have these forms is *structured* (a slice load or
  store); anything else is a *gather* / *scatter* with a per-element predicate: slower, never
  wrong.
- Liveness says which values the emitter must produce: a structured access needs only the
  scalars its forms mention, not its offset and mask tiles.
- The version plan says when masked accesses are wholly in bounds: conditions computable at
  program entry, and per loop, the first iterations in which accesses whose masks move with
  the induction variable are full (the loop can be split there: full iterations, then a tail).

The forms the facts are written in, and the facts, are in `forms`; the version plan in
`versions`.
"""
from __future__ import annotations

from typing import Optional

from . import tile as t
from .forms import (Affine, Box, Carried, Cond, Facts, GatherAccess, LoopOffset, Poly, StructuredAccess, ZERO,
                    Access, _reshaped, in_i64)
from .versions import entry_values, version_plan


class _Analyzer:
    def __init__(self, kernel: t.Kernel):
        self.kernel = kernel
        self.facts = Facts()
        self._affine: dict[int, Optional[Affine]] = {}
        self._uses = t.uses(kernel)
        self._block_arg_of: dict[int, tuple[t.For, int]] = {}
        self._result_of_loop: dict[int, tuple[t.For, int]] = {}
        for op in kernel.walk():
            if isinstance(op, t.For):
                for j, a in enumerate(op.iter_args):
                    self._block_arg_of[a.id] = (op, j)
                for j, r in enumerate(op.results):
                    self._result_of_loop[r.id] = (op, j)

    # -- scalar polynomials --------------------------------------------------------------
    def poly(self, v: t.Value) -> Poly:
        """`v` (an integer scalar) as a polynomial, seeing through integer arithmetic."""
        op = v.owner
        if isinstance(op, t.Constant) and not v.is_tile:
            return Poly.const(int(op.value))
        if isinstance(op, t.Elementwise) and not v.is_tile:
            a = op.args
            if op.opname == "arith.addi":
                return self._in_i64(self.poly(a[0]) + self.poly(a[1]), op)
            if op.opname == "arith.subi":
                return self._in_i64(self.poly(a[0]) - self.poly(a[1]), op)
            if op.opname == "arith.muli":
                return self._in_i64(self.poly(a[0]) * self.poly(a[1]), op)
            if op.opname in ("arith.extsi", "arith.trunci"):
                return self.poly(a[0])
        return Poly.atom(v)

    def _in_i64(self, p: Poly, op: t.Op) -> Poly:
        return in_i64(p, op, self.kernel.name)

    # -- affine forms of integer tiles ---------------------------------------------------
    def affine(self, v: t.Value) -> Optional[Affine]:
        if v.id in self._affine:
            return self._affine[v.id]
        self._affine[v.id] = None  # cycles through loops resolve to "unknown"
        res = self._affine_uncached(v)
        if res is not None:
            res = Affine(res.offset, tuple(ZERO if n == 1 else s for s, n in zip(res.strides, v.shape)))
        self._affine[v.id] = res
        return res

    def _affine_uncached(self, v: t.Value) -> Optional[Affine]:
        rank = len(v.shape)
        if not v.is_tile:
            return Affine(self.poly(v), ())
        if v.dtype not in ("i32", "i64"):
            return None
        op = v.owner
        if isinstance(op, t.Constant):
            return Affine(Poly.const(int(op.value)), (ZERO,) * rank)
        if isinstance(op, t.MakeRange):
            return Affine(Poly.const(op.start), (Poly.const(1),))
        if isinstance(op, t.Splat):
            return Affine(self.poly(op.src), (ZERO,) * rank)
        if isinstance(op, t.Broadcast):
            f = self.affine(op.src)
            return None if f is None else Affine(f.offset, f.strides)
        if isinstance(op, t.ExpandDims):
            f = self.affine(op.src)
            if f is None:
                return None
            s = list(f.strides)
            s.insert(op.axis, ZERO)
            return Affine(f.offset, tuple(s))
        if isinstance(op, t.Trans):
            f = self.affine(op.src)
            return None if f is None else Affine(f.offset, tuple(f.strides[i] for i in op.order))
        if isinstance(op, t.Reshape):
            f = self.affine(op.src)
            return None if f is None else _reshaped(f, op.src.shape, v.shape)
        if isinstance(op, t.Elementwise):
            a = op.args
            if op.opname in ("arith.extsi", "arith.trunci"):
                return self.affine(a[0])
            if op.opname in ("arith.addi", "arith.subi"):
                fa, fb = self.affine(a[0]), self.affine(a[1])
                if fa is None or fb is None:
                    return None
                return self._affine_in_i64(fa + fb if op.opname == "arith.addi" else fa - fb, op)
            if op.opname == "arith.muli":
                fa, fb = self.affine(a[0]), self.affine(a[1])
                if fa is None or fb is None:
                    return None
                if fb.uniform:
                    return self._affine_in_i64(fa.scale(fb.offset), op)
                if fa.uniform:
                    return self._affine_in_i64(fb.scale(fa.offset), op)
                return None
            return None
        if v.id in self._block_arg_of:
            return self._loop_carried(*self._block_arg_of[v.id], kind="arg")
        if v.id in self._result_of_loop:
            return self._loop_carried(*self._result_of_loop[v.id], kind="result")
        return None

    def _affine_in_i64(self, f: Affine, op: t.Op) -> Affine:
        for p in (f.offset, *f.strides):
            self._in_i64(p, op)
        return f

    def _loop_carried(self, loop: t.For, j: int, kind: str) -> Optional[Affine]:
        """A tile carried by `loop` as ``arg + uniform step``: its offset becomes a scalar."""
        init = self.affine(loop.inits[j])
        if init is None:
            return None
        arg, y = loop.iter_args[j], loop.body.yields[j]
        step = self._step(arg, y)
        if step is None:
            return None
        self.facts.loop_offsets[(id(loop), j)] = LoopOffset(init.offset, step)
        return Affine(Poly.atom(Carried(loop, j, kind)), init.strides)

    def _step(self, arg: t.Value, y: t.Value) -> Optional[Poly]:
        if y is arg:
            return ZERO
        op = y.owner
        if isinstance(op, t.Elementwise) and op.opname == "arith.addi":
            for mine, other in ((op.args[0], op.args[1]), (op.args[1], op.args[0])):
                if mine is arg:
                    f = self.affine(other)
                    if f is not None and f.uniform:
                        return f.offset
        return None

    # -- masks ---------------------------------------------------------------------------
    def box(self, m: t.Value) -> Optional[Box]:
        rank = len(m.shape)
        op = m.owner
        if not m.is_tile:
            return Box((), (), (Cond("val", value=m),))
        if isinstance(op, t.Constant):
            if op.value:
                return Box.full(rank)
            return Box(((),) * rank, ((),) * rank, (Cond("lt0", poly=Poly.const(0)),))
        if isinstance(op, t.Splat):
            return Box(((),) * rank, ((),) * rank, (Cond("val", value=op.src),))
        if isinstance(op, t.ExpandDims):
            b = self.box(op.src)
            if b is None:
                return None
            lo, hi = list(b.lo), list(b.hi)
            lo.insert(op.axis, ())
            hi.insert(op.axis, ())
            return Box(tuple(lo), tuple(hi), b.conds)
        if isinstance(op, t.Broadcast):
            b = self.box(op.src)
            if b is None:
                return None
            lo, hi, conds = list(b.lo), list(b.hi), list(b.conds)
            for d, (n_in, n_out) in enumerate(zip(op.src.shape, m.shape)):
                if n_in == 1 and n_out != 1:
                    # A bound on a size-1 dim is a condition at index 0 for the whole tile.
                    conds += [Cond("lt0", poly=p - Poly.const(1)) for p in lo[d]]  # lo <= 0
                    conds += [Cond("lt0", poly=-p) for p in hi[d]]                 # 0 < hi
                    lo[d], hi[d] = (), ()
            return Box(tuple(lo), tuple(hi), tuple(conds))
        if isinstance(op, t.Elementwise):
            if op.opname == "arith.andi":
                a, b = self.box(op.args[0]), self.box(op.args[1])
                return None if a is None or b is None else a & b
            if op.opname == "arith.cmpi":
                return self._cmp_box(op, rank)
        return None

    def _cmp_box(self, op: t.Elementwise, rank: int) -> Optional[Box]:
        pred = op.attrs["predicate"]
        if pred not in ("slt", "sle", "sgt", "sge"):
            return None
        fa, fb = self.affine(op.args[0]), self.affine(op.args[1])
        if fa is None or fb is None:
            return None
        d = fa - fb  # condition: d.offset + sum i*stride  (pred)  0
        # Normalize to "expr < 0": slt: e<0; sle: e-1<0; sgt: -e<0; sge: -e-1<0.
        if pred in ("sgt", "sge"):
            d = -d
        if pred in ("sle", "sge"):
            d = Affine(d.offset - Poly.const(1), d.strides)
        nonzero = [i for i, s in enumerate(d.strides) if not s.is_zero()]
        empty = ((),) * rank
        if not nonzero:
            return Box(empty, empty, (Cond("lt0", poly=d.offset),))
        if len(nonzero) != 1:
            return None
        dim = nonzero[0]
        c = d.strides[dim].const_value
        lo, hi = list(empty), list(empty)
        if c == 1:        # o + i < 0  <=>  i < -o
            hi[dim] = (-d.offset,)
        elif c == -1:     # o - i < 0  <=>  i > o  <=>  i >= o + 1
            lo[dim] = (d.offset + Poly.const(1),)
        else:
            return None
        return Box(tuple(lo), tuple(hi))

    # -- accesses ------------------------------------------------------------------------
    def classify(self, op: t.Load | t.Store) -> Access:
        form = self.affine(op.offsets)
        if form is None:
            return GatherAccess("offsets are not affine in the tile indices")
        box = None
        if op.mask is not None:
            box = self.box(op.mask)
            if box is None:
                return GatherAccess("mask is not a bounds check")
            shape = op.offsets.shape
            if any((box.lo[d] or box.hi[d]) and form.strides[d].is_zero() and shape[d] != 1
                   for d in range(len(shape))):
                return GatherAccess("mask along a dimension the offsets do not vary with")
        other = None
        if isinstance(op, t.Load) and op.other is not None:
            other = uniform_scalar(op.other)
            if other is None:
                return GatherAccess("'other' is not uniform")
        return StructuredAccess(form, box, other)

    # -- liveness ------------------------------------------------------------------------
    def liveness(self) -> None:
        live, live_ops = self.facts.live, self.facts.live_ops
        work: list[t.Value] = []

        def mark(v: t.Value) -> None:
            if v.id not in live:
                live.add(v.id)
                work.append(v)

        def mark_poly(p: Poly) -> None:
            for a in p.atom_list():
                if isinstance(a, t.Value):
                    mark(a)
                elif (id(a.loop), a.index) not in self.facts.carried_used:
                    self.facts.carried_used.add((id(a.loop), a.index))
                    mark_op(a.loop)
                    lo = self.facts.loop_offsets[(id(a.loop), a.index)]
                    mark_poly(lo.init)
                    mark_poly(lo.step)

        def mark_access(op: t.Load | t.Store) -> None:
            acc = self.facts.access(op)
            if isinstance(acc, StructuredAccess):
                for p in acc.polys():
                    mark_poly(p)
                for c in (acc.box.conds if acc.box else ()):
                    if c.value is not None:
                        mark(c.value)
                if acc.other is not None:
                    mark(acc.other)
            else:
                mark(op.offsets)
                if op.mask is not None:
                    mark(op.mask)
                if isinstance(op, t.Load) and op.other is not None:
                    mark(op.other)

        parents: dict[int, Optional[t.Op]] = {}

        def index_parents(b: t.Block, parent: Optional[t.Op]) -> None:
            for op in b.ops:
                parents[id(op)] = parent
                for r in op.regions():
                    index_parents(r, op)

        index_parents(self.kernel.body, None)

        def mark_op(op: t.Op) -> None:
            # Emitting an op inside a region requires emitting the region's owner.
            while op is not None and id(op) not in live_ops:
                live_ops.add(id(op))
                if isinstance(op, t.For):
                    mark(op.lb), mark(op.ub), mark(op.step)
                elif isinstance(op, t.If):
                    mark(op.cond)
                elif isinstance(op, t.While):
                    # The condition reads the carried values: all of them run.
                    for v in (*op.inits, *op.before.yields, *op.after.yields):
                        mark(v)
                op = parents[id(op)]

        for op in self.kernel.walk():
            if isinstance(op, t.Store):
                mark_op(op)
                mark(op.value)
                mark_access(op)
            elif isinstance(op, t.Atomic):   # element by element: its operands as they are
                mark_op(op)
                for v in op.operands():
                    mark(v)

        while work:
            v = work.pop()
            owner = v.owner
            if isinstance(owner, t.Op):
                mark_op(owner)
                if isinstance(owner, t.Load):
                    mark_access(owner)
                elif isinstance(owner, t.For):
                    j = owner.results.index(v)
                    mark(owner.inits[j]), mark(owner.body.yields[j]), mark(owner.iter_args[j])
                elif isinstance(owner, t.If):
                    j = owner.results.index(v)
                    mark(owner.then.yields[j]), mark(owner.otherwise.yields[j])
                else:
                    for o in owner.operands():
                        mark(o)
            elif v.id in self._block_arg_of:
                loop, j = self._block_arg_of[v.id]
                mark_op(loop)
                mark(loop.inits[j]), mark(loop.body.yields[j])


def uniform_scalar(v: t.Value) -> Optional[t.Value]:
    """The scalar every element of tile `v` equals, when that is evident (splat / constant)."""
    op = v.owner
    if not v.is_tile:
        return v
    if isinstance(op, t.Splat):
        return op.src
    if isinstance(op, (t.Constant, t.Broadcast)):
        return v if isinstance(op, t.Constant) else uniform_scalar(op.src)
    return None


def uniform_tile(v: t.Value) -> bool:
    """Every element of `v` is evidently the same scalar: constants and splats, seen through
    shape ops and elementwise ops of such tiles and scalars."""
    op = v.owner
    if not v.is_tile or isinstance(op, (t.Constant, t.Splat)):
        return True
    if isinstance(op, (t.Broadcast, t.ExpandDims, t.Reshape, t.Trans)):
        return uniform_tile(op.src)
    return isinstance(op, t.Elementwise) and all(map(uniform_tile, op.args))


# Single-op combiners (on the two block arguments) whose reduction of n copies of one value is
# computed in closed form (`closed_form_reduce`).
CLOSED_FORM_COMBINERS = frozenset({
    "arith.addi", "arith.addf", "arith.muli", "arith.mulf", "arith.xori", "arith.andi", "arith.ori",
    "arith.maxsi", "arith.minsi", "arith.maxui", "arith.minui",
    "arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf"})


def closed_form_reduce(op: t.Op) -> bool:
    """A tt.reduce of a uniform tile (`uniform_tile`) with a single-op combiner of
    CLOSED_FORM_COMBINERS: its result is computed from the scalar and the element count.
    (IREE folds such a tile into the reduction's body, as a value defined outside it, and MLIR's
    linalg vectorizer then drops the reduction of that value over the vectorized part of the
    reduced dim: on CUDA, tl.sum(tl.full((32, 32), 1, tl.int32)) came out 256.)"""
    if not isinstance(op, t.Reduce) or len(op.srcs) != 1:
        return False
    block = op.combiner
    if len(block.args) != 2 or len(block.ops) != 1 or len(block.yields) != 1:
        return False
    c = block.ops[0]
    return (isinstance(c, t.Elementwise) and c.opname in CLOSED_FORM_COMBINERS and block.yields[0] is c.result
            and len(c.args) == 2 and set(map(id, c.args)) == set(map(id, block.args))
            and uniform_tile(op.srcs[0]))


def analyze(kernel: t.Kernel) -> Facts:
    """Pointer, mask, liveness and versioning facts for `kernel`."""
    a = _Analyzer(kernel)
    for op in kernel.walk():
        if isinstance(op, (t.Load, t.Store)):
            a.facts.accesses[id(op)] = a.classify(op)
    a.liveness()
    a.facts.entry = entry_values(kernel)
    a.facts.plan = version_plan(kernel, a.facts)
    return a.facts
