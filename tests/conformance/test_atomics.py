"""Atomics: every tl.atomic_* op in tensor and scalar form, masked, with the old values they
return, under contention across programs (programs hitting the same addresses, a histogram, a
spin lock), against Triton's interpreter (same program order: the old values are deterministic)
or torch."""
import pytest
import torch
import triton
import triton.language as tl

import triton_iree

from oracle import interpret

BLOCK = 32


@triton.jit
def rmw_kernel(target_ptr, val_ptr, old_ptr, n, m, OP: tl.constexpr, BLOCK: tl.constexpr):
    # Programs overlap: element i hits target (i % m); within a program the targets differ.
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    ptrs = target_ptr + i % m
    v = tl.load(val_ptr + i, mask=mask)
    if OP == "add":
        old = tl.atomic_add(ptrs, v, mask=mask)
    elif OP == "max":
        old = tl.atomic_max(ptrs, v, mask=mask)
    elif OP == "min":
        old = tl.atomic_min(ptrs, v, mask=mask)
    elif OP == "and":
        old = tl.atomic_and(ptrs, v, mask=mask)
    elif OP == "or":
        old = tl.atomic_or(ptrs, v, mask=mask)
    elif OP == "xor":
        old = tl.atomic_xor(ptrs, v, mask=mask)
    else:
        old = tl.atomic_xchg(ptrs, v, mask=mask)
    tl.store(old_ptr + i, old, mask=mask)


OPS = {"add": ("tl.atomic_add", True), "max": ("tl.atomic_max", True), "min": ("tl.atomic_min", True),
       "and": ("tl.atomic_and", False), "or": ("tl.atomic_or", False), "xor": ("tl.atomic_xor", False),
       "xchg": ("tl.atomic_xchg", True)}
RMW_CASES = [pytest.param(op, dtype, marks=pytest.mark.construct(construct))
             for op, (construct, floats) in OPS.items()
             for dtype in ([torch.int32, torch.int64] + [torch.float32] * floats)] + \
    [pytest.param("add", torch.float16, marks=pytest.mark.construct("tl.atomic_add"))]


