"""`tl.extra.libdevice` on IREE.

Triton's `triton.language.extra.libdevice` holds stubs that each backend binds to a module of
its own (`get_module_map`). Ours has one builtin per stub. Each emits `tt.extern_elementwise`
with library `LIBRARY` and the function's name as its symbol, with the argument and result
types of Triton's CUDA libdevice (predicates return int32; f16 and bf16 arguments are accepted
too and computed in f32). The reader calls `expand`, which writes the function as arith/math
ops that IREE lowers itself. A function with no expansion here is refused by the reader with
an `UnsupportedError` that names it and the user's line.
"""
from __future__ import annotations

import inspect
import math
from typing import Callable, Optional

from triton.language import core
from triton.language.extra import libdevice as _stubs

from . import f32_trig, f64_math, tile as t

LIBRARY = "triton_iree.libdevice"
MODULE = _stubs.__name__   # the name Triton looks our module up by

_FLOATS = ("f16", "bf16", "f32", "f64")
_INTS = ("i32", "i64", "u32", "u64")

# Float functions, of the arguments' float type: the MLIR op each one is, or is built around
# where `expand` adds the cases IREE's expansion of that op gets wrong.
FLOAT_OPS = {
    "abs": "math.absf", "floor": "math.floor", "ceil": "math.ceil", "trunc": "math.trunc",
    "round": "math.round", "rint": "math.roundeven", "nearbyint": "math.roundeven",
    "exp": "math.exp", "exp2": "math.exp2", "expm1": "math.expm1", "log": "math.log",
    "log2": "math.log2", "log10": "math.log10", "log1p": "math.log1p", "sqrt": "math.sqrt",
    "sqrt_rn": "math.sqrt", "rsqrt": "math.rsqrt", "cbrt": "math.cbrt", "sin": "math.sin",
    "cos": "math.cos", "tan": "math.tan", "sinh": "math.sinh", "cosh": "math.cosh",
    "tanh": "math.tanh", "asin": "math.asin", "acos": "math.acos", "atan": "math.atan",
    "asinh": "math.asinh", "acosh": "math.acosh", "atanh": "math.atanh", "erf": "math.erf",
    "fast_expf": "math.exp", "fast_logf": "math.log", "fast_log2f": "math.log2",
    "fast_log10f": "math.log10", "fast_sinf": "math.sin", "fast_cosf": "math.cos",
    "fast_tanf": "math.tan", "fast_tanhf": "math.tanh",
    "pow": "math.powf", "fast_powf": "math.powf", "atan2": "math.atan2", "fmod": "arith.remf",
    "copysign": "math.copysign", "div_rn": "arith.divf", "fast_dividef": "arith.divf",
    "add_rn": "arith.addf", "sub_rn": "arith.subf", "mul_rn": "arith.mulf",
    "fma": "math.fma", "fma_rn": "math.fma", "hypot": "math.sqrt", "rcp_rn": "arith.divf",
}
# Refused on f64 arguments: sqrt_rn, whose f64 square root is not always correctly rounded
# there (within 1 ulp). (The functions IREE's llvm-cpu would compute by calling libm on f64,
# which its executables cannot link, are f64_math's inline expansions: log2, log10, tanh, cbrt,
# sin, cos, tan, asin, acos, atan, atan2, erf, fmod.)
NO_F64 = frozenset(("sqrt_rn",))
# Logarithms computed as log(x) / log(base): IREE's llvm-cpu has no f32 log10 (f64 log2 and
# log10 are f64_math's).
SCALED_LOGS = {"log10": 1 / math.log(10), "fast_log10f": 1 / math.log(10), "log2": 1 / math.log(2)}

# Predicates on floats, as int32 0 / 1: (arith.cmpf predicate, whether |x| is compared with
# inf); signbit compares the bits, as a signed integer, with zero.
PREDICATES = {"isnan": ("uno", False), "isinf": ("oeq", True), "finitef": ("one", True),
              "isfinited": ("one", True), "signbit": ("slt", False)}
