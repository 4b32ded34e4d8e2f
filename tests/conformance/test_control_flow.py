"""Control flow: `while` loops with data-dependent conditions, early `return`, against Triton's
interpreter."""
import pytest
import torch
import triton
import triton.language as tl

from oracle import interpret

BLOCK = 16
SIZES = [BLOCK - 1, BLOCK + 1, 3 * BLOCK - 1]


def _run_both(kernel, grid, args, out_index, **meta):
    """Launches `kernel` here and in the interpreter; returns (ours, the interpreter's) output."""
    ref = interpret(kernel, grid, args, **meta)[out_index]
    kernel[grid](*args, **meta)
    return args[out_index], ref


@triton.jit
def halve_until_kernel(x_ptr, out_ptr, count_ptr, n, limit, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    big = tl.max(tl.abs(x), axis=0)
    steps = 0
    while big > limit:
        x = x // 2 if x.dtype.is_int() else x * 0.5
        big = big // 2 if x.dtype.is_int() else big * 0.5
        steps += 1
    tl.store(out_ptr + offs, x, mask=m)
    tl.store(count_ptr + tl.program_id(0), steps)


@pytest.mark.construct("while loop")
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_while_carries_a_tile_and_scalars(dtype, n):
    torch.manual_seed(n)
    x = (torch.randn(n) * 1000).to(dtype)
    grid = (triton.cdiv(n, BLOCK),)
    args = [x, torch.zeros(n, dtype=dtype), torch.full((grid[0],), -1, dtype=torch.int32), n, 3]
    ref = interpret(halve_until_kernel, grid, args, BLOCK=BLOCK)
    halve_until_kernel[grid](*args, BLOCK=BLOCK)
    assert torch.equal(args[1], ref[1]) and torch.equal(args[2], ref[2])
    assert ref[2].min() > 0


@triton.jit
def walk_rows_kernel(x_ptr, lens_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    """Sums rows 0..len-1 of column block pid, where len is read from memory: the loop walks a
    pointer tile and a scalar pointer."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    rows = tl.load(lens_ptr + tl.program_id(0))
    p = x_ptr + offs
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    r = 0
    while r < rows:
        acc += tl.load(p, mask=m, other=0).to(tl.float32)
        p += stride
        r += 1
    tl.store(out_ptr + offs, acc, mask=m)


@pytest.mark.construct("while loop")
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_while_walks_a_pointer_with_a_bound_from_memory(dtype, n):
    torch.manual_seed(n)
    grid = (triton.cdiv(n, BLOCK),)
    x = torch.randn(7, n).to(dtype)
    lens = torch.randint(0, 8, (grid[0],), dtype=torch.int32)
    ours, ref = _run_both(walk_rows_kernel, grid, [x, lens, torch.zeros(n), n, n], 2, BLOCK=BLOCK)
    torch.testing.assert_close(ours, ref)


@triton.jit
def double_in_place_kernel(buf_ptr, n, limit, BLOCK: tl.constexpr):
    """Loads and stores the same addresses inside a while loop: each iteration must see the
    previous iteration's store."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    top = tl.max(tl.load(buf_ptr + offs, mask=m, other=0), axis=0)
    while top < limit:
        v = tl.load(buf_ptr + offs, mask=m, other=0)
        tl.store(buf_ptr + offs, v * 2 + 1, mask=m)
        top = tl.max(tl.load(buf_ptr + offs, mask=m, other=0), axis=0)


@pytest.mark.construct("while loop")
@pytest.mark.parametrize("n", SIZES)
def test_while_stores_then_loads_the_same_buffer(n):
    torch.manual_seed(n)
    grid = (triton.cdiv(n, BLOCK),)
    buf = torch.randint(0, 5, (n,), dtype=torch.int32)
    ours, ref = _run_both(double_in_place_kernel, grid, [buf, n, 1000], 0, BLOCK=BLOCK)
    assert torch.equal(ours, ref)
    assert ref.max() >= 1000


@pytest.mark.construct("while loop")
def test_while_accesses_are_checked_with_bounds_checks():
    import triton_iree
    x = torch.randn(3, BLOCK - 1)
    out = torch.zeros(BLOCK - 1)
    args = [x, torch.tensor([3], dtype=torch.int32), out, BLOCK - 1, BLOCK - 1]
    walk_rows_kernel[(1,)](*args, BLOCK=BLOCK, check_bounds=True)
    torch.testing.assert_close(out, x.sum(0))
    args[1][0] = 4     # one row past the tensor
    with pytest.raises(triton_iree.DeviceError, match="out-of-bounds load through 'x_ptr'"):
        walk_rows_kernel[(1,)](*args, BLOCK=BLOCK, check_bounds=True)


@triton.jit
def early_return_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    if pid % 2 == 1:
        tl.store(out_ptr + offs, -x, mask=m)
        return
    tl.store(out_ptr + offs, x * 2, mask=m)


@triton.jit
def nested_early_return_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """The code after the outer `if` is reached from both of its branches, with different `y`."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = x
    if pid % 3 == 1:
        y = x + 1
        if pid > 3:
            tl.store(out_ptr + offs, -x, mask=m)
            return
    else:
        y = x * 3
    tl.store(out_ptr + offs, y * 2, mask=m)


@triton.jit
def return_in_while_cond_kernel(x_ptr, out_ptr, n, limit, BLOCK: tl.constexpr):
    """An early return before a while loop whose trip count depends on the data."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    total = tl.sum(x, axis=0)
    if total < 0:
        return
    while total < limit:
        x = x + 1
        total = tl.sum(tl.where(m, x, 0), axis=0)
    tl.store(out_ptr + offs, x, mask=m)


@pytest.mark.construct("early return")
@pytest.mark.parametrize("n", [BLOCK + 1, 7 * BLOCK - 1])
@pytest.mark.parametrize("kernel", [early_return_kernel, nested_early_return_kernel])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int32])
def test_early_return(kernel, dtype, n):
    torch.manual_seed(n)
    x = (torch.randn(n) * 10).to(dtype)
    grid = (triton.cdiv(n, BLOCK),)
    ours, ref = _run_both(kernel, grid, [x, torch.full((n,), 7, dtype=dtype), n], 1, BLOCK=BLOCK)
    assert torch.equal(ours, ref)


