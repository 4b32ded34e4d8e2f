"""The GPU cases: corpus kernels with their arguments, grid and reference, built the same way
on the machine that compiles (`pack.py`, CPU tensors) and on the one with the GPU (`run.py`).

Each case states the Triton specialization the way Triton's JIT derives it from the arguments
(pointers and integers divisible by 16, integers equal to 1 become constants), so the module
compiled ahead of time is the one Triton itself would build for them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from triton_iree import kernels as K

_TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64",
          torch.int32: "i32", torch.int64: "i64", torch.int8: "i8", torch.int16: "i16", torch.bool: "i1"}


@dataclass
class Case:
    name: str
    fn: object
    make: Callable          # make(device) -> (args, constexprs)
    grid: Callable          # grid(args) -> (gx, gy, gz)
    outputs: tuple          # indices of the arguments the kernel writes
    ref: Callable           # ref(args) -> expected tensors of `outputs`
    num_warps: int = 4
    num_stages: int = 3
    atol: float = 1e-5
    rtol: float = 1e-5
    bench: bool = False
    flops: float = 0.0      # per launch, for TFLOP/s; else bytes moved, for GB/s
    nbytes: float = 0.0


def specialization(fn, args, constexprs) -> tuple[dict, dict, dict]:
    """(signature, constexprs, attrs) as Triton's JIT specializes these arguments."""
    names = fn.arg_names
    sig, consts, attrs = {}, dict(constexprs), {}
    for i, (name, a) in enumerate(zip(names, list(args) + [None] * (len(names) - len(args)))):
        if name in constexprs:
            sig[name] = "constexpr"
        elif isinstance(a, torch.Tensor):
            sig[name] = "*" + _TYPES[a.dtype]
            if a.data_ptr() % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(a, bool):
            sig[name] = "i1"
        elif isinstance(a, int):
            if a == 1:
                sig[name], consts[name] = "constexpr", 1
                continue
            sig[name] = "i32" if -2**31 <= a < 2**31 else "i64"
            if a % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(a, float):
            sig[name] = "fp32"
        else:
            raise TypeError(f"{name}: {type(a).__name__}")
    return sig, consts, attrs


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _randn(shape, dtype, device, seed=0):
    return torch.randn(shape, generator=_gen(seed)).to(dtype).to(device)


def _guarded(n, dtype, device, lead=16):
    """A length-n output inside a larger buffer of NaN (or -7) guards on both sides: writes outside
    show up in the guards."""
    fill = float("nan") if dtype.is_floating_point else -7
    buf = torch.full((n + 2 * lead,), fill, dtype=dtype, device=device)
    return buf[lead:lead + n]


