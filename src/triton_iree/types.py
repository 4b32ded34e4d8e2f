"""Triton's types and their MLIR, torch and byte-size counterparts: the one table of them.

Triton names types as its signatures do ('fp32', 'i32', 'u8', ...); the emitted modules use MLIR's
element types ('f32', 'i32', 'i8', ...), with unsigned and signed integers alike.
"""
from __future__ import annotations

# Triton's name of a pointer's element type -> (MLIR element type of the buffer the kernel
# takes, torch dtype of the tensors Triton gives that type: bools are u1, and i1 buffers are bytes).
POINTER_TYPES = {
    "fp32": ("f32", "float32"), "fp16": ("f16", "float16"), "bf16": ("bf16", "bfloat16"),
    "fp64": ("f64", "float64"), "fp8e4nv": ("f8E4M3FN", "float8_e4m3fn"), "fp8e5": ("f8E5M2", "float8_e5m2"),
    "i1": ("i8", "bool"), "i8": ("i8", "int8"), "i16": ("i16", "int16"), "i32": ("i32", "int32"),
    "i64": ("i64", "int64"), "u1": ("i8", "bool"), "u8": ("i8", "uint8"), "u16": ("i16", "uint16"),
    "u32": ("i32", "uint32"), "u64": ("i64", "uint64"),
}

# Triton's scalar argument types a launch passes -> the MLIR type of the function's argument.
# (fp16 and bf16 scalars are not among them: IREE's function arguments have no 16-bit floats.)
SCALAR_TYPES = {"i1": "i1", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64",
                "u1": "i1", "u8": "i8", "u16": "i16", "u32": "i32", "u64": "i64",
                "fp32": "f32", "fp64": "f64"}

# MLIR element type -> (bytes, Triton's name in the language, torch dtype of its bit pattern's
# signed reading).
ELEMENTS = {
    "i1": (1, "tl.int1", "bool"), "i8": (1, "tl.int8", "int8"), "i16": (2, "tl.int16", "int16"),
    "i32": (4, "tl.int32", "int32"), "i64": (8, "tl.int64", "int64"),
    "f16": (2, "tl.float16", "float16"), "bf16": (2, "tl.bfloat16", "bfloat16"),
    "f32": (4, "tl.float32", "float32"), "f64": (8, "tl.float64", "float64"),
    "f8E4M3FN": (1, "tl.float8e4nv", "float8_e4m3fn"), "f8E5M2": (1, "tl.float8e5", "float8_e5m2"),
}
ELEMENT_BYTES = {m: e[0] for m, e in ELEMENTS.items()}
TYPE_NAMES = {m: e[1] for m, e in ELEMENTS.items()}
TORCH_DTYPES = {m: e[2] for m, e in ELEMENTS.items()}
# MLIR integer type -> torch dtype of its unsigned reading.
UNSIGNED_TORCH_DTYPES = {"i8": "uint8", "i16": "uint16", "i32": "uint32", "i64": "uint64"}