# Conversions: name -> (source dtypes, result dtype, rounding op applied first). The casts
# themselves round to nearest (int -> float, f64 -> f32) or toward zero (float -> int).
_ROUNDINGS = {"rn": "math.roundeven", "rz": None, "rd": "math.floor", "ru": "math.ceil"}
CONVERSIONS = {
    **{f"{src}2{dst}_{r}": ((sd,), dd, op) for r, op in _ROUNDINGS.items()
       for src, sd in (("float", "f32"), ("double", "f64"))
       for dst, dd in (("int", "i32"), ("uint", "u32"), ("ll", "i64"), ("ull", "u64"))},
    "llrint": (("f32", "f64"), "i64", "math.roundeven"),
    "llround": (("f32", "f64"), "i64", "math.round"),
    **{f"{src}2{dst}_rn": ((sd,), dd, None) for src, sd in (("int", "i32"), ("uint", "u32"),
                                                           ("ll", "i64"), ("ull", "u64"))
       for dst, dd in (("float", "f32"), ("double", "f64"))},
    "double2float_rn": (("f64",), "f32", None),
}
# Bit reinterpretations: name -> (source dtype, result dtype).
BITCASTS = {"int_as_float": ("i32", "f32"), "uint_as_float": ("u32", "f32"),
            "float_as_int": ("f32", "i32"), "float_as_uint": ("f32", "u32"),
            "longlong_as_double": ("i64", "f64"), "double_as_longlong": ("f64", "i64")}
# Integer functions: name -> MLIR op; clz and popc return int32, also for 64-bit arguments.
INT_OPS = {"abs": "math.absi", "clz": "math.ctlz", "popc": "math.ctpop"}

_TRITON = {"i1": "int1", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
           "u32": "uint32", "u64": "uint64", "f16": "fp16", "bf16": "bf16", "f32": "fp32",
           "f64": "fp64"}
_NAMES = {v: k for k, v in _TRITON.items()}


def result_dtype(name: str, args: tuple[str, ...]) -> Optional[str]:
    """The dtype `name` returns for arguments of dtypes `args` (keys of `_TRITON`, unsigned as
    'u32' / 'u64'), or None when the arguments do not fit it."""
    a = args[0]
    if name in INT_OPS and args == (a,) and a in _INTS:
        return a if name == "abs" else "i32"
    if name in FLOAT_OPS and a in _FLOATS and all(x == a for x in args):
        return a
    if name == "pow" and a in _FLOATS and args[1:] == ("i32",):
        return a
    if name in PREDICATES and args == (a,) and a in _FLOATS:
        return "i32"
    if name in CONVERSIONS and args == (a,) and a in CONVERSIONS[name][0]:
        return CONVERSIONS[name][1]
    if name in BITCASTS and args == (BITCASTS[name][0],):
        return BITCASTS[name][1]
    return None


def supported(name: str) -> bool:
    return any(name in table for table in (FLOAT_OPS, PREDICATES, CONVERSIONS, BITCASTS, INT_OPS))


def expand(name: str, args: list[t.Value], ty: t.Type, loc: str,
           emit: Callable[[t.Op], t.Value]) -> Optional[t.Value]:
    """`name` applied to `args` (already broadcast to one shape), with result type `ty`, as tile
    ops added by `emit`; None when triton-iree has no expansion of it for these types."""
    def op(opname: str, xs: list[t.Value], dtype: str, attrs: dict | None = None) -> t.Value:
        return emit(t.Elementwise(opname, xs, t.with_dtype(ty, dtype), attrs, loc))

    def wide(x: t.Value) -> t.Value:   # f16 / bf16 computed in f32 (exact)
        return op("arith.extf", [x], "f32") if x.dtype in ("f16", "bf16") else x

    def narrow(r: t.Value) -> t.Value:  # back to the result type
        return op("arith.truncf", [r], ty.dtype) if r.dtype != ty.dtype else r

    def constant(like: t.Value) -> Callable:   # (value[, dtype]) -> a constant shaped as `like`
        return lambda value, dtype=like.dtype: emit(t.Constant(value, t.with_dtype(like.type, dtype), loc))

    if name in INT_OPS and not t.is_float(args[0].dtype):
        r = op(INT_OPS[name], args, args[0].dtype)
        return op("arith.trunci", [r], ty.dtype) if r.dtype != ty.dtype else r
    if name in ("pow", "fast_powf"):
        x, y = wide(args[0]), args[1]
        y = op("arith.sitofp", [y], x.dtype) if not t.is_float(y.dtype) else wide(y)
        return narrow(_pow(x, y, op, constant(x)))
    if name in ("hypot", "rcp_rn"):
        xs = [wide(x) for x in args]
        const = constant(xs[0])
        return narrow(op("arith.divf", [const(1.0), xs[0]], xs[0].dtype) if name == "rcp_rn"
                      else _hypot(*xs, op, const))
    if name in FLOAT_OPS:
        xs = [wide(x) for x in args]
        if (r := f64_math.expand(FLOAT_OPS[name], xs, loc, emit)) is not None:
            return r
        if (r := f32_trig.expand(FLOAT_OPS[name], xs, loc, emit)) is not None:   # sin, cos, tan
            return narrow(r)
        if name in NO_F64 and xs[0].dtype == "f64":
            return None
        if name in SCALED_LOGS and (name != "log2" or xs[0].dtype == "f64"):
            scale = constant(xs[0])(SCALED_LOGS[name])
            r = op("arith.mulf", [op("math.log", xs, xs[0].dtype), scale], xs[0].dtype)
        else:
            r = _edges(name, xs[0], op(FLOAT_OPS[name], xs, xs[0].dtype), op, constant(xs[0]))
        return narrow(r)
    if name in PREDICATES:
        pred, magnitude = PREDICATES[name]
        x = wide(args[0])
        if name == "signbit":
            bits = op("arith.bitcast", [x], f"i{t.bitwidth(x.dtype)}")
            bit = op("arith.cmpi", [bits, constant(bits)(0)], "i1", {"predicate": pred})
        elif magnitude:
            inf = constant(x)(float("inf"))
            bit = op("arith.cmpf", [op("math.absf", [x], x.dtype), inf], "i1", {"predicate": pred})
        else:
            bit = op("arith.cmpf", [x, x], "i1", {"predicate": pred})
        return op("arith.extui", [bit], ty.dtype)
    if name in CONVERSIONS:
        _, dst, rounding = CONVERSIONS[name]
        x = args[0]
        if t.is_float(x.dtype) and t.is_float(ty.dtype):
            return op("arith.truncf", [x], ty.dtype)
        if not t.is_float(x.dtype):
            return op("arith.uitofp" if name.startswith("u") else "arith.sitofp", [x], ty.dtype)
        if rounding:
            x = op(rounding, [x], x.dtype)
        return _saturating_cast(x, dst, ty.dtype, op, constant(x))
    if name in BITCASTS:
        return op("arith.bitcast", args, ty.dtype)
    return None


