"""Stores of a constant tile through pointers whose offsets are not one strided box: zero strides
(every element, or a row or column of them, at one address) under a mask, and gathered offsets;
against Triton's interpreter, with the elements the stores leave untouched."""
import pytest
import torch
import triton
import triton.language as tl

from oracle import interpret

SENTINEL = -3


@triton.jit
def broadcast_store_kernel(out_ptr, n, VALUE: tl.constexpr, B: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, B)
    tl.store(out_ptr + offs * 0 + pid, tl.full([B], VALUE, out_ptr.dtype.element_ty), mask=offs < n - pid)


@triton.jit
def broadcast_store_2d_kernel(out_ptr, n, m, SR: tl.constexpr, SC: tl.constexpr, R: tl.constexpr,
                              C: tl.constexpr):
    pid = tl.program_id(0)
    r = tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    tl.store(out_ptr + pid * 7 + r * SR + c * SC, tl.full([R, C], 7.0, tl.float32), mask=(r < n - pid) & (c < m))


@triton.jit
def gathered_store_kernel(out_ptr, n, MASKED: tl.constexpr, B: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, B)
    ptrs = out_ptr + pid * 29 + (offs * offs) % 23
    if MASKED:
        tl.store(ptrs, tl.full([B], 7, tl.int32), mask=offs < n)
    else:
        tl.store(ptrs, tl.full([B], 7, tl.int32))


def _check(kernel, out, grid, *args, **meta):
    want = interpret(kernel, grid, [out.clone(), *args], **meta)[0]
    kernel[grid](out, *args, **meta)
    assert torch.equal(out, want), (out, want)


@pytest.mark.construct("tl.store of a constant through a broadcast or gathered pointer")
@pytest.mark.parametrize("dtype, value", [(torch.float32, 7.0), (torch.float16, -2.5), (torch.int32, 7),
                                          (torch.int8, -5), (torch.int64, 2 ** 40)], ids=str)
def test_masked_store_of_a_constant_through_a_zero_stride(dtype, value):
    # Program pid stores where its lanes below n - pid are on: none from program n on.
    out = torch.full((13,), SENTINEL, dtype=dtype)
    _check(broadcast_store_kernel, out, (9,), 5, VALUE=value, B=16)


@pytest.mark.construct("tl.store of a constant through a broadcast or gathered pointer")
@pytest.mark.parametrize("sr, sc", [(0, 1), (3, 0), (0, 0), (0, 2)])
def test_masked_2d_store_of_a_constant_with_zero_strides(sr, sc):
    out = torch.full((7 * 4 + 3 * 8 + 2 * 16 + 5,), float(SENTINEL))
    _check(broadcast_store_2d_kernel, out, (4,), 3, 11, SR=sr, SC=sc, R=8, C=16)


@pytest.mark.construct("tl.store of a constant through a broadcast or gathered pointer")
@pytest.mark.parametrize("masked", [True, False])
def test_store_of_a_constant_through_gathered_offsets(masked):
    out = torch.full((3 * 29 + 4,), SENTINEL, dtype=torch.int32)
    _check(gathered_store_kernel, out, (3,), 9, MASKED=masked, B=16)
