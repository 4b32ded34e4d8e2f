"""`noinline` @triton.jit functions: the module has several tt.func and tt.call ops; each call
is inlined by the reader. Compared with Triton's interpreter."""
import pytest
import torch
import triton
import triton.language as tl

from oracle import interpret

BLOCK = 16


@triton.jit(noinline=True)
def plus_one(x):
    return x + 1


@triton.jit(noinline=True)
def plus_two(x):
    return plus_one(plus_one(x))


@triton.jit(noinline=True)
def both(x, y):
    return x * 2, y - 1


@triton.jit(noinline=True)
def pick(x, y, out_ptr):
    """Calls in both branches of a runtime `if`, and a store through a pointer argument."""
    if x > y:
        z = plus_one(x)
    else:
        z = plus_two(y)
    a, b = both(z, x)
    tl.store(out_ptr, a + b)


@triton.jit(noinline=True)
def block_of(ptr, n, start, BLOCK: tl.constexpr):
    """Returns a tile and a pointer: a masked load at `ptr + start`, and the pointer past it."""
    offs = start + tl.arange(0, BLOCK)
    return tl.load(ptr + offs, mask=offs < n, other=0), ptr + BLOCK


@triton.jit(noinline=True)
def sign_or_zero(x):
    """Early returns inside the callee."""
    if x > 0:
        return 1
    if x < 0:
        return -1
    return 0


@triton.jit
def scalar_calls_kernel(x_ptr, y_ptr, out_ptr, sign_ptr):
    pid = tl.program_id(0)
    x = tl.load(x_ptr + pid)
    y = tl.load(y_ptr + pid)
    pick(x, y, out_ptr + pid)
    tl.store(sign_ptr + pid, sign_or_zero(x - y))


@triton.jit
def tile_calls_kernel(x_ptr, out_ptr, n, m, BLOCK: tl.constexpr):
    start = tl.program_id(0) * 2 * BLOCK
    a, p = block_of(x_ptr, n, start, BLOCK)
    b = tl.load(p + start + tl.arange(0, BLOCK), mask=start + BLOCK + tl.arange(0, BLOCK) < n, other=0)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, (a + 1) * b, mask=offs < m)


@pytest.mark.construct("noinline @triton.jit function")
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_scalar_calls(dtype):
    torch.manual_seed(0)
    n = 9
    x = torch.randint(-3, 4, (n,)).to(dtype)
    y = torch.randint(-3, 4, (n,)).to(dtype)
    y[0] = x[0]
    args = [x, y, torch.zeros(n, dtype=dtype), torch.full((n,), 5, dtype=torch.int32)]
    ref = interpret(scalar_calls_kernel, (n,), args)
    scalar_calls_kernel[(n,)](*args)
    assert torch.equal(args[2], ref[2]) and torch.equal(args[3], ref[3])
    assert set(ref[3].tolist()) == {-1, 0, 1}


@pytest.mark.construct("noinline @triton.jit function")
@pytest.mark.parametrize("n", [2 * BLOCK - 1, 2 * BLOCK + 1, 6 * BLOCK - 1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_calls_that_return_tiles_and_pointers(dtype, n):
    torch.manual_seed(n)
    x = torch.randn(n).to(dtype)
    grid = (triton.cdiv(n, 2 * BLOCK),)
    m = triton.cdiv(n, 2)
    args = [x, torch.zeros(grid[0] * BLOCK, dtype=dtype), n, m]
    ref = interpret(tile_calls_kernel, grid, args, BLOCK=BLOCK)
    tile_calls_kernel[grid](*args, BLOCK=BLOCK)
    torch.testing.assert_close(args[1][:m], ref[1][:m])
    assert torch.equal(args[1][m:], torch.zeros(grid[0] * BLOCK - m, dtype=dtype))


@triton.jit(noinline=True)
def dot_into(z_ptr, x, N: tl.constexpr):
    offs = tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :]
    z = tl.load(z_ptr + offs)
    tl.store(z_ptr + offs, tl.dot(z, z) + x)


@triton.jit
def dot_call_kernel(z_ptr, x_ptr, N: tl.constexpr):
    dot_into(z_ptr, tl.load(x_ptr), N)


@pytest.mark.construct("noinline @triton.jit function")
def test_call_that_loads_dots_and_stores_the_same_buffer():
    torch.manual_seed(0)
    z = torch.randn(16, 16)
    x = torch.tensor([0.5])
    want = z @ z + 0.5
    dot_call_kernel[(1,)](z, x, N=16)
    torch.testing.assert_close(z, want)


RECURSIVE_TTIR = """
"builtin.module"() ({
  "tt.func"() <{function_type = (!tt.ptr<f32>) -> (), sym_name = "k", sym_visibility = "public"}> ({
  ^bb0(%p: !tt.ptr<f32>):
    %x = "tt.load"(%p) <{cache = 1 : i32, evict = 1 : i32, isVolatile = false, operandSegmentSizes = array<i32: 1, 0, 0>}> : (!tt.ptr<f32>) -> f32
    %y = "tt.call"(%x) <{callee = @m.again__fp32__}> : (f32) -> f32
    "tt.store"(%p, %y) <{cache = 1 : i32, evict = 1 : i32}> : (!tt.ptr<f32>, f32) -> ()
    "tt.return"() : () -> ()
  }) {noinline = false} : () -> ()
  "tt.func"() <{function_type = (f32) -> f32, sym_name = "m.again__fp32__", sym_visibility = "private"}> ({
  ^bb0(%x: f32):
    %y = "tt.call"(%x) <{callee = @m.again__fp32__}> : (f32) -> f32
    "tt.return"(%y) : (f32) -> ()
  }) {noinline = true} : () -> ()
}) : () -> ()
"""


@pytest.mark.construct("noinline @triton.jit function")
def test_recursion_is_unsupported():
    from triton_iree import UnsupportedError
    from triton_iree.reader import read_ttir
    with pytest.raises(UnsupportedError, match="recursive call of the @triton.jit function 'again'"):
        read_ttir(RECURSIVE_TTIR)
