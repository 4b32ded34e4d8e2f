"""tl.sort and tl.topk, mixed into the TTIR reader.

Triton's library builds both (`sort_impl` in triton/language/standard.py) as a bitonic network
on the tile reshaped to a hypercube [2, 2, ..., 2]: each compare-and-swap finds its partners with
an xor reduction along one size-2 axis. iree-compile does not finish on modules with such
high-rank tiles (a 32-element sort has rank 5). So the reader reads the ops of one call of
`sort_impl` as a group and emits the same network on the tile's own shape instead: the partner of
element j along the last axis is element j ^ 2^i, read with a gather, and each compare-and-swap
keeps Triton's comparison, flip pattern and order, so the result is the one Triton's expansion
gives, element for element (NaNs and signed zeros included).

Which network a call builds (ascending or descending; the k of topk is the result's last dim) is
not visible in the TTIR's ops but only in its constants; so the group read as Triton wrote it is evaluated on test inputs (a small
numpy interpreter of the tile ops it consists of), and the replacement is used only when it
gives exactly the same results on them. Anything else is refused naming tl.sort / tl.topk.
"""
from __future__ import annotations

import math

import numpy as np

from . import tile as t
from .errors import UnsupportedError

_NP = {"i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
       "f16": np.float16, "f32": np.float32, "f64": np.float64,
       # bf16 is evaluated as f16: only moved, bit-cast to i16 and compared here.
       "bf16": np.float16}
_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


class _NotEvaluable(Exception):
    pass


_PREDICATES = {"eq": np.equal, "ne": np.not_equal, "gt": np.greater, "ge": np.greater_equal,
               "lt": np.less, "le": np.less_equal}


def _cmp(pred: str, a, b):
    """arith.cmpi / arith.cmpf with MLIR's predicate names."""
    if a.dtype.kind == "f":
        if pred in ("false", "true", "ord", "uno"):
            raise _NotEvaluable(pred)
        with np.errstate(invalid="ignore"):
            unordered = np.isnan(a) | np.isnan(b)
            r = _PREDICATES[pred[1:]](a, b) & ~unordered
        return r | unordered if pred[0] == "u" else r
    if pred[0] == "u":
        a, b = a.view(_UNSIGNED[a.dtype.itemsize]), b.view(_UNSIGNED[b.dtype.itemsize])
    return _PREDICATES[pred.lstrip("su")](a, b)


def _minmax(fn, nan_propagating: bool):
    def f(a, b):
        if a.dtype.kind != "f":
            return fn(a, b)
        r = fn(a, b)
        if nan_propagating:
            return np.where(np.isnan(a) | np.isnan(b), np.nan, r).astype(a.dtype)
        return np.where(np.isnan(a), b, np.where(np.isnan(b), a, r)).astype(a.dtype)
    return f


_ELEMENTWISE = {
    "arith.xori": lambda a, b: a ^ b, "arith.subi": lambda a, b: a - b, "arith.shli": lambda a, b: a << b,
    "arith.shrsi": lambda a, b: a >> b, "arith.andi": lambda a, b: a & b, "arith.ori": lambda a, b: a | b,
    "arith.maxsi": np.maximum, "arith.minsi": np.minimum,
    "arith.maxnumf": _minmax(np.fmax, False), "arith.minnumf": _minmax(np.fmin, False),
    "arith.maximumf": _minmax(np.maximum, True), "arith.minimumf": _minmax(np.minimum, True),
}


