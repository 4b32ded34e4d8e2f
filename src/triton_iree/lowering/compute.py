"""Compute: elementwise expressions fused into `linalg.generic`, materialized tiles,
reductions, reshapes, and bf16 rounding done explicitly."""
from __future__ import annotations

import math
import re
from typing import Optional

from .. import tile as t
from . import fp8_bits
from ..analysis import closed_form_reduce, uniform_scalar
from ..errors import TYPE_NAMES, python_name, tile_op_name
from .targets.gpu import reduced_on_one_thread
from .values import (_BF16_EXACT, _CASTS, _CHEAP_OPS, _INT_DIVS, EmitterBase, _Body, _bytes, _Tensor,
                     literal)


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
    under IREE's vector distribution (see `ComputeEmitter._reduce`), or None."""
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


# LLVM turns scalar f16 maxnum / minnum (also f32 ones of extended f16 values: it narrows them)
# into calls of the C library's fmaxf / fminf, which IREE's executables cannot link: they are
# compare and select instead.
_F16_SELECTS = {"arith.maxnumf": "oge", "arith.minnumf": "ole"}


def _from_f16(v: t.Value) -> bool:
    """`v` is an f16 value extended (tl.clamp on fp16 computes in f32, and LLVM narrows it back)."""
    op = v.owner
    return isinstance(op, t.Elementwise) and op.opname == "arith.extf" and op.args[0].dtype == "f16"


