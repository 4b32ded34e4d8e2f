import re

import pytest
import torch
import triton
import triton.language as tl
from iree.compiler import ir

from triton_iree import lowering
from triton_iree.targets import make_target
from triton_iree.targets.cpu import CpuTiling

from helpers import add_program, edge_sizes, facts_and_module, nested_ops, tile_program


def test_module_abi_and_dispatch_form():
    k = add_program(1024)
    _, text = facts_and_module(k)
    with ir.Context():
        module = ir.Module.parse(text)
        func = module.body.operations[0]
        assert func.operation.name == "func.func" and ir.StringAttr(func.attributes["sym_name"]).value == "add_kernel"
        ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        assert [str(a) for a in ftype.inputs[:7]] == ["tensor<?xf32>"] * 3 + ["i32"] * 4   # n, the grid
        assert [str(r) for r in ftype.results] == ["tensor<?xf32>"]
        outputs = [str(a) for a in ir.ArrayAttr(func.attributes["arg_attrs"])]
        assert outputs[:3] == ["{}", "{}", "{iree.abi.output = 0 : index}"]
    assert text.count("flow.dispatch.workgroups") == 1
    assert "flow.dispatch.workgroup.id[0]" in text
    # a full-tile version with static slices beside the masked one
    assert "sizes = [1024]" in text and "scf.if" in text


def test_emitted_modules_are_deterministic():
    _, a = facts_and_module(add_program(256))
    _, b = facts_and_module(add_program(256))
    assert a == b


def _matmul_module(options, **consts):
    from helpers import MATMUL_CONSTS, MATMUL_SIG, tile_program
    import kernels as K
    k = tile_program(K.matmul_kernel, MATMUL_SIG, {**MATMUL_CONSTS, **consts})
    text = lowering.lower(k, options)
    return text


def test_cpu_lowering_configs_one_root_on_a_matmul():
    text = _matmul_module(lowering.EmitOptions(max_workgroups=128, cpu_tiling=CpuTiling()),
                          BLOCK_M=64, BLOCK_N=64, BLOCK_K=64)
    assert text.count("#iree_codegen.compilation_info") == 1
    root = next(ln for ln in text.splitlines() if "compilation_info" in ln)
    assert "linalg.matmul" in root and "DoubleTilingExpert" in root
    par, red = CpuTiling().tile_sizes("matmul", (64, 64, 64), ("parallel", "parallel", "reduction"), 4)
    assert f"vector_common_parallel = {par}, vector_reduction = {red}" in root
    for ln in text.splitlines():
        if "linalg." in ln and " = linalg." in ln and "linalg.index" not in ln:
            assert "lowering_config" in ln or "compilation_info" in ln, ln
    # The root is in the masked version (always reachable), not in the full one.
    full, masked = text.split("} else {", 1)
    assert "compilation_info" in masked.split("flow.return")[0]


def test_no_lowering_configs_without_a_matmul_or_cpu_tiling():
    _, text = facts_and_module(add_program(1024))
    assert "lowering_config" not in text
    k = add_program(1024)
    assert "lowering_config" not in lowering.lower(k, make_target("llvm-cpu").emit_options())
    assert "lowering_config" not in _matmul_module(lowering.EmitOptions())


def test_matmul_full_version_form():
    # Full version: the K loop is split at the peel point into its full iterations, which load
    # in place without masking (no transfers, no row loops, no tiles filled with `other`), and
    # the tail; the masked version follows. (What the loops compute is checked by running them.)
    text = _matmul_module(lowering.EmitOptions(cpu_tiling=CpuTiling()))
    with ir.Context():
        module = ir.Module.parse(text)
        versions = [op for op in nested_ops(module.operation) if op.name == "scf.if" and len(op.regions[1].blocks)]
        full, masked = (list(versions[0].regions[i].blocks[0].operations) for i in (0, 1))
        loops = [i for i, op in enumerate(full) if op.name == "scf.for" and len(op.results)]   # not the store's rows
        assert len(loops) == 2
        assert "arith.floordivsi" in [op.name for op in full[:loops[1]]]          # the peel point
        body = {op.name for op in nested_ops(full[loops[0]])[1:]}
        assert not body & {"vector.transfer_read", "vector.transfer_write", "tensor.insert_slice", "scf.for", "scf.if"}
        assert any(op.name == "scf.for" and len(op.results) for top in masked for op in nested_ops(top))