def _values(n, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:   # small integers in floats: sums are exact in any order
        return torch.randint(-50, 50, (n,), generator=g).to(dtype)
    return torch.randint(-(1 << 20), 1 << 20, (n,), generator=g, dtype=dtype)


@pytest.mark.parametrize("op, dtype", RMW_CASES)
def test_rmw(op, dtype):
    n, m = 5 * BLOCK - 3, BLOCK + 7        # 5 programs, the last one partly masked
    target, val = _values(m, dtype, 0), _values(n, dtype, 1)
    old = torch.zeros(n, dtype=dtype)
    grid = (triton.cdiv(n, BLOCK),)
    # The interpreter has no float xchg: it exchanges the same bits as int32.
    bits = (lambda x: x.view(torch.int32)) if op == "xchg" and dtype == torch.float32 else (lambda x: x)
    ref = interpret(rmw_kernel, grid, [bits(target), bits(val), bits(old), n, m], OP=op, BLOCK=BLOCK)
    rmw_kernel[grid](target, val, old, n, m, OP=op, BLOCK=BLOCK)
    assert torch.equal(bits(target), ref[0])
    assert torch.equal(bits(old), ref[2])


@triton.jit
def scalar_kernel(counter_ptr, max_ptr, old_ptr):
    pid = tl.program_id(0)
    old = tl.atomic_add(counter_ptr, pid + 1)
    prev = tl.atomic_max(max_ptr, (pid * 7) % 11)
    tl.store(old_ptr + 2 * pid, old)
    tl.store(old_ptr + 2 * pid + 1, prev)


@pytest.mark.construct("tl.atomic_add")
def test_scalar_form():
    grid = (23,)
    counter, mx, old = torch.zeros(1, dtype=torch.int32), torch.full((1,), -1, dtype=torch.int32), \
        torch.zeros(46, dtype=torch.int32)
    ref = interpret(scalar_kernel, grid, [counter, mx, old])
    scalar_kernel[grid](counter, mx, old)
    assert counter.item() == sum(range(1, 24)) and mx.item() == 10
    assert torch.equal(old, ref[2])


@triton.jit
def histogram_kernel(x_ptr, hist_ptr, old_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    b = tl.load(x_ptr + i, mask=mask)
    tl.store(old_ptr + i, tl.atomic_add(hist_ptr + b, 1, mask=mask), mask=mask)


@pytest.mark.construct("tl.atomic_add")
@pytest.mark.parametrize("n", [1000, 4097])
def test_histogram_contention(n):
    # Many programs, and duplicate bins inside each program's tile.
    x = torch.randint(0, 13, (n,), generator=torch.Generator().manual_seed(n), dtype=torch.int32)
    hist, old = torch.zeros(13, dtype=torch.int32), torch.full((n,), -1, dtype=torch.int32)
    histogram_kernel[(triton.cdiv(n, 64),)](x, hist, old, n, BLOCK=64)
    counts = torch.bincount(x, minlength=13)
    assert torch.equal(hist, counts.to(torch.int32))
    for b in range(13):   # each increment of a bin saw a different count before it
        assert sorted(old[x == b].tolist()) == list(range(counts[b].item()))


@triton.jit
def float_max_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    tl.atomic_max(out_ptr + i % 3, tl.load(x_ptr + i, mask=mask), mask=mask)
    tl.atomic_min(out_ptr + 3 + i % 3, tl.load(x_ptr + i, mask=mask), mask=mask)


@pytest.mark.construct("tl.atomic_max")
def test_float_max_min_signs():
    # Triton writes float max / min as integer max / umin on the bits, by sign.
    n = 200
    x = torch.randn(n, generator=torch.Generator().manual_seed(3)) * 100
    out = torch.tensor([-1e30] * 3 + [1e30] * 3)
    float_max_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    idx = torch.arange(n) % 3
    ref = [x[idx == k].max() for k in range(3)] + [x[idx == k].min() for k in range(3)]
    assert torch.equal(out, torch.stack(ref))


@triton.jit
def cas_kernel(x_ptr, cmp_ptr, val_ptr, old_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    # Without a mask, atomic_cas reads all BLOCK lanes: keep them in bounds.
    j = tl.where(mask, i, 0)
    old = tl.atomic_cas(x_ptr + j, tl.load(cmp_ptr + j), tl.load(val_ptr + j))
    tl.store(old_ptr + i, old, mask=mask)


@pytest.mark.construct("tl.atomic_cas")
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32])
def test_cas(dtype):
    n = 3 * BLOCK - 5
    x = torch.randint(0, 3, (n,), generator=torch.Generator().manual_seed(0)).to(dtype)
    cmp = torch.randint(0, 3, (n,), generator=torch.Generator().manual_seed(1)).to(dtype)
    val = torch.arange(n).to(dtype) + 100
    old = torch.zeros(n, dtype=dtype)
    grid = (triton.cdiv(n, BLOCK),)
    ref = interpret(cas_kernel, grid, [x, cmp, val, old, n], BLOCK=BLOCK)
    cas_kernel[grid](x, cmp, val, old, n, BLOCK=BLOCK)
    assert torch.equal(x, ref[0]) and torch.equal(old, ref[3])


@triton.jit
def spin_lock_kernel(lock_ptr, counter_ptr, order_ptr):
    # Every program takes the lock, then does a plain read-modify-write of the counter.
    while tl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    c = tl.load(counter_ptr)
    tl.store(order_ptr + tl.program_id(0), c)
    tl.store(counter_ptr, c + 1)
    tl.atomic_xchg(lock_ptr, 0)


@pytest.mark.construct("tl.atomic_cas")
def test_spin_lock():
    grid = (37,)
    lock, counter = torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    order = torch.full((37,), -1, dtype=torch.int32)
    spin_lock_kernel[grid](lock, counter, order)
    assert lock.item() == 0 and counter.item() == 37
    assert sorted(order.tolist()) == list(range(37))


@triton.jit
def order_kernel(x_ptr, before_ptr, after_ptr, n, BLOCK: tl.constexpr):
    # A load before an atomic keeps the old data; one after it sees the update.
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    before = tl.load(x_ptr + i, mask=mask)
    tl.atomic_add(x_ptr + i, 10.0, mask=mask)
    tl.store(before_ptr + i, before, mask=mask)
    tl.store(after_ptr + i, tl.load(x_ptr + i, mask=mask), mask=mask)


@pytest.mark.construct("tl.atomic_add")
def test_memory_order():
    n = 2 * BLOCK + 3
    x = torch.arange(n, dtype=torch.float32)
    before, after = torch.zeros(n), torch.zeros(n)
    order_kernel[(triton.cdiv(n, BLOCK),)](x, before, after, n, BLOCK=BLOCK)
    assert torch.equal(before, torch.arange(n, dtype=torch.float32))
    assert torch.equal(after, torch.arange(n, dtype=torch.float32) + 10)
    assert torch.equal(x, after)


@triton.jit
def column_sum_kernel(x_ptr, out_ptr, rows, cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # A 2-D atomic whose rows hit the same addresses (a stride-0 dim), from several programs.
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]
    c = tl.arange(0, BLOCK_C)[None, :]
    mask = (r < rows) & (c < cols)
    x = tl.load(x_ptr + r * cols + c, mask=mask)
    tl.atomic_add(out_ptr + c + 0 * r, x, mask=mask)


@pytest.mark.construct("tl.atomic_add")
def test_2d_duplicates():
    rows, cols = 45, 13
    x = torch.randint(-9, 9, (rows, cols), generator=torch.Generator().manual_seed(4)).float()
    out = torch.zeros(cols)
    column_sum_kernel[(triton.cdiv(rows, 8),)](x, out, rows, cols, BLOCK_R=8, BLOCK_C=16)
    assert torch.equal(out, x.sum(0))


@triton.jit
def bf16_add_kernel(x_ptr, y_ptr, idx_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    old = tl.atomic_add(x_ptr + tl.load(idx_ptr + offs, mask=m), tl.load(y_ptr + offs, mask=m), mask=m)
    tl.store(y_ptr + offs, old, mask=m)


@pytest.mark.construct("tl.atomic_add")
def test_bf16_add_rounds_each_add():
    """Each add of a bf16 atomic rounds to bf16 (to nearest even), in the order the elements come:
    programs in order, elements in row-major order, as the serial reference below adds them."""
    g = torch.Generator().manual_seed(5)
    n = 300
    y = torch.randn(n, generator=g).to(torch.bfloat16)
    idx = torch.randint(0, 7, (n,), generator=g, dtype=torch.int32)
    x = torch.randn(7, generator=g).to(torch.bfloat16)
    want, olds = x.clone(), torch.empty_like(y)
    for i in range(n):
        olds[i] = want[idx[i]]
        want[idx[i]] = (want[idx[i]].float() + y[i].float()).to(torch.bfloat16)
    bf16_add_kernel[(triton.cdiv(n, 64),)](x, y, idx, n, BLOCK=64)
    assert torch.equal(x, want) and torch.equal(y, olds)


@triton.jit
def every_other_add_kernel(x_ptr, out_ptr, old_ptr, n, step, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    # Triton specializes step == 1 to a constant: the mask folds to false everywhere.
    mask = (offs < n) & (offs % step != 0)
    old = tl.atomic_add(out_ptr + offs // 2, tl.load(x_ptr + offs, mask=mask), mask=mask)
    tl.store(old_ptr + offs, tl.where(mask, old, -1.0), mask=offs < n)


@pytest.mark.construct("tl.atomic_add")
@pytest.mark.parametrize("step", [1, 2])
def test_mask_folded_to_false(step):
    n = 10
    x = torch.arange(1.0, n + 1)
    out, old = torch.zeros(n // 2), torch.zeros(n)
    every_other_add_kernel[(1,)](x, out, old, n, step, BLOCK=16)
    if step == 1:
        assert torch.equal(out, torch.zeros(n // 2)) and torch.equal(old, torch.full((n,), -1.0))
    else:   # the odd elements, one per bin
        assert torch.equal(out, x[1::2]) and torch.equal(old[1::2], torch.zeros(n // 2))


@pytest.mark.construct("tl.atomic_add")
def test_checked_mode_out_of_bounds():
    x = torch.zeros(100, dtype=torch.int32)
    x[70] = 13                        # one bin past the end, in program 1
    hist, old = torch.zeros(13, dtype=torch.int32), torch.zeros(100, dtype=torch.int32)
    with pytest.raises(triton_iree.DeviceError, match=r"out-of-bounds atomic through 'hist_ptr' in program "
                                                      r"\(1, 0, 0\): element offset 13 ") as e:
        histogram_kernel[(2,)](x, hist, old, 100, BLOCK=64, check_bounds=True)
    assert e.value.access == "atomic"
    assert hist.sum().item() == 64    # program 1's failing atomic was not performed at all
