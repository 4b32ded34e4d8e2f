"""Triton's element types of pointer arguments, in one table for the package."""
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