def _edges(name: str, x: t.Value, r: t.Value, op, const) -> t.Value:
    """`r`, IREE's expansion of `name` at `x`, where it is right; C's result where it is not:
    cbrt of infinities (NaN), asinh and acosh of large |x| (where x * x overflows), and acosh
    below 1 (NaN)."""
    dt = x.dtype

    def cmp(pred: str, a: t.Value, b: t.Value) -> t.Value:
        return op("arith.cmpf", [a, b], "i1", {"predicate": pred})

    def where(c: t.Value, a: t.Value, b: t.Value) -> t.Value:
        return op("arith.select", [c, a, b], dt)

    if name not in ("cbrt", "asinh", "acosh"):
        return r
    ax = op("math.absf", [x], dt)
    if name == "cbrt":
        return where(cmp("oeq", ax, const(float("inf"))), x, r)
    # log(2 |x|), the value for |x| > 2^28 (x * x beyond the precision of either type)
    big = cmp("ogt", ax, const(2.0 ** 28))
    log2x = op("arith.addf", [op("math.log", [ax], dt), const(math.log(2))], dt)
    if name == "asinh":
        return where(big, op("math.copysign", [log2x, x], dt), r)
    return where(cmp("olt", x, const(1.0)), const(float("nan")), where(big, log2x, r))


def _saturating_cast(x: t.Value, dst: str, dtype: str, op, const) -> t.Value:
    """Float `x` (already rounded) to the integer type `dst` ('i32', 'u64', ...; `dtype` is its
    signless type) as CUDA converts: out-of-range values saturate, NaN becomes 0. A plain
    fptosi / fptoui is undefined there."""
    unsigned, bits = dst.startswith("u"), t.bitwidth(dtype)
    lo, hi = (0, (1 << bits) - 1) if unsigned else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    r = op("arith.fptoui" if unsigned else "arith.fptosi", [x], dtype)

    def where(pred: str, bound: float, value: int, r: t.Value) -> t.Value:
        c = op("arith.cmpf", [x, const(bound, x.dtype) if pred != "uno" else x], "i1", {"predicate": pred})
        return op("arith.select", [c, const(value, dtype), r], dtype)

    signed = (lambda v: v - (1 << bits) if v >= 1 << (bits - 1) else v)   # the bits as a signless constant
    r = where("oge", float(hi + 1), signed(hi), r)
    r = where("olt", float(lo), lo, r)
    return where("uno", 0.0, 0, r)