# --- slice bounds: the emitted module's index arithmetic, evaluated for concrete arguments ---

_BINOPS = {
    "arith.addi": lambda a, b: a + b, "arith.subi": lambda a, b: a - b, "arith.muli": lambda a, b: a * b,
    "arith.minsi": min, "arith.minui": min, "arith.maxsi": max, "arith.maxui": max,
    "arith.divui": lambda a, b: a // b, "arith.floordivsi": lambda a, b: a // b,
    "arith.divsi": lambda a, b: abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1),
    "arith.ceildivsi": lambda a, b: -(-a // b), "arith.ceildivui": lambda a, b: -(-a // b),
    "arith.remsi": lambda a, b: a - b * (abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)),
    "arith.andi": lambda a, b: a & b, "arith.ori": lambda a, b: a | b, "arith.xori": lambda a, b: a ^ b,
}
_CASTS = ("arith.index_cast", "arith.index_castui", "arith.extsi", "arith.extui", "arith.trunci")
_PREDICATES = [lambda a, b: a == b, lambda a, b: a != b] + [lambda a, b: a < b, lambda a, b: a <= b,
                                                           lambda a, b: a > b, lambda a, b: a >= b] * 2


class _SliceBounds:
    """Runs the integer part of an emitted module (host function, every workgroup, scf.if and
    scf.for over scalars) and records each dispatch.tensor.load / store whose slice reaches
    outside its binding. Tensor values are not computed; a branch whose condition is unknown is
    followed both ways."""

    def __init__(self):
        from iree.compiler import ir
        self.ir, self.env, self.violations, self.checked = ir, {}, [], 0

    def run(self, text: str, args) -> list:
        ir = self.ir
        with ir.Context():
            module = ir.Module.parse(text)
            func = module.body.operations[0]
            for a, v in zip(func.regions[0].blocks[0].arguments, args):
                self.env[a] = v
            self.block(func.regions[0].blocks[0])
        return self.violations

    def get(self, v):
        return self.env.get(v)

    def block(self, block, args=()):
        for a, v in zip(block.arguments, args):
            self.env[a] = v
        for op in block.operations:
            name = op.operation.name
            if name in ("scf.yield", "flow.return"):
                return [self.get(v) for v in op.operands]
            self.op(op.operation, name)
        return []

    def op(self, op, name):
        ir, vals = self.ir, [self.get(v) for v in op.operands]
        out = None
        if name == "arith.constant":
            try:
                out = ir.IntegerAttr(op.attributes["value"]).value
            except ValueError:
                pass
        elif name in _CASTS:
            out = vals[0]
        elif name in _BINOPS and None not in vals:
            out = _BINOPS[name](*vals)
        elif name == "arith.cmpi" and None not in vals:
            out = _PREDICATES[ir.IntegerAttr(op.attributes["predicate"]).value](*vals)
        elif name == "arith.select" and vals[0] is not None:
            out = vals[1] if vals[0] else vals[2]
        elif name == "tensor.dim":
            out = vals[0]                      # tensor arguments are given as their lengths
        elif name == "flow.dispatch.workgroups":
            return self.workgroups(op, vals)
        elif name == "flow.dispatch.workgroup.id":
            out = self.wid[ir.IntegerAttr(op.attributes["dimension"]).value]
        elif name in ("iree_tensor_ext.dispatch.tensor.load", "iree_tensor_ext.dispatch.tensor.store"):
            self.access(op, name, vals)
        elif name == "scf.if":
            results = None
            for taken, region in zip((True, False), op.regions):
                if vals[0] in (taken, None) and region.blocks:
                    results = self.block(region.blocks[0])
            out = results if vals[0] is not None else None
            for r, v in zip(op.results, out or []):
                self.env[r] = v
            return
        elif name == "scf.for":
            lb, ub, step, *carried = vals
            if None not in (lb, ub, step):
                for iv in range(lb, ub, step):
                    carried = self.block(op.regions[0].blocks[0], [iv, *carried])
                for r, v in zip(op.results, carried):
                    self.env[r] = v
            return
        if len(op.results) == 1:
            self.env[op.results[0]] = out

    def workgroups(self, op, vals):
        counts = vals[:3]
        body = op.regions[0].blocks[0]
        for z in range(counts[2]):
            for y in range(counts[1]):
                for x in range(counts[0]):
                    self.wid = (x, y, z)
                    self.block(body, vals[3:])

    def access(self, op, name, vals):
        ir = self.ir
        segs = list(ir.DenseI32ArrayAttr(op.attributes["operandSegmentSizes"]))
        if name.endswith("store"):
            segs, vals = segs[1:], vals[1:]
        parts, i = [], 0
        for n in segs:
            parts.append(vals[i:i + n])
            i += n
        _, dims, offs, sizes, strides = parts
        dyn = ir.ShapedType.get_dynamic_size()
        statics = [list(ir.DenseI64ArrayAttr(op.attributes[k]))
                   for k in ("static_offsets", "static_sizes", "static_strides")]
        off, size, stride = ([next(it) if s == dyn else s for s in st]
                             for st, it in zip(statics, (iter(offs), iter(sizes), iter(strides))))
        if None in (*off, *size, *stride, *dims) or len(dims) != 1 or 0 in size:
            return
        self.checked += 1
        first, last = off[0], off[0] + (size[0] - 1) * stride[0]
        if min(first, last) < 0 or max(first, last) >= dims[0]:
            self.violations.append((name, first, last, dims[0]))


