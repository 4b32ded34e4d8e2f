"""The kernel corpus, end to end through kernel[grid](...), checked against torch.

Sizes run through the block-size edge set (`edge_sizes`: 1, BLOCK-1, BLOCK, BLOCK+1,
k*BLOCK-1); outputs are views into larger buffers so that elements the kernel must not touch can
be checked. Tests marked `isolated` put their tensors at the end of mapped memory (`guarded`), so
an access past the last element crashes; they run in a process of their own.
"""
import pytest
import torch
import triton
import triton.language as tl

import kernels as K
from helpers import assert_fp16_rounding_of, edge_sizes, guarded


def padded(shape, fill=7.0, dtype=torch.float32, pad=13):
    """A tensor of `shape` that is a view into a larger buffer (a tail of `pad` guard values)."""
    n = 1
    for s in shape:
        n *= s
    buf = torch.full((n + pad,), fill, dtype=dtype)
    return buf, buf[:n].view(shape)


@pytest.mark.parametrize("n", edge_sizes(1024) + [98432 + 5])
def test_vector_add(seeded, n):
    x, y = torch.rand(n), torch.rand(n)
    buf, out = padded((n,))
    K.run_add(x, y, out)
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)
    assert torch.all(buf[n:] == 7.0), "elements past n were written"


def _filled(n, fill, dtype=torch.float32):
    t = guarded(n, dtype)
    t.copy_(fill if isinstance(fill, torch.Tensor) else torch.full((n,), fill, dtype=dtype))
    return t


@pytest.mark.isolated
@pytest.mark.parametrize("block", [16, 1024])
def test_vector_add_reads_and_writes_nothing_past_n(seeded, block):
    # The tensors end where unmapped memory begins: a load or store of element n crashes.
    for n in edge_sizes(block):
        x, y, out = _filled(n, torch.rand(n)), _filled(n, torch.rand(n)), _filled(n, 7.0)
        K.run_add(x, y, out, BLOCK_SIZE=block)
        assert torch.equal(out, x + y), n


@pytest.mark.isolated
@pytest.mark.parametrize("form", range(4))
def test_masks_in_every_comparison_form(seeded, form):
    # lo <= i < hi written with <, <=, > and >= (the index on either side): the first and the
    # last valid element are where a bound normalised one off shows.
    B = 64
    for n in edge_sizes(B):
        for lo in (0, 1, n // 2):
            x, out = _filled(n, torch.randn(n)), _filled(n, 7.0)
            K.mask_forms_kernel[(triton.cdiv(n, B),)](x, out, lo, n, BLOCK=B, FORM=form)
            ref = torch.full((n,), 7.0)
            ref[lo:] = x[lo:] + 1
            assert torch.equal(out, ref), (n, lo)


@triton.jit
def _row_masks_kernel(x_ptr, out_ptr, M, N, L, BLOCK: tl.constexpr):
    # Row pid (a one-element range, which Triton folds to a scalar) exists when L <= pid < M;
    # the load's pointer does not depend on it, the store's does.
    pid = tl.program_id(0)
    r = pid + tl.arange(0, 1)
    cols = tl.arange(0, BLOCK)
    m = (r[:, None] < M) & (r[:, None] >= L) & (cols[None, :] < N)
    x = tl.load(x_ptr + cols[None, :] + r[:, None] * 0, mask=m, other=-1.0)
    tl.store(out_ptr + pid, tl.sum(x))
    tl.store(out_ptr + 8 + r[:, None] * BLOCK + cols[None, :], x + 1, mask=m)


def test_masks_on_a_one_element_row():
    B, N = 32, 20
    x = torch.randn(B)
    for L, M in [(0, 3), (2, 5), (4, 4)]:
        out = torch.full((8 + 6 * B,), 7.0)
        _row_masks_kernel[(6,)](x, out, M, N, L, BLOCK=B)
        rows = (torch.arange(6) >= L) & (torch.arange(6) < M)
        sums = torch.where(rows, x[:N].sum() - (B - N), -B)
        torch.testing.assert_close(out[:6], sums.float(), rtol=1e-5, atol=1e-5)
        assert (out[6:8] == 7).all()
        tile = torch.full((6, B), 7.0)
        tile[rows, :N] = x[:N] + 1
        assert torch.equal(out[8:].view(6, B), tile), (L, M)


def test_vector_add_strided_views(seeded):
    # Non-contiguous inputs are fine for a kernel that indexes them with stride 1 only if the
    # caller passes contiguous memory; here x is a slice with a storage offset.
    base = torch.rand(5000)
    x = base[17:17 + 3001]
    y = torch.rand(3001)
    out = torch.empty(3001)
    K.run_add(x, y, out, BLOCK_SIZE=256)
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


@pytest.mark.parametrize("shape", [(183, 781), (64, 1)] + [(5, n) for n in edge_sizes(256)])
def test_softmax(seeded, shape):
    x = torch.randn(shape)
    torch.testing.assert_close(K.run_softmax(x), torch.softmax(x, -1), rtol=1e-5, atol=1e-6)


def test_softmax_row_strides(seeded):
    # Rows of a wider matrix: the row stride differs from the row length, and the output
    # rows live in a wider buffer whose other columns must stay untouched.
    big = torch.randn(50, 400)
    x = big[:, 10:310]
    out_big = torch.full((50, 333), 3.0)
    out = out_big[:, :300]
    K.run_softmax(x, out)
    torch.testing.assert_close(out, torch.softmax(x, -1), rtol=1e-5, atol=1e-6)
    assert torch.all(out_big[:, 300:] == 3.0)


def test_softmax_other_is_minus_inf(seeded):
    # Masked-off columns load as -inf, so they must not change the max or the sum.
    x = torch.full((3, 100), -1e30)
    x[:, 0] = 0.0
    y = K.run_softmax(x)
    torch.testing.assert_close(y, torch.softmax(x, -1))


@pytest.mark.parametrize("M,N,Kd,blocks", [(257, 97, 131, (32, 32, 32)), (70, 33, 65, (16, 64, 32)),
                                           (128, 128, 128, (64, 64, 32))])
def test_matmul_fp32(seeded, M, N, Kd, blocks):
    a, b = torch.randn(M, Kd), torch.randn(Kd, N)
    c = K.run_matmul(a, b, *[], BLOCK_M=blocks[0], BLOCK_N=blocks[1], BLOCK_K=blocks[2])
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)