def _hypot(x: t.Value, y: t.Value, op, const) -> t.Value:
    """sqrt(x * x + y * y) without overflow or underflow: m * sqrt(1 + (n / m) ** 2) for
    m = max(|x|, |y|), n = min; 0 where both are 0, inf where either is infinite (even with a
    NaN), NaN where either is NaN otherwise."""
    dt = x.dtype
    ax, ay = op("math.absf", [x], dt), op("math.absf", [y], dt)
    m, n = op("arith.maximumf", [ax, ay], dt), op("arith.minimumf", [ax, ay], dt)
    q = op("arith.divf", [n, m], dt)
    r = op("arith.mulf", [m, op("math.sqrt", [op("math.fma", [q, q, const(1.0)], dt)], dt)], dt)
    zero, inf = const(0.0), const(float("inf"))
    r = op("arith.select", [op("arith.cmpf", [m, zero], "i1", {"predicate": "oeq"}), zero, r], dt)
    infinite = op("arith.ori", [op("arith.cmpf", [a, inf], "i1", {"predicate": "oeq"}) for a in (ax, ay)], "i1")
    return op("arith.select", [infinite, inf, r], dt)


def _pow(x: t.Value, y: t.Value, op, const) -> t.Value:
    """x ** y with C's special cases. IREE expands math.powf as exp(y * log(x)), which is right
    for x > 0 only: the sign for odd integer y, NaN for negative x and other y, and the cases
    whose result is 1 (y = 0, x = 1, x = -1 with y infinite) are added here."""
    dt = x.dtype
    bits = f"i{t.bitwidth(dt)}"

    def cmp(pred: str, a: t.Value, b: t.Value) -> t.Value:
        return op("arith.cmpf", [a, b], "i1", {"predicate": pred})

    def both(a: t.Value, b: t.Value) -> t.Value:
        return op("arith.andi", [a, b], "i1")

    def where(c: t.Value, a: t.Value, b: t.Value) -> t.Value:
        return op("arith.select", [c, a, b], dt)

    zero, one, inf = const(0.0, dt), const(1.0, dt), const(float("inf"), dt)
    ax, ay = op("math.absf", [x], dt), op("math.absf", [y], dt)
    r = op("math.powf", [ax, y], dt)
    y_finite = cmp("olt", ay, inf)
    y_int = both(cmp("oeq", op("math.floor", [y], dt), y), y_finite)
    half = op("arith.mulf", [y, const(0.5, dt)], dt)
    y_odd = both(y_int, cmp("une", op("math.floor", [half], dt), half))
    x_sign = op("arith.cmpi", [op("arith.bitcast", [x], bits), const(0, bits)], "i1", {"predicate": "slt"})
    r = where(both(x_sign, y_odd), op("arith.negf", [r], dt), r)
    y_fraction = both(y_finite, op("arith.xori", [y_int, const(True, "i1")], "i1"))
    x_negative = both(cmp("olt", x, zero), cmp("olt", ax, inf))
    r = where(both(x_negative, y_fraction), const(float("nan"), dt), r)
    unit = op("arith.ori", [cmp("oeq", y, zero), cmp("oeq", x, one)], "i1")
    unit = op("arith.ori", [unit, both(cmp("oeq", ax, one), cmp("oeq", ay, inf))], "i1")
    return where(unit, one, r)


def _builtin(name: str, arity: int):
    def fn(*args, _semantic=None):
        if len(args) != arity:
            raise TypeError(f"libdevice.{name} takes {arity} arguments, got {len(args)}")
        types = tuple(_semantic.to_tensor(a).dtype for a in args)
        dtypes = tuple(_NAMES.get(d.name, d.name) for d in types)
        ret = result_dtype(name, dtypes)
        if ret is None:
            if supported(name):
                raise TypeError(f"libdevice.{name} does not take arguments of types "
                                f"({', '.join(d.name for d in types)})")
            ret = dtypes[0]   # the reader refuses it, naming it and the line
        return core.extern_elementwise(LIBRARY, "", list(args), {types: (name, core.dtype(_TRITON.get(ret, ret)))},
                                       is_pure=True, _semantic=_semantic)
    fn.__name__ = fn.__qualname__ = name
    return core.builtin(fn)


def _arity(name: str) -> int:
    stub = getattr(_stubs, name, None)
    return len(inspect.signature(stub).parameters) if stub else 1


for _name in sorted({n for n, f in vars(_stubs).items() if inspect.isfunction(f)} | set(FLOAT_OPS)):
    globals()[_name] = _builtin(_name, _arity(_name))
