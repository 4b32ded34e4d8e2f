"""Errors in the user's terms: the Python construct (tl.cumsum, not tt.scan) and the user's
source line (not a line of triton/language/standard.py), with no internal traceback."""
import inspect
import traceback

import pytest
import torch
import triton
import triton.language as tl
from iree.compiler import ir
from triton.language import standard

from triton_iree import UnsupportedError, locations, reader
from triton_iree.backend import compiler


def _line_of(fn, text: str) -> int:
    lines, first = inspect.getsourcelines(fn.fn)
    return first + next(i for i, ln in enumerate(lines) if text in ln)


def test_source_loc_walks_call_sites_to_the_users_frame():
    lib = inspect.getsourcefile(standard.cumsum.fn)
    with ir.Context():
        inner = ir.Location.file(lib, 120, 7)
        user = ir.Location.file("/home/u/kernel.py", 12, 9)
        helper = ir.Location.file("/home/u/helpers.py", 30, 4)
        assert locations.source_loc(ir.Location.callsite(inner, [user])) == "/home/u/kernel.py:12:9"
        # A user's own @triton.jit helper is the user's code: its line is the one to fix.
        assert locations.source_loc(ir.Location.callsite(inner, [helper, user])) == "/home/u/helpers.py:30:4"
        assert locations.source_loc(ir.Location.name("x", inner)) == f"{lib}:120:7"   # only Triton's frame
        assert locations.source_loc(ir.Location.unknown()) == ""


@triton.jit
def _cumsum_kernel(x_ptr, out_ptr):
    offs = tl.arange(0, 16)
    tl.store(out_ptr + offs, tl.cumsum(tl.load(x_ptr + offs), axis=0))


def test_unsupported_library_construct_is_named_at_the_users_line():
    text = compiler.kernel_ttir(_cumsum_kernel, dict(x_ptr="*fp32", out_ptr="*fp32"))
    assert '"tt.scan"' in text
    # An op the reader does not know, emitted inside tl.cumsum's body in standard.py.
    with pytest.raises(UnsupportedError) as e:
        reader.read_ttir(text.replace('"tt.scan"', '"tt.scan_v2"'))
    msg = str(e.value)
    assert msg.startswith("tl.cumsum (tt.scan_v2) is not supported by triton-iree"), msg
    assert e.value.loc.startswith(f"{__file__}:{_line_of(_cumsum_kernel, 'tl.cumsum')}:"), e.value.loc
    assert "standard.py" not in msg


@triton.jit
def _asm_kernel(x_ptr):
    x = tl.load(x_ptr)
    tl.store(x_ptr, tl.inline_asm_elementwise("mov $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True,
                                              pack=1))


def test_unsupported_op_is_named_by_its_python_construct():
    with pytest.raises(UnsupportedError, match=r"^tl\.inline_asm_elementwise \(tt\.elementwise_inline_asm\) "
                                               r"is not supported") as e:
        reader.read_ttir(compiler.kernel_ttir(_asm_kernel, dict(x_ptr="*fp32")))
    assert e.value.loc.startswith(f"{__file__}:{_line_of(_asm_kernel, 'inline_asm_elementwise')}:")


def test_unsupported_error_at_launch_has_no_internal_frames():
    x = torch.rand(16)
    with pytest.raises(UnsupportedError) as e:
        _asm_kernel[(1,)](x)
    frames = traceback.extract_tb(e.value.__traceback__)
    ours = [f for f in frames if "triton_iree" in f.filename]
    assert len(ours) == 1 and ours[0].filename.endswith("backend/compiler.py"), frames
    assert e.value.__cause__ is None and e.value.__suppress_context__
    assert f"at {__file__}:{_line_of(_asm_kernel, 'inline_asm_elementwise')}:" in str(e.value)
    assert "tl.inline_asm_elementwise (tt.elementwise_inline_asm)" in str(e.value)


@triton.jit
def _loopy_combine(a, b):
    r = a
    while r < b:
        r = r + 1.0
    return r


@triton.jit
def _reduce_with_loop_kernel(x_ptr, out_ptr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    tl.store(out_ptr, tl.reduce(x, 0, _loopy_combine))


def test_unsupported_op_in_a_reduce_combine_function_is_named_by_its_construct():
    x, out = torch.rand(16), torch.zeros(1)
    with pytest.raises(UnsupportedError, match=r"^a while loop in the combine function of tl\.reduce is not "
                                               r"supported") as e:
        _reduce_with_loop_kernel[(1,)](x, out)
    assert "While" not in str(e.value) and "scf." not in str(e.value)
    # The line of the user's combine function that has the loop.
    assert e.value.loc.startswith(f"{__file__}:{_line_of(_loopy_combine, 'while')}:"), e.value.loc

