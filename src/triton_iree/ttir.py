"""TTIR's vocabulary as its generic form prints it: the predicate and atomic enums, the
elementwise ops the emitter lowers 1:1, and readers of op attributes."""
from __future__ import annotations

from iree.compiler import ir

# arith.cmpi / arith.cmpf predicate enums, as TTIR's generic form prints them (integers).
CMPI_PREDICATES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")
CMPF_PREDICATES = ("false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord",
                   "ueq", "ugt", "uge", "ult", "ule", "une", "uno", "true")

# Elementwise ops the emitter lowers 1:1 (scalar form inside linalg bodies or in the dispatch).
ELEMENTWISE_OPS = frozenset("""
arith.addi arith.subi arith.muli arith.divsi arith.divui arith.remsi arith.remui
arith.ceildivsi arith.floordivsi arith.andi arith.ori arith.xori arith.shli arith.shrsi
arith.shrui arith.maxsi arith.minsi arith.maxui arith.minui arith.addf arith.subf arith.mulf
arith.divf arith.remf arith.negf arith.maximumf arith.minimumf arith.maxnumf arith.minnumf
arith.cmpi arith.cmpf arith.select arith.extsi arith.extui arith.trunci arith.extf
arith.truncf arith.sitofp arith.uitofp arith.fptosi arith.fptoui arith.bitcast
arith.mulsi_extended arith.mului_extended
math.exp math.exp2 math.log math.log2 math.log10 math.log1p math.expm1 math.sqrt math.rsqrt
math.sin math.cos math.tan math.tanh math.sinh math.cosh math.asin math.acos math.atan
math.atan2 math.erf math.absf math.absi math.floor math.ceil math.trunc math.round
math.roundeven math.fma math.powf math.copysign math.cbrt math.ctlz math.cttz math.ctpop
""".split())

# tt.atomic_rmw's atomic_rmw_op enum (FADD is add on floats).
ATOMIC_RMW_OPS = {1: "and", 2: "or", 3: "xor", 4: "add", 5: "add", 6: "max", 7: "min", 8: "umax",
                  9: "umin", 10: "xchg"}

# TTIR ops that are plain elementwise ops under another name.
RENAMED_OPS = {"tt.precise_sqrt": "math.sqrt", "tt.precise_divf": "arith.divf"}

def _attr_int(op, name: str) -> int:
    return ir.IntegerAttr(op.attributes[name]).value


def _scalar_of_attr(attr, dtype: str):
    if isinstance(attr, (ir.DenseElementsAttr, ir.DenseIntElementsAttr, ir.DenseFPElementsAttr)):
        if not attr.is_splat:
            return None
        attr = attr.get_splat_value()
    if isinstance(attr, ir.BoolAttr):
        return bool(attr.value)
    if isinstance(attr, ir.IntegerAttr):
        v = attr.value
        return bool(v) if dtype == "i1" else v
    if isinstance(attr, ir.FloatAttr):
        return attr.value
    return None
