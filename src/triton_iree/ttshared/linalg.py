"""linalg ops: generic, map, fill, copy, transpose, broadcast, reduce and matmul as tile ops
at the iteration shape, and linalg bodies as tile ops over that shape."""
from __future__ import annotations

from typing import Optional

from iree.compiler import ir

from .. import tile as t
from ..errors import InputError, TritonIreeError, UnsupportedError
from ..ttir import ELEMENTWISE_OPS, _scalar_of_attr
from .values import _CASTS_TO_INDEX, Alloc, BufView, TTSharedBase, Undef, Window, _shape


class LinalgReader(TTSharedBase):
    # -- linalg -------------------------------------------------------------------------------
    def _dest(self, v: ir.Value, op):
        """A linalg output: (alloc it updates or None, its current contents)."""
        x = self.get(v, op)
        if isinstance(x, Window) and isinstance(x.root, Alloc) and x.is_whole:
            x = x.root
        if isinstance(x, Alloc):
            return x, x.value
        if isinstance(x, (t.Value, Undef)):
            return None, x
        raise self._unsupported(op, "an output that is not a whole tile or alloc")

    def _results(self, op, outs: list, values: list[t.Value]) -> None:
        """Binds linalg results: allocs take the new values, tensor results are bound."""
        res = list(op.operation.results)
        for (alloc, _), v in zip(outs, values):
            if alloc is not None:
                alloc.value = v
        if res:
            for r, v in zip(res, values):
                self.env[r] = v

    def _outs(self, op, values) -> list:
        return [self._dest(v, op) for v in values]

    def _check_dtype(self, op, v: t.Value, dtype: str) -> None:
        if v.dtype != dtype:
            raise self._unsupported(op, f"a result of {v.dtype} into an output of {dtype}")

    def _op_linalg_fill(self, op, loc: str) -> None:
        x = self.scalar(op.inputs[0], op)
        dst = self.get(op.outputs[0], op)
        if isinstance(dst, Window) and isinstance(dst.root, Alloc) and not dst.is_whole:
            # A fill of part of an alloc: the fill where the window is, the old contents elsewhere.
            if x.dtype != dst.root.dtype:
                raise self._unsupported(op, f"a fill of {x.dtype} into {dst.root.dtype}")
            self._assign(Window(self.splat(x, dst.root.shape, loc), dst.dims, dst.fixed), dst, op, loc)
            return
        outs = self._outs(op, op.outputs)
        _, prev = outs[0]
        if x.dtype != prev.dtype:
            raise self._unsupported(op, f"a fill of {x.dtype} into {prev.dtype}")
        self._results(op, outs, [self.splat(x, _shape(prev), loc)])

    def _affine_exprs(self, op, attr) -> list[Optional[int]]:
        """An indexing map's results: loop dim positions, or None for the constant 0."""
        amap = ir.AffineMapAttr(attr).value
        out = []
        for e in amap.results:
            if isinstance(e, ir.AffineDimExpr):
                out.append(e.position)
            elif isinstance(e, ir.AffineConstantExpr) and e.value == 0:
                out.append(None)
            else:
                raise self._unsupported(op, f"indexing map {amap}")
        return out

    def _to_loops(self, x: t.Value, exprs: list[Optional[int]], loops: tuple[int, ...], op, loc: str) -> t.Value:
        """Operand `x` (indexed by `exprs`) as a tile over the whole iteration space."""
        if not x.is_tile:
            return self.splat(x, loops, loc)
        if any(e is None for e in exprs):
            keep = [i for i, e in enumerate(exprs) if e is not None]
            x = self.emit(t.Reshape(x, t.TileType(tuple(x.shape[i] for i in keep), x.dtype), loc)).result \
                if keep else None
            exprs = [exprs[i] for i in keep]
            if x is None:
                raise self._unsupported(op, "an operand indexed only by constants")
        if len(set(exprs)) != len(exprs):
            raise self._unsupported(op, "an indexing map that repeats a loop dimension")
        order = tuple(sorted(range(len(exprs)), key=lambda i: exprs[i]))
        if order != tuple(range(len(exprs))):
            x = self.emit(t.Trans(x, order, t.TileType(tuple(x.shape[i] for i in order), x.dtype), loc)).result
        dims = sorted(exprs)
        shape = list(x.shape)
        for j in range(len(loops)):
            if j not in dims:
                shape.insert(j, 1)
                x = self.emit(t.ExpandDims(x, j, t.TileType(tuple(shape), x.dtype), loc)).result
        if tuple(shape) != tuple(loops):
            x = self.emit(t.Broadcast(x, t.TileType(tuple(loops), x.dtype), loc)).result
        return x

    def _from_loops(self, y: t.Value, exprs: list[Optional[int]], out_shape, op, loc: str) -> t.Value:
        """A tile over the iteration space, written to an output indexed by `exprs`."""
        ks = [e for e in exprs if e is not None]
        nloops = len(y.shape) if y.is_tile else 0
        if sorted(ks) != list(range(nloops)):
            raise self._unsupported(op, "an output map that is not a permutation of the loops")
        if not y.is_tile:
            return self.splat(y, tuple(out_shape), loc) if out_shape else y
        order = tuple(ks)
        if order != tuple(range(nloops)):
            y = self.emit(t.Trans(y, order, t.TileType(tuple(y.shape[i] for i in order), y.dtype), loc)).result
        if len(exprs) != nloops:
            y = self.emit(t.Reshape(y, t.TileType(tuple(out_shape), y.dtype), loc)).result
        return y

    def _eval_body(self, mblock, args: list[t.Value], shape: tuple[int, ...]) -> list[t.Value]:
        """A linalg region as tile ops over `shape` (scalar ops when `shape` is ())."""
        for a, v in zip(mblock.arguments, args):
            self.env[a] = v
        for op in mblock.operations:
            name = op.operation.name
            loc = self.loc(op)
            self._check_attrs(op, name)
            try:
                if name == "linalg.yield":
                    return [self.lift(self.scalar(v, op), shape, loc) if not self.get(v, op).is_tile
                            else self.get(v, op) for v in op.operation.operands]
                if name == "arith.constant":
                    ty = self._type(op.result.type, op)
                    if ty.shape:
                        raise self._unsupported(op, "a tensor constant inside a linalg body")
                    value = _scalar_of_attr(op.attributes["value"], ty.dtype)
                    self.bind(op, self.const(value, ty.dtype, shape, loc))
                elif name == "linalg.index":
                    d = ir.IntegerAttr(op.attributes["dim"]).value
                    r = self.index_range(shape[d], 0, loc)
                    self.bind(op, self.place(r, d, shape, loc) if len(shape) > 1 else r)
                elif name in ELEMENTWISE_OPS or name in _CASTS_TO_INDEX:
                    ins = []
                    for v in op.operation.operands:
                        x = self.get(v, op)
                        if not isinstance(x, t.Value):
                            raise self._unsupported(op, "a non-scalar operand inside a linalg body")
                        ins.append(x)
                    self.bind(op, self._elementwise(op, ins, shape))
                elif name == "memref.load":
                    self._gather(op, shape, loc)
                else:
                    raise self._unsupported(op, "inside a linalg body")
            except TritonIreeError:
                raise
            except Exception as e:
                raise UnsupportedError(f"cannot read op '{name}' ({type(e).__name__}: {e})",
                                       kernel=self.kernel_name, loc=loc or None) from e
        raise InputError("a linalg body without linalg.yield", kernel=self.kernel_name)

    def _gather(self, op, shape, loc: str) -> None:
        ops = list(op.operation.operands)
        m = self.get(ops[0], op)
        if not isinstance(m, BufView):
            raise self._unsupported(op, "a load from a tile inside a linalg body")
        off = self.lift(self.i64(m.offset, loc), shape, loc)
        for v, st in zip(ops[1:], m.strides):
            i = self.get(v, op)
            i = self.lift(i if i.dtype == "i64" else self.ew("arith.extsi", [i], "i64", loc), shape, loc)
            if not (isinstance(st, int) and st == 1):
                i = self.ew("arith.muli", [i, self.lift(self.i64(st, loc), shape, loc)], "i64", loc)
            off = self.ew("arith.addi", [off, i], "i64", loc)
        ty = t.TileType(shape, m.param.dtype) if shape else t.ScalarType(m.param.dtype)
        self.bind(op, self.emit(t.Load(m.param, off, None, None, ty, loc)).result)

    def _op_linalg_generic(self, op, loc: str) -> None:
        its = [str(a) for a in op.iterator_types]
        if any("parallel" not in s for s in its):
            raise self._unsupported(op, "a linalg.generic with reduction iterators (use linalg.reduce)")
        ins = [self.value(v, op) for v in op.inputs]
        outs = self._outs(op, op.outputs)
        maps = [self._affine_exprs(op, m) for m in op.indexing_maps]
        n = len(its)
        loops: list[Optional[int]] = [None] * n
        for v, exprs in zip(list(op.inputs) + list(op.outputs), maps):
            ty = v.type
            if not isinstance(ty, ir.ShapedType):
                continue
            for i, e in enumerate(exprs):
                if e is not None:
                    loops[e] = ty.shape[i]
        if any(s is None or s < 0 for s in loops):
            raise self._unsupported(op, "an iteration space without static sizes")
        shape = tuple(loops)
        args = [self._to_loops(x, m, shape, op, loc) for x, m in zip(ins, maps)]
        out_maps = maps[len(ins):]
        body = op.regions[0].blocks[0]
        for (_, prev), m, barg in zip(outs, out_maps, list(body.arguments)[len(ins):]):
            if len(list(barg.uses)):
                args.append(self._to_loops(self.tile(prev, op), m, shape, op, loc))
            else:
                args.append(None)
        ys = self._eval_body(body, args, shape)
        results = []
        for y, (_, prev), m in zip(ys, outs, out_maps):
            r = self._from_loops(y, m, _shape(prev), op, loc)
            self._check_dtype(op, r, prev.dtype)
            results.append(r)
        self._results(op, outs, results)

    def _op_linalg_map(self, op, loc: str) -> None:
        ins = [self.value(v, op) for v in op.inputs]
        outs = self._outs(op, [op.init])
        shape = _shape(outs[0][1])
        ys = self._eval_body(op.regions[0].blocks[0], [self.lift(x, shape, loc) for x in ins], shape)
        self._check_dtype(op, ys[0], outs[0][1].dtype)
        self._results(op, outs, ys)

    def _op_linalg_copy(self, op, loc: str) -> None:
        if not op.operation.results:
            self._copy(self.get(op.inputs[0], op), self.get(op.outputs[0], op), op, loc)
            return
        self._results(op, self._outs(op, op.outputs), [self.value(op.inputs[0], op)])

    def _op_linalg_transpose(self, op, loc: str) -> None:
        x = self.value(op.input, op)
        perm = tuple(ir.DenseI64ArrayAttr(op.attributes["permutation"]))
        outs = self._outs(op, [op.init])
        ty = t.TileType(tuple(x.shape[i] for i in perm), x.dtype)
        self._results(op, outs, [self.emit(t.Trans(x, perm, ty, loc)).result])

    def _op_linalg_broadcast(self, op, loc: str) -> None:
        x = self.value(op.input, op)
        dims = sorted(ir.DenseI64ArrayAttr(op.attributes["dimensions"]))
        outs = self._outs(op, [op.init])
        out_shape = _shape(outs[0][1])
        if not x.is_tile:
            self._results(op, outs, [self.splat(x, out_shape, loc)])
            return
        shape = list(x.shape)
        for d in dims:
            shape.insert(d, 1)
            x = self.emit(t.ExpandDims(x, d, t.TileType(tuple(shape), x.dtype), loc)).result
        if tuple(shape) != out_shape:
            x = self.emit(t.Broadcast(x, t.TileType(out_shape, x.dtype), loc)).result
        self._results(op, outs, [x])

    def _op_linalg_reduce(self, op, loc: str) -> None:
        xs = [self.value(v, op) for v in op.inputs]
        outs = self._outs(op, op.inits)
        dims = sorted(ir.DenseI64ArrayAttr(op.attributes["dimensions"]), reverse=True)
        mblock = op.regions[0].blocks[0]
        dtypes = [x.dtype for x in xs]
        cur = xs
        for axis in dims:
            # linalg combines (element, accumulator); the tile combiner takes (lhs, rhs) =
            # (accumulated, next element).
            blk = t.Block()
            lhs = [t.Value(t.ScalarType(d), blk) for d in dtypes]
            rhs = [t.Value(t.ScalarType(d), blk) for d in dtypes]
            blk.args = lhs + rhs
            with self._into(blk):
                blk.yields = self._eval_body(mblock, rhs + lhs, ())
            rshape = tuple(n for i, n in enumerate(cur[0].shape) if i != axis)
            types = [t.TileType(rshape, d) if rshape else t.ScalarType(d) for d in dtypes]
            cur = self.emit(t.Reduce(cur, axis, blk, types, loc)).results
        # Then the initial value: linalg.reduce folds the elements into the outputs.
        inits = [prev for _, prev in outs]
        if any(isinstance(p, Undef) for p in inits):
            results = list(cur)
        else:
            shape = _shape(inits[0])
            results = self._eval_body(mblock, list(cur) + [self.tile(p, op) for p in inits], shape)
        for r, (_, prev) in zip(results, outs):
            self._check_dtype(op, r, prev.dtype)
        self._results(op, outs, results)

    def _op_linalg_matmul(self, op, loc: str) -> None:
        if "cast" in op.operation.attributes and "unsigned" in str(op.operation.attributes["cast"]):
            raise self._unsupported(op, "unsigned casts")
        a, b = (self.value(v, op) for v in op.inputs)
        outs = self._outs(op, op.outputs)
        acc = self.tile(outs[0][1], op)
        if "indexing_maps" in op.operation.attributes:
            ma, mb, mc = (self._affine_exprs(op, m) for m in op.indexing_maps)
            if mc != [0, 1] or sorted(ma) != [0, 2] or sorted(mb) != [1, 2]:
                raise self._unsupported(op, "a matmul with these indexing maps")
            if ma == [2, 0]:
                a = self.emit(t.Trans(a, (1, 0), t.TileType((a.shape[1], a.shape[0]), a.dtype), loc)).result
            if mb == [1, 2]:
                b = self.emit(t.Trans(b, (1, 0), t.TileType((b.shape[1], b.shape[0]), b.dtype), loc)).result
        if len(a.shape) != 2 or len(b.shape) != 2:
            raise self._unsupported(op, "a matmul that is not 2-D")
        self._results(op, outs, [self.emit(t.Dot(a, b, acc, loc)).result])
