"""Pointers in TTIR as the reader holds them: `!tt.ptr<T>` types, and pointer values (a kernel
argument's buffer plus element offsets), which become offsets into buffers in the tile program."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Optional

from iree.compiler import ir

from . import tile as t

_PTR_TYPE = re.compile(r"^!tt\.ptr<([^,>]+)(?:,\s*\d+)?>$")


def ptr_pointee(ty: ir.Type) -> Optional[str]:
    m = _PTR_TYPE.match(str(ty))
    return m.group(1) if m else None


def memory_dtype(pointee: str) -> str:
    # Triton keeps booleans in memory as bytes.
    return "i8" if pointee == "i1" else pointee


@dataclass
class Ptr:
    """A pointer (scalar or tile) during reading: a buffer plus i64 element offsets.

    `view` is the element type the pointer reads as, when a pointer bitcast reinterprets the
    buffer's elements, e.g. Triton's i1 pointers as i8. A view narrower than the buffer's
    elements (`x_ptr.to(tl.pointer_type(tl.int8))` on a float32 buffer) has `scale` elements in
    each buffer element, and its offsets count view elements. A view wider than them (an int32
    buffer read as int64) spans `wide` buffer elements, and its offsets count buffer elements.
    """
    buffer: t.Param
    offsets: t.Value
    view: Optional[str] = None
    scale: int = 1
    wide: int = 1

    @property
    def dtype(self) -> str:
        return self.view or self.buffer.dtype

    def moved(self, offsets: t.Value) -> "Ptr":
        return Ptr(self.buffer, offsets, self.view, self.scale, self.wide)


@dataclass
class Addr:
    """An integer computed from a pointer (`.to(tl.int64)` on it, plus or minus integers) during
    reading: `value` is the pointer's byte offset in `buffer`, not its address (an argument has
    none in IREE's model). It can only become a pointer into `buffer` again, or be subtracted
    from another into `buffer` (a byte distance, the same as of the addresses)."""
    buffer: t.Param
    value: t.Value


def unit_bytes(ptr: Ptr) -> int:
    """The bytes one unit of `ptr.offsets` counts (a narrower view's elements, else the buffer's)."""
    return t.bitwidth(ptr.dtype if ptr.scale > 1 else ptr.buffer.dtype) // 8


def known_divisor(v: t.Value) -> int:
    """A number the integer `v` is known to be a multiple of, from the ops computing it (0 if
    `v` is 0): constants, sums, products, sign extensions and shape ops of them."""
    op = v.owner
    if isinstance(op, t.Constant):
        return abs(int(op.value))
    if isinstance(op, (t.Splat, t.Broadcast, t.ExpandDims, t.Reshape, t.Trans, t.Unsplat)):
        return known_divisor(op.src)
    if isinstance(op, t.Elementwise) and op.opname in ("arith.addi", "arith.subi"):
        return math.gcd(*(known_divisor(a) for a in op.args))
    if isinstance(op, t.Elementwise) and op.opname == "arith.muli":
        return known_divisor(op.args[0]) * known_divisor(op.args[1])
    if isinstance(op, t.Elementwise) and op.opname == "arith.extsi":
        return known_divisor(op.args[0])
    return 1
