"""Float casts: to and from fp8e4nv / fp8e5 (`tt.fp_to_fp`) with Triton's rounding and
saturation, downcasts rounding toward zero, round trips through narrower floats, and fp8
`tl.dot`; against torch."""
import pytest
import torch
import triton
import triton.language as tl

BLOCK = 64
FP8 = {torch.float8_e4m3fn: (tl.float8e4nv, 448.0), torch.float8_e5m2: (tl.float8e5, 57344.0)}
TL = {torch.float32: tl.float32, torch.float16: tl.float16, torch.bfloat16: tl.bfloat16}


@triton.jit
def cast_kernel(x_ptr, y_ptr, n, DST: tl.constexpr, ROUNDING: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    if ROUNDING == "":
        y = x.to(DST)
    else:
        y = x.to(DST, fp_downcast_rounding=ROUNDING)
    tl.store(y_ptr + offs, y, mask=m)


def _cast(x, dst, rounding=""):
    y = torch.empty(x.shape, dtype=dst)
    dst_tl = FP8[dst][0] if dst in FP8 else TL[dst]
    cast_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), DST=dst_tl, ROUNDING=rounding, BLOCK=BLOCK)
    return y


def _all_fp8(dtype):
    return torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype)


def _same(a, b):
    """Bitwise equal, except that any NaN matches any NaN."""
    af, bf = a.float(), b.float()
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return bool(((a.view(bits[a.element_size()]) == b.view(bits[b.element_size()])) |
                 (af.isnan() & bf.isnan())).all())


