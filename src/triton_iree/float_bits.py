"""Float formats, and an upcast built from a float's bits in integer arithmetic for the SPIR-V
targets (`targets.spirv`), whose drivers may fold a round trip of conversions away."""
from __future__ import annotations

from . import f64_math, tile as t

# Significand and exponent bits of each float format.
FORMATS = {"f64": (52, 11), "f32": (23, 8), "bf16": (7, 8), "f16": (10, 5), "f8E5M2": (2, 5), "f8E4M3FN": (3, 4)}


def bias(dtype: str) -> int:
    """The exponent bias of float format `dtype`; its smallest normal number is 2^(1 - bias)."""
    return 2 ** (FORMATS[dtype][1] - 1) - 1


def expand_round_trips(kernel: t.Kernel) -> None:
    """Each upcast (extf) of a downcast's (truncf's) result, as in x.to(tl.float16).to(tl.float32),
    rebuilt from the narrow value's bits in integer arithmetic (`exact_upcast`): NVIDIA's Vulkan
    driver reads the pair of conversions as x, even marked NoContraction, so the round trip did
    not round. For f16 and f32 narrow values (IREE's SPIR-V builds bf16 casts from integers)."""
    def expand(o: t.Elementwise, emit):
        src = o.args[0]
        if o.opname == "arith.extf" and src.dtype in ("f16", "f32") and isinstance(src.owner, t.Elementwise) \
                and src.owner.opname == "arith.truncf":
            return exact_upcast(src, o.result.dtype, o.loc, emit)
        return None
    t.expand_elementwise(kernel, expand)


def exact_upcast(h: t.Value, wide: str, loc: str, emit) -> t.Value:
    """`h` (f16 or f32) as the wider float type `wide`, from its bits: sign, exponent rebiased,
    significand shifted; infinities and NaN keep their significand; zeros and subnormals are
    their significand (an integer, converted exactly) times the subnormal unit."""
    op, const = f64_math.builders(h, loc, emit)
    (mn, en), (mw, ew) = FORMATS[h.dtype], FORMATS[wide]
    n, w = t.bitwidth(h.dtype), t.bitwidth(wide)
    iw = f"i{w}"

    def i(name: str, *xs: t.Value) -> t.Value:
        return op(name, list(xs), iw)

    def c(v: int) -> t.Value:
        return const(v, iw)

    def is_(a: t.Value, v: int) -> t.Value:
        return op("arith.cmpi", [a, c(v)], "i1", {"predicate": "eq"})

    u = op("arith.extui", [op("arith.bitcast", [h], f"i{n}")], iw)
    sign = i("arith.shli", i("arith.andi", u, c(1 << (n - 1))), c(w - n))
    exponent = i("arith.andi", i("arith.shrui", u, c(mn)), c(2 ** en - 1))
    m = i("arith.andi", u, c(2 ** mn - 1))
    significand = i("arith.shli", m, c(mw - mn))
    normal = i("arith.ori", i("arith.shli", i("arith.addi", exponent, c(bias(wide) - bias(h.dtype))), c(mw)),
               significand)
    special = i("arith.ori", c((2 ** ew - 1) << mw), significand)
    tiny = op("arith.bitcast", [op("arith.mulf", [op("arith.uitofp", [m], wide), const(2.0 ** (1 - bias(h.dtype) - mn),
                                                                                       wide)], wide)], iw)
    bits = op("arith.select", [is_(exponent, 0), tiny,
                               op("arith.select", [is_(exponent, 2 ** en - 1), special, normal], iw)], iw)
    return op("arith.bitcast", [i("arith.ori", bits, sign)], wide)