EDGES_32 = edge_sizes(32)


@pytest.mark.parametrize("M,N,Kd", [(EDGES_32[i], EDGES_32[(i + 1) % 5], EDGES_32[(i + 2) % 5]) for i in range(5)])
def test_matmul_block_edges(seeded, M, N, Kd):
    a, b = torch.randn(M, Kd), torch.randn(Kd, N)
    big = torch.full((M + 2, N + 3), 7.0)
    out = big[1:M + 1, 1:N + 1]
    K.run_matmul(a, b, out)
    torch.testing.assert_close(out, a @ b, rtol=1e-4, atol=1e-4)
    big[1:M + 1, 1:N + 1] = 7.0
    assert torch.all(big == 7.0), "elements outside the output were written"


def test_matmul_fp16_fp32_accumulator(seeded):
    a = torch.randn(100, 260).half()
    b = torch.randn(260, 77).half()
    c = K.run_matmul(a, b)
    assert_fp16_rounding_of(c, a.float() @ b.float())


def test_matmul_transposed_b_view(seeded):
    a = torch.randn(96, 150)
    bt = torch.randn(81, 150)
    b = bt.t()                     # non-contiguous: strides (1, 150)
    assert not b.is_contiguous()
    c = K.run_matmul(a, b)
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)


def test_matmul_output_in_wider_buffer(seeded):
    a, b = torch.randn(40, 50), torch.randn(50, 30)
    out_big = torch.full((40, 45), -2.0)
    out = out_big[:, 5:35]
    K.run_matmul(a, b, out, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)
    torch.testing.assert_close(out, a @ b, rtol=1e-4, atol=1e-4)
    assert torch.all(out_big[:, :5] == -2.0) and torch.all(out_big[:, 35:] == -2.0)


@pytest.mark.parametrize("M,N,block", [(37, 1500, 512), (8, 100, 128), (3, 4096, 1024)] +
                         [(3, n, 256) for n in edge_sizes(256)])
