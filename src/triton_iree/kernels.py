"""The kernel corpus: plain Triton kernels, written as in Triton's tutorials.

One corpus serves the examples, the tests and the benchmarks (`triton-iree bench`);
`examples/kernels.py` re-exports it under its old name. Each kernel is an
unchanged ``@triton.jit`` function; each ``run_*`` helper launches it with
``kernel[grid](...)`` exactly as a Triton user would, and each ``ref_*`` helper
computes the same result with torch.
"""
import torch
import triton
import triton.language as tl


# --- vector add -----------------------------------------------------------------------

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def run_add(x, y, out=None, BLOCK_SIZE=1024):
    out = torch.empty_like(x) if out is None else out
    n = out.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=BLOCK_SIZE)
    return out


def ref_add(x, y):
    return x + y


# --- fused row softmax ----------------------------------------------------------------

@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    row_start = in_ptr + row * in_row_stride
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(row_start + cols, mask=mask, other=-float("inf"))
    x_minus_max = x - tl.max(x, axis=0)
    numerator = tl.exp(x_minus_max)
    denominator = tl.sum(numerator, axis=0)
    y = numerator / denominator
    tl.store(out_ptr + row * out_row_stride + cols, y, mask=mask)


def run_softmax(x, out=None):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x) if out is None else out
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_rows, n_cols,
                              BLOCK_SIZE=BLOCK_SIZE, num_warps=4)
    return out


def ref_softmax(x):
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


# --- tiled matmul with a K loop --------------------------------------------------------

@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a_mask = (offs_m[:, None] < M) & (offs_k[None, :] < K - k * BLOCK_K)
        b_mask = (offs_k[:, None] < K - k * BLOCK_K) & (offs_n[None, :] < N)
        a = tl.load(a_ptrs, mask=a_mask, other=0.0)
        b = tl.load(b_ptrs, mask=b_mask, other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c = acc.to(c_ptr.dtype.element_ty)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


def run_matmul(a, b, out=None, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32):
    M, K = a.shape
    K2, N = b.shape
    assert K == K2
    out = torch.empty((M, N), dtype=a.dtype) if out is None else out
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))
    matmul_kernel[grid](a, b, out, M, N, K,
                        a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        out.stride(0), out.stride(1),
                        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K)
    return out


def matmul_signature(dtype: str = "fp32") -> str:
    """The `aot` signature of `matmul_kernel` (and `matmul_stepped_kernel`) on `dtype` matrices
    (Triton's type names: fp16, bf16, fp32), no argument specialized."""
    strides = ",".join(f"stride_{s}=i32" for s in ("am", "ak", "bk", "bn", "cm", "cn"))
    return f"a_ptr=*{dtype},b_ptr=*{dtype},c_ptr=*{dtype},M=i32,N=i32,K=i32,{strides}"


def ref_matmul(a, b):
    return (a.float() @ b.float()).to(a.dtype)


# --- layer norm forward -----------------------------------------------------------------