def _evaluate(ops: list[t.Op], env: dict) -> dict:
    """Evaluates tile ops with numpy; `env` maps Value ids to arrays (scalars as 0-d arrays)."""
    for op in ops:
        for v in op.operands():
            if v.id not in env:
                if isinstance(v.owner, t.Op) and _static(v):
                    _evaluate([v.owner], env)
                else:
                    raise _NotEvaluable(f"operand {v} defined outside")
        r = op.results[0] if op.results else None
        if isinstance(op, t.Constant):
            env[r.id] = np.full(r.shape, op.value, dtype=_NP[r.dtype])
        elif isinstance(op, t.MakeRange):
            env[r.id] = np.arange(op.start, op.end, dtype=np.int32)
        elif isinstance(op, (t.Reshape, t.Broadcast, t.Splat)):
            src = env[op.src.id]
            env[r.id] = (np.broadcast_to(src, r.shape) if not isinstance(op, t.Reshape)
                         else src.reshape(r.shape)).copy()
        elif isinstance(op, t.ExpandDims):
            env[r.id] = np.expand_dims(env[op.src.id], op.axis)
        elif isinstance(op, t.Gather):
            env[r.id] = np.take_along_axis(env[op.src.id], env[op.index.id].astype(np.int64), op.axis)
        elif isinstance(op, t.Join):
            env[r.id] = np.stack([env[op.a.id], env[op.b.id]], -1)
        elif isinstance(op, t.Reduce):
            if len(op.srcs) != 1:
                raise _NotEvaluable("reduce of several tiles")
            src = env[op.srcs[0].id]
            acc = np.take(src, 0, op.axis)
            for j in range(1, src.shape[op.axis]):
                benv = {op.combiner.args[0].id: acc, op.combiner.args[1].id: np.take(src, j, op.axis)}
                _evaluate(op.combiner.ops, benv)
                acc = benv[op.combiner.yields[0].id]
            env[r.id] = np.asarray(acc).astype(_NP[r.dtype])
        elif isinstance(op, t.For):
            lb, ub, step = (int(env[v.id]) for v in (op.lb, op.ub, op.step))
            carried = [env[v.id] for v in op.inits]
            for iv in range(lb, ub, step):
                benv = {**env, op.iv.id: np.asarray(iv, dtype=_NP[op.iv.dtype]),
                        **{a.id: c for a, c in zip(op.iter_args, carried)}}
                _evaluate(op.body.ops, benv)
                carried = [benv[y.id] for y in op.body.yields]
            env.update((r.id, c) for r, c in zip(op.results, carried))
        elif isinstance(op, t.Elementwise):
            a = [env[v.id] for v in op.args]
            name = op.opname
            if name == "arith.bitcast":
                env[r.id] = a[0].view(_NP[r.dtype])
            elif name in ("arith.extui", "arith.extsi", "arith.extf", "arith.truncf"):
                env[r.id] = a[0].astype(_NP[r.dtype])
            elif name == "arith.select":
                env[r.id] = np.where(a[0], a[1], a[2])
            elif name in ("arith.cmpi", "arith.cmpf"):
                env[r.id] = _cmp(op.attrs["predicate"], a[0], a[1])
            elif name in _ELEMENTWISE:
                env[r.id] = np.asarray(_ELEMENTWISE[name](a[0], a[1])).astype(_NP[r.dtype])
            else:
                raise _NotEvaluable(name)
        else:
            raise _NotEvaluable(op.name)
    return env


