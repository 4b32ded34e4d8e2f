"""Rewrites on reading: TTIR ops the reader writes as other tile ops than their one-to-one
translation, because IREE's CPU code has no such op, or computes it less accurately than Triton
promises (or than its GPU code does). The reader calls each at one place; each returns the
rewritten result, its tile ops added through `emit`, or None where it does not apply (the reader
then translates the op as it is).

- `elementwise` (arith / math ops):
  - ``math.absf`` of fp8 (``tl.abs``, e4m3 / e5m2): the sign bit cleared on the i8 bits. IREE's
    CPU code has no fp8 arithmetic, no absf of fp8 either (Triton's test_abs_fp8 uses it).
  - fp64 functions that IREE's llvm-cpu code would take from the C math library, which its
    executables cannot link: inline f64 and i64 ops (`f64_math`).
  - f32, f16 and bf16 sin / cos / tan: an argument reduction right for every f32 (`f32_trig`,
    f16 / bf16 through f32). IREE's own reduces in f32: 2.8e-3 off at 1e5, wrong at 1e8.
  - ``arith.fptosi`` / ``arith.fptoui`` of a constant (``tl.load(..., other=-float("inf"))`` on
    an int pointer, ``tl.full(..., float).to(int)``): the constant, converted as Triton's
    interpreter converts it (numpy's cast). Out of range or NaN, MLIR and LLVM fold the cast of a
    constant to poison; at run time the CPU's own instruction gives numpy's value.
- `reduce` (``tt.reduce``):
  - ``tl.sum`` of one fp16 / bf16 tile adds in f32 and rounds once. The order of a reduction
    is not Triton's to promise, but its GPU code adds pairwise, where fp16 / bf16 partial sums
    stay accurate; IREE's CPU code adds along the row, where they stop growing (1024 ones in
    bf16 sum to 256; Triton's test_sum_dtype checks this).
  - a max / min written as compare-and-select (torch Inductor's amax: ``where(a > b or a != a,
    a, b)``) combines with the one op it computes (``arith.maximumf``, ``arith.maxsi``, ...),
    and an or / and of booleans reduces their values as i32 with maxui / minui: IREE's CPU
    code vectorizes a reduction only when its combiner is one op of a kind it knows, and runs
    the others (and those of i1) one element at a time.
- `dot` (``tt.dot``): an fp16 accumulator (``out_dtype=tl.float16``) accumulates in f32 and is
  rounded once, as tensor cores add their products: added up in fp16 along K the sums drift (by
  0.03 over K = 64, where Triton's own test_dot3d allows 0.01).
- `map_elementwise` (``tt.map_elementwise``): with ``pack`` > 1 the function takes ``pack``
  consecutive elements (row-major) of each argument and returns ``pack`` of each result: its
  lanes as tiles of their own (reshaped, split), mapped with ``pack`` 1, joined back.
- `atomic` (``tt.atomic_rmw``, ``tt.atomic_cas``): an atomic masked off everywhere (a mask
  Triton folded to false) does nothing, and its old values are undefined: a constant 0, no
  atomic op. (iree-compile fails on the dispatch if it stays.)
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from . import f32_trig, f64_math, tile as t
from .float_casts import FP8_MAX

Emit = Callable[[t.Op], t.Value]   # adds an op to the block being read; returns its result


def elementwise(opname: str, args: list[t.Value], ty: t.Type, loc: str, emit: Emit) -> Optional[t.Value]:
    """An arith / math op of type `ty` on `args`, rewritten; None if no rewrite applies."""
    if opname == "math.absf" and args[0].dtype in FP8_MAX:
        # |x| of fp8 (IREE's CPU code has no fp8 arithmetic): the sign bit cleared.
        i8 = t.with_dtype(ty, "i8")
        bits = emit(t.Elementwise("arith.bitcast", args, i8, loc=loc))
        mag = emit(t.Elementwise("arith.andi", [bits, emit(t.Constant(0x7F, i8, loc))], i8, loc=loc))
        return emit(t.Elementwise("arith.bitcast", [mag], ty, loc=loc))
    if (opname in ("arith.fptosi", "arith.fptoui") and isinstance(args[0].owner, t.Constant)
            and t.bitwidth(ty.dtype) >= 8):
        return emit(t.Constant(_float_to_int(args[0].owner.value, args[0].dtype, opname, ty.dtype), ty, loc))
    # fp64 functions that would call the C math library, written with inline f64 ops.
    if (r := f64_math.expand(opname, args, loc, emit)) is not None:
        return r
    # f32 (f16, bf16) sin / cos / tan with an argument reduction right for every f32.
    return f32_trig.expand(opname, args, loc, emit)


def _float_to_int(value: float, src: str, opname: str, dst: str) -> int:
    """The float constant `value` of type `src` converted to the integer type `dst` (signless; the
    result as a signed int) by `opname`, as numpy (Triton's interpreter) converts it."""
    bits = t.bitwidth(dst)
    to = np.dtype(f"{'u' if opname == 'arith.fptoui' else ''}int{bits}")
    with np.errstate(invalid="ignore"):     # out of range or NaN: the value the host's cast gives
        r = np.array(value, np.float64 if src == "f64" else np.float32).astype(to)
    return int(r.astype(f"int{bits}"))


def reduce(srcs: list[t.Value], axis: int, combiner: t.Block, types: list[t.Type], loc: str,
           emit: Emit) -> Optional[list[t.Value]]:
    """The results of a reduction of `srcs` along `axis` by `combiner`, rewritten; None if no
    rewrite applies."""
    if (kind := _select_min_max(combiner)) is not None:
        # A max / min written as compare-and-select: the one op it computes.
        return [emit(t.Reduce(srcs, axis, _one_op_combiner(kind, combiner), types, loc))]
    if (kind := _bool_any_all(combiner, srcs)) is not None:
        # Or / and of booleans: max / min of their values as i32.
        wide = emit(t.Elementwise("arith.extui", srcs, t.with_dtype(srcs[0].type, "i32"), loc=loc))
        red = t.Reduce([wide], axis, _one_op_combiner(kind, combiner, "i32"), [t.with_dtype(types[0], "i32")], loc)
        return [emit(t.Elementwise("arith.trunci", [emit(red)], types[0], loc=loc))]
    if not _is_narrow_float_sum(combiner, srcs):
        return None
    # tl.sum of fp16 / bf16 adds in f32 and rounds once (IREE's CPU code adds along the row,
    # where fp16 / bf16 partial sums stop growing).
    wide = emit(t.Elementwise("arith.extf", srcs, t.with_dtype(srcs[0].type, "f32"), loc=loc))
    add = t.Block()
    add.args = [t.Value(t.ScalarType("f32"), add) for _ in range(2)]
    add.ops = [t.Elementwise("arith.addf", add.args, t.ScalarType("f32"), combiner.ops[0].attrs, loc)]
    add.yields = [add.ops[0].result]
    total = emit(t.Reduce([wide], axis, add, [t.with_dtype(types[0], "f32")], loc))
    return [emit(t.Elementwise("arith.truncf", [total], types[0], loc=loc))]


# "p PRED q" selects p as the max (min) of the two: the op it computes. Floats only with the NaN
# check on p (below); ties select p, equal values but for the sign of a zero, which the
# unspecified order of a reduction leaves open anyway.
_SELECTED = {"ogt": "arith.maximumf", "oge": "arith.maximumf", "olt": "arith.minimumf", "ole": "arith.minimumf",
             "sgt": "arith.maxsi", "sge": "arith.maxsi", "slt": "arith.minsi", "sle": "arith.minsi",
             "ugt": "arith.maxui", "uge": "arith.maxui", "ult": "arith.minui", "ule": "arith.minui"}
_SWAPPED = {"ogt": "olt", "oge": "ole", "olt": "ogt", "ole": "oge", "sgt": "slt", "sge": "sle", "slt": "sgt",
            "sle": "sge", "ugt": "ult", "uge": "ule", "ult": "ugt", "ule": "uge"}


def _select_min_max(combiner: t.Block) -> Optional[str]:
    """The max / min op a two-argument combiner computes as compare-and-select, or None:
    ``where(a > b, a, b)`` of integers (maxsi, ..., by the predicate's signedness), and of floats
    ``where(a > b or a != a, a, b)``, a max that propagates NaN from either side (maximumf,
    minimumf with <): Inductor's ``triton_helpers.maximum`` / ``minimum``, its amax and max
    reductions. IREE's CPU code vectorizes a reduction only where its combiner is one op it
    knows; these ran element by element (a LayerNorm + softmax kernel 3x slower)."""
    if len(combiner.args) != 2 or len(combiner.yields) != 1 or len(combiner.ops) not in (2, 4):
        return None
    sel = combiner.ops[-1]
    if not (isinstance(sel, t.Elementwise) and sel.opname == "arith.select" and combiner.yields == [sel.result]):
        return None
    cond, p, q = sel.args
    a, b = combiner.args
    if {id(p), id(q)} != {id(a), id(b)} or p is q:
        return None
    ops = {id(op.result): op for op in combiner.ops[:-1] if isinstance(op, t.Elementwise)}
    if len(ops) != len(combiner.ops) - 1:
        return None
    nan_check = None
    if len(combiner.ops) == 4:
        either = ops.get(id(cond))
        if either is None or either.opname != "arith.ori":
            return None
        first, second = (ops.get(id(v)) for v in either.args)
        nan_check, cmp = (first, second) if _is_nan_check(first, p) else (second, first)
        if not _is_nan_check(nan_check, p):
            return None
    else:
        cmp = ops.get(id(cond))
    if cmp is None or cmp.opname not in ("arith.cmpf", "arith.cmpi") or (cmp.opname == "arith.cmpf") != (nan_check is not None):
        return None
    pred = cmp.attrs.get("predicate")
    if [id(v) for v in cmp.args] == [id(q), id(p)]:
        pred = _SWAPPED.get(pred)
    elif [id(v) for v in cmp.args] != [id(p), id(q)]:
        return None
    return _SELECTED.get(pred)


def _is_nan_check(op: Optional[t.Op], x: t.Value) -> bool:
    """``x != x`` (or unordered(x, x)): true exactly where x is NaN."""
    return (isinstance(op, t.Elementwise) and op.opname == "arith.cmpf" and op.attrs.get("predicate") in ("une", "uno")
            and all(v is x for v in op.args))


def _bool_any_all(combiner: t.Block, srcs: list) -> Optional[str]:
    """maxui / minui for a reduction of one i1 tile by or / and (``tl.reduce(mask, axis,
    _or)``: Inductor's any / all), else None. IREE's CPU code computes i1 reductions one element
    at a time (a fifth of a LayerNorm + softmax kernel from torch.compile); on 0 / 1 values as
    i32 the same reduction is a max / min, which it vectorizes."""
    op = _single_op(combiner)
    if len(srcs) != 1 or srcs[0].dtype != "i1" or op is None:
        return None
    return {"arith.ori": "arith.maxui", "arith.andi": "arith.minui"}.get(op.opname)


def _single_op(combiner: t.Block) -> Optional[t.Elementwise]:
    """The combiner's op when it is one op on its two arguments, yielded."""
    if len(combiner.ops) != 1:
        return None
    op = combiner.ops[0]
    if (isinstance(op, t.Elementwise) and combiner.yields == [op.result] and len(op.args) == 2
            and set(map(id, op.args)) == set(map(id, combiner.args))):
        return op
    return None


def _one_op_combiner(opname: str, like: t.Block, dtype: Optional[str] = None) -> t.Block:
    block = t.Block()
    scalar = t.ScalarType(dtype) if dtype else like.args[0].type
    block.args = [t.Value(scalar, block) for _ in range(2)]
    block.ops = [t.Elementwise(opname, block.args, scalar, loc=like.ops[-1].loc)]
    block.yields = [block.ops[0].result]
    return block


def _is_narrow_float_sum(combiner: t.Block, srcs: list) -> bool:
    """The reduction adds one fp16 or bf16 tile (`tl.sum`'s combiner, an addf of its two args)."""
    add = _single_op(combiner)
    return len(srcs) == 1 and srcs[0].dtype in ("f16", "bf16") and add is not None and add.opname == "arith.addf"


def dot(a: t.Value, b: t.Value, c: t.Value, loc: str, emit: Emit) -> Optional[t.Value]:
    """`a @ b + c`, rewritten; None if no rewrite applies."""
    if c.dtype != "f16":
        return None
    # An fp16 accumulator accumulates in f32 and is rounded once, as tensor cores add their
    # products (added up in fp16 along K the sums drift).
    wide = emit(t.Elementwise("arith.extf", [c], t.with_dtype(c.type, "f32"), loc=loc))
    acc = emit(t.Dot(a, b, wide, loc))
    return emit(t.Elementwise("arith.truncf", [acc], c.type, loc=loc))


def map_elementwise(args: list[t.Value], body: t.Block, types: list[t.Type], pack: int, loc: str,
                    emit_op: Callable[[t.Op], t.Op]) -> list[t.Value]:
    """The results of tl.map_elementwise of `body` over `args` (tiles of one shape, `pack` a power
    of two dividing their size; `body` takes `pack` lanes of each argument in turn and yields
    `pack` lanes of each result in turn, as Triton's GPU code calls it)."""
    if pack == 1:
        return emit_op(t.MapElementwise(args, body, types, loc)).results
    k = pack.bit_length() - 1
    shape = args[0].shape
    packs = args[0].type.numel // pack

    def lanes(v: t.Value, depth: int) -> list[t.Value]:
        # Lane j of the 2 x ... x 2 minor dims: its last bit picks the half of the last dim.
        if depth == 0:
            return [v]
        lo, hi = emit_op(t.Split(v, [t.TileType(v.shape[:-1], v.dtype)] * 2, loc)).results
        even, odd = lanes(lo, depth - 1), lanes(hi, depth - 1)
        return [(odd if j % 2 else even)[j // 2] for j in range(2 ** depth)]

    def joined(vs: list[t.Value]) -> t.Value:
        if len(vs) == 1:
            return vs[0]
        lo, hi = joined(vs[0::2]), joined(vs[1::2])
        return emit_op(t.Join(lo, hi, t.TileType(lo.shape + (2,), lo.dtype), loc)).result

    ins = []
    for a in args:
        grouped = emit_op(t.Reshape(a, t.TileType((packs,) + (2,) * k, a.dtype), loc)).result
        ins += lanes(grouped, k)
    outs = emit_op(t.MapElementwise(ins, body, [t.TileType((packs,), ty.dtype) for ty in types for _ in range(pack)],
                                    loc)).results
    return [emit_op(t.Reshape(joined(outs[i * pack:(i + 1) * pack]), t.TileType(shape, ty.dtype), loc)).result
            for i, ty in enumerate(types)]


def atomic(value: t.Value, mask: Optional[t.Value], loc: str, emit: Emit) -> Optional[t.Value]:
    """The old values an atomic of `value` under `mask` returns, rewritten; None if no rewrite
    applies."""
    if mask is not None and isinstance(mask.owner, t.Constant) and not mask.owner.value:
        # Masked off everywhere (a mask Triton folded to false): it does nothing, and its old
        # values are undefined. (iree-compile fails on the dispatch if it stays.)
        return emit(t.Constant(0, value.type, loc))
    return None
