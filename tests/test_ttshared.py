"""triton-shared input: `prepare` raises triton-shared's memref/linalg output to the tile program
and emits an IREE input module. Every program here is compiled and run, and checked against
numpy (or torch for bf16)."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import iree.runtime as rt
from iree.compiler import ir

from triton_iree import analysis, compile as iree_compile, forms, targets, ttshared
from triton_iree.errors import InputError, UnsupportedError

from helpers import edge_sizes, nested_ops

DATA = Path(__file__).resolve().parent / "data" / "ttshared"
SEEDS = {"ranked": "ttshared_add_kernel_ranked.mlir", "unranked": "ttshared_add_kernel_unranked.mlir"}
SEED_N = 98432 + 5


def seed_text(kind: str) -> str:
    """The two programs of the issue, as triton-shared printed them (unchanged copies)."""
    return (DATA / SEEDS[kind]).read_text()


def data(name: str) -> str:
    return (DATA / name).read_text()


def compile_text(text: str, name: str) -> bytes:
    module = ttshared.prepare(text, name)
    return iree_compile.compile_module(module, targets.make_target("llvm-cpu"), name=Path(name).stem)


def run(vmfb: bytes, function: str, *args):
    """Calls `function` through iree.runtime; returns its results as numpy arrays."""
    ctx = rt.SystemContext(config=rt.Config("local-task"))
    ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb))
    res = ctx.modules.module[function](*[a(ctx.config.device) if callable(a) else a for a in args])
    res = res if isinstance(res, (tuple, list)) else [res]
    return [np.asarray(r.to_host()) for r in res]


def bf16_buffer(bits: np.ndarray):
    """A bf16 buffer view from raw 16-bit patterns (numpy has no bf16), made on the device."""
    def make(device):
        return device.allocator.allocate_buffer_copy(
            memory_type=rt.MemoryType.DEVICE_LOCAL, allowed_usage=rt.BufferUsage.DEFAULT, device=device,
            buffer=np.ascontiguousarray(bits.ravel()), element_type=rt.HalElementType.BFLOAT_16)
    return make


def accesses(text: str):
    kernel = ttshared.read_ttshared(text)
    facts = analysis.analyze(kernel)
    return kernel, [facts.access(op) for op in kernel.walk() if type(op).__name__ in ("Load", "Store")]


# --- the seed -----------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["ranked", "unranked"])
def test_seed_compiles_and_adds(kind):
    vmfb = compile_text(seed_text(kind), SEEDS[kind])
    extra = 77
    rng = np.random.default_rng(0)
    for n in edge_sizes(1024) + [SEED_N]:
        x = rng.standard_normal(n + extra).astype(np.float32)
        y = rng.standard_normal(n + extra).astype(np.float32)
        out = np.full(n + extra, -7.25, np.float32)
        grid = (n + 1023) // 1024
        (res,) = run(vmfb, "add_kernel", x, y, out, n, grid, 1, 1)
        assert res.shape == out.shape
        np.testing.assert_array_equal(res[:n], x[:n] + y[:n])
        np.testing.assert_array_equal(res[n:], out[n:])   # the tail beyond n is untouched


@pytest.mark.parametrize("kind", ["ranked", "unranked"])
def test_seed_is_structured_with_the_triton_abi(kind):
    text = seed_text(kind)
    kernel, accs = accesses(text)
    assert [p.is_buffer for p in kernel.params] == [True, True, True, False]
    assert [p.dtype for p in kernel.params] == ["f32", "f32", "f32", "i32"]
    assert len(accs) == 3 and all(isinstance(a, forms.StructuredAccess) for a in accs)
    module = ttshared.prepare(text)
    with ir.Context():
        parsed = ir.Module.parse(module)   # alive while its ops are read
        fn = next(op for op in nested_ops(parsed.operation) if op.name == "func.func")
        ty = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
        assert ir.StringAttr(fn.attributes["sym_name"]).value == "add_kernel"
        assert [str(t) for t in ty.inputs] == ["tensor<?xf32>"] * 3 + ["i32"] * 4
        assert [str(t) for t in ty.results] == ["tensor<?xf32>"]
        outputs = [str(a) for a in ir.ArrayAttr(fn.attributes["arg_attrs"])]
        assert outputs == ["{}", "{}", "{iree.abi.output = 0 : index}", "{}", "{}", "{}", "{}"]
    assert "memref" not in module


def _tool(name: str) -> str:
    here = Path(sys.executable).with_name(name)
    path = str(here) if here.exists() else shutil.which(name)
    if path is None:
        pytest.skip(f"{name} not found")
    return path


def cli(*args):
    return subprocess.run([sys.executable, "-m", "triton_iree.cli", *args], capture_output=True, text=True)


def test_seed_through_cli_iree_compile_and_iree_run_module(tmp_path):
    src = tmp_path / "seed.mlir"
    src.write_text(seed_text("unranked"))
    prepared, vmfb = tmp_path / "seed.iree.mlir", tmp_path / "seed.vmfb"
    r = cli("prepare", str(src), "-o", str(prepared), "--print-flags")
    assert r.returncode == 0, r.stderr
    flags = r.stdout.split()   # --print-flags prints to stdout
    assert "--iree-llvmcpu-disable-distribution" in flags
    # Stock iree-compile takes the prepared module with the printed flags.
    r = subprocess.run([_tool("iree-compile"), str(prepared), *flags, "-o", str(vmfb)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    n, extra = SEED_N, 50
    rng = np.random.default_rng(1)
    x, y = (rng.standard_normal(n + extra).astype(np.float32) for _ in range(2))
    out = np.full(n + extra, 3.5, np.float32)
    for name, arr in (("x", x), ("y", y), ("out", out)):
        np.save(tmp_path / f"{name}.npy", arr)
    grid = (n + 1023) // 1024
    r = subprocess.run([_tool("iree-run-module"), f"--module={vmfb}", "--device=local-task",
                        "--function=add_kernel", f"--input=@{tmp_path / 'x.npy'}", f"--input=@{tmp_path / 'y.npy'}",
                        f"--input=@{tmp_path / 'out.npy'}", f"--input={n}", f"--input={grid}", "--input=1",
                        "--input=1", f"--output=@{tmp_path / 'res.npy'}"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    res = np.load(tmp_path / "res.npy")
    np.testing.assert_array_equal(res[:n], x[:n] + y[:n])
    np.testing.assert_array_equal(res[n:], out[n:])
    # triton-iree compile gives a module that runs the same way.
    r = cli("compile", str(src), "--target", "llvm-cpu", "-o", str(tmp_path / "c.vmfb"))
    assert r.returncode == 0, r.stderr
    (res2,) = run((tmp_path / "c.vmfb").read_bytes(), "add_kernel", x, y, out, n, grid, 1, 1)
    np.testing.assert_array_equal(res2, res)


def _retyped_seed(dtype: str) -> str:
    text = seed_text("ranked").replace("xf32", f"x{dtype}").replace(": f32", f": {dtype}")
    return text if dtype in ("f16", "bf16") else text.replace("arith.addf", "arith.addi")


@pytest.mark.parametrize("dtype", ["f16", "bf16", "i32", "i8"])
def test_seed_element_types(dtype):
    import torch
    text = _retyped_seed(dtype)
    assert "f32" not in text
    vmfb = compile_text(text, f"add_{dtype}.mlir")
    n = 5000 + 3
    g = torch.Generator().manual_seed(2)
    if dtype in ("i32", "i8"):
        hi = 2 ** (int(dtype[1:]) - 1)
        x, y = (torch.randint(-hi, hi, (n + 40,), generator=g, dtype=getattr(torch, f"int{dtype[1:]}")) for _ in range(2))
        out = torch.full((n + 40,), 5, dtype=x.dtype)
    else:
        tdt = torch.float16 if dtype == "f16" else torch.bfloat16
        x, y = (torch.randn(n + 40, generator=g).to(tdt) for _ in range(2))
        out = torch.full((n + 40,), 5.0, dtype=tdt)
    grid = (n + 1023) // 1024
    if dtype == "bf16":
        bits = [t.view(torch.int16).numpy() for t in (x, y, out)]
        (res,) = run(vmfb, "add_kernel", *[bf16_buffer(b) for b in bits], n, grid, 1, 1)
        res = torch.from_numpy(res.view(np.int16).copy()).view(torch.bfloat16)
    else:
        (res,) = run(vmfb, "add_kernel", x.numpy(), y.numpy(), out.numpy(), n, grid, 1, 1)
        res = torch.from_numpy(res.copy())
    expect = out.clone()
    expect[:n] = x[:n] + y[:n]   # torch rounds bf16/f16 sums and wraps i8 like Triton does
    assert torch.equal(res.view(expect.dtype), expect)


# --- programs in the same style -----------------------------------------------------------------

def test_the_input_is_parsed_in_a_child_process_first(monkeypatch):
    """MLIR's parser corrupts the heap on some invalid inputs (tests/data/fuzz/
    forward_reference_into_nested_region.mlir aborted the process after the parse error): a
    child process parses the text first, and its errors and crashes are InputErrors here."""
    text = (DATA / "softmax_argmax_mixed.mlir").read_text()
    bad = (Path(__file__).resolve().parent / "data" / "fuzz" / "forward_reference_into_nested_region.mlir").read_text()
    with pytest.raises(InputError, match=r"input does not parse: redefinition of block '\^bb0'") as e:
        ttshared.read_ttshared(bad, "bad.mlir")
    assert e.value.loc == "bad.mlir:75:5"
    monkeypatch.setattr(ttshared, "_PARSE_CHILD", "import os; os.abort()")
    with pytest.raises(InputError, match=r"input does not parse: MLIR's parser crashed on it \(signal 6\)"):
        ttshared.read_ttshared(text)


def test_2d_masked_strided_tile_mixed_form_with_transposed_store():
    text = data("scale_transpose_2d_mixed.mlir")
    _, accs = accesses(text)
    assert all(isinstance(a, forms.StructuredAccess) for a in accs) and len(accs) == 2
    vmfb = compile_text(text, "scale_transpose_2d_mixed.mlir")
    M, N, ld_in, ld_out = 70, 100, 113, 75    # in is M x N (row stride ld_in), out is N x M (ld_out)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((M, ld_in)).astype(np.float16)
    out = np.full((N, ld_out), 7.0, np.float16)
    grid = ((M + 31) // 32, (N + 63) // 64, 1)
    (res,) = run(vmfb, "scale_transpose_kernel", x.ravel(), out.ravel(), M, N, ld_in, ld_out, *grid)
    expect = out.copy()
    expect[:, :M] = (x[:, :N] * np.float16(2) + np.float16(1)).T
    np.testing.assert_array_equal(res.reshape(N, ld_out), expect)


def test_row_max_with_linalg_reduce_uses_the_fill_as_other():
    text = data("row_max_reduce.mlir")
    _, accs = accesses(text)
    load = accs[0]
    assert isinstance(load, forms.StructuredAccess) and load.other is not None
    vmfb = compile_text(text, "row_max_reduce.mlir")
    M, N, ld = 37, 100, 130
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((M, ld)) - 10).astype(np.float32)   # all negative: a 0 fill would win
    out = np.full(M + 5, 3.0, np.float32)
    (res,) = run(vmfb, "row_max_kernel", x.ravel(), out, M, N, ld, (M + 15) // 16, 1, 1)
    expect = out.copy()
    expect[:M] = x[:, :N].max(axis=1)
    np.testing.assert_array_equal(res, expect)


def test_scf_for_over_column_chunks_carries_the_accumulator_alloc():
    text = data("row_sum_loop.mlir")
    kernel, accs = accesses(text)
    loops = [op for op in kernel.walk() if type(op).__name__ == "For"]
    # The accumulator alloc is carried as a tile value (the view as a scalar offset).
    assert len(loops) == 1 and [v.is_tile for v in loops[0].inits].count(True) == 1
    assert all(isinstance(a, forms.StructuredAccess) for a in accs)
    vmfb = compile_text(text, "row_sum_loop.mlir")
    for M, N, ld in ((21, 300, 310), (8, 64, 64), (3, 1, 5)):
        rng = np.random.default_rng(M)
        x = rng.standard_normal((M, ld)).astype(np.float32)
        out = np.full(M + 3, 3.0, np.float32)
        (res,) = run(vmfb, "row_sum_loop_kernel", x.ravel(), out, M, N, ld, (M + 7) // 8, 1, 1)
        np.testing.assert_allclose(res[:M], x[:, :N].astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(res[M:], out[M:])


def test_scalar_load_and_memref_store_of_a_block_sum():
    text = data("block_sum_scalar_store.mlir")
    vmfb = compile_text(text, "block_sum_scalar_store.mlir")
    n = 1000
    rng = np.random.default_rng(5)
    x = rng.integers(-1000, 1000, n + 50).astype(np.int32)
    scale = np.array([-3], np.int32)
    out = np.full(8, -1, np.int32)
    grid = (n + 255) // 256
    (res,) = run(vmfb, "block_sum_kernel", x, scale, out, n, grid, 1, 1)
    expect = out.copy()
    expect[:grid] = [x[i * 256:min(n, (i + 1) * 256)].sum() * -3 for i in range(grid)]
    np.testing.assert_array_equal(res, expect)


def test_matmul_k_loop_mixed_form_bf16():
    import torch
    text = data("matmul_k_loop_mixed.mlir")
    vmfb = compile_text(text, "matmul_k_loop_mixed.mlir")
    M, N, K = 70, 45, 100
    g = torch.Generator().manual_seed(6)
    a, b = torch.randn(M, K, generator=g).to(torch.bfloat16), torch.randn(K, N, generator=g).to(torch.bfloat16)
    c = np.full((M, N), 5.0, np.float32)
    grid = ((M + 31) // 32, (N + 31) // 32, 1)
    (res,) = run(vmfb, "matmul_kernel", bf16_buffer(a.view(torch.int16).numpy()),
                 bf16_buffer(b.view(torch.int16).numpy()), c.ravel(), M, N, K, K, N, N, *grid)
    expect = (a.double() @ b.double()).numpy()
    np.testing.assert_allclose(res.reshape(M, N), expect, rtol=1e-4, atol=1e-4)


def test_mask_on_a_size_one_dim_is_kept():
    # A 1 x 64 tile per row; programs past the last row must not write.
    text = data("row_copy_1xn.mlir")
    vmfb = compile_text(text, "row_copy_1xn.mlir")
    M, N, ld = 5, 50, 64
    x = np.arange((M + 3) * ld, dtype=np.float32)
    out = np.full((M + 3) * ld, -1.0, np.float32)
    (res,) = run(vmfb, "row_copy_kernel", x, out, M, N, ld, M + 3, 1, 1)
    expect = out.reshape(M + 3, ld).copy()
    expect[:M, :N] = x.reshape(M + 3, ld)[:M, :N] + 1
    np.testing.assert_array_equal(res.reshape(M + 3, ld), expect)


def test_softmax_and_argmax_mixed_form():
    # linalg.transpose + linalg.reduce, expand_shape, a (d0, 0) broadcast map, linalg.broadcast,
    # linalg.index, and a two-input linalg.reduce (argmax with ties to the lower index).
    text = data("softmax_argmax_mixed.mlir")
    _, accs = accesses(text)
    assert len(accs) == 3 and all(isinstance(a, forms.StructuredAccess) for a in accs)
    vmfb = compile_text(text, "softmax_argmax_mixed.mlir")
    M, N, ld_in, ld_out = 10, 100, 101, 103
    rng = np.random.default_rng(7)
    x = rng.standard_normal((M, ld_in)).astype(np.float32)
    x[2, 5] = x[2, 40] = 9.0
    out = np.full((M, ld_out), 2.0, np.float32)
    idx = np.full(M + 2, -5, np.int32)
    sm, am = run(vmfb, "softmax_argmax_kernel", x.ravel(), out.ravel(), idx, M, N, ld_in, ld_out,
                 (M + 3) // 4, 1, 1)
    xs = x[:, :N].astype(np.float64)
    e = np.exp(xs - xs.max(axis=1, keepdims=True))
    expect = out.copy()
    expect[:, :N] = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(sm.reshape(M, ld_out), expect, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(sm.reshape(M, ld_out)[:, N:], out[:, N:])
    expect_idx = idx.copy()
    expect_idx[:M] = xs.argmax(axis=1)
    assert expect_idx[2] == 5
    np.testing.assert_array_equal(am, expect_idx)


def test_partial_fill_and_affine_scalar_access():
    text = data("partial_fill_affine.mlir")
    vmfb = compile_text(text, "partial_fill_affine.mlir")
    for n in (0, 10, 61, 100):
        v = np.array([4.5], np.float32)
        out = np.full(64 * 3 + 5, -1.0, np.float32)
        (res,) = run(vmfb, "partial_fill_kernel", v, out, n, 3, 1, 1)
        row = np.ones(64, np.float32)
        row[3:3 + min(n, 61)] = 4.5   # the fill of a subview [3, 3 + n)
        row[63] = 9.0                 # affine.store of v + v
        expect = out.copy()
        expect[:192] = np.tile(row, 3)
        np.testing.assert_array_equal(res, expect)


# --- errors ------------------------------------------------------------------------------------

def _bad_op_text() -> str:
    text = seed_text("ranked")
    bad = text.replace("%7 = arith.addf %in, %in_8 : f32",
                       '%7 = "tt.extern_elementwise"(%in, %in_8) {symbol = "foo"} : (f32, f32) -> f32')
    assert bad != text
    return bad


def _bad_parse_text() -> str:
    text = seed_text("ranked")
    bad = text.replace("%7 = arith.addf %in, %in_8 : f32", "%7 = arith.addf %in, %in_9 : f32")
    assert bad != text
    return bad


def _line_of(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


@pytest.mark.parametrize("command", ["prepare", "compile"])
@pytest.mark.parametrize("case", ["unsupported_op", "malformed"])
def test_bad_input_is_one_line_error_without_output(tmp_path, command, case):
    text = _bad_op_text() if case == "unsupported_op" else _bad_parse_text()
    src = tmp_path / "bad.mlir"
    src.write_text(text)
    out = tmp_path / ("out.mlir" if command == "prepare" else "out.vmfb")
    r = cli(command, str(src), "-o", str(out))
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    line = _line_of(text, "tt.extern_elementwise" if case == "unsupported_op" else "%in_9")
    assert f"{src}:{line}:" in lines[0]
    if case == "unsupported_op":
        assert "'tt.extern_elementwise'" in lines[0]
    assert not out.exists()


def test_unsupported_constructs_raise_with_op_and_location():
    text = seed_text("ranked")
    # A reduction written as linalg.generic.
    red = text.replace('iterator_types = ["parallel"]', 'iterator_types = ["reduction"]')
    with pytest.raises(UnsupportedError, match=r"'linalg.generic'.*reduction.*at in\.mlir:\d+:\d+"):
        ttshared.prepare(red, "in.mlir")
    # Missing grid arguments.
    short = text.replace(", %arg7: i32, %arg8: i32, %arg9: i32)", ")")
    with pytest.raises(InputError, match="last six arguments"):
        ttshared.prepare(short.replace("%arg7", "%arg6"), "in.mlir")
    # A pointer argument of rank 2.
    rank2 = text.replace("%arg0: memref<?xf32>", "%arg0: memref<?x?xf32>").replace(
        "reinterpret_cast %arg0 to offset: [%1], sizes: [1024], strides: [1] : memref<?xf32>",
        "reinterpret_cast %arg0 to offset: [%1], sizes: [1024], strides: [1] : memref<?x?xf32>")
    with pytest.raises(UnsupportedError, match="pointer argument 0"):
        ttshared.prepare(rank2, "in.mlir")