def _test_inputs(shape: tuple[int, ...], dtype: str) -> list[np.ndarray]:
    """Inputs that tell sorting networks apart: distinct values in a random order, and values
    with repeats (and, for floats, signed zeros, infinities and NaNs)."""
    rng = np.random.default_rng(0)
    n = int(np.prod(shape))
    span = min(n, 100)
    distinct = rng.permutation(n) % (2 ** min(t.bitwidth(dtype) - 1, 62))
    out = [distinct, rng.integers(-span // 2, span // 2 + 1, n)]
    out = [a.astype(_NP[dtype]) for a in out]
    if dtype in ("f16", "bf16", "f32", "f64"):
        special = out[1].copy()
        special[rng.integers(0, n, max(1, n // 8))] = -0.0
        special[rng.integers(0, n, max(1, n // 16))] = np.inf
        special[rng.integers(0, n, max(1, n // 16))] = -np.inf
        special[rng.integers(0, n, max(1, n // 16))] = np.nan
        out.append(special)
    return [a.reshape(shape) for a in out]


_STATIC: dict[int, bool] = {}


def _static(v: t.Value) -> bool:
    """`v` is computed from constants and ranges alone (the same in every program)."""
    if v.id not in _STATIC:
        op = v.owner
        _STATIC[v.id] = isinstance(op, (t.Constant, t.MakeRange)) or (
            isinstance(op, (t.Reshape, t.Broadcast, t.ExpandDims, t.Splat, t.Elementwise))
            and all(_static(a) for a in op.operands()))
    return _STATIC[v.id]


class BitonicSort:
    """TTIRReader mixin: a call of Triton's sort_impl (tl.sort, tl.topk) read as one group."""

    def _read_sort_group(self, ops: list, call: tuple[str, str]) -> None:
        name, user_loc = call
        members = set(ops)
        _STATIC.clear()

        def refuse(why: str) -> UnsupportedError:
            return UnsupportedError(f"{name} is not supported by triton-iree here: {why}",
                                    kernel=self.kernel_name, loc=user_loc)

        # Triton's expansion, read into a block of its own; the ops that do not depend on the
        # data (constants, index tiles that CSE may share with the code around the call) are
        # read where they belong.
        outer, scratch = self.block, t.Block()
        self._in_sort_group = True
        try:
            for op in ops:
                data = any(not _static(self.env[v]) for v in op.operands if v in self.env
                           and isinstance(self.env[v], t.Value))
                self.block = scratch if data or len(op.regions) else outer
                self._read_op(op, op.name)
        finally:
            self.block = outer
            self._in_sort_group = False
        mine = {r.id for op in scratch.ops for r in op.results}
        inputs = []
        for op in scratch.ops:
            for v in op.operands():
                if v.id not in mine and not _static(v) and v not in inputs:
                    inputs.append(v)
        outputs = [r for op in ops for r in op.results
                   if isinstance(self.env.get(r), t.Value) and self.env[r].id in mine
                   and any(u.owner.operation not in members for u in r.uses)]
        if len(inputs) != 1 or len(outputs) != 1:
            raise refuse(f"expected one input and one result of its expansion, found {len(inputs)} and {len(outputs)}")
        x = inputs[0]
        if not x.is_tile or x.dtype not in _NP or x.dtype == "i1":
            raise refuse(f"a tile of {x.dtype}")
        theirs = self.env[outputs[0]]
        if not isinstance(theirs, t.Value) or not theirs.is_tile:
            raise refuse("its expansion does not give a tile")
        n, k = x.shape[-1], theirs.shape[-1]
        if theirs.shape[:-1] != x.shape[:-1] or n & (n - 1) or k & (k - 1) or k > n:
            raise refuse(f"a result of shape {list(theirs.shape)} for an input of shape {list(x.shape)}")
        gt = next((op.attrs["predicate"] for op in scratch.ops if isinstance(op, t.Elementwise)
                   and op.opname in ("arith.cmpf", "arith.cmpi") and op.args[0].dtype == x.dtype
                   and op.attrs["predicate"] in ("ogt", "sgt", "ugt")), "ogt" if t.is_float(x.dtype) else "sgt")
        combiners = [op.combiner for op in scratch.ops if isinstance(op, t.Reduce) and
                     not any(isinstance(c, t.Elementwise) and c.opname == "arith.xori" for c in op.combiner.ops)]

        tests = _test_inputs(x.shape, x.dtype)
        try:
            expected = [_evaluate(scratch.ops, {x.id: a})[theirs.id] for a in tests]
        except _NotEvaluable as e:
            raise refuse(f"its expansion has an op the check cannot evaluate ({e})") from None
        if len(combiners) != (n // k).bit_length() - 1 and not (k == 1 and len(combiners) == 1):
            raise refuse(f"{len(combiners)} min / max reductions in its expansion")
        for descending in (False, True):
            ours = t.Block()
            self.block = ours
            try:
                y = self._bitonic(x, k, descending, gt, combiners, user_loc)
            finally:
                self.block = outer
            try:
                got = [_evaluate(ours.ops, {x.id: a})[y.id] for a in tests]
            except _NotEvaluable:
                continue
            if all(g.shape == e.shape and g.tobytes() == e.tobytes() for g, e in zip(got, expected)):
                for op in ours.ops:
                    outer.add(op)
                self.env[outputs[0]] = y
                self.sort_calls.append((name, user_loc))
                return
        raise refuse("its expansion is not the bitonic sort this version of triton-iree knows")

    def _bitonic(self, x: t.Value, k: int, descending: bool, gt: str, combiners: list, loc: str) -> t.Value:
        """Triton's sort_impl network on `x`'s own shape, sorting along the last axis and keeping
        the first `k` (a power of two) of each row."""
        rows = x.shape
        log_n, log_k = (rows[-1]).bit_length() - 1, k.bit_length() - 1
        if len(rows) > 1 and k == rows[-1] > 1:
            # A sort of rows is the same network on the rows laid end to end: partners (j ^ 2^i)
            # and directions (bit `stage` of j) stay within a row, 2^i and 2^stage being below its
            # length. Gathers of 1-D tiles are spread over a GPU's threads, those of 2-D tiles not.
            x = self._emit(t.Reshape(x, t.TileType((math.prod(rows),), x.dtype), loc)).result
        shape = x.shape
        axis = len(shape) - 1

        def ew(opname, args, dtype, attrs=None):
            ty = t.TileType(args[0].shape, dtype)
            return self._emit(t.Elementwise(opname, args, ty, attrs, loc)).result

        def const(value, like: t.Value, dtype: str):
            return self._emit(t.Constant(value, t.TileType(like.shape, dtype), loc)).result

        def iota(length: int) -> t.Value:
            v = self._emit(t.MakeRange(0, length, loc)).result
            for d in range(axis):
                v = self._emit(t.ExpandDims(v, 0, t.TileType((1,) * (d + 1) + (length,), "i32"), loc)).result
            if axis:
                v = self._emit(t.Broadcast(v, t.TileType(shape[:-1] + (length,), "i32"), loc)).result
            return v

        def bit(idx: t.Value, mask: t.Value) -> t.Value:   # idx & mask != 0
            return ew("arith.cmpi", [ew("arith.andi", [idx, mask], "i32"), const(0, idx, "i32")], "i1",
                      {"predicate": "ne"})

        pred = "arith.cmpf" if t.is_float(x.dtype) else "arith.cmpi"

        def swapped(a: t.Value, b: t.Value, flip: t.Value, side: t.Value) -> t.Value:
            """a, or its partner b where the compare-and-swap exchanges them."""
            swap = ew("arith.xori", [ew(pred, [a, b], "i1", {"predicate": gt}), ew("arith.xori", [flip, side], "i1")],
                      "i1")
            return ew("arith.select", [swap, b, a], a.dtype)

        def merge(x: t.Value, stage: int, alternating: bool) -> t.Value:
            """The steps with partners at distances 2^(stage-1), ..., 2, 1."""
            idx = iota(x.shape[-1])
            # The direction of each element's pair; the same at j ^ mask, masks being below 2^stage.
            flip = bit(idx, const(1 << stage, idx, "i32")) if alternating else const(bool(descending), idx, "i1")
            if looped:
                return loop(x, stage, flip, idx)
            pos = {0: idx}                        # j ^ mask, by mask
            order = list(reversed(range(stage)))
            for g in range(0, stage, group):
                x = steps(x, order[g:g + group], flip, pos)
            return x

        def loop(x: t.Value, stage: int, flip: t.Value, idx: t.Value) -> t.Value:
            """The merge's steps as a loop whose body is one step, its partners j ^ 2^i read
            with one gather."""
            i32 = t.ScalarType("i32")
            lb, ub, one, last = (self._emit(t.Constant(v, i32, loc)).result for v in (0, stage, 1, stage - 1))
            body, outer = t.Block(), self.block
            body.args = [t.Value(i32, body, "iv"), t.Value(x.type, body, "it")]
            self.block = body
            try:
                i = self._emit(t.Elementwise("arith.subi", [last, body.args[0]], i32, loc=loc)).result
                mask = self._emit(t.Elementwise("arith.shli", [one, i], i32, loc=loc)).result
                mask = self._emit(t.Splat(mask, idx.type, loc)).result
                partner = self._emit(t.Gather(body.args[1], ew("arith.xori", [idx, mask], "i32"), axis, x.type,
                                              loc)).result
                body.yields = [swapped(body.args[1], partner, flip, bit(idx, mask))]
            finally:
                self.block = outer
            return self._emit(t.For(lb, ub, one, [x], body, loc)).results[0]

        def steps(x: t.Value, bits: list[int], flip: t.Value, pos: dict) -> t.Value:
            """The compare-and-swap steps with partners at distances 2^i, i in `bits`, in one go:
            the element at j after them, from the elements of x at j ^ mask for every mask of
            those bits (one gather each)."""
            memo: dict = {}

            def at(mask: int, done: int) -> t.Value:   # x after the first `done` steps, at j ^ mask
                if mask not in pos:
                    pos[mask] = ew("arith.xori", [pos[0], const(mask, pos[0], "i32")], "i32")
                if (mask, done) not in memo:
                    if done == 0:
                        v = x if mask == 0 else self._emit(t.Gather(x, pos[mask], axis, x.type, loc)).result
                    else:
                        i = bits[done - 1]
                        v = swapped(at(mask, done - 1), at(mask ^ (1 << i), done - 1), flip,
                                    bit(pos[mask], const(1 << i, pos[mask], "i32")))
                    memo[mask, done] = v
                return memo[mask, done]
            return at(0, len(bits))

        # Each step gathers from the tile the step before made. IREE's GPU code keeps each such
        # tile in workgroup memory, with no reuse (one tile a step for 1-D tiles, 2.2 to 2.4 for
        # 2-D ones, whose gathers run on one thread: a top k of rows; on SPIR-V one a gather). A
        # 1024-element f32 sort's 55 steps took 216 KiB on CUDA, where a workgroup (sm_80) may
        # have 163 KiB. A network that would take more than 160 KiB makes `group` steps at once
        # (up to 4), from 2^group - 1 gathers of one tile; with `sort_loops` (SPIR-V, where that
        # takes more, 708 KiB for group 4) one that would take more than 64 KiB makes each merge
        # a loop whose body is one step: one tile a merge.
        tile = math.prod(shape) * max(1, t.bitwidth(x.dtype) // 8) * (1 if axis == 0 else 2.5)

        def workgroup_memory(m: int) -> float:   # merges on the whole tile, then on halves, quarters...
            return tile * (sum(-(-s // m) for s in range(1, log_k + 1)) +
                           sum(2.0 ** -j for j in range(1, log_n - log_k + 1)) * -(-log_k // m))
        looped = self.sort_loops and workgroup_memory(1) > 64 * 1024
        group = next(m for m in (1, 2, 3, 4) if workgroup_memory(m) <= 160 * 1024 or m == 4)

        if k == 1 and len(combiners) == 1 and log_n != 1:
            # Triton >= 3.9 takes the min / max of the whole row for a top 1.
            if combiners[0].args[0].dtype != x.dtype:
                x = ew("arith.extf", [x], combiners[0].args[0].dtype)
            red = self._emit(t.Reduce([x], axis, combiners[0], [t.TileType(shape[:-1], x.dtype)], loc)).result
            return self._emit(t.ExpandDims(red, axis, t.TileType(shape[:-1] + (1,), x.dtype), loc)).result
        for s in range(1, log_k + 1):
            x = merge(x, s, s < log_n)
        if shape != rows:
            return self._emit(t.Reshape(x, t.TileType(rows, x.dtype), loc)).result
        for n, s in enumerate(range(log_k + 1, log_n + 1)):
            wide = combiners[n].args[0].dtype
            if wide != x.dtype:
                # tl.max / tl.min reduce fp16 and bf16 in fp32 (exact): the rest of the network runs there.
                if not (t.is_float(x.dtype) and t.bitwidth(wide) > t.bitwidth(x.dtype)):
                    raise UnsupportedError(f"tl.topk reducing {x.dtype} in {wide} is not supported by triton-iree",
                                           kernel=self.kernel_name, loc=loc)
                x = ew("arith.extf", [x], wide)
            half = x.shape[-1] // 2
            idx = iota(half)
            lo = ew("arith.andi", [idx, const(k - 1, idx, "i32")], "i32")
            hi = ew("arith.shli", [ew("arith.shrsi", [idx, const(log_k, idx, "i32")], "i32"),
                                   const(log_k + 1, idx, "i32")], "i32")
            first = ew("arith.ori", [hi, lo], "i32")
            second = ew("arith.ori", [first, const(k, idx, "i32")], "i32")
            ty = t.TileType(shape[:-1] + (half,), x.dtype)
            a = self._emit(t.Gather(x, first, axis, ty, loc)).result
            b = self._emit(t.Gather(x, second, axis, ty, loc)).result
            pair = self._emit(t.Join(a, b, t.TileType(ty.shape + (2,), x.dtype), loc)).result
            x = self._emit(t.Reduce([pair], axis + 1, combiners[n], [ty], loc)).result
            x = merge(x, log_k, s < log_n)
        return x

