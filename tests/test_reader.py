import pytest
import triton
import triton.language as tl

from triton_iree import UnsupportedError, reader
from triton_iree.backend import compiler
from triton_iree import tile as t

from helpers import add_program


def test_pointers_become_buffers_plus_offsets():
    k = add_program(256)
    assert k.name == "add_kernel"
    assert [p.name for p in k.buffers] == ["x_ptr", "y_ptr", "out_ptr"]
    assert [p.dtype for p in k.buffers] == ["f32"] * 3
    assert [(p.name, p.dtype) for p in k.scalars] == [("n_elements", "i32")]
    assert len(k.base_offsets) == 3
    loads = [op for op in k.walk() if isinstance(op, t.Load)]
    stores = [op for op in k.walk() if isinstance(op, t.Store)]
    assert [op.buffer.name for op in loads] == ["x_ptr", "y_ptr"]
    assert [op.buffer.name for op in stores] == ["out_ptr"]
    assert all(op.offsets.dtype == "i64" and op.offsets.shape == (256,) for op in loads + stores)
    assert k.stored_buffers() == [k.buffers[2]]


@triton.jit
def _print_kernel(x_ptr, n):
    tl.device_print("x", tl.load(x_ptr + tl.arange(0, 16)))


@triton.jit
def _inline_asm_kernel(x_ptr, n):
    x = tl.load(x_ptr)
    tl.store(x_ptr, tl.inline_asm_elementwise("mov $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1))


def test_device_print_is_read_as_a_print_of_its_values():
    k = reader.read_ttir(compiler.kernel_ttir(_print_kernel, dict(x_ptr="*fp32", n="i32")))
    prints = [op for op in k.walk() if isinstance(op, t.Print)]
    assert len(prints) == 1 and prints[0].prefix.strip() == "x:" and prints[0].values[0].shape == (16,)


@pytest.mark.parametrize("fn,opname", [(_inline_asm_kernel, "tt.elementwise_inline_asm")])
def test_unsupported_ops_name_op_and_source_line(fn, opname):
    text = compiler.kernel_ttir(fn, dict(x_ptr="*fp32", n="i32"))
    with pytest.raises(UnsupportedError) as e:
        reader.read_ttir(text)
    msg = str(e.value)
    assert opname in msg
    assert "test_reader.py:" in msg, msg
    assert fn.fn.__name__ in msg


def test_malformed_ttir_is_an_input_error():
    from triton_iree import InputError
    with pytest.raises(InputError):
        reader.read_ttir('"builtin.module"() ({ "tt.func"(')


def test_runtime_ifs_become_if_ops_with_their_results():
    import kernels as K
    sig = dict(x_ptr="*fp32", out_ptr="*fp32", n="i32", mode="i32", BLOCK="constexpr")
    k = reader.read_ttir(compiler.kernel_ttir(K.runtime_if_kernel, sig, dict(BLOCK=64)))
    ifs = [op for op in k.walk() if isinstance(op, t.If)]
    assert len(ifs) == 2
    value_if, store_if = ifs
    assert [r.type.mlir() for r in value_if.results] == ["tensor<64xf32>"]    # y, a tile
    assert [sum(isinstance(op, t.Store) for op in b.ops) for b in (store_if.then, store_if.otherwise)] == [1, 1]
    assert not store_if.results


@triton.jit
def _where_max_nan(a, b):
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def _where_min_int(a, b):
    return tl.where(b > a, a, b)


@triton.jit
def _where_max_no_nan_check(a, b):
    return tl.where(a > b, a, b)


@triton.jit
def _or(a, b):
    return a | b


@triton.jit
def _reduce_kernel(x_ptr, out_ptr, OP: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    if OP == 3:
        tl.store(out_ptr, tl.reduce(x > 0, 0, _or).to(x.dtype))
        return
    if OP == 0:
        y = tl.reduce(x, 0, _where_max_nan)
    elif OP == 1:
        y = tl.reduce(x, 0, _where_min_int)
    else:
        y = tl.reduce(x, 0, _where_max_no_nan_check)
    tl.store(out_ptr, y)


@pytest.mark.parametrize("op, dtype, combined_by", [(0, "fp32", "arith.maximumf"), (1, "i32", "arith.minsi"),
                                                    (1, "u16", "arith.minui"), (2, "fp32", None),
                                                    (3, "fp32", "arith.maxui")])
def test_compare_and_select_combiners_are_read_as_their_op(op, dtype, combined_by):
    """A max / min written as tl.where is read as the one op it computes; a float max without
    the NaN check is not arith.maximumf (a NaN on the left is dropped), so it stays as written.
    An or of booleans is read as a max of their values as i32."""
    text = compiler.kernel_ttir(_reduce_kernel, dict(x_ptr=f"*{dtype}", out_ptr=f"*{dtype}", OP="constexpr"),
                                constexprs={"OP": op})
    [red] = [o for o in reader.read_ttir(text).walk() if isinstance(o, t.Reduce)]
    assert red.srcs[0].dtype == ("i32" if op == 3 else dtype.replace("fp", "f").replace("u", "i"))
    names = [o.opname for o in red.combiner.ops]
    assert names == ([combined_by] if combined_by else ["arith.cmpf", "arith.select"])