@pytest.mark.construct("fp8 casts (tt.fp_to_fp)")
@pytest.mark.parametrize("src", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("fp8", list(FP8))
def test_fp8_upcast_of_every_value(fp8, src):
    x = _all_fp8(fp8)
    assert _same(_cast(x, src), x.to(src))


@pytest.mark.construct("fp8 casts (tt.fp_to_fp)")
@pytest.mark.parametrize("n", [BLOCK - 1, 3 * BLOCK - 1])
@pytest.mark.parametrize("src", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("fp8", list(FP8))
def test_fp8_downcast_rounds_to_nearest_even(fp8, src, n):
    torch.manual_seed(n)
    top = FP8[fp8][1]
    # Values in range, the exact ties between neighbouring fp8 values, and tiny values.
    grid = _all_fp8(fp8).float()
    grid = grid[grid.isfinite() & (grid.abs() <= top)].sort().values
    ties = (grid[1:] + grid[:-1]) / 2
    x = torch.cat([torch.randn(n) * top / 8, ties[torch.randint(0, len(ties), (n,))], torch.randn(n) * 1e-3])
    x = x.to(src)
    assert _same(_cast(x, fp8), x.to(fp8))


@pytest.mark.construct("fp8 casts (tt.fp_to_fp)")
@pytest.mark.parametrize("fp8", list(FP8))
def test_fp8_downcast_saturates(fp8):
    top = FP8[fp8][1]
    x = torch.tensor([top * 1.5, -top * 4, float("inf"), float("-inf"), float("nan"), top, -top, 0.0])
    y = _cast(x, fp8).float()
    want = torch.tensor([top, -top, top, -top, float("nan"), top, -top, 0.0])
    torch.testing.assert_close(y, want, equal_nan=True, rtol=0, atol=0)


def _toward_zero(x, fp8):
    """The fp8 value of largest magnitude not above |x|, with x's sign (saturating)."""
    vals = _all_fp8(fp8)
    finite = vals[vals.float().isfinite()]
    pos = finite[finite.float() >= 0].float().unique().sort().values
    idx = torch.searchsorted(pos, x.abs().float(), right=True) - 1
    out = pos[idx.clamp(min=0)] * x.float().sign()
    return torch.where(x.isnan(), x.float(), out)


@pytest.mark.construct("downcasts toward zero (fp_downcast_rounding=\"rtz\")")
@pytest.mark.parametrize("src", [torch.float32, torch.float16])
@pytest.mark.parametrize("fp8", list(FP8))
def test_fp8_downcast_toward_zero(fp8, src):
    torch.manual_seed(0)
    top = FP8[fp8][1]
    x = torch.cat([torch.randn(3 * BLOCK - 1) * top / 4, torch.tensor([top * 2, -top * 3, 0.0, -0.0])]).to(src)
    y = _cast(x, fp8, "rtz")
    torch.testing.assert_close(y.float(), _toward_zero(x, fp8), rtol=0, atol=0, equal_nan=True)


def _nearest_toward_zero(x, dst):
    """x cast to `dst` toward zero, from torch's cast to nearest: that or one step toward zero
    (the formats are sign-magnitude; beyond the range, infinity steps back to the largest finite)."""
    near = x.to(dst)
    away = near.double().abs() > x.double().abs()
    ints = {2: torch.int16, 4: torch.int32}[near.element_size()]
    return (near.view(ints) - away.to(ints)).view(dst)


@pytest.mark.construct("downcasts toward zero (fp_downcast_rounding=\"rtz\")")
@pytest.mark.parametrize("src,dst", [(torch.float32, torch.float16), (torch.float32, torch.bfloat16)])
def test_float_downcast_toward_zero(src, dst):
    torch.manual_seed(0)
    tiny = torch.finfo(dst).smallest_normal
    top = torch.finfo(dst).max
    x = torch.cat([torch.randn(3 * BLOCK - 1) * 100,                        # normal
                   torch.randn(BLOCK) * tiny, torch.randn(BLOCK) * tiny / 300,  # dst's subnormals, and below
                   torch.tensor([top * 1.5, -top * 1.5, torch.finfo(src).max, float(top), -float(top), float("inf"), float("-inf"),
                                 float("nan"), 0.0, -0.0, 1e-45, -1e-45])]).to(src)
    assert _same(_cast(x, dst, "rtz"), _nearest_toward_zero(x, dst))


@triton.jit
def round_trip_kernel(x_ptr, y_ptr, n, MID: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(y_ptr + offs, x.to(MID).to(y_ptr.dtype.element_ty), mask=m)


@pytest.mark.construct("float casts (arith.truncf, arith.extf)")
@pytest.mark.parametrize("src,mid", [(torch.float32, torch.float16), (torch.float32, torch.bfloat16),
                                     (torch.float64, torch.float32), (torch.float64, torch.float16)])
def test_round_trip_through_a_narrower_float(src, mid):
    """x.to(f16).to(f32) rounds x (a compiler may not fold the pair away), infinities, NaN and
    (from f32) subnormals included. From f64, subnormal f32 results are left out: IREE's CPU
    code flushes them to zero (README)."""
    torch.manual_seed(1)
    tiny = torch.randn(BLOCK) * torch.finfo(mid).smallest_normal
    if src == torch.float64:
        tiny += tiny.sign() * torch.finfo(mid).smallest_normal
    x = torch.cat([torch.randn(3 * BLOCK - 1) * 100, tiny.to(src),
                   torch.tensor([float("inf"), -float("inf"), float("nan"), 0.0, -0.0])]).to(src)
    x[:8] *= torch.finfo(mid).max / 100   # beyond the narrow type's range: infinities
    y = torch.empty_like(x)
    round_trip_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), MID=TL[mid], BLOCK=BLOCK)
    assert _same(y, x.to(mid).to(src))
    assert not _same(y, x)


@triton.jit
def fp8_dot_kernel(a_ptr, b_ptr, c_ptr, m, n, k, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)[:, None]
    rn = tl.arange(0, BN)[None, :]
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm * k + rk[None, :], mask=(rm < m) & (rk[None, :] < k), other=0.0)
    b = tl.load(b_ptr + rk[:, None] * n + rn, mask=(rk[:, None] < k) & (rn < n), other=0.0)
    tl.store(c_ptr + rm * n + rn, tl.dot(a, b), mask=(rm < m) & (rn < n))


@pytest.mark.construct("tl.dot (fp8)")
@pytest.mark.parametrize("shape", [(15, 17, 31), (31, 16, 33)])
@pytest.mark.parametrize("fp8", list(FP8))
def test_fp8_dot(fp8, shape):
    m, n, k = shape
    torch.manual_seed(k)
    a, b = torch.randn(m, k).to(fp8), torch.randn(k, n).to(fp8)
    c = torch.empty(m, n)
    fp8_dot_kernel[(1,)](a, b, c, m, n, k, BM=32, BN=32, BK=64)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-5, atol=1e-5)


