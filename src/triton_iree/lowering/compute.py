"""Compute: elementwise expressions fused into `linalg.generic` (broadcasts and other shape ops
as indexing maps), materialized tiles (fills, empty tiles), reshapes and unsplats. The scalar op
of each element is `arith`'s; reductions are in `reductions`."""
from __future__ import annotations

import re
from typing import Optional

from .. import tile as t
from ..analysis import uniform_scalar
from .values import _CHEAP_OPS, EmitterBase, _Body, _bytes, _Tensor, literal


class ComputeEmitter(EmitterBase):
    """Tiles and the linalg.generic ops computing them."""

    def tensor_entry(self, v: t.Value) -> _Tensor:
        e = self.lookup(("t", v.id))
        if e is None:
            name = self._materialize(v)
            e = _Tensor(name, tuple(range(len(v.shape))), v.type.mlir())
            self.bind(("t", v.id), e)
        return e

    def tensor(self, v: t.Value) -> str:
        """`v` as a tensor of its full shape."""
        e = self.tensor_entry(v)
        if e.dims == tuple(range(len(v.shape))):
            return e.name
        name = self._generic_map(v, root=False)
        self.bind(("t", v.id), _Tensor(name, tuple(range(len(v.shape))), v.type.mlir()))
        return name

    def _empty(self, ty: str, shared: bool = False) -> str:
        """A new tile to write into. While a snapshot load is emitted, a fresh allocation: then
        IREE cannot merge the load's ops with identical ones from before a store. `shared`: an
        allocation in `alloc_space` too (a tile that the threads assemble together)."""
        e = self.fresh("e")
        if self.snapshotting or shared:
            self.w(f"{e} = bufferization.alloc_tensor(){self.alloc_space} : {ty}")
        else:
            self.w(f"{e} = tensor.empty() : {ty}")
        return e

    def _fill(self, scalar: str, ty: t.TileType, stored: bool = False, shared: bool = False) -> str:
        """`scalar` broadcast to a tile; `stored`: the one element a scalar store writes;
        `shared`: into an allocation of its own (`_empty`). Such a fill, and one into workgroup
        memory (a snapshot load's tile), is spread over the threads on its own on CUDA and HIP
        (`configure`)."""
        e, f = self._empty(ty.mlir(), shared), self.fresh("fill")
        slot = self._config_slot("fill", ty.shape, ("parallel",) * len(ty.shape), _bytes(ty.dtype),
                                 spread=stored or self.snapshotting or shared)
        self.w(f"{f} = linalg.fill {slot}ins({scalar} : {ty.dtype}) outs({e} : {ty.mlir()}) -> {ty.mlir()}")
        self.fills[f] = scalar
        return f

    def _uniform_scalar_name(self, v: t.Value) -> Optional[str]:
        u = uniform_scalar(v)
        if u is None:
            return None
        if u.is_tile:   # a constant tile
            return self.const(u.owner.value, v.dtype)
        return self.scalar(u)

    def _materialize(self, v: t.Value) -> str:
        op = v.owner
        u = self._uniform_scalar_name(v) if isinstance(op, (t.Constant, t.Splat)) else None
        if u is not None:
            return self._fill(u, v.type)
        return self._generic_map(v, root=True)

    def _generic_map(self, v: t.Value, root: bool) -> str:
        """A linalg.generic computing all of `v` (a linalg.map over an input: `_write_over_input`):
        its own op if `root`, else from its tensor."""
        rank = len(v.shape)
        body = _Body(rank)
        res = self._elem(body, v, tuple(range(rank)), root=root)
        ident = self._map(rank, [f"d{i}" for i in range(rank)])
        over = self._write_over_input(body, v, ident, res) if self.base_distribute else None
        if over is not None:
            return over
        e = self._empty(v.type.mlir())
        out = self.fresh("g")
        self._write_generic(out, body, [ident], ["parallel"] * rank, [e], [v.type.mlir()], [v.dtype],
                            [res], v.shape)
        return out

    def _write_over_input(self, body: _Body, v: t.Value, ident: str, res: str) -> Optional[str]:
        """In a Vulkan dispatch the lowering configures: `v` computed as a linalg.map that writes
        over one of its inputs of `v`'s type (None where it has none). IREE's BaseDistribute
        pipeline bufferizes the whole dispatch before tiling it, so every tile the dispatch
        materializes is a buffer in workgroup memory (32 KiB on lavapipe; attention's tiles did
        not fit); a result written over an input takes no buffer of its own where the input is
        not read afterwards (bufferization copies the input otherwise). A linalg.generic would
        not do: IREE gives an elementwise generic a new output tensor. Inputs read along some of
        the loops only (broadcasts) are read in the body, with tensor.extract. Not over a tile
        loaded whole from a binding (`storage_views`): that is a view of the binding, not a
        buffer of its own, and writing over it would copy it to workgroup memory first; a new
        output tensor there lets IREE fuse the loads, the op and its store into each thread's
        loop (the vector add's full-tile version reads and writes its bindings directly)."""
        ty = v.type.mlir()
        over = next((i for i in body.ins if i[1] == ty and i[2] == ident and i[0] not in self.storage_views), None)
        if over is None or v.dtype == "i1":   # a boolean tile: its own linalg.generic (below)
            return None
        # Boolean tiles are read in the body too: IREE stores i1 tensors as i8 and rewrites
        # linalg.generic's block arguments to match, but not linalg.map's ('expected element
        # type of input 'i8' to match bbArg type 'i1'').
        ins = [i for i in body.ins if i[2] == ident and i[4] != "i1"]
        extracts = []
        for name, in_ty, imap, arg, elt in body.ins:
            if imap == ident and elt != "i1":
                continue
            dims = re.fullmatch(r"affine_map<\([^)]*\) -> \(([^)]*)\)>", imap).group(1).split(", ")
            idx = []
            for d in dims:
                ix = self.fresh("ix")
                extracts.append(f"{ix} = linalg.index {int(d[1:])} : index")
                idx.append(ix)
            extracts.append(f"{arg} = tensor.extract {name}[{', '.join(idx)}] : {in_ty}")
        slot = self._generic_slot(body, v.shape, ["parallel"] * len(v.shape), [v.dtype])
        out = self.fresh("g")
        self.w(f"{out} = linalg.map ins({', '.join(i[0] for i in ins)} : {', '.join(i[1] for i in ins)}) "
               f"outs({over[0]} : {ty}) {slot}")
        bargs = [f"{i[3]}: {i[4]}" for i in ins] + [f"{self.fresh('o')}: {v.dtype}"]
        self.w(f"  ({', '.join(bargs)}) {{")
        self.indent += 1
        for line in extracts + body.lines:
            self.w(line)
        self.w(f"linalg.yield {res} : {v.dtype}")
        self.indent -= 1
        self.w("}")
        return out

    def _generic_slot(self, body: _Body, shape, iterators, out_elts: list[str]) -> str:
        """The configuration mark (`_config_slot`) of a linalg op with `body`'s inputs and region."""
        elt = max(_bytes(x[4]) for x in body.ins + [("", "", "", "", e) for e in out_elts])
        math = any(" = math." in ln or " = arith.div" in ln or " = arith.rem" in ln for ln in body.lines)
        return self._config_slot("generic", tuple(shape), tuple(iterators), elt, math)

    @staticmethod
    def _map(nloops: int, results: list[str]) -> str:
        dims = ", ".join(f"d{i}" for i in range(nloops))
        return f"affine_map<({dims}) -> ({', '.join(results)})>"

    def _write_generic(self, out: str, body: _Body, out_maps: list[str], iterators: list[str],
                       inits: list[str], init_types: list[str], out_elts: list[str],
                       yields: list[str], shape: tuple[int, ...]) -> None:
        """A linalg.generic over the static loop ranges `shape`."""
        covered = {int(d) for m in [i[2] for i in body.ins] + out_maps
                   for d in re.findall(r"d(\d+)", m.split("->", 1)[1])}
        if len(covered) < len(shape):
            # The iteration space must be readable from some operand: add an unused input. (A
            # reduction of values computed in its body, or of a join along the joined dim.)
            ty = t.TileType(shape, out_elts[0]).mlir()
            e = self.fresh("dom")
            self.w(f"{e} = tensor.empty() : {ty}")
            body.ins.append((e, ty, self._map(len(shape), [f"d{i}" for i in range(len(shape))]),
                             self.fresh("in"), out_elts[0]))
        maps = [i[2] for i in body.ins] + out_maps
        its = ", ".join(f'"{x}"' for x in iterators)
        lhs = out if len(inits) == 1 else f"{out}:{len(inits)}"
        ins = ""
        if body.ins:
            ins = f" ins({', '.join(i[0] for i in body.ins)} : {', '.join(i[1] for i in body.ins)})"
        slot = self._generic_slot(body, shape, iterators, out_elts)
        self.w(f"{lhs} = linalg.generic {{indexing_maps = [{', '.join(maps)}], iterator_types = [{its}]}}"
               f"{ins} outs({', '.join(inits)} : {', '.join(init_types)}) {'attrs = ' if slot else ''}{slot}{{")
        outs_args = body.memo.get("__outs__", [self.fresh("o") for _ in inits])
        bargs = [f"{i[3]}: {i[4]}" for i in body.ins] + [f"{a}: {e}" for a, e in zip(outs_args, out_elts)]
        self.w(f"^bb0({', '.join(bargs)}):")
        self.indent += 1
        for line in body.lines:
            self.w(line)
        self.w(f"linalg.yield {', '.join(yields)} : {', '.join(out_elts)}")
        self.indent -= 1
        self.w(f"}} -> ({', '.join(init_types)})" if len(inits) > 1 else f"}} -> {init_types[0]}")

    def _leaf_arg(self, body: _Body, v: t.Value, view: tuple) -> str:
        """A block argument of `body` reading materialized `v` at `view`."""
        key = ("leaf", v.id, view)
        if key in body.memo:
            return body.memo[key]
        e = self.tensor_entry(v)
        self._sync()
        keep = [d for d in e.dims if v.shape[d] != 1]
        if not keep:
            # Every dim is size 1: read the one element outside the region.
            zeros = ", ".join([self.idx(0)] * len(e.dims))
            s = self.fresh("x")
            self.w(f"{s} = tensor.extract {e.name}[{zeros}] : {e.type}")
            body.memo[key] = s
            return s
        name, ttype = e.name, e.type
        if len(keep) != len(e.dims):
            # Drop the size-1 dims (rank-reducing slice) so the indexing map is a projection.
            full_shape = [v.shape[d] for d in e.dims]
            red = t.TileType(tuple(v.shape[d] for d in keep), v.dtype).mlir()
            n = self.fresh("rs")
            offs = ", ".join("0" for _ in e.dims)
            strides = ", ".join("1" for _ in e.dims)
            self.w(f"{n} = tensor.extract_slice {e.name}[{offs}] [{', '.join(map(str, full_shape))}] "
                   f"[{strides}] : {e.type} to {red}")
            name, ttype = n, red
        results = []
        for d in keep:
            assert view[d] is not None, (v, view)
            results.append(f"d{view[d]}")
        arg = self.fresh("in")
        body.ins.append((name, ttype, self._map(body.nloops, results), arg, v.dtype))
        body.memo[key] = arg
        return arg

    def _linalg_index(self, body: _Body, dim: int) -> str:
        key = ("index", dim)
        if key not in body.memo:
            n = self.fresh("ix")
            body.lines.append(f"{n} = linalg.index {dim} : index")
            body.memo[key] = n
        return body.memo[key]

    def _elem(self, body: _Body, v: t.Value, view: tuple, root: bool = False) -> str:
        """The element of `v` at `view` (per dim of v: a loop dim, or None for index 0)."""
        if not v.is_tile:
            return self.scalar(v)
        key = ("elem", v.id, view)
        if key in body.memo:
            return body.memo[key]
        op = v.owner
        # An i1 tile made by an elementwise op is recomputed here even where it was made as a
        # tile (for an atomic's loop, say): on the CPU, IREE fuses every i1 tile's op into its
        # consumers, and the fused op loses its lowering_config and is vectorized whole.
        cheap = isinstance(op, _CHEAP_OPS) or (
            self.options.gpu_tiling is None and isinstance(op, t.Elementwise) and v.dtype == "i1")
        if not root and ((not cheap and self.lookup(("t", v.id)) is not None) or self._is_leaf(v)):
            r = self._leaf_arg(body, v, view)
            body.memo[key] = r
            return r
        out = body.lines.append
        if isinstance(op, t.Constant):
            r = self.fresh("k")
            out(f"{r} = arith.constant {literal(op.value, v.dtype)} : {v.dtype}")
        elif isinstance(op, t.Splat):
            r = self.scalar(op.src)
        elif isinstance(op, t.MakeRange):
            if view[0] is None:
                r = self.fresh("k")
                out(f"{r} = arith.constant {op.start} : i32")
            else:
                i = self._linalg_index(body, view[0])
                r = self.fresh("rg")
                out(f"{r} = arith.index_cast {i} : index to i32")
                if op.start:
                    c, r2 = self.fresh("k"), self.fresh("rg")
                    out(f"{c} = arith.constant {op.start} : i32")
                    out(f"{r2} = arith.addi {r}, {c} : i32")
                    r = r2
        elif isinstance(op, t.Broadcast):
            sview = tuple(None if (ns == 1 and nr != 1) else x
                          for x, ns, nr in zip(view, op.src.shape, v.shape))
            r = self._elem(body, op.src, sview)
        elif isinstance(op, t.ExpandDims):
            r = self._elem(body, op.src, view[:op.axis] + view[op.axis + 1:])
        elif isinstance(op, t.Trans):
            sview = [None] * len(view)
            for i, o in enumerate(op.order):
                sview[o] = view[i]
            r = self._elem(body, op.src, tuple(sview))
        elif isinstance(op, t.Elementwise):
            args = [self._elem(body, a, view) for a in op.args]
            r = self._elementwise(op, args, out)
        elif isinstance(op, t.Load):
            r = self._gather_elem(body, op, view)
        elif isinstance(op, t.Join):
            r = self._join_elem(body, op, view)
        else:
            r = self._leaf_arg(body, v, view)
        body.memo[key] = r
        return r

    def _unsplat(self, op: t.Unsplat) -> str:
        """The one element of a single-element tile."""
        u = self._uniform_scalar_name(op.src)
        if u is not None:
            return u
        e = self.tensor_entry(op.src)
        self._sync()   # on Vulkan another thread may have computed the element
        x = self.fresh("x")
        self.w(f"{x} = tensor.extract {e.name}[{', '.join(self.idx(0) for _ in e.dims)}] : {e.type}")
        return x

    def _reshape(self, op: t.Reshape) -> None:
        src = self.tensor(op.src)
        st, rt_ = op.src.type, op.result.type
        cur, cur_ty = src, st.mlir()
        if len(st.shape) > 1:
            flat = t.TileType((st.numel,), st.dtype).mlir()
            n = self.fresh("flat")
            self.w(f"{n} = tensor.collapse_shape {cur} [[{', '.join(map(str, range(len(st.shape))))}]] : "
                   f"{cur_ty} into {flat}")
            cur, cur_ty = n, flat
        if len(rt_.shape) > 1:
            n = self.fresh("resh")
            self.w(f"{n} = tensor.expand_shape {cur} [[{', '.join(map(str, range(len(rt_.shape))))}]] "
                   f"output_shape [{', '.join(map(str, rt_.shape))}] : {cur_ty} into {rt_.mlir()}")
            cur = n
        self.bind(("t", op.result.id), _Tensor(cur, tuple(range(len(rt_.shape))), rt_.mlir()))
