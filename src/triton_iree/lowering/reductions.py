"""Reductions: a reduction linalg.generic (from the combiner's identity, or from the first
element along the axis), signed max / min and integer and under IREE's vector distribution by
flipped bits, reductions of uniform tiles in closed form on CUDA / HIP, and reductions on one
thread."""
from __future__ import annotations

import math
from typing import Optional

from .. import tile as t
from ..analysis import closed_form_reduce
from ..errors import tile_op_name
from .values import EmitterBase, _Body, _Tensor, literal


def _combiner_identity(block: t.Block) -> Optional[tuple[str, object]]:
    """(opname, identity) when the combiner is a single op on (lhs, rhs) with a known identity."""
    if len(block.args) != 2 or len(block.ops) != 1 or len(block.yields) != 1:
        return None
    op = block.ops[0]
    if not isinstance(op, t.Elementwise) or block.yields[0] is not op.result:
        return None
    if set(map(id, op.args)) != set(map(id, block.args)) or len(op.args) != 2:
        return None
    dtype = op.result.dtype
    bits = t.bitwidth(dtype)
    identities = {
        "arith.addf": -0.0, "arith.mulf": 1.0, "arith.maximumf": -math.inf,
        "arith.minimumf": math.inf, "arith.maxnumf": math.nan, "arith.minnumf": math.nan,
        "arith.addi": 0, "arith.muli": 1, "arith.ori": 0, "arith.xori": 0, "arith.andi": -1,
        "arith.maxsi": -(1 << (bits - 1)), "arith.minsi": (1 << (bits - 1)) - 1,
        "arith.maxui": 0, "arith.minui": -1,
    }
    if op.opname not in identities:
        return None
    ident = identities[op.opname]
    if dtype == "i1" and isinstance(ident, int):
        ident = bool(ident & 1)
    return op.opname, ident


def _distributed_flip(opname: str, dtype: str) -> Optional[tuple[str, int, int]]:
    """(combining op, xor mask, its identity) computing a signed max / min or an and of integers
    under IREE's vector distribution (see `ReductionEmitter._reduce`), or None."""
    bits = t.bitwidth(dtype) if dtype in t.INT_TYPES else 64
    if bits >= 64:
        return None
    if opname in ("arith.maxsi", "arith.minsi"):
        kind = "arith.maxui" if opname == "arith.maxsi" else "arith.minui"
        ident = 0 if kind == "arith.maxui" else -1
        return kind, -(1 << (bits - 1)), (bool(ident) if dtype == "i1" else ident)
    if opname == "arith.andi" and bits > 1:
        return "arith.ori", -1, 0
    return None