def test_layer_norm(seeded, M, N, block):
    x = torch.randn(M, N) * 3 + 1
    w, b = torch.randn(N), torch.randn(N)
    y, mean, rstd = K.run_layer_norm(x, w, b, BLOCK_SIZE=block)
    ry, rmean, rrstd = K.ref_layer_norm(x, w, b)
    torch.testing.assert_close(y, ry, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(mean, rmean, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rstd, rrstd, rtol=1e-4, atol=1e-5)


def test_scale_shift_2d_grid(seeded):
    x = torch.randn(100, 77)
    buf, out = padded((100, 77))
    K.run_scale_shift_2d(x, 2.5, -1.0, out)
    torch.testing.assert_close(out, x * 2.5 - 1.0, rtol=0, atol=1e-6)
    assert torch.all(buf[100 * 77:] == 7.0)


def test_scale_shift_2d_column_major_input(seeded):
    x = torch.randn(60, 45).t()    # strides (1, 45): the fast dim is rows
    out = torch.empty(45, 60)
    K.run_scale_shift_2d(x, -0.5, 3.0, out)
    torch.testing.assert_close(out, x * -0.5 + 3.0, rtol=0, atol=1e-6)


def test_gather(seeded):
    for n in edge_sizes(128):
        x = torch.randn(777)
        idx = torch.randint(0, 777, (n,), dtype=torch.int32)
        out = torch.zeros(n)
        K.gather_kernel[(triton.cdiv(n, 128),)](x, idx, out, n, BLOCK=128)
        torch.testing.assert_close(out, x[idx.long()], rtol=0, atol=0)


def test_scatter(seeded):
    for n in edge_sizes(128):
        x = torch.randn(n)
        idx = torch.randperm(n + 50)[:n].to(torch.int32)
        out = torch.full((n + 50,), 9.0)
        K.scatter_kernel[(triton.cdiv(n, 128),)](x, idx, out, n, BLOCK=128)
        ref = torch.full((n + 50,), 9.0)
        ref[idx.long()] = x * 2
        torch.testing.assert_close(out, ref, rtol=0, atol=0)


def test_div_mod_indexing(seeded):
    x = torch.randn(37, 53)
    out = torch.zeros(53 * 37)
    K.mod_div_index_kernel[(triton.cdiv(out.numel(), 256),)](x, out, out.numel(), COLS=37, XBLOCK=256)
    torch.testing.assert_close(out.view(53, 37), x.t(), rtol=0, atol=0)


def test_row_sum_axis1(seeded):
    x = torch.randn(100, 70)
    out = torch.zeros(100)
    K.row_sum_kernel[(triton.cdiv(100, 16),)](x, out, 100, 70, x.stride(0), BLOCK_M=16, BLOCK_N=128)
    torch.testing.assert_close(out, x.sum(1), rtol=1e-5, atol=1e-5)


def test_argmax_two_operand_reduce(seeded):
    x = torch.randn(20, 300)
    oi = torch.zeros(20, dtype=torch.int32)
    ov = torch.zeros(20)
    K.argmax_kernel[(20,)](x, oi, ov, 300, x.stride(0), BLOCK=512)
    assert torch.equal(oi.long(), x.argmax(1))
    torch.testing.assert_close(ov, x.max(1).values, rtol=0, atol=0)


def test_scalar_io_3d_grid_and_scalar_types(seeded):
    x = torch.randn(24)
    out = torch.zeros(24)
    K.scalar_io_kernel[(2, 3, 4)](x, out, 1.5, 2 ** 40 + 3, FLAG=True)
    torch.testing.assert_close(out, x * 1.5 + float(2 ** 40 + 3), rtol=0, atol=0)
    K.scalar_io_kernel[(2, 3, 4)](x, out, 1.5, 3, FLAG=False)
    torch.testing.assert_close(out, x + 3.0, rtol=0, atol=0)


def test_int_ops_and_where(seeded):
    for n in edge_sizes(256):
        x = torch.randint(-50, 50, (n,), dtype=torch.int32)
        y = torch.randint(-5, 5, (n,), dtype=torch.int32)
        out = torch.zeros(n, dtype=torch.int32)
        K.where_int_kernel[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
        ysafe = torch.where(y == 0, torch.ones_like(y), y)
        r = torch.where(x > y, x - y, (x * 3) ^ y)
        # Triton's // on integers truncates toward zero (C semantics).
        r = torch.maximum(r, torch.tensor(-5, dtype=torch.int32)) + torch.div(x, ysafe, rounding_mode="trunc").int()
        assert torch.equal(out, r)


def test_bool_tensors(seeded):
    n = 1000
    x = torch.randn(n)
    keep = torch.rand(n) > 0.5
    k0 = keep.clone()
    out = torch.zeros(n)
    K.bool_mask_kernel[(triton.cdiv(n, 256),)](x, keep, out, n, BLOCK=256)
    torch.testing.assert_close(out, torch.where(k0, x, 0.0), rtol=0, atol=0)
    assert torch.equal(keep, x > 0)


def test_in_place_read_modify_write(seeded):
    for n in edge_sizes(256):
        buf = torch.randn(n + 10)
        ref = buf.clone()
        K.inplace_rmw_kernel[(triton.cdiv(n, 256),)](buf, n, BLOCK=256)
        ref[:n] = ref[:n] * 2 + 1
        torch.testing.assert_close(buf, ref, rtol=0, atol=0)


def test_loads_see_earlier_stores_in_the_same_program(seeded):
    n, B = 1000, 128
    x = torch.randn(n)
    x0 = x.clone()
    out = torch.zeros(n)
    K.store_then_load_kernel[(triton.cdiv(n, B),)](x, out, n, BLOCK=B)
    torch.testing.assert_close(out, x0 + 1, rtol=0, atol=0)
    ref = torch.zeros(n)
    for o in range(n):
        r = (o // B) * B + (B - 1 - o % B)
        ref[o] = x0[r] + 1 if r < n else 0.0
    torch.testing.assert_close(x, ref, rtol=0, atol=0)


def test_negative_stride(seeded):
    for n in edge_sizes(128):
        x = torch.randn(n)
        out = torch.zeros(n)
        K.reversed_copy_kernel[(triton.cdiv(n, 128),)](x, out, n, BLOCK=128)
        torch.testing.assert_close(out, x.flip(0), rtol=0, atol=0)


def test_mask_that_is_not_a_bounds_check(seeded):
    for n in edge_sizes(128):
        x = torch.randn(n)
        out = torch.full((n,), 5.0)
        K.even_mask_kernel[(triton.cdiv(n, 128),)](x, out, n, BLOCK=128)
        ref = torch.full((n,), 5.0)
        ref[::2] = x[::2]
        torch.testing.assert_close(out, ref, rtol=0, atol=0)


@pytest.mark.parametrize("stride", [0, 2, 3])
def test_runtime_strides(seeded, stride):
    for n in edge_sizes(128):
        x = torch.randn(3 * n + 1)
        out = torch.zeros(n)
        K.strided_copy_kernel[(triton.cdiv(n, 128),)](x, out, n, stride, BLOCK=128)
        ref = x[0].expand(n) if stride == 0 else x[::stride][:n]
        torch.testing.assert_close(out, ref, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_elementwise_rounds_each_op(seeded, dtype):
    n, B = 3000, 512
    x, y = torch.randn(n).to(dtype), torch.randn(n).to(dtype)
    out = torch.zeros(n, dtype=dtype)
    sums = torch.zeros(triton.cdiv(n, B))
    K.low_precision_kernel[(triton.cdiv(n, B),)](x, y, out, sums, n, BLOCK=B)
    # Triton's semantics: x * 3 and x * y round to `dtype`; `/` promotes to fp32, so the rest is
    # fp32, rounded once by the store. torch rounds after every op in the same way.
    z = (x * 3).float() + y.float() / 7 - (x * y).float()
    assert torch.equal(out, z.to(dtype))
    ref_sums = torch.nn.functional.pad(z, (0, B * len(sums) - n)).view(-1, B).sum(1)
    torch.testing.assert_close(sums, ref_sums, rtol=1e-5, atol=1e-4)


def test_bf16_matmul_fp32_accumulator(seeded):
    a = torch.randn(64, 96).bfloat16()
    b = torch.randn(96, 48).bfloat16()
    c = K.run_matmul(a, b, BLOCK_M=32, BLOCK_N=16, BLOCK_K=32)
    ref = (a.float() @ b.float()).bfloat16()
    torch.testing.assert_close(c, ref, rtol=1e-2, atol=1e-2)


def test_program_wide_mask_condition(seeded):
    n, B = 1000, 128
    x = torch.randn(n)
    out = torch.full((n,), 4.0)
    K.guarded_copy_kernel[(triton.cdiv(n, B),)](x, out, n, 3, BLOCK=B)   # programs 0..2 only
    ref = torch.full((n,), 4.0)
    ref[:3 * B] = x[:3 * B]
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


def test_mask_on_a_size_one_dim(seeded):
    M, N, stride = 5, 50, 64
    x = torch.randn(8, stride)
    out = torch.full((8, stride), 9.0)
    K.row_tile_copy_kernel[(8,)](x, out, M, N, stride, BLOCK_N=64)       # rows 5..7 masked off
    ref = torch.full((8, stride), 9.0)
    ref[:M, :N] = x[:M, :N] + 1
    torch.testing.assert_close(out, ref, rtol=0, atol=0)


def test_mask_along_a_broadcast_dim(seeded):
    x = torch.randn(40)
    out = torch.full((16 * 37 + 5,), 2.0)
    K.broadcast_masked_kernel[(1,)](x, out, 13, 37, BLOCK_M=16, BLOCK_N=64)
    ref = torch.full((16 * 37 + 5,), 2.0)
    ref[:13 * 37] = x[:37].repeat(13)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)

# --- matmul lowering: full-tile versions, slab loads, peeled K loops, several dots -----------

def _views(M, N, Kd, kind):
    """(a, b) of shapes (M, Kd), (Kd, N) laid out as `kind`, with storage offsets."""
    if kind == "contiguous":
        return torch.randn(M, Kd), torch.randn(Kd, N)
    if kind == "transposed":       # inner stride 1 along the tile's rows
        return (torch.randn(Kd + 2, M + 1)[1:Kd + 1, :M].t(),
                torch.randn(N + 1, Kd + 3)[:N, 3:].t())
    if kind == "wide_rows":        # row strides larger than the rows, storage offsets
        return torch.randn(M, Kd + 9)[:, 4:4 + Kd], torch.randn(Kd + 1, N + 11)[1:, 5:5 + N]
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["contiguous", "transposed", "wide_rows"])
@pytest.mark.parametrize("M,N,Kd,blocks", [(64, 64, 64, (64, 64, 64)), (130, 70, 200, (64, 32, 64)),
                                           (100, 96, 20, (32, 32, 32)), (33, 129, 1000, (32, 64, 64))])
def test_matmul_views_and_odd_shapes(seeded, kind, M, N, Kd, blocks):
    a, b = _views(M, N, Kd, kind)
    big = torch.full((M + 3, N + 5), 7.0)
    out = big[1:M + 1, 2:N + 2]
    K.run_matmul(a, b, out, *blocks)
    torch.testing.assert_close(out, a @ b, rtol=1e-4, atol=1e-3)
    big[1:M + 1, 2:N + 2] = 7.0
    assert torch.all(big == 7.0), "elements outside the output view were written"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("M,N,Kd", [(96, 80, 200), (40, 50, 16), (64, 64, 128)])
def test_matmul_stepped_k_loop(seeded, dtype, M, N, Kd):
    # K < BLOCK_K has no full iteration; 200 = 3 full iterations and a tail.
    a, b = torch.randn(M, Kd).to(dtype), torch.randn(Kd, N).to(dtype)
    c = K.run_matmul_stepped(a, b, BLOCK_M=32, BLOCK_N=32, BLOCK_K=64)
    if dtype == torch.float16:
        assert_fp16_rounding_of(c, a.float() @ b.float())
    else:
        torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)


def test_two_dots_and_a_reduction_in_one_dispatch(seeded):
    M, N, Kd, BM, BN = 100, 72, 150, 32, 32
    a, b, d = torch.randn(M, Kd), torch.randn(Kd, N), torch.randn(Kd, N)
    c, e = torch.empty(M, N), torch.empty(M, N)
    gn = triton.cdiv(N, BN)
    s = torch.empty(gn, M)
    K.two_dots_rowsum_kernel[(triton.cdiv(M, BM), gn)](a, b, d, c, e, s, M, N, Kd,
                                                       BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=32)
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(e, a @ d, rtol=1e-4, atol=1e-3)
    ref = torch.nn.functional.pad(a @ b, (0, gn * BN - N)).view(M, gn, BN).sum(2).t()
    torch.testing.assert_close(s, ref, rtol=1e-4, atol=1e-3)


def test_dot_accumulator_with_other_uses(seeded):
    M, N, Kd, B = 50, 40, 100, 32
    a, b = torch.randn(M, Kd), torch.randn(Kd, N)
    c = torch.empty(M, N)
    K.decayed_dot_kernel[(triton.cdiv(M, B), triton.cdiv(N, B))](a, b, c, M, N, Kd, 0.5,
                                                                 BLOCK_M=B, BLOCK_N=B, BLOCK_K=B)
    ref = torch.zeros(M, N)
    for k in range(0, Kd, B):
        ref = ref * 0.5 + a[:, k:k + B] @ b[k:k + B]
    torch.testing.assert_close(c, ref, rtol=1e-4, atol=1e-4)


def test_int8_dot_int32_accumulator(seeded):
    M, N, Kd, B = 70, 90, 130, 32
    a = torch.randint(-128, 128, (M, Kd), dtype=torch.int8)
    b = torch.randint(-128, 128, (Kd, N), dtype=torch.int8)
    c = torch.empty(M, N, dtype=torch.int32)
    K.int8_matmul_kernel[(triton.cdiv(M, B), triton.cdiv(N, B))](a, b, c, M, N, Kd,
                                                                 BLOCK_M=B, BLOCK_N=B, BLOCK_K=B)
    assert torch.equal(c, a.int() @ b.int())


@pytest.mark.isolated
@pytest.mark.parametrize("R,C,stride,n", [(40, 50, 7, None), (40, 50, 64, None), (8, 16, 20, 7 * 20 + 16),
                                          (3, 16, 16, None), (16, 32, 40, 15 * 40 + 32)])
def test_2d_load_rows_overlapping_or_ending_the_buffer(seeded, R, C, stride, n):
    # stride < BLOCK_C: rows overlap (no slab); n = (R - 1) * stride + C: the buffer ends with
    # the last row's data, so R * stride elements from a tile's start do not fit (and x ends
    # where unmapped memory begins: reading them crashes).
    n = n or (R - 1) * stride + C + 5
    x = _filled(n, torch.randn(n))
    out = torch.full((R * C + 9,), 5.0)
    BR, BC = 8, 16
    # One program more than needed along each axis: their tiles are wholly masked off.
    K.window_kernel[(triton.cdiv(R, BR) + 1, triton.cdiv(C, BC) + 1)](x, out, R, C, stride,
                                                                      BLOCK_R=BR, BLOCK_C=BC)
    ref = x.as_strided((R, C), (stride, 1)) * 2
    torch.testing.assert_close(out[:R * C].view(R, C), ref, rtol=0, atol=0)
    assert torch.all(out[R * C:] == 5.0)


@pytest.mark.parametrize("L,D,blocks", [(100, 32, (32, 32)), (256, 64, (64, 64)), (70, 16, (16, 32))])
def test_attention_online_softmax(seeded, L, D, blocks):
    q, k, v = torch.randn(L, D), torch.randn(L, D), torch.randn(L, D)
    o = K.run_attention(q, k, v, *blocks)
    torch.testing.assert_close(o, K.ref_attention(q, k, v), rtol=1e-4, atol=1e-4)


# --- one construct each: runtime ifs, transposed pointer tiles, scalar masks, inf and nan ------

@pytest.mark.parametrize("mode", [1, 0])
def test_runtime_if(seeded, mode):
    B = 128
    for n in edge_sizes(B):
        x = torch.randn(n)
        buf, out = padded((n,))
        K.runtime_if_kernel[(triton.cdiv(n, B),)](x, out, n, mode, BLOCK=B)
        y = x * 2 if mode > 0 else x - 1
        sign = 1 - 2 * ((torch.arange(n) // B) % 2)
        assert torch.equal(out, y * sign)
        assert torch.all(buf[n:] == 7.0)


@pytest.mark.parametrize("M,N", [(37, 50), (16, 32), (1, 33), (17, 31)])
def test_loads_and_stores_through_transposed_pointer_tiles(seeded, M, N):
    x = torch.randn(M, N + 11)[:, 3:N + 3]
    big = torch.full((N * M + 6,), 9.0)
    out = big[:N * M].view(N, M)
    K.trans_pointer_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 32))](x, out, M, N, x.stride(0),
                                                                     BLOCK_M=16, BLOCK_N=32)
    assert torch.equal(out, x.t() + 1)
    assert torch.all(big[N * M:] == 9.0)