class ComputeEmitter(EmitterBase):
    """Elementwise ops, tiles, reductions."""

    def _elementwise(self, op: t.Elementwise, args: list[str], out) -> str:
        dtypes = [a.dtype for a in op.args]
        rdtype = op.result.dtype
        if (op.opname, rdtype) in self.options.no_libm:
            raise self.err(f"{python_name(op.opname)} on {TYPE_NAMES.get(rdtype, rdtype)} is not supported on "
                           f"this target: its code would call the C math library, which IREE's executables "
                           f"cannot link; compute it in tl.float32 if that precision is enough", op)
        if op.opname in _F16_SELECTS and (rdtype == "f16" or any(map(_from_f16, op.args))):
            return self._select_max_min(op.opname, args, rdtype, out)
        if "bf16" in dtypes + [rdtype] and op.opname not in _BF16_EXACT:
            return self._bf16_elementwise(op, args, dtypes, out)
        if self.fp8_as_bits and op.opname in ("arith.truncf", "arith.extf") and (rdtype in fp8_bits.FP8
                                                                                or dtypes[0] in fp8_bits.FP8):
            return self._fp8_convert(op.opname, args[0], dtypes[0], rdtype, out)
        return self._arith(op.opname, op.attrs, args, dtypes, rdtype, out)

    def _arith(self, name: str, attrs: dict, args: list[str], dtypes: list[str], rdtype: str, out) -> str:
        r = self.fresh()
        at = dtypes[0]
        if name in ("arith.cmpi", "arith.cmpf"):
            out(f"{r} = {name} {attrs['predicate']}, {args[0]}, {args[1]} : {at}")
        elif name == "arith.select":
            out(f"{r} = arith.select {args[0]}, {args[1]}, {args[2]} : {rdtype}")
        elif name in _CASTS:
            if at == rdtype:
                return args[0]
            out(f"{r} = {name} {args[0]} : {at} to {rdtype}")
        elif name == "arith.divf" and rdtype == "f32" and self.llvmgpu and not attrs.get("precise"):
            # Triton's `/` on f32 is approximate on NVIDIA GPUs (div.full.f32, within 2 ulp), IREE's
            # arith.divf correctly rounded (div.rn.f32, a dozen instructions). With arcp LLVM
            # multiplies by the divisor's reciprocal (within 1.5 ulp), computed once where the
            # divisor is a row's scalar (softmax divides each row by its sum).
            out(f"{r} = arith.divf {args[0]}, {args[1]} fastmath<arcp> : f32")
        elif name in _INT_DIVS:
            # Division by zero is undefined in Triton but traps on a CPU; masked-off lanes
            # compute too, so guard the divisor.
            zero, one = self.fresh(), self.fresh()
            out(f"{zero} = arith.constant 0 : {rdtype}")
            out(f"{one} = arith.constant 1 : {rdtype}")
            isz, safe = self.fresh(), self.fresh()
            out(f"{isz} = arith.cmpi eq, {args[1]}, {zero} : {rdtype}")
            out(f"{safe} = arith.select {isz}, {one}, {args[1]} : {rdtype}")
            out(f"{r} = {name} {args[0]}, {safe} : {rdtype}")
        else:
            out(f"{r} = {name} {', '.join(args)} : {rdtype}")
        return r

    @property
    def fp8_as_bits(self) -> bool:
        """fp8 conversions as integer bit operations (CUDA/HIP codegen; tests force it on CPUs)."""
        return self.llvmgpu

    def _fp8_convert(self, name: str, x: str, dtype: str, rdtype: str, out) -> str:
        """f32 <-> fp8 on CUDA/HIP codegen, which lowers neither conversion: integer bit
        operations on the fp8 bytes (bitcast from and to i8), with arith's semantics."""
        if name == "arith.truncf":
            if dtype != "f32":
                raise self.err(f"truncf from {dtype} to {rdtype}: fp8 converts only from f32 here")
            bits = fp8_bits.emit(fp8_bits.truncf_ops(rdtype), x, "f32", self.fresh, out)
            r = self.fresh()
            out(f"{r} = arith.bitcast {bits} : i8 to {rdtype}")
            return r
        if rdtype != "f32":
            raise self.err(f"extf from {dtype} to {rdtype}: fp8 converts only to f32 here")
        b = self.fresh()
        out(f"{b} = arith.bitcast {x} : {dtype} to i8")
        return fp8_bits.emit(fp8_bits.extf_ops(dtype), b, "i8", self.fresh, out)

    def _select_max_min(self, name: str, args: list[str], dtype: str, out) -> str:
        """maxnum / minnum as a if a >= b (<= b for min) or b is NaN, else b: NaN loses to a number."""
        c, nan, pick, r = self.fresh(), self.fresh(), self.fresh(), self.fresh()
        out(f"{c} = arith.cmpf {_F16_SELECTS[name]}, {args[0]}, {args[1]} : {dtype}")
        out(f"{nan} = arith.cmpf uno, {args[1]}, {args[1]} : {dtype}")
        out(f"{pick} = arith.ori {c}, {nan} : i1")
        out(f"{r} = arith.select {pick}, {args[0]}, {args[1]} : {dtype}")
        return r

    def _bf16_elementwise(self, op: t.Elementwise, args: list[str], dtypes: list[str], out) -> str:
        """bf16 arithmetic, computed in f32 and rounded to bf16 explicitly (round to nearest
        even). IREE's CPU codegen computes bf16 in f32 and drops the rounding, even that of an
        explicit f32 -> bf16 cast, which would give results Triton never computes."""
        wide = []
        for a, d in zip(args, dtypes):
            if d == "bf16":
                w = self.fresh()
                out(f"{w} = arith.extf {a} : bf16 to f32")
                a = w
            wide.append(a)
        wdtypes = ["f32" if d == "bf16" else d for d in dtypes]
        rdtype = op.result.dtype
        if rdtype != "bf16":
            return self._arith(op.opname, op.attrs, wide, wdtypes, rdtype, out)
        name = op.opname
        if name == "arith.truncf":
            name = "arith.truncf" if wdtypes[0] == "f64" else "arith.extf"   # to f32 (no-op for f32)
        x = self._arith(name, op.attrs, wide, wdtypes, "f32", out)
        # Round x (f32) to the nearest bf16, ties to even; NaNs stay (quiet) NaNs.
        b, lsb, r1, r2, keep, nan, qn, pick, y, res = (self.fresh() for _ in range(10))
        c16, c1, c7fff, cmask, cq = (self.fresh() for _ in range(5))
        out(f"{c16} = arith.constant 16 : i32")
        out(f"{c1} = arith.constant 1 : i32")
        out(f"{c7fff} = arith.constant 32767 : i32")
        out(f"{cmask} = arith.constant -65536 : i32")
        out(f"{cq} = arith.constant 4194304 : i32")
        out(f"{b} = arith.bitcast {x} : f32 to i32")
        out(f"{lsb} = arith.shrui {b}, {c16} : i32")
        out(f"{r1} = arith.andi {lsb}, {c1} : i32")
        out(f"{r2} = arith.addi {b}, {c7fff} : i32")
        out(f"{keep} = arith.addi {r2}, {r1} : i32")
        out(f"{qn} = arith.ori {b}, {cq} : i32")
        out(f"{nan} = arith.cmpf uno, {x}, {x} : f32")
        out(f"{pick} = arith.select {nan}, {qn}, {keep} : i32")
        out(f"{y} = arith.andi {pick}, {cmask} : i32")
        rounded = self.fresh()
        out(f"{rounded} = arith.bitcast {y} : i32 to f32")
        out(f"{res} = arith.truncf {rounded} : f32 to bf16")
        return res

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
        the loops only (broadcasts) are read in the body, with tensor.extract."""
        ty = v.type.mlir()
        over = next((i for i in body.ins if i[1] == ty and i[2] == ident), None)
        if over is None:
            return None
        ins = [i for i in body.ins if i[2] == ident]
        extracts = []
        for name, in_ty, imap, arg, _ in body.ins:
            if imap == ident:
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
        if not body.ins and any(x == "reduction" for x in iterators):
            # The iteration space must be readable from some operand: add an unused input.
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
        else:
            r = self._leaf_arg(body, v, view)
        body.memo[key] = r
        return r

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
        if self.llvmgpu and (reduced_on_one_thread(op) or self.gpu_scatters and op.to_scalar or
                             self.gpu_whole_reductions and not op.to_scalar and
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

    def _bind_reduce_results(self, op: t.Reduce, names: list[str], out_types: list[t.TileType]) -> None:
        for r, name, ty in zip(op.results, names, out_types):
            if r.is_tile:
                self.bind(("t", r.id), _Tensor(name, tuple(range(len(r.shape))), ty.mlir()))
            else:
                s = self.fresh("x")
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

    def _unsplat(self, op: t.Unsplat) -> str:
        """The one element of a single-element tile."""
        u = self._uniform_scalar_name(op.src)
        if u is not None:
            return u
        e = self.tensor_entry(op.src)
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