@triton.jit
def layer_norm_fwd_kernel(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    mean = 0
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        tl.store(Y + cols, y, mask=mask)


def run_layer_norm(x, weight, bias, eps=1e-5, BLOCK_SIZE=None):
    M, N = x.shape
    y = torch.empty_like(x)
    mean = torch.empty((M,), dtype=torch.float32)
    rstd = torch.empty((M,), dtype=torch.float32)
    if BLOCK_SIZE is None:
        BLOCK_SIZE = min(triton.next_power_of_2(N), 1024)
    layer_norm_fwd_kernel[(M,)](x, y, weight, bias, mean, rstd, x.stride(0), N, eps,
                                BLOCK_SIZE=BLOCK_SIZE, num_warps=8)
    return y, mean, rstd


def ref_layer_norm(x, weight, bias, eps=1e-5):
    xf = x.float()
    mean = xf.mean(dim=1)
    var = xf.var(dim=1, unbiased=False)
    rstd = 1 / torch.sqrt(var + eps)
    y = torch.nn.functional.layer_norm(xf, (x.shape[1],), weight.float(), bias.float(), eps)
    return y.to(x.dtype), mean, rstd


# --- a 2-D grid kernel: tiled scale-and-shift of a matrix ------------------------------

@triton.jit
def scale_shift_2d_kernel(x_ptr, out_ptr, M, N, stride_xm, stride_xn, stride_om, stride_on,
                          scale, shift, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * stride_xm + rn[None, :] * stride_xn, mask=mask)
    y = x * scale + shift
    tl.store(out_ptr + rm[:, None] * stride_om + rn[None, :] * stride_on, y, mask=mask)


def run_scale_shift_2d(x, scale, shift, out=None, BLOCK_M=16, BLOCK_N=32):
    M, N = x.shape
    out = torch.empty_like(x) if out is None else out
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    scale_shift_2d_kernel[grid](x, out, M, N, x.stride(0), x.stride(1), out.stride(0), out.stride(1),
                                scale, shift, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
    return out


def ref_scale_shift_2d(x, scale, shift):
    return x * scale + shift


# --- more constructs: each exercises one path of the pipeline ----------------------------

@triton.jit
def gather_kernel(x_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out[i] = x[idx[i]]: offsets loaded from memory, so the load is a gather."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    idx = tl.load(idx_ptr + offs, mask=mask, other=0)
    tl.store(out_ptr + offs, tl.load(x_ptr + idx, mask=mask), mask=mask)


@triton.jit
def scatter_kernel(x_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out[idx[i]] = x[i] * 2: offsets loaded from memory, so the store is a scatter."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    idx = tl.load(idx_ptr + offs, mask=mask, other=0)
    tl.store(out_ptr + idx, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


@triton.jit
def mod_div_index_kernel(x_ptr, out_ptr, xnumel, COLS: tl.constexpr, XBLOCK: tl.constexpr):
    """Inductor-style indexing with // and %: out[r, c] = x[c, r] for an (R, COLS) output."""
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    r = xindex // COLS
    c = xindex % COLS
    rows = xnumel // COLS
    v = tl.load(x_ptr + (c * rows + r), xmask)
    tl.store(out_ptr + xindex, v, xmask)


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, M, N, stride_m, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Sums each row of a 2-D tile (a reduction along axis 1)."""
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * stride_m + rn[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + rm, tl.sum(x, axis=1), mask=rm < M)


@triton.jit
def argmax_kernel(x_ptr, out_idx_ptr, out_val_ptr, N, stride, BLOCK: tl.constexpr):
    """Per-row argmax and max: a reduction with two operands."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < N, other=-float("inf"))
    val, idx = tl.max(x, axis=0, return_indices=True)
    tl.store(out_idx_ptr + row, idx)
    tl.store(out_val_ptr + row, val)


@triton.jit
def scalar_io_kernel(x_ptr, out_ptr, scale, offset_i64, FLAG: tl.constexpr):
    """Scalar loads and stores, f32 and i64 scalar arguments, program ids on three axes."""
    pid = tl.program_id(0) + tl.program_id(1) * tl.num_programs(0) + \
        tl.program_id(2) * tl.num_programs(0) * tl.num_programs(1)
    v = tl.load(x_ptr + pid)
    if FLAG:
        v = v * scale
    tl.store(out_ptr + pid, v + offset_i64.to(tl.float32))


@triton.jit
def where_int_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Integer arithmetic, comparisons and tl.where on i32 data."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    y = tl.load(y_ptr + offs, mask=m, other=1)
    r = tl.where(x > y, x - y, (x * 3) ^ y)
    r = tl.maximum(r, -5) + (x // tl.where(y == 0, 1, y))
    tl.store(out_ptr + offs, r, mask=m)


@triton.jit
def bool_mask_kernel(x_ptr, keep_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Loads a torch.bool tensor (bytes in memory) and uses it as a mask."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    keep = tl.load(keep_ptr + offs, mask=m, other=0) != 0
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, tl.where(keep, x, 0.0), mask=m)
    tl.store(keep_ptr + offs, x > 0, mask=m)


@triton.jit
def inplace_rmw_kernel(x_ptr, n, BLOCK: tl.constexpr):
    """Reads and writes the same buffer: x = x * 2 + 1."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2 + 1, mask=m)


@triton.jit
def store_then_load_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Stores a block, then reads it back reversed in the same program: loads see earlier stores."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1, mask=m)
    rev = tl.program_id(0) * BLOCK + (BLOCK - 1 - tl.arange(0, BLOCK))
    tl.store(x_ptr + offs, tl.load(out_ptr + rev, mask=rev < n, other=0.0), mask=m)


@triton.jit
def reversed_copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out[i] = x[n - 1 - i]: a slice with stride -1."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + (n - 1 - offs), mask=m), mask=m)


@triton.jit
def even_mask_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """A mask that is not a bounds check, and an `other` that is not uniform."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = (offs < n) & (offs % 2 == 0)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m, other=offs.to(tl.float32)), mask=m)


@triton.jit
def strided_copy_kernel(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
    """out[i] = x[i * stride] with a runtime stride (0 included)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs * stride, mask=m), mask=m)


@triton.jit
def low_precision_kernel(x_ptr, y_ptr, out_ptr, sum_ptr, n, BLOCK: tl.constexpr):
    """Elementwise math and a reduction in the buffers' own precision (fp16 / bf16)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    y = tl.load(y_ptr + offs, mask=m, other=0.0)
    z = x * 3 + y / 7 - x * y
    tl.store(out_ptr + offs, z, mask=m)
    tl.store(sum_ptr + tl.program_id(0), tl.sum(z.to(tl.float32), axis=0))


@triton.jit
def rand_kernel(out_ptr, seed, n, BLOCK: tl.constexpr):
    """Philox random numbers (tl.rand: umulhi, shifts, xors) clamped to [0.1, 0.9]."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    r = tl.rand(seed, offs)
    tl.store(out_ptr + offs, tl.clamp(r, 0.1, 0.9), mask=offs < n)


@triton.jit
def guarded_copy_kernel(x_ptr, out_ptr, n, limit, BLOCK: tl.constexpr):
    """A mask with a program-wide condition: programs at or past `limit` store nothing."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = (offs < n) & (pid < limit)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m, other=-1.0), mask=m)


@triton.jit
def row_tile_copy_kernel(x_ptr, out_ptr, M, N, stride, BLOCK_N: tl.constexpr):
    """A 1 x BLOCK_N tile per program, masked on its size-1 row dim (row < M) and on columns."""
    row = tl.program_id(0) + tl.arange(0, 1)
    cols = tl.arange(0, BLOCK_N)
    m = (row[:, None] < M) & (cols[None, :] < N)
    v = tl.load(x_ptr + row[:, None] * stride + cols[None, :], mask=m, other=0.0)
    tl.store(out_ptr + row[:, None] * stride + cols[None, :], v + 1, mask=m)


@triton.jit
def broadcast_masked_kernel(x_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Loads a row vector broadcast over rows, masked on both dims (a mask along a dim whose
    offsets do not change): out[r, c] = x[c] for r < M, c < N."""
    rm = tl.arange(0, BLOCK_M)
    rn = tl.arange(0, BLOCK_N)
    m = (rm[:, None] < M) & (rn[None, :] < N)
    v = tl.load(x_ptr + rm[:, None] * 0 + rn[None, :], mask=m, other=-3.0)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], v, mask=m)


# --- dot variants: each stresses one part of the matmul lowering ------------------------

@triton.jit
def matmul_stepped_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                          stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_K: tl.constexpr):
    """The K loop steps by BLOCK_K with k in the mask (`offs_k + k < K`), and uses tl.dot's
    accumulator argument; the output keeps the inputs' type."""
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k + rk)[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def run_matmul_stepped(a, b, out=None, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32):
    M, K = a.shape
    N = b.shape[1]
    out = torch.empty((M, N), dtype=a.dtype) if out is None else out
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    matmul_stepped_kernel[grid](a, b, out, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                out.stride(0), out.stride(1), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                                BLOCK_K=BLOCK_K)
    return out


@triton.jit
def two_dots_rowsum_kernel(a_ptr, b_ptr, d_ptr, c_ptr, e_ptr, s_ptr, M, N, K, BLOCK_M: tl.constexpr,
                           BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Two accumulators in one K loop (C = A @ B, E = A @ D, contiguous operands), then a row
    reduction of C: several matmuls and a reduction in one dispatch."""
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc2 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + rk
        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        bm = (kk[:, None] < K) & (rn[None, :] < N)
        b = tl.load(b_ptr + kk[:, None] * N + rn[None, :], mask=bm, other=0.0)
        d = tl.load(d_ptr + kk[:, None] * N + rn[None, :], mask=bm, other=0.0)
        acc += tl.dot(a, b)
        acc2 += tl.dot(a, d)
    cm = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=cm)
    tl.store(e_ptr + rm[:, None] * N + rn[None, :], acc2, mask=cm)
    tl.store(s_ptr + tl.program_id(1) * M + rm, tl.sum(tl.where(cm, acc, 0.0), axis=1), mask=rm < M)


@triton.jit
def decayed_dot_kernel(a_ptr, b_ptr, c_ptr, M, N, K, decay, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """acc = acc * decay + A_k @ B_k: the accumulator has another use than the dot."""
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + rk
        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc * decay)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def int8_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr):
    """An integer dot: int8 operands, int32 accumulator, contiguous operands."""
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + rk
        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0)
        b = tl.load(b_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def window_kernel(x_ptr, out_ptr, R, C, stride, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """out[r, c] = 2 * x[r * stride + c]: rows of a 2-D load overlap when stride < BLOCK_C."""
    rr = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    rc = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    m = (rr[:, None] < R) & (rc[None, :] < C)
    x = tl.load(x_ptr + rr[:, None] * stride + rc[None, :], mask=m)
    tl.store(out_ptr + rr[:, None] * C + rc[None, :], x * 2, mask=m)


@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, L, scale, D: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr):
    """One-head attention with an online softmax (contiguous (L, D) q, k, v): q @ k^T through
    tl.trans, row reductions, exp, and accumulators rescaled every iteration."""
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + rm[:, None] * D + rd[None, :], mask=rm[:, None] < L, other=0.0)
    m_i = tl.full((BLOCK_M,), -float("inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    for start in range(0, L, BLOCK_N):
        rn = start + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + rn[:, None] * D + rd[None, :], mask=rn[:, None] < L, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        s = tl.where(rn[None, :] < L, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + rn[:, None] * D + rd[None, :], mask=rn[:, None] < L, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p, v)
        m_i = m_new
    tl.store(o_ptr + rm[:, None] * D + rd[None, :], acc / l_i[:, None], mask=rm[:, None] < L)


def run_attention(q, k, v, BLOCK_M=32, BLOCK_N=32):
    L, D = q.shape
    o = torch.empty_like(q)
    attention_kernel[(triton.cdiv(L, BLOCK_M),)](q, k, v, o, L, D ** -0.5, D=D, BLOCK_M=BLOCK_M,
                                                 BLOCK_N=BLOCK_N)
    return o


def ref_attention(q, k, v):
    return torch.softmax((q @ k.t()) * q.shape[1] ** -0.5, -1) @ v


# --- paths the kernels above do not take: each is one construct ---------------------------

@triton.jit
def mask_forms_kernel(x_ptr, out_ptr, lo, hi, BLOCK: tl.constexpr, FORM: tl.constexpr):
    """out[i] = x[i] + 1 for lo <= i < hi; FORM picks how the two bounds are written: with <,
    <=, > or >=, the index on either side."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if FORM == 0:
        m = (offs >= lo) & (offs < hi)
    elif FORM == 1:
        m = (lo <= offs) & (offs <= hi - 1)
    elif FORM == 2:
        m = (offs > lo - 1) & (hi > offs)
    else:
        m = (lo - 1 < offs) & (hi - 1 >= offs)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m, other=0.0) + 1, mask=m)


@triton.jit
def runtime_if_kernel(x_ptr, out_ptr, n, mode, BLOCK: tl.constexpr):
    """Runtime `if`s: on a scalar argument, yielding a tile; on the program id, with a store in
    each branch."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    if mode > 0:
        y = x * 2
    else:
        y = x - 1
    if pid % 2 == 0:
        tl.store(out_ptr + offs, y, mask=m)
    else:
        tl.store(out_ptr + offs, -y, mask=m)


@triton.jit
def trans_pointer_kernel(x_ptr, out_ptr, M, N, stride_x, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """out (N x M) = x (M x N, row stride stride_x) transposed, plus 1: loads and stores through
    tl.trans of pointer tiles and of their mask."""
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    m = (rm[:, None] < M) & (rn[None, :] < N)
    v = tl.load(tl.trans(x_ptr + rm[:, None] * stride_x + rn[None, :]), mask=tl.trans(m), other=0.0)
    tl.store(tl.trans(out_ptr + rm[:, None] + rn[None, :] * M), v + 1, mask=tl.trans(m))


@triton.jit
def masked_scalar_kernel(x_ptr, out_ptr, loaded_ptr, n):
    """Masked scalar accesses: program i loads x[i] (other -1 past n) into loaded[i], and stores
    2 * x[i] to out[i] only where i < n."""
    pid = tl.program_id(0)
    v = tl.load(x_ptr + pid, mask=pid < n, other=-1.0)
    tl.store(loaded_ptr + pid, v)
    tl.store(out_ptr + pid, v * 2, mask=pid < n)


@triton.jit
def special_values_kernel(x_ptr, out_ptr, k, n, BLOCK: tl.constexpr):
    """inf, -inf and nan constants of the buffers' element type: out[i] = inf where x[i] > 0,
    -inf where x[i] < 0, nan where x[i] == 0 and (the load's `other`) for k <= i < n."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    dt = out_ptr.dtype.element_ty
    x = tl.load(x_ptr + offs, mask=offs < k, other=float("nan"))
    y = tl.where(x > 0, tl.full((BLOCK,), float("inf"), dt), tl.where(x < 0, tl.full((BLOCK,), float("-inf"), dt), x))
    tl.store(out_ptr + offs, tl.where(x == 0, tl.full((BLOCK,), float("nan"), dt), y), mask=offs < n)
