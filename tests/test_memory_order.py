"""Memory order inside one program: loads and stores to the same memory take effect in
program order (read-after-write, write-after-read, write-after-write), straight-line, in
loops, under `if`, through gathers and scatters, scalars and 2-D tiles, and through pointer
arguments that share memory. Expected values are computed with torch from the program's
sequential semantics. Sizes cover the block-size edges (partial and full programs)."""
import pytest
import torch
import triton
import triton.language as tl

BLOCK = 64
SIZES = [1, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK - 1]


@triton.jit
def swap_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x_ptr + offs, mask=m)
    b = tl.load(y_ptr + offs, mask=m)
    tl.store(x_ptr + offs, b, mask=m)
    tl.store(y_ptr + offs, a, mask=m)


@triton.jit
def raw_kernel(p_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(p_ptr + offs, mask=m)
    tl.store(p_ptr + offs, v * 2, mask=m)
    w = tl.load(p_ptr + offs, mask=m)
    tl.store(p_ptr + offs, w + 1, mask=m)


@triton.jit
def war_other_buffer_kernel(p_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # The old p is stored to out only after p was overwritten.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(p_ptr + offs, mask=m)
    tl.store(p_ptr + offs, v * 3, mask=m)
    tl.store(out_ptr + offs, v + 1, mask=m)


@triton.jit
def waw_kernel(p_ptr, n, BLOCK: tl.constexpr):
    # Two stores to overlapping addresses: the second wins where they overlap.
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(p_ptr + offs, offs.to(tl.float32), mask=offs < n)
    half = pid * BLOCK + tl.arange(0, BLOCK // 2) + BLOCK // 4
    tl.store(p_ptr + half, -1.0 - half.to(tl.float32), mask=half < n)


@triton.jit
def shift_kernel(p_ptr, n, BLOCK: tl.constexpr):
    # One program moves [1, n) to [0, n - 1) and then [0, n - 1) to [1, n): elements are
    # read before any of them is written.
    offs = tl.arange(0, BLOCK)
    a = tl.load(p_ptr + offs + 1, mask=offs + 1 < n)
    tl.store(p_ptr + offs, a, mask=offs + 1 < n)
    b = tl.load(p_ptr + offs, mask=offs < n - 1)
    tl.store(p_ptr + offs + 1, b * 10, mask=offs < n - 1)


@triton.jit
def loop_kernel(p_ptr, q_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    for _ in range(3):
        r = tl.load(q_ptr + offs, mask=m)
        tl.store(q_ptr + offs, r * 0.5 + tl.load(p_ptr + offs, mask=m), mask=m)


@triton.jit
def loop_carried_kernel(q_ptr, n, BLOCK: tl.constexpr):
    # acc carries old values of q across the stores of later iterations.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    acc = tl.load(q_ptr + offs, mask=m)
    for i in range(4):
        r = tl.load(q_ptr + offs, mask=m)
        tl.store(q_ptr + offs, r + acc, mask=m)
        acc = acc * 2 + i


@triton.jit
def if_kernel(p_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(p_ptr + offs, mask=m)
    if pid % 2 == 0:
        tl.store(p_ptr + offs, v + 100, mask=m)
    w = tl.load(p_ptr + offs, mask=m)
    tl.store(out_ptr + offs, w + v, mask=m)


@triton.jit
def gather_in_place_kernel(p_ptr, idx_ptr, n, BLOCK: tl.constexpr):
    # p[offs] = p[idx[offs]] for one program: a permutation applied in place.
    offs = tl.arange(0, BLOCK)
    m = offs < n
    i = tl.load(idx_ptr + offs, mask=m, other=0)
    g = tl.load(p_ptr + i, mask=m)
    tl.store(p_ptr + offs, g, mask=m)


@triton.jit
def scatter_then_load_kernel(p_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    m = offs < n
    i = tl.load(idx_ptr + offs, mask=m, other=0)
    tl.store(p_ptr + i, offs.to(tl.float32) * 2, mask=m)
    tl.store(out_ptr + offs, tl.load(p_ptr + offs, mask=m), mask=m)


@triton.jit
def scalar_counter_kernel(c_ptr, steps):
    v = tl.load(c_ptr)
    tl.store(c_ptr, v + 1)
    w = tl.load(c_ptr)
    tl.store(c_ptr, w * 2)
    for _ in range(steps):
        x = tl.load(c_ptr)
        tl.store(c_ptr, x + 3)


@triton.jit
def transpose_in_place_kernel(p_ptr, N: tl.constexpr):
    r = tl.arange(0, N)[:, None]
    c = tl.arange(0, N)[None, :]
    x = tl.load(p_ptr + r * N + c)
    tl.store(p_ptr + c * N + r, x)


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=m), mask=m)


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


def grid(n):
    return (triton.cdiv(n, BLOCK),)


def guarded(values, pad=9, fill=-7.0):
    """`values` as the front of a bigger buffer whose tail must stay `fill`."""
    buf = torch.full((values.numel() + pad,), fill, dtype=values.dtype)
    buf[:values.numel()] = values
    return buf, buf[:values.numel()]


@pytest.mark.parametrize("n", SIZES)
def test_swap_war(n):
    x0, y0 = torch.rand(n), torch.rand(n)
    xb, x = guarded(x0.clone())
    yb, y = guarded(y0.clone())
    swap_kernel[grid(n)](x, y, n, BLOCK=BLOCK)
    assert torch.equal(x, y0) and torch.equal(y, x0)
    assert torch.all(xb[n:] == -7) and torch.all(yb[n:] == -7)


@pytest.mark.parametrize("n", SIZES)
def test_load_after_store_raw(n):
    p = torch.rand(n)
    ref = p * 2 + 1
    raw_kernel[grid(n)](p, n, BLOCK=BLOCK)
    torch.testing.assert_close(p, ref, rtol=0, atol=0)


@pytest.mark.parametrize("n", SIZES)
def test_old_value_used_after_store(n):
    p0 = torch.rand(n)
    p, out = p0.clone(), torch.empty(n)
    war_other_buffer_kernel[grid(n)](p, out, n, BLOCK=BLOCK)
    torch.testing.assert_close(p, p0 * 3, rtol=0, atol=0)
    torch.testing.assert_close(out, p0 + 1, rtol=0, atol=0)


@pytest.mark.parametrize("n", SIZES)
def test_waw_second_store_wins(n):
    pb, p = guarded(torch.zeros(n))
    waw_kernel[grid(n)](p, n, BLOCK=BLOCK)
    ref = torch.arange(n, dtype=torch.float32)
    for pid in range(triton.cdiv(n, BLOCK)):
        half = torch.arange(BLOCK // 2) + pid * BLOCK + BLOCK // 4
        half = half[half < n]
        ref[half] = -1.0 - half.float()
    torch.testing.assert_close(p, ref, rtol=0, atol=0)
    assert torch.all(pb[n:] == -7)


@pytest.mark.parametrize("n", [2, 17, BLOCK])
def test_shift_reads_before_writes(n):
    p0 = torch.rand(n)
    pb, p = guarded(p0.clone())
    shift_kernel[(1,)](p, n, BLOCK=BLOCK)
    ref = p0.clone()
    ref[:-1] = p0[1:].clone()
    after = ref.clone()
    ref[1:] = after[:-1] * 10
    torch.testing.assert_close(p, ref, rtol=0, atol=0)
    assert torch.all(pb[n:] == -7)


@pytest.mark.parametrize("n", SIZES)
def test_loop_loads_and_stores_one_row(n):
    p, q = torch.rand(n), torch.rand(n)
    ref = q.clone()
    for _ in range(3):
        ref = ref * 0.5 + p
    loop_kernel[grid(n)](p, q, n, BLOCK=BLOCK)
    torch.testing.assert_close(q, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n", SIZES)
def test_loop_carried_old_values(n):
    q = torch.rand(n)
    ref, acc = q.clone(), q.clone()
    for i in range(4):
        ref = ref + acc
        acc = acc * 2 + i
    loop_carried_kernel[grid(n)](q, n, BLOCK=BLOCK)
    torch.testing.assert_close(q, ref, rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("n", SIZES)
def test_store_under_if_then_load(n):
    p0 = torch.rand(n)
    p, out = p0.clone(), torch.empty(n)
    if_kernel[grid(n)](p, out, n, BLOCK=BLOCK)
    even = (torch.arange(n) // BLOCK) % 2 == 0
    new_p = torch.where(even, p0 + 100, p0)
    torch.testing.assert_close(p, new_p, rtol=0, atol=0)
    torch.testing.assert_close(out, new_p + p0, rtol=0, atol=0)


@pytest.mark.parametrize("n", [1, 5, BLOCK - 1, BLOCK])
def test_gather_then_store_same_buffer(n):
    torch.manual_seed(n)
    p0 = torch.rand(n)
    idx = torch.randperm(n).to(torch.int32)
    p = p0.clone()
    gather_in_place_kernel[(1,)](p, idx, n, BLOCK=BLOCK)
    torch.testing.assert_close(p, p0[idx.long()], rtol=0, atol=0)


@pytest.mark.parametrize("n", [1, 5, BLOCK - 1, BLOCK])
def test_scatter_then_load(n):
    torch.manual_seed(n)
    idx = torch.randperm(n).to(torch.int32)
    p, out = torch.rand(n), torch.empty(n)
    scatter_then_load_kernel[(1,)](p, idx, out, n, BLOCK=BLOCK)
    ref = torch.empty(n)
    ref[idx.long()] = torch.arange(n, dtype=torch.float32) * 2
    torch.testing.assert_close(p, ref, rtol=0, atol=0)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


def test_scalar_read_modify_write():
    c = torch.tensor([5.0, -7.0])
    scalar_counter_kernel[(1,)](c, 4)
    assert c.tolist() == [(5.0 + 1) * 2 + 3 * 4, -7.0]


@pytest.mark.parametrize("N", [4, 16])
def test_transpose_in_place(N):
    p0 = torch.rand(N, N)
    p = p0.clone()
    transpose_in_place_kernel[(1,)](p, N=N)
    torch.testing.assert_close(p, p0.t(), rtol=0, atol=0)


# -- pointer arguments that share memory ---------------------------------------------------

@pytest.mark.parametrize("n", SIZES)
def test_in_place_add_out_is_x(n):
    x0, y = torch.rand(n), torch.rand(n)
    x = x0.clone()
    add_kernel[grid(n)](x, y, x, n, BLOCK=BLOCK)
    torch.testing.assert_close(x, x0 + y, rtol=0, atol=0)


@pytest.mark.parametrize("n", SIZES)
def test_swap_same_tensor_twice(n):
    x0 = torch.rand(n)
    x = x0.clone()
    swap_kernel[grid(n)](x, x, n, BLOCK=BLOCK)
    torch.testing.assert_close(x, x0, rtol=0, atol=0)


@pytest.mark.parametrize("n", [2, 17, BLOCK])
def test_overlapping_views_copy_like_memmove(n):
    # One program: every load happens before every store, so dst = old src (memmove).
    buf0 = torch.rand(n + 1)
    buf = buf0.clone()
    copy_kernel[(1,)](buf[:n], buf[1:], n, BLOCK=BLOCK)
    torch.testing.assert_close(buf[1:], buf0[:n], rtol=0, atol=0)
    assert buf[0] == buf0[0]


@pytest.mark.parametrize("n", [2, 17, BLOCK])
def test_overlapping_views_written_and_read(n):
    # war_other_buffer with out = p shifted by one: p[i] = 3 p0[i], then out[i] = p0[i] + 1.
    buf0 = torch.rand(n + 1)
    buf = buf0.clone()
    war_other_buffer_kernel[(1,)](buf[:n], buf[1:], n, BLOCK=BLOCK)
    ref = buf0.clone()
    ref[:n] = buf0[:n] * 3
    ref[1:] = buf0[:n] + 1
    torch.testing.assert_close(buf, ref, rtol=0, atol=0)


def test_disjoint_arguments_use_the_copy_free_module(monkeypatch):
    """Without shared memory the launch runs the module whose loads are views."""
    from triton_iree import runtime
    used = []
    real = runtime.LoadedKernel._invoke

    def spy(self, ctx, args):
        used.append(self.aliasing)
        return real(self, ctx, args)

    monkeypatch.setattr(runtime.LoadedKernel, "_invoke", spy)
    x, y, out = torch.rand(100), torch.rand(100), torch.empty(100)
    add_kernel[grid(100)](x, y, out, 100, BLOCK=BLOCK)
    add_kernel[grid(100)](x, y, x, 100, BLOCK=BLOCK)
    assert used == [False, True]


# -- which loads are snapshots ------------------------------------------------------------

def _snapshots(fn, sig, consts, may_alias=False):
    from triton_iree import analysis
    from triton_iree.memory_order import snapshot_loads
    from helpers import tile_program
    kernel = tile_program(fn, sig, consts)
    facts = analysis.analyze(kernel)
    loads = [op for op in kernel.walk() if type(op).__name__ == "Load"]
    snap = snapshot_loads(kernel, facts, may_alias)
    return [id(op) in snap for op in loads]


def test_in_place_elementwise_needs_no_copy():
    @triton.jit
    def scale_in_place(p_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(p_ptr + offs, tl.load(p_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    assert _snapshots(scale_in_place, dict(p_ptr="*fp32", n="i32", BLOCK="constexpr"),
                      dict(BLOCK=64)) == [False]


def test_snapshots_of_swap_and_corpus():
    sig = dict(x_ptr="*fp32", y_ptr="*fp32", n="i32", BLOCK="constexpr")
    # y is read (by the store to x) before the store to y: only x must be copied.
    assert _snapshots(swap_kernel, sig, dict(BLOCK=64)) == [True, False]
    add_sig = dict(x_ptr="*fp32", y_ptr="*fp32", out_ptr="*fp32", n="i32", BLOCK="constexpr")
    # Distinct buffers: no load is overtaken; sharing memory: both are.
    assert _snapshots(add_kernel, add_sig, dict(BLOCK=64)) == [False, False]
    assert _snapshots(add_kernel, add_sig, dict(BLOCK=64), may_alias=True) == [True, True]


def test_corpus_kernels_are_copy_free():
    """The corpus kernels read and write distinct buffers: their modules make no copies."""
    import kernels as K
    from helpers import MATMUL_CONSTS, MATMUL_SIG, facts_and_module, tile_program
    for fn, sig, consts in [
            (K.add_kernel, dict(x_ptr="*fp32", y_ptr="*fp32", out_ptr="*fp32", n_elements="i32",
                                BLOCK_SIZE="constexpr"), dict(BLOCK_SIZE=1024)),
            (K.matmul_kernel, MATMUL_SIG, MATMUL_CONSTS)]:
        _, module = facts_and_module(tile_program(fn, sig, consts))
        assert "bufferization.alloc_tensor" not in module


@triton.jit
def read_in_loop_kernel(p_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # x is loaded once and read in every iteration, after the previous iteration's store to p.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(p_ptr + offs, mask=m)
    for i in range(3):
        tl.store(out_ptr + offs + i * n, x, mask=m)
        tl.store(p_ptr + offs, tl.full([BLOCK], i, tl.float32), mask=m)


@pytest.mark.parametrize("n", SIZES)
def test_value_loaded_before_loop_read_after_store_in_loop(n):
    p0 = torch.rand(n)
    p, out = p0.clone(), torch.empty(3 * n)
    read_in_loop_kernel[grid(n)](p, out, n, BLOCK=BLOCK)
    torch.testing.assert_close(out, p0.repeat(3), rtol=0, atol=0)
    torch.testing.assert_close(p, torch.full((n,), 2.0), rtol=0, atol=0)


@triton.jit
def store_if_big_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr, FROM_Y: tl.constexpr, TILE: tl.constexpr):
    # The stored values are a constant or a loaded tile, and the load of x[0] is a snapshot (a
    # store to x follows it): nothing in the dispatch computes.
    if TILE:
        big = tl.load(x_ptr + tl.arange(0, 1)).item() > 42
    else:
        big = tl.load(x_ptr) > 42
    if big:
        if FROM_Y:
            tl.store(x_ptr + 1 + tl.arange(0, BLOCK), tl.load(y_ptr + tl.arange(0, BLOCK)))
        else:
            tl.store(x_ptr, 7)


@pytest.mark.parametrize("first", [45, 40])
@pytest.mark.parametrize("from_y, tile", [(False, False), (False, True), (True, False)])
def test_store_under_a_condition_on_the_same_buffer(first, from_y, tile):
    x = torch.tensor([first, 0, 0, 0, 0], dtype=torch.int32)
    y = torch.tensor([1, 2, 3, 4], dtype=torch.int32)
    store_if_big_kernel[(1,)](x, y, BLOCK=4, FROM_Y=from_y, TILE=tile)
    want = torch.tensor([first, 0, 0, 0, 0], dtype=torch.int32)
    if first > 42:
        if from_y:
            want[1:] = y
        else:
            want[0] = 7
    assert torch.equal(x, want)


@triton.jit
def stats_then_in_place_kernel(p_ptr, out_ptr, n, BLOCK: tl.constexpr, KEEP_LAST: tl.constexpr):
    # A first loop reads p into scalars (and, with KEEP_LAST, carries its last loaded tile
    # out); a second loop overwrites p; then the scalars and that tile are read.
    r = tl.arange(0, BLOCK)
    s = 0.0
    mx = float("-inf")
    last = tl.zeros([BLOCK], tl.float32)
    for i in range(0, n, BLOCK):
        x = tl.load(p_ptr + i + r, mask=i + r < n, other=0.0)
        s += tl.sum(x)
        mx = tl.maximum(mx, tl.max(tl.where(i + r < n, x, float("-inf"))))
        if KEEP_LAST:
            last = x
    for i in range(0, n, BLOCK):
        x = tl.load(p_ptr + i + r, mask=i + r < n)
        tl.store(p_ptr + i + r, x - s / n, mask=i + r < n)
    tl.store(out_ptr + r, last + mx)


STATS_SIG = dict(p_ptr="*fp32", out_ptr="*fp32", n="i32", BLOCK="constexpr", KEEP_LAST="constexpr")


def test_scalars_a_loop_computes_from_loads_need_no_copy():
    # The sum and max are final when the first loop ends, before the second loop's stores;
    # the second loop's load is overwritten in place, in its iteration, at addresses that move
    # with the loop; a tile carried out of the first loop is still read after the stores.
    assert _snapshots(stats_then_in_place_kernel, STATS_SIG, dict(BLOCK=64, KEEP_LAST=False)) == [False, False]
    assert _snapshots(stats_then_in_place_kernel, STATS_SIG, dict(BLOCK=64, KEEP_LAST=True)) == [True, False]


def test_in_place_in_a_loop_at_fixed_addresses_is_copied():
    # q is loaded and stored at the same addresses in every iteration: a view could be
    # hoisted out of the loop, before the previous iteration's store.
    sig = dict(p_ptr="*fp32", q_ptr="*fp32", n="i32", BLOCK="constexpr")
    assert _snapshots(loop_kernel, sig, dict(BLOCK=64)) == [True, False]


@pytest.mark.parametrize("keep_last", [False, True])
@pytest.mark.parametrize("n", SIZES)
def test_scalars_and_tiles_from_a_loop_read_after_stores(n, keep_last):
    p0 = torch.randn(n)
    pb, p = guarded(p0.clone())
    out = torch.empty(BLOCK)
    stats_then_in_place_kernel[(1,)](p, out, n, BLOCK=BLOCK, KEEP_LAST=keep_last)
    torch.testing.assert_close(p, p0 - p0.sum() / n, rtol=1e-5, atol=1e-5)
    last = torch.zeros(BLOCK)
    if keep_last:
        start = (n - 1) // BLOCK * BLOCK
        last[:n - start] = p0[start:]
    torch.testing.assert_close(out, last + p0.max(), rtol=0, atol=0)
    assert torch.all(pb[n:] == -7)


@triton.jit
def skip_or_in_place_kernel(p_ptr, flag_ptr, n, BLOCK: tl.constexpr):
    # A row is zeroed where its flag is set (and the program returns), else scaled by its max.
    row = tl.program_id(0)
    p_ptr += row * n
    r = tl.arange(0, BLOCK)
    if tl.load(flag_ptr + row) != 0:
        for i in range(0, n, BLOCK):
            tl.store(p_ptr + i + r, 0.0, mask=i + r < n)
        return
    mx = float("-inf")
    for i in range(0, n, BLOCK):
        mx = tl.maximum(mx, tl.max(tl.load(p_ptr + i + r, mask=i + r < n, other=float("-inf"))))
    for i in range(0, n, BLOCK):
        x = tl.load(p_ptr + i + r, mask=i + r < n)
        tl.store(p_ptr + i + r, x / mx, mask=i + r < n)


def test_stores_in_the_other_branch_of_an_if_need_no_copy():
    sig = dict(p_ptr="*fp32", flag_ptr="*i32", n="i32", BLOCK="constexpr")
    assert _snapshots(skip_or_in_place_kernel, sig, dict(BLOCK=64)) == [False, False, False]


@pytest.mark.parametrize("n", SIZES)
def test_skip_or_in_place_rows(n):
    p0 = torch.rand(4, n) + 0.5
    flags = torch.tensor([0, 1, 0, 1], dtype=torch.int32)
    pb, p = guarded(p0.clone().reshape(-1))
    skip_or_in_place_kernel[(4,)](p, flags, n, BLOCK=BLOCK)
    want = p0 / p0.max(1, keepdim=True).values
    want[flags == 1] = 0
    torch.testing.assert_close(p.view(4, n), want, rtol=0, atol=0)
    assert torch.all(pb[4 * n:] == -7)


@triton.jit
def sliding_in_place_kernel(p_ptr, n, steps, BLOCK: tl.constexpr):
    # Each iteration rewrites, in place, a window one element past the previous one: it reads
    # elements the previous iteration wrote.
    r = tl.arange(0, BLOCK)
    for i in range(0, steps):
        x = tl.load(p_ptr + i + r, mask=i + r < n)
        tl.store(p_ptr + i + r, x * 0.5 + i, mask=i + r < n)


@pytest.mark.parametrize("n", SIZES)
def test_in_place_windows_that_overlap_between_iterations(n):
    assert _snapshots(sliding_in_place_kernel, dict(p_ptr="*fp32", n="i32", steps="i32", BLOCK="constexpr"),
                      dict(BLOCK=BLOCK)) == [False]
    p0 = torch.rand(n)
    pb, p = guarded(p0.clone())
    steps = n // 2 + 1
    sliding_in_place_kernel[(1,)](p, n, steps, BLOCK=BLOCK)
    want = p0.clone()
    for i in range(steps):
        want[i:i + BLOCK] = want[i:i + BLOCK] * 0.5 + i
    torch.testing.assert_close(p, want, rtol=0, atol=0)
    assert torch.all(pb[n:] == -7)


def test_masked_in_place_stores_in_loops_copy_nothing():
    # Without snapshots, a masked store in a loop stores its computed tile as it is: a copy of
    # 128 KiB per stored tile is what a 32768-wide row cannot afford on the CPU's stack.
    from helpers import facts_and_module, tile_program
    _, module = facts_and_module(tile_program(stats_then_in_place_kernel, STATS_SIG, dict(BLOCK=64, KEEP_LAST=False)))
    assert "bufferization.alloc_tensor() copy(" not in module
    _, module = facts_and_module(tile_program(loop_kernel, dict(p_ptr="*fp32", q_ptr="*fp32", n="i32",
                                                                BLOCK="constexpr"), dict(BLOCK=64)))
    assert "linalg.generic" in _alloc_copy_sources(module)   # from a snapshot: still copied


def _alloc_copy_sources(module: str) -> list[str]:
    """The op producing the tile each `bufferization.alloc_tensor() copy(...)` of `module` copies."""
    from iree.compiler import ir
    from helpers import nested_ops
    with ir.Context():
        parsed = ir.Module.parse(module)   # alive while its ops are read
        return [op.operands[0].owner.name for op in nested_ops(parsed.operation)
                if op.name == "bufferization.alloc_tensor" and " copy(" in str(op)]