class ReductionEmitter(EmitterBase):
    """tt.reduce."""

    def _reduce(self, op: t.Reduce) -> None:
        """A linalg.generic reducing `op.axis`. On GPUs its loops are ordered with the reduction
        loop innermost (the tile's other dims in order, then the axis): IREE's dispatch creation
        interchanges the loops of a reduction whose reduction loop is not innermost
        (TransposeGenericOps) but leaves the op's lowering_config as it was, so the root's thread
        tiles then split the reduction loop over threads that each write the same outputs (a race:
        axis-0 sums of a 2-D tile came out as one row's). The CPU keeps the tile's own order."""
        if self.llvmgpu and closed_form_reduce(op):
            self._closed_form(op)
            return
        if self.llvmgpu and (self.options.gpu_tiling.reduced_on_one_thread(op) or
                             self.gpu_scatters and op.to_scalar or self.gpu_whole_reductions and not op.to_scalar and
                             all(r.type.numel == 1 for r in op.results)):
            # (The second: a reduction to one element kept as a tile, in a dispatch IREE
            # configures for a reduction to a scalar: IREE failed to distribute the two.)
            types = [r.type if r.is_tile else t.TileType((1,), r.dtype) for r in op.results]

            def reduce(_dests: list[str]) -> list[str]:
                self._reduce_here(op)
                outs = []
                for r, ty in zip(op.results, types):
                    if r.is_tile:
                        outs.append(self.tensor(r))
                        continue
                    outs.append(self.fresh("x"))
                    self.w(f"{outs[-1]} = tensor.from_elements {self.scalar(r)} : {ty.mlir()}")
                return outs

            names = self._on_one_thread(types, [self._empty(ty.mlir()) for ty in types], reduce)
            for r, name, ty in zip(op.results, names, types):
                if r.is_tile:
                    self.bind(("t", r.id), _Tensor(name, tuple(range(len(r.shape))), ty.mlir()))
                    continue
                x = self.fresh("x")
                self.w(f"{x} = tensor.extract {name}[{self.idx(0)}] : {ty.mlir()}")
                self.bind(("s", r.id), x)
            return
        self._reduce_here(op)

    def _reduce_here(self, op: t.Reduce) -> None:
        src0 = op.srcs[0]
        shape = src0.shape
        rank = len(shape)
        axis = op.axis
        # Loop j iterates the tile's dim order[j]; view[d] is the loop of the tile's dim d.
        if self.options.gpu_tiling is not None:
            order = [i for i in range(rank) if i != axis] + [axis]
        else:
            order = list(range(rank))
        view = tuple(order.index(d) for d in range(rank))
        rshape = tuple(n for i, n in enumerate(shape) if i != axis)
        out_types = [t.TileType(rshape, s.dtype) if rshape else t.TileType((), s.dtype) for s in op.srcs]
        known = _combiner_identity(op.combiner)
        flip = None
        if known is not None and self.llvmgpu and self.gpu_whole_reductions:
            flip = _distributed_flip(known[0], src0.dtype)
        if flip is not None:
            # IREE's vector distribution starts each thread's part of a reduction from its own
            # identity of the combining kind, wrong for signed max / min and bitwise and of
            # integers narrower than 64 bits (0 for maxsi, -1 for minsi, 1 for andi: on CUDA the
            # max of a block of negative int32 came out 0). Reduce the values with their sign
            # bit (all bits, for and) flipped with maxui / minui / ori, whose identities are
            # right, and flip the result back.
            kind, mask, ident = flip
            dtype = src0.dtype
            c = self.const(mask, dtype)
            inits = [self._fill(self.const(ident, dtype), out_types[0])]
            body = _Body(rank)
            x = self._elem(body, src0, tuple(range(rank)))
            xf, acc, y = self.fresh("flip"), self.fresh("acc"), self.fresh("v")
            body.lines.append(f"{xf} = arith.xori {x}, {c} : {dtype}")
            body.lines.append(f"{y} = {kind} {acc}, {xf} : {dtype}")
            body.memo["__outs__"] = [acc]
            out_map = self._map(rank, [f"d{i}" for i in range(rank) if i != axis])
            its = ["reduction" if i == axis else "parallel" for i in range(rank)]
            red = self.fresh("red")
            self._write_generic(red, body, [out_map], its, inits, [out_types[0].mlir()], [dtype], [y], shape)
            res = op.results[0]
            if res.is_tile:
                self._bind_reduce_results(op, [self._flip_back(red, out_types[0], c)], out_types)
            else:
                x, f = self.fresh("x"), self.fresh("v")
                self.w(f"{x} = tensor.extract {red}[] : {out_types[0].mlir()}")
                self.w(f"{f} = arith.xori {x}, {c} : {dtype}")
                self.bind(("s", res.id), f)
            return
        if known is not None:
            inits = [self._fill(self.const(known[1], s.dtype), ty) for s, ty in zip(op.srcs, out_types)]
            body = _Body(rank)
            xs = [self._elem(body, s, view) for s in op.srcs]
            loops_shape = tuple(shape[d] for d in order)
        else:
            # No known identity: start from element 0 along the axis, combine the rest.
            srcs = [self.tensor(s) for s in op.srcs]
            inits, rests = [], []
            for s, name, ty in zip(op.srcs, srcs, out_types):
                offs = ", ".join("0" for _ in shape)
                ones = ", ".join("1" for _ in shape)
                first = ", ".join("1" if i == axis else str(n) for i, n in enumerate(shape))
                init = self.fresh("init")
                if rshape:
                    self.w(f"{init} = tensor.extract_slice {name}[{offs}] [{first}] [{ones}] : "
                           f"{s.type.mlir()} to {ty.mlir()}")
                else:
                    x = self.fresh("x")
                    self.w(f"{x} = tensor.extract {name}[{', '.join(self.idx(0) for _ in shape)}] : {s.type.mlir()}")
                    self.w(f"{init} = tensor.from_elements {x} : {ty.mlir()}")
                inits.append(init)
                if shape[axis] > 1:
                    rest_shape = tuple(n - 1 if i == axis else n for i, n in enumerate(shape))
                    rty = t.TileType(rest_shape, s.dtype)
                    rest = self.fresh("rest")
                    roffs = ", ".join("1" if i == axis else "0" for i in range(rank))
                    self.w(f"{rest} = tensor.extract_slice {name}[{roffs}] [{', '.join(map(str, rest_shape))}] "
                           f"[{ones}] : {s.type.mlir()} to {rty.mlir()}")
                    rests.append((rest, rty))
            if shape[axis] == 1:
                self._bind_reduce_results(op, inits, out_types)
                return
            body = _Body(rank)
            xs = []
            for rest, rty in rests:
                arg = self.fresh("in")
                body.ins.append((rest, rty.mlir(), self._map(rank, [f"d{view[i]}" for i in range(rank)]), arg, rty.dtype))
                xs.append(arg)
            loops_shape = tuple(rests[0][1].shape[d] for d in order)
        accs = [self.fresh("acc") for _ in op.srcs]
        body.memo["__outs__"] = accs
        ys = self._combine(body, op.combiner, accs, xs)
        out_map = self._map(rank, [f"d{view[i]}" for i in range(rank) if i != axis])
        its = ["reduction" if order[j] == axis else "parallel" for j in range(rank)]
        out = self.fresh("red")
        self._write_generic(out, body, [out_map] * len(op.srcs), its, inits, [ty.mlir() for ty in out_types],
                            [s.dtype for s in op.srcs], ys, loops_shape)
        names = [out] if len(op.srcs) == 1 else [f"{out}#{i}" for i in range(len(op.srcs))]
        self._bind_reduce_results(op, names, out_types)

    def _flip_back(self, red: str, ty: t.TileType, c: str) -> str:
        """`red` (a reduction's result tensor) with every element xor-ed with scalar `c`."""
        rank = len(ty.shape)
        body = _Body(rank)
        ident = self._map(rank, [f"d{i}" for i in range(rank)])
        arg, f = self.fresh("in"), self.fresh("v")
        body.ins.append((red, ty.mlir(), ident, arg, ty.dtype))
        body.lines.append(f"{f} = arith.xori {arg}, {c} : {ty.dtype}")
        out = self.fresh("g")
        self._write_generic(out, body, [ident], ["parallel"] * rank, [self._empty(ty.mlir())], [ty.mlir()],
                            [ty.dtype], [f], ty.shape)
        return out

    def _bind_reduce_results(self, op: t.Reduce, names: list[str], out_types: list[t.TileType]) -> None:
        for r, name, ty in zip(op.results, names, out_types):
            if r.is_tile:
                self.bind(("t", r.id), _Tensor(name, tuple(range(len(r.shape))), ty.mlir()))
            else:
                s = self.fresh("x")
                if self.spirv_rows:
                    # Read as a 0-d vector: IREE's SPIR-V SubgroupReduce pipeline forwards it from
                    # the reduction's vector. A tensor.extract became a load from workgroup
                    # memory, which stopped the distribution over the threads: the whole
                    # program then ran on the first thread, its tiles as SPIR-V vectors of
                    # the row's length (softmax of 8192 did not compile in 27 minutes).
                    v = self.fresh("xv")
                    self.w(f"{v} = vector.transfer_read {name}[], {self.const(0, ty.dtype)} : {ty.mlir()}, vector<{ty.dtype}>")
                    self.w(f"{s} = vector.extract {v}[] : {ty.dtype} from vector<{ty.dtype}>")
                else:
                    self.w(f"{s} = tensor.extract {name}[] : {ty.mlir()}")
                self.bind(("s", r.id), s)

    def _combine(self, body: _Body, block: t.Block, lhs: list[str], rhs: list[str]) -> list[str]:
        """Emits the scalar combiner region into `body`, with (lhs, rhs) bound to its args."""
        self.scopes.append({})
        for a, name in zip(block.args, lhs + rhs):
            self.bind(("s", a.id), name)
        for op in block.ops:
            if not isinstance(op, (t.Elementwise, t.Constant)):
                raise self.err(f"{tile_op_name(op)} in the combine function of tl.reduce is not supported by "
                               f"triton-iree (only arithmetic and tl.where there)", op)
            if isinstance(op, t.Constant):
                r = self.fresh("k")
                body.lines.append(f"{r} = arith.constant {literal(op.value, op.result.dtype)} : {op.result.dtype}")
            else:
                r = self._elementwise(op, [self.scalar(a) for a in op.args], body.lines.append)
            self.bind(("s", op.result.id), r)
        ys = [self.scalar(y) for y in block.yields]
        self.scopes.pop()
        return ys

    def _uniform_value(self, v: t.Value) -> str:
        """The scalar every element of `v` equals (`analysis.uniform_tile`), emitted here."""
        op = v.owner
        if not v.is_tile:
            return self.scalar(v)
        if isinstance(op, t.Constant):
            return self.const(op.value, v.dtype)
        if isinstance(op, t.Splat):
            return self.scalar(op.src)
        if isinstance(op, (t.Broadcast, t.ExpandDims, t.Reshape, t.Trans)):
            return self._uniform_value(op.src)
        return self._elementwise(op, [self._uniform_value(a) for a in op.args], self.w)

    def _closed_form(self, op: t.Reduce) -> None:
        """A reduction of a uniform tile (`analysis.closed_form_reduce`), on CUDA and HIP: its
        n elements all equal k, so the sum is n * k (wrapping in integers, n * k rounded once
        in floats: an f16 / bf16 k is multiplied in f32), the product k ** n (by squaring),
        the xor k or 0 as n is odd or even, every other combiner (max, min, and, or) k."""
        src, res = op.srcs[0], op.results[0]
        name = op.combiner.ops[0].opname
        dtype, n = src.dtype, src.shape[op.axis]
        k = self._uniform_value(src)
        wide = "f32" if dtype in ("f16", "bf16") else dtype
        if name in ("arith.addf", "arith.mulf") and wide != dtype:
            kw = self.fresh("v")
            self.w(f"{kw} = arith.extf {k} : {dtype} to f32")
            k = kw

        def binop(opname: str, a: str, b: str) -> str:
            r = self.fresh("v")
            self.w(f"{r} = {opname} {a}, {b} : {wide}")
            return r

        if name == "arith.addi":
            bits = t.bitwidth(dtype)
            m = n % (1 << bits)
            if bits > 1 and m >= 1 << (bits - 1):
                m -= 1 << bits
            r = binop("arith.muli", k, self.const(m, dtype))
        elif name == "arith.addf":
            r = binop("arith.mulf", k, self.const(float(n), wide))
        elif name in ("arith.muli", "arith.mulf"):
            r, base, e = None, k, n
            while e:
                if e & 1:
                    r = base if r is None else binop(name, r, base)
                e >>= 1
                if e:
                    base = binop(name, base, base)
        elif name == "arith.xori":
            r = k if n % 2 else self.const(0, dtype)
        else:
            r = k
        if wide != dtype and name in ("arith.addf", "arith.mulf"):
            rn = self.fresh("v")
            self.w(f"{rn} = arith.truncf {r} : f32 to {dtype}")
            r = rn
        if res.is_tile:
            ty = t.TileType(res.shape, dtype)
            self.bind(("t", res.id), _Tensor(self._fill(r, ty), tuple(range(len(res.shape))), ty.mlir()))
        else:
            self.bind(("s", res.id), r)