def _window_module():
    import kernels as K
    from helpers import tile_program
    sig = dict(x_ptr="*fp32", out_ptr="*fp32", R="i32", C="i32", stride="i32", BLOCK_R="constexpr",
               BLOCK_C="constexpr")
    return lowering.lower(tile_program(K.window_kernel, sig, dict(BLOCK_R=8, BLOCK_C=16)), make_target("llvm-cpu").emit_options())


@pytest.mark.parametrize("R,C,stride,n", [(8, 16, 20, 7 * 20 + 16), (16, 32, 40, 15 * 40 + 32), (40, 50, 64, 39 * 64 + 50),
                                          (3, 16, 16, 48), (40, 50, 7, 39 * 7 + 55)])
def test_every_slice_of_a_2d_load_is_inside_its_buffer(R, C, stride, n):
    # Rows of a tile may be read as one slab of R * stride elements: where the buffer ends
    # with the last row's data (n = (R - 1) * stride + C), that slab would read past it. A read
    # that IREE folds away today; the slices in the module must still be in bounds.
    text = _window_module()
    out_len = R * C
    grid = (-(-R // 8) + 1, -(-C // 16) + 1, 1)
    bounds = _SliceBounds()
    assert bounds.run(text, [n, out_len, R, C, stride, *grid, 0, 0]) == []
    assert bounds.checked > 0


@pytest.mark.parametrize("lead", [0, 5])
def test_every_slice_of_vector_add_is_inside_its_buffer(lead):
    text = lowering.lower(add_program(256), make_target("llvm-cpu").emit_options())
    for n in edge_sizes(256):
        bounds = _SliceBounds()
        assert bounds.run(text, [n + lead] * 3 + [n, -(-n // 256), 1, 1] + [lead] * 3) == [], n
        assert bounds.checked >= 3 * -(-n // 256)


@triton.jit
def _row_cross_entropy(x_ptr, stride, y_ptr, loss_ptr, n_cols, BLOCK: tl.constexpr):
    # A forward over a row in BLOCK chunks (running max and sum of exponentials), then the
    # gradient written in place over the logits; rows whose target is -100 are ignored.
    row = tl.program_id(0).to(tl.int64)
    x_ptr += row * stride
    y = tl.load(y_ptr + row)
    if y == -100:
        for i in range(0, n_cols, BLOCK):
            offs = i + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 0.0, mask=offs < n_cols)
        tl.store(loss_ptr + row, 0.0)
        return
    m = float("-inf")
    d = 0.0
    for i in range(0, n_cols, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n_cols, other=float("-inf"))
        new_m = tl.maximum(m, tl.max(x, 0))
        d = d * tl.exp(m - new_m) + tl.sum(tl.exp(x - new_m), 0)
        m = new_m
    x_y = tl.load(x_ptr + y)
    for i in range(0, n_cols, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        g = tl.exp(tl.load(x_ptr + offs, mask=offs < n_cols) - m) / d
        tl.store(x_ptr + offs, tl.where(offs == y, g - 1.0, g), mask=offs < n_cols)
    tl.store(loss_ptr + row, tl.log(d) + m - x_y)


CE_SIG = dict(x_ptr="*fp32", stride="i32", y_ptr="*i64", loss_ptr="*fp32", n_cols="i32", BLOCK="constexpr")


def test_elementwise_tiles_read_by_one_op_are_computed_inside_it():
    # g is read twice by one expression: as a tile of its own, IREE fuses it into the `where`
    # and the fused op loses its lowering_config, so it was vectorized whole (32768 lanes).
    text = lowering.lower(tile_program(_row_cross_entropy, CE_SIG, dict(BLOCK=32768)), make_target("llvm-cpu").emit_options())
    assert "compilation_info" in text
    assert _generic_inputs(text), text
    assert "linalg.generic" not in [producer for _, producer in _generic_inputs(text)]


# BLOCK 32768: the tiles of the loops' full and masked versions fit the CPU's 1 MiB stack only
# without copies of the loads: the first loop's only reach scalars, the second's are
# overwritten in place, and the stores of the ignored rows' branch never precede them.
@pytest.mark.parametrize("n_cols, block", [(n, 256) for n in (1, 255, 256, 257, 1000)] +
                         [(32000, 32768), (40000, 32768)])
def test_row_cross_entropy_against_torch(n_cols, block):
    torch.manual_seed(n_cols)
    x = torch.randn(5, n_cols + 3)[:, :n_cols] * 4
    y = torch.randint(0, n_cols, (5,))
    y[3] = -100
    ref = x.clone().requires_grad_()
    loss_ref = torch.nn.functional.cross_entropy(ref, y, reduction="none", ignore_index=-100)
    loss_ref.sum().backward()
    tail = torch.randn(5, 3)
    full = torch.cat([x, tail], 1)
    x = full[:, :n_cols]
    loss = torch.empty(5)
    _row_cross_entropy[(5,)](x, full.stride(0), y, loss, n_cols, BLOCK=block)
    torch.testing.assert_close(loss, loss_ref.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(x, ref.grad, rtol=1e-5, atol=1e-6)
    assert torch.equal(full[:, n_cols:], tail)


@triton.jit
def _moe_down_proj_backward(dout_ptr, tok_ptr, flat_ptr, topw_ptr, w2_ptr, z_ptr, ends_ptr, tstart_ptr,
                            texp_ptr, dz_ptr, wact_ptr, ds_ptr, H: tl.constexpr, I: tl.constexpr,
                            BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # A mixture-of-experts down projection's backward, rows sorted by expert: dout @ w2^T per
    # expert (rows gathered by token), the SwiGLU backward, the routing weights' gradient by
    # atomics at the rows' flat (token, k) slots, where the weights are also gathered.
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    start = tl.load(tstart_ptr + pm)
    e = tl.load(texp_ptr + pm).to(tl.int64)
    end = tl.load(ends_ptr + e + 1)
    rows = (start + tl.arange(0, BM)).to(tl.int64)
    rmask = rows < end
    cols = pn * BN + tl.arange(0, BN)
    m2 = rmask[:, None] & (cols[None, :] < I)
    tok = tl.load(tok_ptr + rows, mask=rmask, other=0).to(tl.int64)
    flat = tl.load(flat_ptr + rows, mask=rmask, other=0)
    wts = tl.load(topw_ptr + flat, mask=rmask, other=0.0)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, H, BK):
        ks = k + tl.arange(0, BK)
        a = tl.load(dout_ptr + tok[:, None] * H + ks[None, :], mask=rmask[:, None] & (ks[None, :] < H), other=0.0)
        b = tl.load(w2_ptr + e * H * I + ks[:, None] * I + cols[None, :],
                    mask=(ks[:, None] < H) & (cols[None, :] < I), other=0.0)
        acc = tl.dot(a, b, acc=acc, input_precision="ieee")
    gate = tl.load(z_ptr + rows[:, None] * (2 * I) + cols[None, :], mask=m2, other=0.0)
    up = tl.load(z_ptr + rows[:, None] * (2 * I) + I + cols[None, :], mask=m2, other=0.0)
    sig = tl.sigmoid(gate)
    silu = gate * sig
    y1 = silu * up
    tl.store(wact_ptr + rows[:, None] * I + cols[None, :], wts[:, None] * y1, mask=m2)
    tl.atomic_add(ds_ptr + flat, tl.sum(acc * y1, axis=1), mask=rmask)
    acc = acc * wts[:, None]
    tl.store(dz_ptr + rows[:, None] * (2 * I) + cols[None, :], acc * (silu * (1.0 - sig) + sig) * up, mask=m2)
    tl.store(dz_ptr + rows[:, None] * (2 * I) + I + cols[None, :], acc * silu, mask=m2)


MOE_SIG = dict(dout_ptr="*fp32", tok_ptr="*i32", flat_ptr="*i32", topw_ptr="*fp32", w2_ptr="*fp32",
               z_ptr="*fp32", ends_ptr="*i32", tstart_ptr="*i32", texp_ptr="*i32", dz_ptr="*fp32",
               wact_ptr="*fp32", ds_ptr="*fp32", H="constexpr", I="constexpr", BM="constexpr",
               BN="constexpr", BK="constexpr")


def test_no_generic_reads_an_i1_tile_of_another():
    # IREE fuses an i1 tile's op into every consumer; the fused op (here the row mask with the
    # gathered weights times the 64x128 accumulator) lost its lowering_config and was
    # vectorized whole: one 8192-lane gather, minutes of compile time.
    text = lowering.lower(tile_program(_moe_down_proj_backward, MOE_SIG,
                                       dict(H=256, I=512, BM=64, BN=128, BK=64)), make_target("llvm-cpu").emit_options())
    assert any(name == "linalg.generic" and "xi1>" in ty for name, ty in _results(text))
    assert ("linalg.generic", "i1") not in [(p, ty.split("x")[-1].rstrip(">")) for ty, p in _generic_inputs(text)]


def _generic_inputs(text: str) -> list[tuple[str, str]]:
    """(type, name of the producing op, or "" for a block argument) of each input of each
    linalg.generic of module `text`."""
    found = []
    with ir.Context():
        module = ir.Module.parse(text)
        for op in nested_ops(module.operation):
            if op.name == "linalg.generic":
                ins = list(op.operands)[:len(op.operands) - len(op.results)]
                found.extend((str(v.type), "" if isinstance(v.owner, ir.Block) else v.owner.name) for v in ins)
    return found


def _results(text: str) -> list[tuple[str, str]]:
    """(op name, result type) of each result of each op of module `text`."""
    with ir.Context():
        module = ir.Module.parse(text)
        return [(op.name, str(r.type)) for op in nested_ops(module.operation) for r in op.results]


@pytest.mark.parametrize("blocks", [(16, 16, 16), (64, 128, 64)])
def test_moe_down_proj_backward_against_torch(blocks):
    bm, bn, bk = blocks
    n_tok, k_top, n_exp, hidden, inter = 19, 2, 3, 40, 72
    g = torch.Generator().manual_seed(0)
    top = torch.stack([torch.randperm(n_exp, generator=g)[:k_top] for _ in range(n_tok)]).reshape(-1)
    topw = torch.rand(n_tok * k_top, generator=g)
    order = torch.sort(top, stable=True).indices                  # sorted row -> flat (token, k)
    ends = torch.zeros(n_exp + 1, dtype=torch.int32)
    ends[1:] = torch.cumsum(torch.bincount(top, minlength=n_exp), 0)
    tiles = [(s, x) for x in range(n_exp) for s in range(int(ends[x]), int(ends[x + 1]), bm)]
    tstart = torch.tensor([s for s, _ in tiles], dtype=torch.int32)
    texp = torch.tensor([x for _, x in tiles], dtype=torch.int32)
    dout = torch.randn(n_tok, hidden, generator=g)
    w2 = torch.randn(n_exp, hidden, inter, generator=g) / hidden ** 0.5
    z = torch.randn(n_tok * k_top, 2 * inter, generator=g)
    dz_buf, wact_buf = torch.full((n_tok * k_top * 2 * inter + 5,), 7.0), torch.full((n_tok * k_top * inter + 5,), 7.0)
    dz, wact = dz_buf[:-5].view(-1, 2 * inter), wact_buf[:-5].view(-1, inter)
    ds = torch.zeros(n_tok * k_top)
    _moe_down_proj_backward[(len(tiles), triton.cdiv(inter, bn))](
        dout, (order // k_top).int(), order.int(), topw, w2, z, ends, tstart, texp, dz, wact, ds,
        hidden, inter, bm, bn, bk)
    da = torch.einsum("rh,rhi->ri", dout[order // k_top], w2[top[order]])
    gate, up = z[:, :inter], z[:, inter:]
    sig = torch.sigmoid(gate)
    y1 = gate * sig * up
    w = topw[order][:, None]
    torch.testing.assert_close(wact, w * y1, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ds, torch.zeros_like(ds).index_add_(0, order, (da * y1).sum(1)), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(dz, torch.cat([da * w * (gate * sig * (1 - sig) + sig) * up, da * w * gate * sig], 1),
                               rtol=1e-4, atol=1e-4)
    assert torch.all(dz_buf[dz.numel():] == 7.0) and torch.all(wact_buf[wact.numel():] == 7.0)


@triton.jit
def _row_smoothed_cross_entropy(x_ptr, stride, y_ptr, w_ptr, loss_ptr, n_cols, eps, BLOCK: tl.constexpr):
    # Class weights and label smoothing (loss per row, as torch's reduction="none"): the first
    # loop also sums w_i * x_i and w_i, the second loads the weights again for the gradient,
    # which it writes over the logits; rows whose target is -100 are zeroed.
    row = tl.program_id(0).to(tl.int64)
    x_ptr += row * stride
    y = tl.load(y_ptr + row)
    if y == -100:
        for i in range(0, n_cols, BLOCK):
            offs = i + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 0.0, mask=offs < n_cols)
        tl.store(loss_ptr + row, 0.0)
        return
    m = float("-inf")
    d = 0.0
    wx = 0.0
    ws = 0.0
    for i in range(0, n_cols, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n_cols, other=float("-inf"))
        w = tl.load(w_ptr + offs, mask=offs < n_cols, other=0.0)
        new_m = tl.maximum(m, tl.max(x, 0))
        d = d * tl.exp(m - new_m) + tl.sum(tl.exp(x - new_m), 0)
        m = new_m
        wx += tl.sum(tl.where(offs < n_cols, w * x, 0.0))
        ws += tl.sum(w)
    lse = m + tl.log(d)
    w_y = tl.load(w_ptr + y)
    x_y = tl.load(x_ptr + y)
    for i in range(0, n_cols, BLOCK):
        offs = i + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n_cols)
        w = tl.load(w_ptr + offs, mask=offs < n_cols)
        p = tl.exp(x - lse)
        g = (1 - eps) * w_y * tl.where(offs == y, p - 1.0, p) + eps / n_cols * (ws * p - w)
        tl.store(x_ptr + offs, g, mask=offs < n_cols)
    tl.store(loss_ptr + row, (1 - eps) * w_y * (lse - x_y) + eps / n_cols * (ws * lse - wx))


@pytest.mark.parametrize("n_cols, block", [(1000, 256), (40000, 32768)])
def test_row_smoothed_cross_entropy_against_torch(n_cols, block):
    # At BLOCK 32768 it fits the CPU's 1 MiB stack only without copies of the tiles the
    # second loop stores.
    torch.manual_seed(n_cols)
    x = torch.randn(4, n_cols + 3)[:, :n_cols] * 4
    y = torch.randint(0, n_cols, (4,))
    y[2] = -100
    w = torch.rand(n_cols) + 0.5
    ref = x.clone().requires_grad_()
    loss_ref = torch.nn.functional.cross_entropy(ref, y, weight=w, reduction="none", ignore_index=-100,
                                                 label_smoothing=0.1)
    loss_ref.sum().backward()
    tail = torch.randn(4, 3)
    full = torch.cat([x, tail], 1)
    x = full[:, :n_cols]
    loss = torch.empty(4)
    _row_smoothed_cross_entropy[(4,)](x, full.stride(0), y, w, loss, n_cols, 0.1, BLOCK=block)
    torch.testing.assert_close(loss, loss_ref.detach(), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(x, ref.grad, rtol=1e-4, atol=1e-6)
    assert torch.equal(full[:, n_cols:], tail)