@pytest.mark.construct("early return")
@pytest.mark.parametrize("n", SIZES)
def test_early_return_before_a_while_loop(n):
    torch.manual_seed(n)
    x = torch.randint(-20, 20, (n,), dtype=torch.int32)
    grid = (triton.cdiv(n, BLOCK),)
    ours, ref = _run_both(return_in_while_cond_kernel, grid, [x, torch.full((n,), 7, dtype=torch.int32), n, 100],
                          1, BLOCK=BLOCK)
    assert torch.equal(ours, ref)


@triton.jit
def barrier_kernel(x_ptr, tmp_ptr, out_ptr, BLOCK: tl.constexpr):
    # Threads exchange values through memory around a barrier: a rotation by one.
    base = tl.program_id(0) * BLOCK
    offs = tl.arange(0, BLOCK)
    tl.store(tmp_ptr + base + offs, tl.load(x_ptr + base + offs) * 2)
    tl.debug_barrier()
    tl.store(out_ptr + base + offs, tl.load(tmp_ptr + base + (offs + 1) % BLOCK))


@pytest.mark.construct("tl.debug_barrier")
def test_debug_barrier_orders_memory_within_a_program():
    x = torch.randn(3, 32)
    tmp, out = torch.zeros(3, 32), torch.zeros(3, 32)
    barrier_kernel[(3,)](x, tmp, out, BLOCK=32)
    assert torch.equal(out, torch.roll(x * 2, -1, dims=1))
