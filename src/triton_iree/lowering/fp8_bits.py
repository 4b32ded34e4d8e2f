"""f32 <-> fp8 (f8E4M3FN, f8E5M2) conversions as integer bit operations, for CUDA/HIP codegen,
where IREE lowers neither arith.truncf to fp8 nor arith.extf from fp8 (fp8 values are only
stored and loaded there, as bytes, and bitcast to and from i8).

Both follow IEEE / MLIR's arith.truncf and arith.extf: the truncf rounds to nearest even,
subnormals included; out-of-range values become infinity (f8E5M2) or NaN (f8E4M3FN, which has
no infinity); NaN stays a (quiet) NaN. The extf is exact.

A conversion is a list of ops `(result, opname, operands, type)`; operands are results of
earlier ops or `("c", value)` constants. `emit` prints them as MLIR; `evaluate` computes them
with numpy, so the tests check the very ops that are emitted."""
from __future__ import annotations

FP8 = {  # mantissa bits, exponent bias, largest finite magnitude code
    "f8E4M3FN": (3, 7, 0x7E),
    "f8E5M2": (2, 15, 0x7B),
}


def truncf_ops(dtype: str) -> list:
    """f32 ("x") -> fp8 bits (i8, the last result)."""
    m, bias, top = FP8[dtype]
    s = 23 - m
    emin_bits = (127 + 1 - bias) << 23          # f32 bits of the smallest normal fp8 number
    nan_code = 0x7F if dtype == "f8E4M3FN" else 0x7E
    ovf_code = 0x7F if dtype == "f8E4M3FN" else 0x7C
    c = lambda v: ("c", v)
    return [
        ("b", "arith.bitcast", ["x"], "i32"),
        ("abs", "arith.andi", ["b", c(0x7FFFFFFF)], "i32"),
        ("sgn0", "arith.shrui", ["b", c(24)], "i32"),
        ("sgn", "arith.andi", ["sgn0", c(0x80)], "i32"),
        # normal: rebias the exponent, round the mantissa to m bits (nearest, ties to even)
        ("rb", "arith.subi", ["abs", c((127 - bias) << 23)], "i32"),
        ("lsb0", "arith.shrui", ["rb", c(s)], "i32"),
        ("lsb", "arith.andi", ["lsb0", c(1)], "i32"),
        ("rb1", "arith.addi", ["rb", c((1 << (s - 1)) - 1)], "i32"),
        ("rb2", "arith.addi", ["rb1", "lsb"], "i32"),
        ("nrm", "arith.shrui", ["rb2", c(s)], "i32"),
        # subnormal: the significand (hidden bit set) shifted right by 150 - E - (bias - 1 + m)
        ("e", "arith.shrui", ["abs", c(23)], "i32"),
        ("man0", "arith.andi", ["abs", c(0x7FFFFF)], "i32"),
        ("man", "arith.ori", ["man0", c(0x800000)], "i32"),
        ("sh0", "arith.subi", [c(150 - (bias - 1) - m), "e"], "i32"),
        ("sh", "arith.minui", ["sh0", c(31)], "i32"),
        ("q", "arith.shrui", ["man", "sh"], "i32"),
        ("one", "arith.shli", [c(1), "sh"], "i32"),
        ("mask", "arith.subi", ["one", c(1)], "i32"),
        ("rem", "arith.andi", ["man", "mask"], "i32"),
        ("half", "arith.shrui", ["one", c(1)], "i32"),
        ("qodd", "arith.andi", ["q", c(1)], "i32"),
        ("remq", "arith.addi", ["rem", "qodd"], "i32"),
        ("up", "arith.cmpi ugt", ["remq", "half"], "i1"),
        ("upi", "arith.extui", ["up"], "i32"),
        ("sub", "arith.addi", ["q", "upi"], "i32"),
        ("small", "arith.cmpi ult", ["abs", c(emin_bits)], "i1"),
        ("mag0", "arith.select", ["small", "sub", "nrm"], "i32"),
        ("big", "arith.cmpi ugt", ["mag0", c(top)], "i1"),
        ("mag1", "arith.select", ["big", c(ovf_code), "mag0"], "i32"),
        ("isnan", "arith.cmpi ugt", ["abs", c(0x7F800000)], "i1"),
        ("mag", "arith.select", ["isnan", c(nan_code), "mag1"], "i32"),
        ("r32", "arith.ori", ["mag", "sgn"], "i32"),
        ("r", "arith.trunci", ["r32"], "i8"),
    ]


