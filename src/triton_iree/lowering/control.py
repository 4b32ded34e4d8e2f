"""Control flow: `scf.for` with loop-carried values (vectors, or a matmul accumulator as a
tensor), peeled loops whose tail is masked, `scf.while`, and `scf.if`."""
from __future__ import annotations

from .. import tile as t
from ..forms import Carried
from .values import EmitterBase, _Tensor

class ControlEmitter(EmitterBase):
    """Loops and conditionals."""

    def _tiles_as_tensors(self) -> bool:
        """Targets with narrow vectors (SPIR-V's have at most 4 elements, and a whole tile as a
        vector stays one): tiles leave an scf.if and cross an scf.for, and an scf.while that
        forwards its arguments, as tensors. A loop copies its new tile into the iter_arg: IREE's
        bufferization refuses a loop-carried tensor that is not updated in place."""
        gpu = self.options.gpu_tiling
        return gpu is not None and gpu.narrow_vectors

    @staticmethod
    def _carried_type(v: t.Value, as_tensor: bool = False) -> str:
        if as_tensor:
            return v.type.mlir()
        return f"vector<{'x'.join(map(str, v.shape))}x{v.dtype}>"

    def _region_value(self, v: t.Value, as_tensor: bool = False) -> tuple[str, str]:
        """(ssa name, type) of `v` as it crosses into or out of a region."""
        if not v.is_tile:
            return self.scalar(v), v.dtype
        src = self.tensor(v)
        if as_tensor:
            return src, v.type.mlir()
        zeros = ", ".join(self.idx(0) for _ in v.shape)
        inb = ", ".join("true" for _ in v.shape)
        r = self.fresh("vec")
        self.w(f"{r} = vector.transfer_read {src}[{zeros}], {self.const(0, v.dtype)} {{in_bounds = [{inb}]}} : "
               f"{v.type.mlir()}, {self._carried_type(v)}")
        return r, self._carried_type(v)

    def _bind_region_value(self, v: t.Value, name: str, as_tensor: bool = False) -> None:
        if not v.is_tile:
            self.bind(("s", v.id), name)
            return
        if as_tensor:
            self.bind(("t", v.id), _Tensor(name, tuple(range(len(v.shape))), v.type.mlir()))
            return
        zeros = ", ".join(self.idx(0) for _ in v.shape)
        inb = ", ".join("true" for _ in v.shape)
        e, r = self.fresh("e"), self.fresh("tile")
        self.w(f"{e} = tensor.empty() : {v.type.mlir()}")
        self.w(f"{r} = vector.transfer_write {name}, {e}[{zeros}] {{in_bounds = [{inb}]}} : "
               f"{self._carried_type(v)}, {v.type.mlir()}")
        self.bind(("t", v.id), _Tensor(r, tuple(range(len(v.shape))), v.type.mlir()))

    def _tensor_carried(self, op: t.For, j: int) -> bool:
        """A dot accumulator: the iter_arg's one use is as the accumulator of a dot in the loop
        body, and the loop yields that dot. It crosses the loop as a tensor: the matmul updates
        it in place, and IREE tiles it (a vector this size would be unrolled whole)."""
        arg, y = op.iter_args[j], op.body.yields[j]
        dot = y.owner
        return (isinstance(dot, t.Dot) and dot in op.body.ops and dot.acc is arg
                and dot.a is not arg and dot.b is not arg
                and [id(u) for u in self._uses.get(arg.id, [])] == [id(dot)])

    def _for(self, op: t.For) -> None:
        live = self.facts.live
        keep = [j for j in range(len(op.inits))
                if op.results[j].id in live or op.iter_args[j].id in live]
        offsets = [j for j in range(len(op.inits)) if (id(op), j) in self.facts.carried_used]
        as_tensor = {j for j in keep if self._tensor_carried(op, j)
                     or (self._tiles_as_tensors() and op.inits[j].is_tile)}
        inits, types = [], []
        for j in keep:
            if j in as_tensor:
                inits.append(self.tensor(op.inits[j]))
                types.append(op.inits[j].type.mlir())
            else:
                n, ty = self._region_value(op.inits[j])
                inits.append(n)
                types.append(ty)
        for j in offsets:
            inits.append(self.poly(self.facts.loop_offsets[(id(op), j)].init))
            types.append("index")
        lb, ub = self.scalar(op.lb), self.scalar(op.ub)
        peel = self.facts.plan.peels.get(id(op)) if self.full_version else None
        if peel is not None:
            # The full iterations [lb, mid) with the moving accesses unmasked, then [mid, ub).
            mid = self._peel_point(op, peel)
            saved = self.assume_full
            self.assume_full = saved | peel.accesses
            inits = self._loop(op, lb, mid, keep, offsets, as_tensor, inits, types)
            self.assume_full = saved
            lb = mid
        # No masked iterations where the dispatch runs only programs without them (`_parts`).
        names = inits if peel is not None and self.skip_tails else \
            self._loop(op, lb, ub, keep, offsets, as_tensor, inits, types)
        for j, n in zip(keep, names):
            if j in as_tensor:
                self.bind(("t", op.results[j].id), _Tensor(n, tuple(range(len(op.results[j].shape))),
                                                            op.results[j].type.mlir()))
            else:
                self._bind_region_value(op.results[j], n)
        for j, n in zip(offsets, names[len(keep):]):
            self.bind(Carried(op, j, "result").key(), n)

    def _peel_point(self, op: t.For, peel) -> str:
        """The first induction value at or after which some moving access is not full.

        Iteration iv is full when c + d * iv <= 0 (d > 0) for each condition, i.e. iv <= F with
        F = floor(-c / d). With S = min(F) + 1 clamped to [lb, ub], the full iterations are those
        before mid = lb + ceil((S - lb) / step) * step."""
        ivty = op.lb.dtype

        def to_index(name: str) -> str:
            if ivty == "index":
                return name
            r = self.fresh("i")
            self.w(f"{r} = arith.index_cast {name} : {ivty} to index")
            return r

        lb, ub, step = (to_index(self.scalar(v)) for v in (op.lb, op.ub, op.step))
        s = None
        conds = {(tuple(sorted(c.terms.items(), key=repr)), d): (c, d) for c, d in peel.conds}
        for c, d in conds.values():
            f = self._binop("arith.floordivsi", self.poly(-c), self.idx(d))
            s = f if s is None else self._binop("arith.minsi", s, f)
        s = self._binop("arith.addi", s, self.idx(1))
        s = self._binop("arith.maxsi", self._binop("arith.minsi", s, ub), lb)
        n = self._binop("arith.ceildivsi", self._binop("arith.subi", s, lb), step)
        mid = self._binop("arith.addi", lb, self._binop("arith.muli", n, step))
        if ivty == "index":
            return mid
        r = self.fresh("mid")
        self.w(f"{r} = arith.index_cast {mid} : index to {ivty}")
        return r

    def _loop(self, op: t.For, lb: str, ub: str, keep: list[int], offsets: list[int], as_tensor: set[int],
              inits: list[str], types: list[str]) -> list[str]:
        """One scf.for over [lb, ub) running op's body; returns the names of its results."""
        step = self.scalar(op.step)
        iv = self.fresh("iv")
        args = [self.fresh("it") for _ in inits]
        nres = len(inits)
        res = self.fresh("for") if nres else None
        lhs = f"{res}:{nres} = " if nres > 1 else (f"{res} = " if nres else "")
        ivty = op.lb.dtype
        suffix = f" : {ivty}" if ivty != "index" else ""
        if nres:
            iters = ", ".join(f"{a} = {i}" for a, i in zip(args, inits))
            self.w(f"{lhs}scf.for {iv} = {lb} to {ub} step {step} iter_args({iters}) -> "
                   f"({', '.join(types)}){suffix} {{")
        else:
            self.w(f"scf.for {iv} = {lb} to {ub} step {step}{suffix} {{")
        self.indent += 1
        self.loop_depth += 1
        self.scopes.append({})
        self.bind(("s", op.iv.id), iv)
        for j, a in zip(keep, args):
            if j in as_tensor:
                v = op.iter_args[j]
                self.bind(("t", v.id), _Tensor(a, tuple(range(len(v.shape))), v.type.mlir()))
            else:
                self._bind_region_value(op.iter_args[j], a)
        for j, a in zip(offsets, args[len(keep):]):
            self.bind(Carried(op, j, "arg").key(), a)
        self._block(op.body)
        ys = [self.tensor(op.body.yields[j]) if j in as_tensor else self._region_value(op.body.yields[j])[0]
              for j in keep]
        self._sync()
        for i, j in enumerate(keep):
            if j in as_tensor and not self._tensor_carried(op, j):
                # Into the iter_arg: a loop-carried tensor must be updated in place.
                ty = op.iter_args[j].type.mlir()
                c = self.fresh("cp")
                self.w(f"{c} = linalg.copy ins({ys[i]} : {ty}) outs({args[i]} : {ty}) -> {ty}")
                ys[i] = c
        for j, a in zip(offsets, args[len(keep):]):
            step_p = self.facts.loop_offsets[(id(op), j)].step
            ys.append(self._binop("arith.addi", a, self.poly(step_p)))
        if nres:
            self.w(f"scf.yield {', '.join(ys)} : {', '.join(types)}")
        self.scopes.pop()
        self.loop_depth -= 1
        self.indent -= 1
        self.w("}")
        return [res] if nres == 1 else [f"{res}#{i}" for i in range(nres)]

    def _while(self, op: t.While) -> None:
        """scf.while: carried values cross its regions as scalars and vectors (as tensors on
        targets with narrow vectors, below)."""
        if any(v.is_tile for o in op.before.walk() for v in o.operands() + o.results):
            if self.llvmgpu and op.inits and [y.id for y in op.before.yields[1:]] == [a.id for a in op.before.args]:
                self._guarded_while(op)
            else:
                self._rotated_while(op)
            return
        ids = [a.id for a in op.before.args]
        if self._tiles_as_tensors() and any(v.is_tile for v in op.inits) and \
                all(y.id in ids for y in op.before.yields[1:]):
            self._while_of_tensors(op, [ids.index(y.id) for y in op.before.yields[1:]])
            return
        inits = [self._region_value(v) for v in op.inits]
        types = ", ".join(ty for _, ty in inits)
        fwd = [self._carried_type(v) if v.is_tile else v.dtype for v in op.results]
        res = self.fresh("while") if op.results else None
        lhs = f"{res}:{len(op.results)} = " if len(op.results) > 1 else (f"{res} = " if res else "")
        args = [self.fresh("it") for _ in inits]
        carried = ", ".join(f"{a} = {n}" for a, (n, _) in zip(args, inits))
        self.w(f"{lhs}scf.while ({carried}) : ({types}) -> ({', '.join(fwd)}) {{")
        self._while_region(op.before, args, lambda ys: f"scf.condition({ys[0]})" +
                           (f" {', '.join(ys[1:])} : {', '.join(fwd)}" if fwd else ""))
        after = [self.fresh("it") for _ in fwd]
        self.w("} do {")
        self.w(f"^bb0({', '.join(f'{a}: {ty}' for a, ty in zip(after, fwd))}):")
        self._while_region(op.after, after, lambda ys: f"scf.yield {', '.join(ys)}" +
                           (f" : {types}" if ys else ""))
        self.w("}")
        names = [res] if len(op.results) == 1 else [f"{res}#{i}" for i in range(len(op.results))]
        for v, n in zip(op.results, names):
            self._bind_region_value(v, n)

    def _while_of_tensors(self, op: t.While, fwd_idx: list[int]) -> None:
        """Targets with narrow vectors: an scf.while whose condition is a scalar and whose before
        region forwards some of its arguments (`fwd_idx`: the argument each forwarded value is)
        carries its tiles as tensors (as vectors, a 16-element tile failed to legalize on SPIR-V:
        'vector.from_elements'). The emitted loop forwards all its arguments, so that each
        carried tile has an argument in the after region too, and the body copies each new tile
        into that argument: a loop-carried tensor must be updated in place (the before region's
        arguments are forwarded unchanged, so that buffer is the iter_arg's)."""
        inits = [self._region_value(v, True) for v in op.inits]
        tys = [ty for _, ty in inits]
        types = ", ".join(tys)
        res = self.fresh("while")
        n = len(inits)
        lhs = f"{res}:{n} = " if n > 1 else f"{res} = "
        args = [self.fresh("it") for _ in inits]
        carried = ", ".join(f"{a} = {x}" for a, (x, _) in zip(args, inits))
        self.w(f"{lhs}scf.while ({carried}) : ({types}) -> ({types}) {{")
        self._while_region(op.before, args, lambda ys: f"scf.condition({ys[0]}) {', '.join(args)} : {types}", True)
        after = [self.fresh("it") for _ in inits]
        self.w("} do {")
        self.w(f"^bb0({', '.join(f'{a}: {ty}' for a, ty in zip(after, tys))}):")

        def into_args(ys: list[str]) -> list[str]:
            self._sync()
            for i, v in enumerate(op.inits):
                if v.is_tile:
                    c = self.fresh("cp")
                    self.w(f"{c} = linalg.copy ins({ys[i]} : {tys[i]}) outs({after[i]} : {tys[i]}) -> {tys[i]}")
                    ys[i] = c
            return ys

        self._while_region(op.after, [after[k] for k in fwd_idx],
                           lambda ys: f"scf.yield {', '.join(into_args(ys))} : {types}", True)
        self.w("}")
        names = [res] if n == 1 else [f"{res}#{i}" for i in range(n)]
        for v, k in zip(op.results, fwd_idx):
            self._bind_region_value(v, names[k], True)

    def _rotated_while(self, op: t.While) -> None:
        """scf.while whose condition computes on tiles (`while tl.sum(v) > c`): the condition
        and forwarded values are computed before the loop and again at the end of its body, and
        the loop carries them; its before region only tests the condition. IREE's loop-invariant
        code motion copies a before region in front of the loop (a zero-trip check), and a tile
        op there twice failed to compile: its configuration set twice on llvm-cpu ('multiple ops
        within dispatch trying to set the translation info'). (CUDA and HIP: `_guarded_while`.)"""
        fwd = [self._carried_type(v) if v.is_tile else v.dtype for v in op.results]
        types = ", ".join([op.cond.dtype] + fwd)
        first = self._before_values(op.before, [self._region_value(v)[0] for v in op.inits])
        res = self.fresh("while") if op.results else None
        lhs = f"{res}:{len(op.results)} = " if len(op.results) > 1 else (f"{res} = " if res else "")
        args = [self.fresh("it") for _ in first]
        carried = ", ".join(f"{a} = {n}" for a, n in zip(args, first))
        self.w(f"{lhs}scf.while ({carried}) : ({types}) -> ({', '.join(fwd)}) {{")
        self.indent += 1
        self.w(f"scf.condition({args[0]})" + (f" {', '.join(args[1:])} : {', '.join(fwd)}" if fwd else ""))
        self.indent -= 1
        after = [self.fresh("it") for _ in fwd]
        self.w("} do {")
        self.w(f"^bb0({', '.join(f'{a}: {ty}' for a, ty in zip(after, fwd))}):")
        self.indent += 1
        self.loop_depth += 1
        self.scopes.append({})
        for v, a in zip(op.after.args, after):
            self._bind_region_value(v, a)
        self._block(op.after)
        nxt = self._before_values(op.before, [self._region_value(y)[0] for y in op.after.yields])
        self.w(f"scf.yield {', '.join(nxt)} : {types}")
        self.scopes.pop()
        self.loop_depth -= 1
        self.indent -= 1
        self.w("}")
        names = [res] if len(op.results) == 1 else [f"{res}#{i}" for i in range(len(op.results))]
        for v, n in zip(op.results, names):
            self._bind_region_value(v, n)

    def _guarded_while(self, op: t.While) -> None:
        """CUDA and HIP: a while loop whose before region forwards its arguments (as Triton's
        does), its condition computing on tiles: the loop carries a flag, first true; its body
        computes the condition and runs the original body under an scf.if on it. (The rotated
        form's reduction before the loop and in it failed to distribute, as in an scf.for.)
        Tiles cross it as tensors, each new one copied into its iter_arg (IREE's bufferization
        refuses an scf.while tensor that is not updated in place; as vectors too)."""
        carried = [self._carried_type(v, True) if v.is_tile else v.dtype for v in op.inits]
        inits = [self._region_value(v, True)[0] for v in op.inits]
        go = self.const(True, "i1")
        types = ["i1"] + carried
        args = [self.fresh("it") for _ in types]
        res = self.fresh("while")
        n = len(carried)
        lhs = f"{res}:{n} = " if n > 1 else f"{res} = "
        self.w(f"{lhs}scf.while ({', '.join(f'{a} = {x}' for a, x in zip(args, [go] + inits))}) : "
               f"({', '.join(types)}) -> ({', '.join(carried)}) {{")
        self.indent += 1
        self.w(f"scf.condition({args[0]}) {', '.join(args[1:])} : {', '.join(carried)}")
        self.indent -= 1
        self.w("} do {")
        inner = [self.fresh("it") for _ in carried]
        self.w(f"^bb0({', '.join(f'{a}: {ty}' for a, ty in zip(inner, carried))}):")
        self.indent += 1
        self.loop_depth += 1
        ys = self._before_values(op.before, inner, True)
        nxt = self.fresh("if")
        lhs = f"{nxt}:{n} = " if n > 1 else f"{nxt} = "
        self.w(f"{lhs}scf.if {ys[0]} -> ({', '.join(carried)}) {{")
        self.indent += 1
        self.if_depth += 1
        self.scopes.append({})
        for v, a in zip(op.after.args, inner):
            self._bind_region_value(v, a, True)
        self._block(op.after)
        self.w(f"scf.yield {', '.join(self._region_value(y, True)[0] for y in op.after.yields)} : {', '.join(carried)}")
        self.scopes.pop()
        self.if_depth -= 1
        self.indent -= 1
        self.w("} else {")
        self.w(f"  scf.yield {', '.join(inner)} : {', '.join(carried)}")
        self.w("}")
        nn = [nxt] if n == 1 else [f"{nxt}#{i}" for i in range(n)]
        for i, v in enumerate(op.inits):
            if v.is_tile:
                c, ty = self.fresh("cp"), carried[i]
                self.w(f"{c} = linalg.copy ins({nn[i]} : {ty}) outs({inner[i]} : {ty}) -> {ty}")
                nn[i] = c
        self.w(f"scf.yield {', '.join([ys[0]] + nn)} : {', '.join(types)}")
        self.loop_depth -= 1
        self.indent -= 1
        self.w("}")
        names = [res] if n == 1 else [f"{res}#{i}" for i in range(n)]
        for v, nm in zip(op.results, names):
            self._bind_region_value(v, nm, True)

    def _before_values(self, block: t.Block, args: list[str], as_tensor: bool = False) -> list[str]:
        """The condition and forwarded values of a while loop's before region on `args`."""
        self.scopes.append({})
        for v, a in zip(block.args, args):
            self._bind_region_value(v, a, as_tensor)
        self._block(block)
        ys = [self._region_value(y, as_tensor)[0] for y in block.yields]
        self.scopes.pop()
        return ys

    def _while_region(self, block: t.Block, args: list[str], terminator, as_tensor: bool = False) -> None:
        self.indent += 1
        self.loop_depth += 1
        self.scopes.append({})
        for v, a in zip(block.args, args):
            self._bind_region_value(v, a, as_tensor)
        self._block(block)
        self.w(terminator([self._region_value(y, as_tensor)[0] for y in block.yields]))
        self.scopes.pop()
        self.loop_depth -= 1
        self.indent -= 1

    def _if(self, op: t.If) -> None:
        live = self.facts.live
        keep = [j for j in range(len(op.results)) if op.results[j].id in live]
        as_tensor = self._tiles_as_tensors()
        types = [self._carried_type(op.results[j], as_tensor) if op.results[j].is_tile else op.results[j].dtype
                 for j in keep]
        cond = self.scalar(op.cond)
        if self.spirv and op.then.ops and op.otherwise.ops and not any(op.results[j].is_tile for j in keep):
            self._if_in_two(op, keep, types, cond)
            return
        # Tiles leaving the `if` as tensors: each branch copies its tile into one destination
        # allocated before the `if` (a bufferization.alloc_tensor). The branches' own tiles
        # could be buffers of different kinds, which IREE's bufferization refused to yield
        # from one `if` ('incompatible buffer types on then/else branches'); it refused a
        # tensor.empty as the destination too.
        dests = {j: self._empty(types[i], shared=True) for i, j in enumerate(keep) if as_tensor and op.results[j].is_tile}
        res = self.fresh("if") if keep else None
        lhs = f"{res}:{len(keep)} = " if len(keep) > 1 else (f"{res} = " if keep else "")
        self.w(f"{lhs}scf.if {cond}" + (f" -> ({', '.join(types)})" if keep else "") + " {")
        self.if_depth += 1
        for bi, blk in enumerate((op.then, op.otherwise)):
            if bi == 1:
                self.w("} else {")
            self.indent += 1
            self.scopes.append({})
            self._block(blk)
            if keep:
                ys = [self._region_value(blk.yields[j], as_tensor)[0] for j in keep]
                if dests:
                    self._sync()
                for i, j in enumerate(keep):
                    if j in dests:
                        c = self.fresh("cp")
                        self.w(f"{c} = linalg.copy ins({ys[i]} : {types[i]}) outs({dests[j]} : {types[i]}) -> {types[i]}")
                        ys[i] = c
                self.w(f"scf.yield {', '.join(ys)} : {', '.join(types)}")
            self.scopes.pop()
            self.indent -= 1
        self.if_depth -= 1
        self.w("}")
        names = [res] if len(keep) == 1 else [f"{res}#{i}" for i in range(len(keep))]
        for j, n in zip(keep, names):
            self._bind_region_value(op.results[j], n, as_tensor)

    def _if_in_two(self, op: t.If, keep: list[int], types: list[str], cond: str) -> None:
        """SPIR-V: an `if` whose branches both compute, with scalar results, as two one-branch
        `scf.if`s, on the condition and on its negation; the second's else yields the first's
        results. IREE's SPIR-V canonicalization merges a selection's two branches where they run
        the same ops on different values into one block whose block arguments pick the values
        (`spirv.BranchConditional %c, ^bb1(%a), ^bb1(%b)`), which SPIR-V serializes as an OpPhi
        with both values coming from the same block: the drivers (NVIDIA's, lavapipe) took the
        first, so such an `if` ran its then branch's values always (`z = x + 1` / `z = y + 2`
        gave x + 1). A branch that computes and one that only yields differ, and are not merged.
        (The negation sits between the two, so that scf.if's canonicalization does not combine
        them again.)"""
        def one(blk: t.Block, c: str, other: list[str]) -> list[str]:
            res = self.fresh("if") if keep else None
            lhs = f"{res}:{len(keep)} = " if len(keep) > 1 else (f"{res} = " if keep else "")
            self.w(f"{lhs}scf.if {c}" + (f" -> ({', '.join(types)})" if keep else "") + " {")
            self.if_depth += 1
            self.indent += 1
            self.scopes.append({})
            self._block(blk)
            if keep:
                ys = [self._region_value(blk.yields[j])[0] for j in keep]
                self.w(f"scf.yield {', '.join(ys)} : {', '.join(types)}")
            self.scopes.pop()
            self.indent -= 1
            self.if_depth -= 1
            if keep:
                self.w("} else {")
                self.w(f"  scf.yield {', '.join(other)} : {', '.join(types)}")
            self.w("}")
            return [res] if len(keep) == 1 else [f"{res}#{i}" for i in range(len(keep))]

        zeros = [self.const(0, op.results[j].dtype) for j in keep]
        first = one(op.then, cond, zeros)
        negated = self._binop("arith.xori", cond, self.const(True, "i1"), "i1")
        names = one(op.otherwise, negated, first)
        for j, n in zip(keep, names):
            self._bind_region_value(op.results[j], n)