@pytest.mark.isolated
def test_masked_scalar_loads_and_stores(seeded):
    for n in (1, 5, 16):
        x = _filled(n, torch.randn(n))            # a load of x[n] would crash
        out = torch.full((n + 4,), 3.0)
        loaded = torch.zeros(n + 4)
        K.masked_scalar_kernel[(n + 4,)](x, out, loaded, n)
        assert torch.equal(loaded, torch.cat([x, torch.full((4,), -1.0)]))
        assert torch.equal(out, torch.cat([x * 2, torch.full((4,), 3.0)]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_inf_and_nan_constants(seeded, dtype):
    n, k, B = 300, 250, 128
    x = torch.randn(n).to(dtype)
    x[::7] = 0
    out = torch.zeros(n + 5, dtype=dtype)
    K.special_values_kernel[(triton.cdiv(n, B),)](x, out, k, n, BLOCK=B)
    inf = torch.tensor(float("inf"), dtype=dtype)
    ref = torch.where(x > 0, inf, torch.where(x < 0, -inf, torch.tensor(float("nan"), dtype=dtype)))
    ref[k:] = float("nan")
    torch.testing.assert_close(out[:n], ref, rtol=0, atol=0, equal_nan=True)
    assert torch.all(out[n:] == 0)


@triton.jit
def _group_norm_backward(x_ptr, x_row, x_col, w_ptr, mean_ptr, rstd_ptr, dx_ptr, dw_ptr, db_ptr, dy_ptr,
                         hidden: tl.constexpr, per_group: tl.constexpr, BLOCK: tl.constexpr):
    # One program per (sample, group): weight and bias gradients by atomics per channel, then
    # the input gradient; the sums are tl.sum without an axis.
    b = tl.program_id(0)
    g = tl.program_id(1)
    x_ptr += b * x_row
    dx_ptr += b * x_row
    dy_ptr += b * x_row
    mean = tl.load(mean_ptr + b * tl.num_programs(1) + g)
    rstd = tl.load(rstd_ptr + b * tl.num_programs(1) + g)
    c1 = 0.0
    c2 = 0.0
    r = tl.arange(0, BLOCK)
    for ch in range(g * per_group, (g + 1) * per_group):
        dw = 0.0
        db = 0.0
        w = tl.load(w_ptr + ch)
        for i in tl.range(0, hidden, BLOCK):
            offs = i + r
            x = tl.load(x_ptr + ch * x_col + offs, mask=offs < hidden, other=0.0)
            dy = tl.load(dy_ptr + ch * x_col + offs, mask=offs < hidden, other=0.0)
            x_hat = (x - mean) * rstd
            dw += tl.sum(dy * x_hat)
            db += tl.sum(dy)
            c1 += tl.sum(x_hat * (w * dy))
            c2 += tl.sum(w * dy)
        tl.atomic_add(dw_ptr + ch, dw)
        tl.atomic_add(db_ptr + ch, db)
    c1 = c1 / (hidden * per_group)
    c2 = c2 / (hidden * per_group)
    for ch in range(g * per_group, (g + 1) * per_group):
        w = tl.load(w_ptr + ch)
        for i in range(0, hidden, BLOCK):
            offs = i + r
            x = tl.load(x_ptr + ch * x_col + offs, mask=offs < hidden, other=0.0)
            dy = tl.load(dy_ptr + ch * x_col + offs, mask=offs < hidden, other=0.0)
            dx = (w * dy - ((x - mean) * rstd * c1 + c2)) * rstd
            tl.store(dx_ptr + ch * x_col + offs, dx, mask=offs < hidden)


@pytest.mark.parametrize("hidden", [1, 15, 16, 17, 47])
def test_group_norm_backward_against_autograd(hidden):
    torch.manual_seed(hidden)
    n, c, groups = 3, 6, 2
    x, w, bias = torch.randn(n, c, hidden), torch.randn(c), torch.randn(c)
    ref = [v.clone().requires_grad_() for v in (x, w, bias)]
    y = torch.nn.functional.group_norm(ref[0], groups, ref[1], ref[2], 1e-5)
    dy = torch.randn_like(y)
    y.backward(dy)
    xg = x.view(n, groups, -1)
    mean, rstd = xg.mean(-1), torch.rsqrt(xg.var(-1, unbiased=False) + 1e-5)
    (buf, dx), dw, db = padded((n, c, hidden)), torch.zeros(c), torch.zeros(c)
    _group_norm_backward[(n, groups)](x, x.stride(0), x.stride(1), w, mean, rstd, dx, dw, db, dy,
                                      hidden, c // groups, BLOCK=16)
    torch.testing.assert_close(dx, ref[0].grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(dw, ref[1].grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(db, ref[2].grad, rtol=1e-4, atol=1e-5)
    assert torch.all(buf[dx.numel():] == 7.0)