@pytest.mark.construct("fp8 casts (tt.fp_to_fp)")
@pytest.mark.parametrize("fp8,normal", [(torch.float8_e4m3fn, 2.0 ** -6), (torch.float8_e5m2, 2.0 ** -14)])
def test_fp8_downcast_near_the_smallest_normal(fp8, normal):
    """Subnormals, and the values that round up to the smallest normal number."""
    x = torch.linspace(0, 4 * normal, 4001)
    x = torch.cat([x, -x])
    assert _same(_cast(x, fp8), x.to(fp8))


@pytest.mark.construct("fp8 casts (tt.fp_to_fp)")
def test_fp64_to_fp8_is_unsupported():
    from triton_iree import UnsupportedError
    with pytest.raises(UnsupportedError, match=r"casting fp64 to fp8 .* \(kernel 'cast_kernel', at .*test_types.py:\d+"):
        _cast(torch.ones(4, dtype=torch.float64), torch.float8_e4m3fn)


@triton.jit
def bytes_kernel(x_ptr, out_ptr, n, VIEW: tl.constexpr, BLOCK: tl.constexpr):
    """Reads the buffer through a pointer to a narrower type: n view elements."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    p = x_ptr.to(tl.pointer_type(VIEW))
    tl.store(out_ptr + offs, tl.load(p + offs, mask=m, other=7), mask=m)


@triton.jit
def bytes_scalar_kernel(x_ptr, out_ptr, i, VIEW: tl.constexpr):
    tl.store(out_ptr, tl.load(x_ptr.to(tl.pointer_type(VIEW)) + i))


VIEWS = [(torch.float32, torch.int8, tl.int8), (torch.int32, torch.int16, tl.int16),
         (torch.float16, torch.uint8, tl.uint8), (torch.float64, torch.float32, tl.float32),
         (torch.int64, torch.int8, tl.int8)]


@pytest.mark.construct("pointer cast to another element size")
@pytest.mark.parametrize("n_elems", [BLOCK // 2 - 1, 3 * BLOCK // 2 + 1])
@pytest.mark.parametrize("src,view,view_tl", VIEWS)
def test_load_through_a_narrower_pointer(src, view, view_tl, n_elems):
    torch.manual_seed(n_elems)
    x = (torch.randn(n_elems + 3) * 1000).to(src)[1:]      # a storage offset
    n = n_elems * (x.element_size() // torch.empty(0, dtype=view).element_size())
    out = torch.zeros(n + BLOCK, dtype=view)
    bytes_kernel[(triton.cdiv(n, BLOCK),)](x, out, n, VIEW=view_tl, BLOCK=BLOCK)
    assert torch.equal(out[:n], x[:n_elems].contiguous().view(view))
    assert torch.equal(out[n:], torch.zeros(BLOCK, dtype=view))
    one = torch.zeros(1, dtype=view)
    bytes_scalar_kernel[(1,)](x, one, 3, VIEW=view_tl)
    assert one.item() == x.contiguous().view(view)[3].item()


@triton.jit
def narrow_store_kernel(x_ptr, BLOCK: tl.constexpr):
    tl.store(x_ptr.to(tl.pointer_type(tl.int8)) + tl.arange(0, BLOCK), tl.zeros([BLOCK], tl.int8))


@triton.jit
def wide_kernel(x_ptr, out_ptr, y_ptr, n, VIEW: tl.constexpr, BLOCK: tl.constexpr):
    """Reads and writes buffers through pointers to a wider type: n view elements."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr.to(tl.pointer_type(VIEW)) + offs, mask=m, other=7)
    tl.store(out_ptr + offs, v, mask=m)
    tl.store(y_ptr.to(tl.pointer_type(VIEW)) + offs, v, mask=m)


@triton.jit
def wide_scalar_kernel(x_ptr, out_ptr, back_ptr, i, VIEW: tl.constexpr):
    # From an odd buffer element, and cast back to the buffer's type one element further.
    p = (x_ptr + 1).to(tl.pointer_type(VIEW)) + i
    tl.store(out_ptr, tl.load(p))
    tl.store(back_ptr, tl.load(p.to(x_ptr.dtype) + 1))


WIDE_VIEWS = [(torch.int32, torch.int64, tl.int64), (torch.int8, torch.int32, tl.int32),
              (torch.float32, torch.float64, tl.float64), (torch.int16, torch.int64, tl.int64)]