def _add(n, bench=False):
    def make(dev):
        x, y = _randn(n, torch.float32, dev, 1), _randn(n, torch.float32, dev, 2)
        out = torch.empty(n, device=dev) if bench else _guarded(n, torch.float32, dev)
        return [x, y, out, n], {"BLOCK_SIZE": 1024}
    return Case(f"vector_add_{n}", K.add_kernel, make, lambda a: ((a[3] + 1023) // 1024, 1, 1), (2,),
                lambda a: [a[0] + a[1]], bench=bench, nbytes=12.0 * n)


def _softmax(m, n, bench=False, num_warps=4):
    block = 1 << (n - 1).bit_length()

    def make(dev):
        x = _randn((m, n), torch.float32, dev, 3)
        out = torch.empty((m, n), device=dev)
        return [out, x, x.stride(0), out.stride(0), m, n], {"BLOCK_SIZE": block}
    return Case(f"softmax_{m}x{n}", K.softmax_kernel, make, lambda a: (a[4], 1, 1), (0,),
                lambda a: [torch.softmax(a[1], dim=-1)], num_warps=num_warps, atol=1e-6, rtol=1e-4,
                bench=bench, nbytes=8.0 * m * n)


def _layer_norm(m, n, bench=False):
    def make(dev):
        x = _randn((m, n), torch.float32, dev, 4)
        w, b = _randn(n, torch.float32, dev, 5), _randn(n, torch.float32, dev, 6)
        y = torch.empty_like(x)
        mean, rstd = torch.empty(m, device=dev), torch.empty(m, device=dev)
        return [x, y, w, b, mean, rstd, x.stride(0), n, 1e-5], {"BLOCK_SIZE": 1024}

    def ref(a):
        x = a[0]
        mean, var = x.mean(dim=1), x.var(dim=1, unbiased=False)
        return [torch.nn.functional.layer_norm(x, (x.shape[1],), a[2], a[3], 1e-5), mean, 1 / torch.sqrt(var + 1e-5)]
    return Case(f"layer_norm_{m}x{n}", K.layer_norm_fwd_kernel, make, lambda a: (a[0].shape[0], 1, 1), (1, 4, 5),
                ref, num_warps=8, atol=1e-4, rtol=1e-4, bench=bench, nbytes=8.0 * m * n)


def _matmul(m, n, k, dtype, blocks, bench=False, num_warps=4, num_stages=3, b_transposed=False, named_blocks=False):
    bm, bn, bk = blocks

    def make(dev):
        a = _randn((m, k), dtype, dev, 7)
        b = _randn((n, k), dtype, dev, 8).t() if b_transposed else _randn((k, n), dtype, dev, 8)
        # Rows padded by 5 elements, inside a buffer of guards: writes outside show up. (The
        # benchmark's output is contiguous, as usual.)
        c = torch.empty((m, n), dtype=dtype, device=dev) if bench else \
            _guarded(m * (n + 5), dtype, dev).view(m, n + 5)[:, :n]
        return [a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1)], \
            {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}
    # Triton's tl.dot multiplies f32 in TF32 on NVIDIA GPUs by default (10-bit mantissas).
    tol = 1e-2
    return Case(f"matmul_{m}x{n}x{k}_{str(dtype)[6:]}{'_bt' if b_transposed else ''}"
                f"{f'_tiles{bm}x{bn}x{bk}' if named_blocks else ''}", K.matmul_kernel, make,
                lambda a: ((a[3] + bm - 1) // bm, (a[4] + bn - 1) // bn, 1), (2,),
                lambda a: [(a[0].float() @ a[1].float()).to(dtype)], num_warps=num_warps, num_stages=num_stages,
                atol=tol * (k ** 0.5), rtol=tol, bench=bench, flops=2.0 * m * n * k)


def _scale_shift(m, n):
    def make(dev):
        x = _randn((n, m), torch.float32, dev, 9).t()          # a transposed view: strides (1, m)
        out = torch.empty((m, n + 3), device=dev)[:, :n]        # rows padded: stride (n + 3, 1)
        return [x, out, m, n, x.stride(0), x.stride(1), out.stride(0), out.stride(1), 1.5, -0.25], \
            {"BLOCK_M": 16, "BLOCK_N": 32}
    return Case(f"scale_shift_2d_{m}x{n}", K.scale_shift_2d_kernel, make,
                lambda a: ((a[2] + 15) // 16, (a[3] + 31) // 32, 1), (1,), lambda a: [a[0] * 1.5 - 0.25])


def _gather(n):
    def make(dev):
        x = _randn(n, torch.float32, dev, 10)
        idx = torch.randint(0, n, (n,), generator=_gen(11), dtype=torch.int32).to(dev)
        return [x, idx, _guarded(n, torch.float32, dev), n], {"BLOCK": 256}
    return Case(f"gather_{n}", K.gather_kernel, make, lambda a: ((a[3] + 255) // 256, 1, 1), (2,),
                lambda a: [a[0][a[1].long()]])


def _row_sum(m, n):
    def make(dev):
        x = _randn((m, n), torch.float32, dev, 12)
        return [x, _guarded(m, torch.float32, dev), m, n, x.stride(0)], {"BLOCK_M": 8, "BLOCK_N": 128}
    return Case(f"row_sum_{m}x{n}", K.row_sum_kernel, make, lambda a: ((a[2] + 7) // 8, 1, 1), (1,),
                lambda a: [a[0].sum(dim=1)], atol=1e-4, rtol=1e-4)


def _argmax(m, n):
    def make(dev):
        x = _randn((m, n), torch.float32, dev, 13)
        return [x, torch.empty(m, dtype=torch.int32, device=dev), torch.empty(m, device=dev), n, x.stride(0)], \
            {"BLOCK": 1 << (n - 1).bit_length()}
    return Case(f"argmax_{m}x{n}", K.argmax_kernel, make, lambda a: (a[0].shape[0], 1, 1), (1, 2),
                lambda a: [a[0].argmax(dim=1).to(torch.int32), a[0].max(dim=1).values])


def _where_int(n):
    def make(dev):
        x = torch.randint(-50, 50, (n,), generator=_gen(14), dtype=torch.int32).to(dev)
        y = torch.randint(-50, 50, (n,), generator=_gen(15), dtype=torch.int32).to(dev)
        return [x, y, _guarded(n, torch.int32, dev), n], {"BLOCK": 128}

    def ref(a):
        x, y = a[0], a[1]
        r = torch.where(x > y, x - y, (x * 3) ^ y)
        # Triton's // on integers rounds toward zero, like C.
        return [torch.maximum(r, torch.tensor(-5, device=x.device)) +
                torch.div(x, torch.where(y == 0, 1, y), rounding_mode="trunc")]
    return Case(f"where_int_{n}", K.where_int_kernel, make, lambda a: ((a[3] + 127) // 128, 1, 1), (2,), ref)


def _inplace(n):
    def make(dev):
        return [_randn(n, torch.float32, dev, 16).round(), n], {"BLOCK": 1024}
    return Case(f"inplace_rmw_{n}", K.inplace_rmw_kernel, make, lambda a: ((a[1] + 1023) // 1024, 1, 1), (0,),
                lambda a: [a[0] * 2 + 1])


def _elementwise_1d(name, fn, n, block, make_inputs, ref, outputs, atol=1e-6, **kw):
    """A 1-D kernel over n elements: fn(*inputs, n, BLOCK=block), grid cdiv(n, block)."""
    def make(dev):
        return [*make_inputs(dev), n], {"BLOCK": block}
    return Case(f"{name}_{n}", fn, make, lambda a: ((a[-1] + block - 1) // block, 1, 1), outputs, ref,
                atol=atol, rtol=1e-5, **kw)


def _scatter(n, bench=False):
    def inputs(dev):
        perm = torch.randperm(n, generator=_gen(20)).to(torch.int32)
        return [_randn(n, torch.float32, dev, 21), perm.to(dev), _guarded(n, torch.float32, dev)]

    def ref(a):
        out = torch.empty(a[0].shape[0], device=a[0].device)
        out[a[1].long()] = a[0] * 2
        return [out]
    return _elementwise_1d("scatter", K.scatter_kernel, n, 128, inputs, ref, (2,), bench=bench, nbytes=12.0 * n)


def _mod_div(rows, cols):
    def make(dev):
        x = _randn((cols, rows), torch.float32, dev, 22)
        return [x, torch.empty(rows * cols, device=dev), rows * cols], {"COLS": cols, "XBLOCK": 256}
    return Case(f"mod_div_index_{rows}x{cols}", K.mod_div_index_kernel, make,
                lambda a: ((a[2] + 255) // 256, 1, 1), (1,), lambda a: [a[0].t().reshape(-1)])


def _scalar_io(grid):
    n = grid[0] * grid[1] * grid[2]

    def make(dev):
        return [_randn(n, torch.float32, dev, 23), _guarded(n, torch.float32, dev), 2.5, 3 << 33], {"FLAG": True}
    return Case(f"scalar_io_{'x'.join(map(str, grid))}", K.scalar_io_kernel, make, lambda a: grid, (1,),
                lambda a: [a[0] * 2.5 + float(3 << 33)], rtol=1e-6)


def _low_precision(n, dtype):
    def inputs(dev):
        return [_randn(n, dtype, dev, 24), _randn(n, dtype, dev, 25), torch.empty(n, dtype=dtype, device=dev),
                torch.empty((n + 255) // 256, device=dev)]

    def ref(a):
        x, y = a[0], a[1]
        z = x * 3 + y / 7 - x * y              # in the buffers' precision, rounded at each op
        pad = torch.zeros(((n + 255) // 256) * 256, device=x.device)
        pad[:n] = z.float()
        return [z, pad.view(-1, 256).sum(dim=1)]
    # bf16 (8-bit significands): Triton rounds the expression otherwise than torch does op by op,
    # a unit in the last place here and there (0.03 at 4), and each program's f32 sum of 256 such
    # elements came out 0.245 off the reference on the H200, Triton's own launch as ours.
    return _elementwise_1d(f"low_precision_{str(dtype)[6:]}", K.low_precision_kernel, n, 256, inputs, ref, (2, 3),
                           atol=0.1 if dtype == torch.float16 else 0.5)


def _strided_copy(n, stride):
    def make(dev):
        x = _randn(n * max(stride, 1) + 1, torch.float32, dev, 26)
        return [x, _guarded(n, torch.float32, dev), n, stride], {"BLOCK": 128}
    return Case(f"strided_copy_{n}_s{stride}", K.strided_copy_kernel, make, lambda a: ((a[2] + 127) // 128, 1, 1),
                (1,), lambda a: [a[0][:a[2] * a[3]:a[3]] if a[3] else a[0][:1].expand(a[2])])


CASES = [
    _inplace(5000), _scatter(3001), _mod_div(37, 129), _scalar_io((3, 4, 5)), _low_precision(1000, torch.float16),
    _low_precision(1000, torch.bfloat16), _strided_copy(999, 3), _strided_copy(999, 0),
    _add(98437), _softmax(1823, 781), _layer_norm(1151, 3001), _matmul(257, 129, 301, torch.float32, (32, 32, 32)),
    _matmul(300, 200, 190, torch.float16, (64, 64, 32), b_transposed=True), _scale_shift(1000, 777),
    _gather(5003), _row_sum(1001, 100), _argmax(333, 1000), _where_int(4099),
    # tensor cores: full and masked tiles and K iterations; K below BLOCK_K (tiles read element by element)
    _matmul(1000, 777, 333, torch.float16, (128, 128, 64), num_warps=8), _matmul(77, 45, 30, torch.bfloat16, (64, 64, 32)),
    # benchmarks (the GPU issue's table)
    _add(1 << 26, bench=True), _softmax(8192, 8192, bench=True, num_warps=16), _layer_norm(8192, 8192, bench=True),
    # 4 warps: Triton's faster of 4 and 8 on the H200 (0.219 ms against 0.227), and IREE's (each warp's
    # tensor-core tile 64 x 64 rather than 64 x 32: 0.617 ms against 0.765)
    _matmul(4096, 4096, 4096, torch.float16, (128, 128, 64), bench=True, num_warps=4, num_stages=3),
    # tiles that fit in the 48 KiB of workgroup memory NVIDIA's Vulkan driver reports (40 KiB)
    _matmul(4096, 4096, 4096, torch.float16, (64, 64, 64), bench=True, named_blocks=True),
    _matmul(1000, 777, 333, torch.float16, (64, 64, 64), named_blocks=True),
    # a part on one thread through code generation (each program's 128 stores one after another)
    _scatter(1 << 24, bench=True),
]