def extf_ops(dtype: str) -> list:
    """fp8 bits ("x", i8) -> f32 (the last result), exactly."""
    m, bias, _ = FP8[dtype]
    c = lambda v: ("c", v)
    ops = [
        ("b", "arith.extui", ["x"], "i32"),
        ("mag", "arith.andi", ["b", c(0x7F)], "i32"),
        ("sgn0", "arith.andi", ["b", c(0x80)], "i32"),
        ("sgn", "arith.shli", ["sgn0", c(24)], "i32"),
        # normal: shift exponent and mantissa into place and rebias the exponent
        ("n0", "arith.shli", ["mag", c(23 - m)], "i32"),
        ("nrm", "arith.addi", ["n0", c((127 - bias) << 23)], "i32"),
        # subnormal (and zero): mantissa * 2^(1 - bias - m), exact in f32
        ("sf", "arith.uitofp", ["mag"], "f32"),
        ("sv", "arith.mulf", ["sf", c(2.0 ** (1 - bias - m))], "f32"),
        ("sub", "arith.bitcast", ["sv"], "i32"),
        ("small", "arith.cmpi ult", ["mag", c(1 << m)], "i1"),
        ("v0", "arith.select", ["small", "sub", "nrm"], "i32"),
    ]
    if dtype == "f8E4M3FN":
        ops += [("isnan", "arith.cmpi eq", ["mag", c(0x7F)], "i1"),
                ("v", "arith.select", ["isnan", c(0x7FC00000), "v0"], "i32")]
    else:
        ops += [("isinf", "arith.cmpi eq", ["mag", c(0x7C)], "i1"),
                ("v1", "arith.select", ["isinf", c(0x7F800000), "v0"], "i32"),
                ("isnan", "arith.cmpi ugt", ["mag", c(0x7C)], "i1"),
                ("v", "arith.select", ["isnan", c(0x7FC00000), "v1"], "i32")]
    return ops + [("r32", "arith.ori", ["v", "sgn"], "i32"),
                  ("r", "arith.bitcast", ["r32"], "f32")]


def emit(ops: list, x: str, x_type: str, fresh, out) -> str:
    """Prints `ops` on `x` (of type `x_type`) with `out`, names from `fresh`; returns the result."""
    names, types = {"x": x}, {"x": x_type}

    def arg(a, ty):
        if isinstance(a, tuple):
            n = fresh()
            if ty == "f32":
                out(f"{n} = arith.constant {float(a[1])!r} : f32")
            else:
                v = a[1] - (1 << 32) if a[1] >= 1 << 31 else a[1]
                out(f"{n} = arith.constant {v} : {ty}")
            return n
        return names[a]

    for res, name, operands, ty in ops:
        n = fresh()
        if name.startswith("arith.cmpi"):
            op, pred = name.split()
            at = types[operands[0]]
            a = [arg(o, at) for o in operands]
            out(f"{n} = {op} {pred}, {a[0]}, {a[1]} : {at}")
        elif name == "arith.select":
            a = [names[operands[0]]] + [arg(o, ty) for o in operands[1:]]
            out(f"{n} = arith.select {a[0]}, {a[1]}, {a[2]} : {ty}")
        elif name in ("arith.bitcast", "arith.extui", "arith.trunci", "arith.uitofp"):
            out(f"{n} = {name} {names[operands[0]]} : {types[operands[0]]} to {ty}")
        else:
            a = [arg(o, ty) for o in operands]
            out(f"{n} = {name} {', '.join(a)} : {ty}")
        names[res], types[res] = n, ty
    return names[ops[-1][0]]


def evaluate(ops: list, x):
    """numpy model of `ops` (on an array `x`: float32 for truncf, uint8 for extf): i32 ops on
    uint32, with arith's semantics (shifts by less than 32, unsigned compares)."""
    import numpy as np
    vals = {"x": x}
    np_t = {"i32": np.uint32, "i8": np.uint8, "f32": np.float32, "i1": bool}

    def arg(a, ty):
        return np_t[ty](a[1]) if isinstance(a, tuple) else vals[a]

    for res, name, operands, ty in ops:
        a = [arg(o, ty if not name.startswith("arith.cmpi") else "i32") if i or name != "arith.select"
             else vals[o] for i, o in enumerate(operands)]
        if name == "arith.bitcast":
            r = a[0].view(np_t[ty])
        elif name in ("arith.extui", "arith.trunci"):
            r = a[0].astype(np_t[ty])
        elif name == "arith.uitofp":
            r = a[0].astype(np.float32)
        elif name == "arith.mulf":
            r = (a[0] * a[1]).astype(np.float32)
        elif name.startswith("arith.cmpi"):
            pred = name.split()[1]
            r = {"ugt": np.greater, "ult": np.less, "eq": np.equal}[pred](a[0], a[1])
        elif name == "arith.select":
            r = np.where(a[0], a[1], a[2]).astype(np_t[ty])
        else:
            if name in ("arith.shrui", "arith.shli"):
                assert np.all(np.asarray(a[1]) < 32)
            f = {"arith.andi": np.bitwise_and, "arith.ori": np.bitwise_or, "arith.addi": np.add,
                 "arith.subi": np.subtract, "arith.shrui": np.right_shift, "arith.shli": np.left_shift,
                 "arith.minui": np.minimum}[name]
            with np.errstate(over="ignore"):
                r = f(a[0], a[1]).astype(np_t[ty])
        vals[res] = np.asarray(r)
    return vals[ops[-1][0]]