@pytest.mark.construct("pointer cast to another element size")
@pytest.mark.parametrize("n", [BLOCK // 2 - 1, 3 * BLOCK // 2 + 1])
@pytest.mark.parametrize("src,view,view_tl", WIDE_VIEWS)
def test_load_store_through_a_wider_pointer(src, view, view_tl, n):
    torch.manual_seed(n)
    r = torch.empty(0, dtype=view).element_size() // torch.empty(0, dtype=src).element_size()
    x = (torch.randn(n * r + 5) * 1000).to(src)[1:]      # a storage offset not a multiple of r
    out = torch.zeros(n + BLOCK, dtype=view)
    y = torch.full((n * r + 3,), 5, dtype=src)
    wide_kernel[(triton.cdiv(n, BLOCK),)](x, out, y, n, VIEW=view_tl, BLOCK=BLOCK)
    assert torch.equal(out[:n], x[:n * r].clone().view(view))
    assert torch.equal(out[n:], torch.zeros(BLOCK, dtype=view))
    assert torch.equal(y[:n * r], x[:n * r])
    assert torch.equal(y[n * r:], torch.full((3,), 5, dtype=src))
    one, back = torch.zeros(1, dtype=view), torch.zeros(1, dtype=src)
    wide_scalar_kernel[(1,)](x, one, back, 3, VIEW=view_tl)
    assert one.item() == x[1 + 3 * r:1 + 4 * r].clone().view(view).item()
    assert back.item() == x[2 + 3 * r].item()


@triton.jit
def narrow_then_wide_kernel(x_ptr, out_ptr, i):
    """Through bytes, whole elements on (4 * i bytes), to a wider type and to the buffer's own."""
    p = x_ptr.to(tl.pointer_type(tl.int8)) + 4 * i
    tl.store(out_ptr, tl.load(p.to(tl.pointer_type(tl.int64))))
    tl.store(out_ptr + 1, tl.load(p.to(tl.pointer_type(tl.int32)) + 1).to(tl.int64))


@pytest.mark.construct("pointer cast to another element size")
def test_narrower_pointer_cast_back_to_whole_elements():
    x = torch.randint(-2**31, 2**31 - 1, (12,), dtype=torch.int32)[1:]
    out = torch.zeros(2, dtype=torch.int64)
    narrow_then_wide_kernel[(1,)](x, out, 3)
    assert out[0].item() == x[3:5].clone().view(torch.int64).item()
    assert out[1].item() == x[4].item()


@triton.jit
def misaligned_cast_kernel(x_ptr, out_ptr):
    tl.store(out_ptr, tl.load((x_ptr.to(tl.pointer_type(tl.int8)) + 2).to(tl.pointer_type(tl.int64))))


@triton.jit
def misaligned_address_kernel(x_ptr, out_ptr):
    tl.store(out_ptr, tl.load((x_ptr.to(tl.int64) + 2).to(tl.pointer_type(tl.float32))))


@triton.jit
def ptr_to_int_kernel(x_ptr, out_ptr):
    tl.store(out_ptr, x_ptr.to(tl.int64))


@triton.jit
def int_to_ptr_kernel(addr, out_ptr):
    tl.store(out_ptr, tl.load(addr.to(tl.int64).to(tl.pointer_type(tl.float32))))


@triton.jit
def address_kernel(x_ptr, i_ptr, out_ptr, y_ptr, d_ptr, n, BLOCK: tl.constexpr):
    """Pointers converted to integers, moved by bytes, and converted back (to other types too)."""
    offs = tl.arange(0, BLOCK)
    m = offs < n
    a = x_ptr.to(tl.int64)
    v = tl.load((a + 4 * 3).to(tl.pointer_type(tl.float32)) + offs, mask=m, other=-1.0)   # 3 floats on
    w = tl.load((a + offs * 4).to(tl.pointer_type(tl.float32)), mask=m, other=0.0)        # a tile of them
    tl.store(out_ptr + offs, v + w, mask=m)
    tl.store((y_ptr.to(tl.int64) + 8 + offs * 4).to(tl.pointer_type(tl.float32)), v, mask=m)
    tl.store(d_ptr, (x_ptr + 5).to(tl.int64) - a)                                         # a byte distance
    tl.store(d_ptr + 1, tl.load((a + 9).to(tl.pointer_type(tl.int8))).to(tl.int64))     # a narrower view
    tl.store(d_ptr + 2, tl.load((i_ptr.to(tl.int64) - 4 + 12).to(tl.pointer_type(tl.int64))))   # a wider one


@pytest.mark.construct("pointer converted to an integer and back")
@pytest.mark.parametrize("n", [BLOCK // 2 - 1, BLOCK - 5])
def test_pointer_to_integer_and_back(n):
    torch.manual_seed(n)
    x = torch.randn(BLOCK + 9)[1:]
    i32 = torch.randint(-2**31, 2**31 - 1, (9,), dtype=torch.int32)[1:]
    out, y = torch.zeros(BLOCK), torch.full((BLOCK + 2,), 5.0)
    d = torch.zeros(3, dtype=torch.int64)
    address_kernel[(1,)](x, i32, out, y, d, n, BLOCK=BLOCK)
    torch.testing.assert_close(out[:n], x[3:3 + n] + x[:n], rtol=0, atol=0)
    assert (out[n:] == 0).all()
    torch.testing.assert_close(y[2:2 + n], x[3:3 + n], rtol=0, atol=0)
    assert (y[:2] == 5).all() and (y[2 + n:] == 5).all()
    assert d[0].item() == 20
    assert d[1].item() == x[2:3].clone().view(torch.int8)[1].item()
    assert d[2].item() == i32[2:4].clone().view(torch.int64).item()


@triton.jit
def address_compare_kernel(x_ptr, y_ptr, out_ptr):
    tl.store(out_ptr, (x_ptr.to(tl.int64) < y_ptr.to(tl.int64)).to(tl.int32))


@pytest.mark.construct("pointer converted to an integer and back")
@pytest.mark.parametrize("kernel,args,what", [
    (ptr_to_int_kernel, lambda: [torch.zeros(1), torch.zeros(1, dtype=torch.int64)],
     r"an integer converted from a pointer \(.to\(tl.int64\) on a pointer\) used by .*store"),
    (address_compare_kernel, lambda: [torch.zeros(1), torch.zeros(1), torch.zeros(1, dtype=torch.int32)],
     r"an integer converted from a pointer .* used by .*cmpi"),
    (int_to_ptr_kernel, lambda: [123456, torch.zeros(1)],
     r"an integer converted to a pointer .* only for an integer computed from a pointer argument"),
    (misaligned_address_kernel, lambda: [torch.zeros(4), torch.zeros(1)],
     r"an integer converted to a pointer to f32 .* plus or minus multiples of 4 bytes: a misaligned pointer"),
])
def test_unsupported_address_uses(kernel, args, what):
    """An address the kernel could see (stored, compared across arguments) or invent."""
    from triton_iree import UnsupportedError
    with pytest.raises(UnsupportedError, match=what) as e:
        kernel[(1,)](*args())
    assert f"test_types.py:{kernel.fn.__code__.co_firstlineno + 2}:" in str(e.value)   # its one line


@pytest.mark.construct("pointer cast to another element size")
@pytest.mark.parametrize("kernel,args,what", [
    (narrow_store_kernel, lambda: [torch.zeros(16)], "a store through a pointer cast to the narrower i8"),
    (misaligned_cast_kernel, lambda: [torch.zeros(16), torch.zeros(1, dtype=torch.int64)],
     r"a pointer to i8, cast from a pointer to the wider f32, cast again to a pointer to i64 .* only where its "
     r"offset is known to be a multiple of 4"),
])
def test_unsupported_pointer_casts(kernel, args, what):
    from triton_iree import UnsupportedError
    meta = {"BLOCK": 16} if kernel is narrow_store_kernel else {}
    with pytest.raises(UnsupportedError, match=what + r".*test_types.py:\d+"):
        kernel[(1,)](*args(), **meta)


@triton.jit
def abs_kernel(x_ptr, z_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(z_ptr + offs, tl.abs(tl.load(x_ptr + offs)))


@pytest.mark.construct("fp8 casts (tt.fp_to_fp)")
@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2], ids=str)
def test_fp8_abs_of_every_value(dtype):
    """tl.abs of fp8 clears the sign bit (NaNs stay NaNs)."""
    bits = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    z = torch.empty(256, dtype=dtype)
    abs_kernel[(1,)](bits.view(dtype), z, BLOCK=256)
    assert torch.equal(z.view(torch.uint8), bits & 0x7F)


@triton.jit
def cast_bits_kernel(x_ptr, y_ptr, n, DST: tl.constexpr, ROUNDING: tl.constexpr, BLOCK: tl.constexpr):
    """cast_kernel, compiled with fp8 conversions as the integer bit operations of CUDA/HIP. A
    copy of its source, not `triton.jit(cast_kernel.fn)`: Triton's compile cache keys on the
    source and would hand back cast_kernel's build, with arith's own conversions."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    if ROUNDING == "":
        y = x.to(DST)
    else:
        y = x.to(DST, fp_downcast_rounding=ROUNDING)
    tl.store(y_ptr + offs, y, mask=m)


@pytest.fixture
def fp8_as_bits(monkeypatch):
    """The CPU target emits fp8 conversions as CUDA/HIP codegen does (integer bit operations)."""
    from triton_iree.lowering.arith import ArithEmitter
    monkeypatch.setattr(ArithEmitter, "fp8_as_bits", property(lambda self: True))


def _cast_bits(x, dst, rounding=""):
    y = torch.empty(x.shape, dtype=dst)
    dst_tl = FP8[dst][0] if dst in FP8 else TL[dst]
    cast_bits_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), DST=dst_tl, ROUNDING=rounding, BLOCK=BLOCK)
    return y


@pytest.mark.construct("fp8 casts (tt.fp_to_fp)")
@pytest.mark.parametrize("fp8", list(FP8))
def test_fp8_casts_as_integer_bit_operations(fp8, fp8_as_bits):
    """The conversions CUDA/HIP codegen gets, run on the CPU: every fp8 value upcast exactly;
    downcasts of ties, their neighbours, subnormals, random bit patterns, infinities and NaN
    round to nearest even and saturate; toward zero too."""
    x = _all_fp8(fp8)
    for dst in (torch.float32, torch.float16, torch.bfloat16):
        assert _same(_cast_bits(x, dst), x.to(dst))
    top = FP8[fp8][1]
    vals = x.float()
    vals = vals[vals.isfinite()].unique()
    mids = (vals[1:] + vals[:-1]) / 2
    grid = torch.cat([vals, mids])
    grid = torch.cat([grid, torch.nextafter(grid, torch.tensor(float("inf"))),
                      torch.nextafter(grid, torch.tensor(float("-inf")))])
    torch.manual_seed(0)
    rand = torch.randint(-2 ** 31, 2 ** 31, (1 << 16,), dtype=torch.int64).to(torch.int32).view(torch.float32)
    special = torch.tensor([float("inf"), -float("inf"), float("nan"), 0.0, -0.0, 1e-45, 3e38, -3e38])
    x = torch.cat([grid, rand, special])
    sat = x.clamp(-top, top)                     # Triton saturates; torch keeps NaN
    y = _cast_bits(x, fp8)
    assert _same(y, sat.to(fp8))
    z = _cast_bits(x[x.isfinite()], fp8, "rtz")
    torch.testing.assert_close(z.float(), _toward_zero(x[x.isfinite()], fp8), rtol=0, atol=0)
    h = grid[grid.abs() <= top].to(torch.float16)
    assert _same(_cast_bits(h, fp8), h.to(fp8))


@pytest.mark.construct("tl.dot (fp8)")
@pytest.mark.parametrize("fp8", list(FP8))
def test_fp8_dot_operands_as_integer_bit_operations(fp8, fp8_as_bits):
    a = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(fp8)
    a = torch.where(a.float().isfinite(), a.float(), 0.0).to(fp8).reshape(16, 16)
    b = torch.eye(16).to(fp8)
    c = torch.empty(16, 16)
    fp8_dot_bits_kernel[(1,)](a, b, c, 16, 16, 16, BM=16, BN=16, BK=16)
    torch.testing.assert_close(c, a.float(), rtol=0, atol=0)


@triton.jit
def fp8_dot_bits_kernel(a_ptr, b_ptr, c_ptr, m, n, k, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """fp8_dot_kernel, compiled with fp8 conversions as the integer bit operations of CUDA/HIP."""
    rm = tl.arange(0, BM)[:, None]
    rn = tl.arange(0, BN)[None, :]
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm * k + rk[None, :], mask=(rm < m) & (rk[None, :] < k), other=0.0)
    b = tl.load(b_ptr + rk[:, None] * n + rn, mask=(rk[:, None] < k) & (rn < n), other=0.0)
    tl.store(c_ptr + rm * n + rn, tl.dot(a, b), mask=(rm < m) & (rn < n))
