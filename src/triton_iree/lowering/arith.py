"""Scalar arithmetic: one elementwise op on scalars, as text (inside linalg bodies or in the
dispatch), with integer divisors guarded, bf16 rounded explicitly, fp8 conversions as bit
operations on CUDA / HIP, and f16 max / min as compare and select."""
from __future__ import annotations

from .. import tile as t
from . import fp8_bits
from ..errors import python_name
from ..types import TYPE_NAMES
from .values import _BF16_EXACT, _CASTS, _INT_DIVS, EmitterBase


# LLVM turns scalar f16 maxnum / minnum (also f32 ones of extended f16 values: it narrows them)
# into calls of the C library's fmaxf / fminf, which IREE's executables cannot link: they are
# compare and select instead.
_F16_SELECTS = {"arith.maxnumf": "oge", "arith.minnumf": "ole"}


def _from_f16(v: t.Value) -> bool:
    """`v` is an f16 value extended (tl.clamp on fp16 computes in f32, and LLVM narrows it back)."""
    op = v.owner
    return isinstance(op, t.Elementwise) and op.opname == "arith.extf" and op.args[0].dtype == "f16"


# Math functions that return NaN for a NaN argument (C's, and Triton's on NVIDIA GPUs). Vulkan
# lets a driver assume no NaN reaches a float instruction unless the shader declares
# SignedZeroInfNanPreserve, which IREE's SPIR-V does not: on NVIDIA's Vulkan driver f32 exp,
# exp2, expm1, sinh, cosh, tanh and pow of NaN returned numbers. On SPIR-V each of these
# results is selected from its NaN argument where it has one, the test on the argument's bits
# (integer operations, which no such assumption touches).
_NAN_IN_NAN_OUT = {f"math.{f}" for f in (
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "cbrt", "sin", "cos", "tan",
    "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "erf", "powf", "atan2")}
_FLOAT_BITS = {"f16": ("i16", 0x7FFF, 0x7C00), "f32": ("i32", 0x7FFFFFFF, 0x7F800000),
               "f64": ("i64", 0x7FFFFFFFFFFFFFFF, 0x7FF0000000000000)}


class ArithEmitter(EmitterBase):
    """Elementwise ops on scalars."""

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
        elif name == "math.ctlz" and rdtype == "i64" and self.spirv:
            return self._ctlz_64(args[0], out)
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
            if self.spirv and name in _NAN_IN_NAN_OUT and rdtype in _FLOAT_BITS:
                return self._nan_passed_through(args, rdtype, r, out)
        return r

    def _ctlz_64(self, x: str, out) -> str:
        """The leading zeros of an i64 from its 32-bit halves: SPIR-V's FindUMsb, which IREE
        lowers math.ctlz to, takes 32-bit integers only ('failed to legalize operation
        'math.ctlz'' on i64)."""
        c32, c32i, c0, sh, hi, lo, zhi, zlo, zlo32, top, pick, r = (self.fresh() for _ in range(12))
        out(f"{c32} = arith.constant 32 : i64")
        out(f"{c32i} = arith.constant 32 : i32")
        out(f"{c0} = arith.constant 0 : i32")
        out(f"{sh} = arith.shrui {x}, {c32} : i64")
        out(f"{hi} = arith.trunci {sh} : i64 to i32")
        out(f"{lo} = arith.trunci {x} : i64 to i32")
        out(f"{zhi} = math.ctlz {hi} : i32")
        out(f"{zlo} = math.ctlz {lo} : i32")
        out(f"{zlo32} = arith.addi {zlo}, {c32i} : i32")
        out(f"{top} = arith.cmpi eq, {hi}, {c0} : i32")
        out(f"{pick} = arith.select {top}, {zlo32}, {zhi} : i32")
        out(f"{r} = arith.extui {pick} : i32 to i64")
        return r

    def _nan_passed_through(self, args: list[str], dtype: str, r: str, out) -> str:
        """`r`, or the last of `args` that is a NaN (`_NAN_IN_NAN_OUT`)."""
        ity, mag, inf = _FLOAT_BITS[dtype]
        cmag, cinf = self.fresh(), self.fresh()
        out(f"{cmag} = arith.constant {mag} : {ity}")
        out(f"{cinf} = arith.constant {inf} : {ity}")
        for a in args:
            b, m, nan, pick = (self.fresh() for _ in range(4))
            out(f"{b} = arith.bitcast {a} : {dtype} to {ity}")
            out(f"{m} = arith.andi {b}, {cmag} : {ity}")
            out(f"{nan} = arith.cmpi ugt, {m}, {cinf} : {ity}")
            out(f"{pick} = arith.select {nan}, {a}, {r} : {dtype}")
            r = pick
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
