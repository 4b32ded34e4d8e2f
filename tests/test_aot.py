"""Ahead-of-time compilation of Python kernels: `triton-iree compile FILE.py:KERNEL` and
`triton_iree.aot.compile_kernel`, run with iree.runtime alone."""
import os
import subprocess
import sys
from pathlib import Path

import iree.runtime as rt
from iree.compiler import ir
import numpy as np
import pytest
import triton
import triton.language as tl

from triton_iree import aot
from triton_iree.errors import InputError

ROOT = Path(__file__).parents[1]
KERNELS = ROOT / "examples" / "kernels.py"
ADD_SIG = "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n_elements=i32"


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "triton_iree.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env)


def one_line_error(r) -> str:
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("triton-iree: error: "), r.stderr
    return lines[0]


def run_vmfb(vmfb: bytes, name: str, *args):
    """Calls the module's function with iree.runtime only (no Triton, no torch)."""
    ctx = rt.SystemContext(config=rt.Config("local-task"))
    ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb))
    return np.asarray(ctx.modules.module[name](*args))


def check_vector_add(vmfb: bytes, block: int) -> None:
    n, tail = 3 * block + 17, 40          # not a multiple of BLOCK; `out` is longer than n
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    out = np.full(n + tail, -7.0, np.float32)
    grid = (n + block - 1) // block
    res = run_vmfb(vmfb, "add_kernel", x, y, out, n, grid, 1, 1, 0, 0, 0)
    np.testing.assert_array_equal(res[:n], x + y)
    np.testing.assert_array_equal(res[n:], out[n:])   # nothing written past n


def test_cli_compiles_a_python_kernel_that_iree_runtime_runs(tmp_path):
    vmfb, dump = tmp_path / "add.vmfb", tmp_path / "dump"
    r = cli("compile", f"{KERNELS}:add_kernel", "--signature", ADD_SIG, "--constexpr", "BLOCK_SIZE=1024",
            "--target", "llvm-cpu", "-o", str(vmfb), env=dict(os.environ, TRITON_IREE_DUMP_DIR=str(dump)))
    assert r.returncode == 0, r.stderr
    check_vector_add(vmfb.read_bytes(), 1024)
    # The stages dumped as for a launch: one directory for the specialization.
    (spec,) = (dump / "add_kernel").iterdir()
    assert sorted(p.name for p in spec.iterdir()) == ["add_kernel.iree.mlir", "add_kernel.ttir", "iree-compile.sh"]


def test_emit_mlir_writes_the_module_with_the_documented_abi(tmp_path):
    r = cli("compile", "examples/kernels.py:add_kernel", "--signature", ADD_SIG, "--constexpr", "BLOCK_SIZE=256",
            "--emit-mlir", "-o", "-")
    assert r.returncode == 0, r.stderr
    with ir.Context():
        module = ir.Module.parse(r.stdout)
        func = module.body.operations[0]
        assert ir.StringAttr(func.attributes["sym_name"]).value == "add_kernel"
        ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        assert [str(a) for a in ftype.inputs] == ["tensor<?xf32>"] * 3 + ["i32"] + ["i32"] * 3 + ["i64"] * 3
        assert [str(a) for a in ftype.results] == ["tensor<?xf32>"]
        assert str(ir.ArrayAttr(func.attributes["arg_attrs"])[2]) == "{iree.abi.output = 0 : index}"
    assert "flow.dispatch.workgroups" in r.stdout


def test_python_api_compiles_with_dict_or_text_signatures():
    sys.path.insert(0, str(KERNELS.parent))
    from kernels import add_kernel
    k = aot.compile_kernel(add_kernel, ADD_SIG, {"BLOCK_SIZE": 128})
    assert k.name == "add_kernel" and "func.func @add_kernel" in k.module
    check_vector_add(k.vmfb, 128)
    only = aot.compile_kernel(add_kernel, aot.parse_signature(ADD_SIG), {"BLOCK_SIZE": 128}, vmfb=False)
    assert only.vmfb is None and only.module == k.module
    with pytest.raises(InputError, match="no value for the tl.constexpr parameter 'BLOCK_SIZE'"):
        aot.compile_kernel(add_kernel, ADD_SIG)


@pytest.mark.parametrize("args, message", [
    (["examples/missing.py:add_kernel", "--signature", ADD_SIG], "cannot read examples/missing.py"),
    (["examples/kernels.py:no_such_kernel", "--signature", ADD_SIG], "has no kernel 'no_such_kernel'"),
    (["examples/kernels.py:torch", "--signature", ADD_SIG], "is not a @triton.jit function"),
    (["examples/kernels.py:add_kernel", "--constexpr", "BLOCK_SIZE=64"], "needs --signature"),
    (["examples/kernels.py:add_kernel", "--signature", "x_ptr=*fp32,y_ptr", "--constexpr", "BLOCK_SIZE=64"],
     "bad signature entry 'y_ptr'"),
    (["examples/kernels.py:add_kernel", "--signature", ADD_SIG.replace("i32", "int7"), "--constexpr", "BLOCK_SIZE=64"],
     "argument 'n_elements': unknown type 'int7'"),
    (["examples/kernels.py:add_kernel", "--signature", ADD_SIG.replace("*fp32", "*float", 1),
      "--constexpr", "BLOCK_SIZE=64"], "argument 'x_ptr': unknown type '*float'"),
    (["examples/kernels.py:add_kernel", "--signature", "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32",
      "--constexpr", "BLOCK_SIZE=64"], "the signature has no type for 'n_elements'"),
    (["examples/kernels.py:add_kernel", "--signature", ADD_SIG + ",m=i32", "--constexpr", "BLOCK_SIZE=64"],
     "kernel 'add_kernel' has no parameter 'm'"),
    (["examples/kernels.py:add_kernel", "--signature", ADD_SIG, "--constexpr", "BLOCK_SIZE=big"],
     "constexpr BLOCK_SIZE='big' is not an int"),
    (["examples/kernels.py:add_kernel", "--signature", ADD_SIG, "--constexpr", "BLOCK_SIZE=1000"],
     "arange's range must be a power of 2 (at `offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)`)"),
])
def test_bad_input_is_one_line_error_without_output(tmp_path, args, message):
    out = tmp_path / "k.vmfb"
    line = one_line_error(cli("compile", *args, "-o", str(out)))
    assert message in line, line
    assert not out.exists()


def test_a_file_that_does_not_import_is_one_line(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("import triton\n\ndef f(:\n")
    line = one_line_error(cli("compile", f"{bad}:f", "--signature", "x=i32", "-o", str(tmp_path / "k.vmfb")))
    assert f"cannot import {bad} (line 3): SyntaxError" in line


def test_gpu_targets_are_refused_until_validated(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_IREE_UNVALIDATED_TARGETS"}
    r = cli("compile", "examples/kernels.py:add_kernel", "--signature", ADD_SIG, "--constexpr", "BLOCK_SIZE=64",
            "--target", "vulkan", "--arch", "rdna3", "-o", str(tmp_path / "k.vmfb"), env=env)
    assert "target 'vulkan' is not validated yet for arch 'rdna3'" in one_line_error(r)
    assert not (tmp_path / "k.vmfb").exists()


def test_cuda_code_generation_needs_no_opt_in(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_IREE_UNVALIDATED_TARGETS"}
    out = tmp_path / "k.mlir"
    r = cli("compile", "examples/kernels.py:add_kernel", "--signature", ADD_SIG, "--constexpr", "BLOCK_SIZE=64",
            "--target", "cuda", "--emit-mlir", "-o", str(out), env=env)
    assert r.returncode == 0, r.stderr
    assert "#iree_gpu.pipeline<TileAndFuse>" in out.read_text()


def test_an_unsupported_construct_is_one_line_naming_the_users_line(tmp_path):
    src = tmp_path / "asm.py"
    src.write_text("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
                   "def asm(x_ptr, BLOCK: tl.constexpr):\n"
                   "    x = tl.load(x_ptr + tl.arange(0, BLOCK))\n"
                   "    y = tl.inline_asm_elementwise('mov $0, $1;', '=r,r', [x], dtype=tl.float32, is_pure=True,"
                   " pack=1)\n"
                   "    tl.store(x_ptr + tl.arange(0, BLOCK), y)\n")
    out = tmp_path / "k.vmfb"
    line = one_line_error(cli("compile", f"{src}:asm", "--signature", "x_ptr=*fp32", "--constexpr", "BLOCK=16",
                              "-o", str(out)))
    assert "tl.inline_asm_elementwise (tt.elementwise_inline_asm) is not supported" in line and f"{src}:8:" in line
    assert not out.exists()


@triton.jit
def _printing_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=-1.0)
    tl.device_print("x", x)
    if tl.program_id(0) == 1:
        tl.device_print("n", n)
    tl.store(x_ptr + offs, x * 2, mask=offs < n)


def test_a_compiled_kernel_that_prints_prints_where_it_is_launched(capfd):
    """The module keeps its print sites in its function's reflection; the Launcher passes the
    logs and prints them after the launch, as `kernel[grid]` does (same lines, same order)."""
    torch = pytest.importorskip("torch")
    x = torch.arange(6, dtype=torch.float32)
    k = aot.compile_kernel(_printing_kernel, {"x_ptr": "*fp32", "n": "i32"}, {"BLOCK": 4})
    capfd.readouterr()
    aot.Launcher(k.vmfb, k.name, {"x_ptr": "*fp32", "n": "i32"})(x, 6, grid=(2,))
    ours = capfd.readouterr().out
    y = torch.arange(6, dtype=torch.float32)
    _printing_kernel[(2,)](y, 6, BLOCK=4)
    assert ours == capfd.readouterr().out
    assert ours.splitlines() == ["(0, 0, 0)  x:  [0. 1. 2. 3.]", "(1, 0, 0)  x:  [ 4.  5. -1. -1.]", "(1, 0, 0)  n:  [6]"]
    assert torch.equal(x, torch.arange(6, dtype=torch.float32) * 2) and torch.equal(x, y)


def test_launcher_runs_a_compiled_module_on_torch_tensors():
    """The runtime half of the AOT workflow: a compiled module, torch tensors, IREE's runtime."""
    torch = pytest.importorskip("torch")
    from triton_iree.kernels import add_kernel
    k = aot.compile_kernel(add_kernel, ADD_SIG + ":16", {"BLOCK_SIZE": 256})
    launch = aot.Launcher(k.vmfb, k.name, ADD_SIG)
    n = 1000
    x, y = torch.rand(n), torch.rand(n)
    buf = torch.full((n + 8,), -1.0)
    out = buf[:n]
    launch(x, y, out, n, grid=((n + 255) // 256,))
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)
    assert (buf[n:] == -1).all()
    with pytest.raises(Exception, match="expected 4 arguments"):
        launch(x, y, out, grid=(4,))


def test_divisibility_hints():
    assert aot.split_hints({"x": "*fp32:16", "n": "i32"}) == ({"x": "*fp32", "n": "i32"}, {"x"})
    with pytest.raises(InputError, match="only divisibility hint is ':16'"):
        aot.split_hints({"x": "*fp32:8"})


def test_native_mode_compiles_tritons_cuda_kernel():
    """--native: Triton's own PTX (sm_90 by default) inside the module; the hints reach Triton,
    which then uses 128-bit accesses."""
    from triton_iree.kernels import add_kernel
    hinted = "x_ptr=*fp32:16,y_ptr=*fp32:16,out_ptr=*fp32:16,n_elements=i32:16"
    k = aot.compile_kernel(add_kernel, hinted, {"BLOCK_SIZE": 1024}, target="cuda", native=True)
    assert b".entry add_kernel(" in k.vmfb and b".target sm_90a" in k.vmfb
    assert b"ld.global.v4" in k.vmfb
    plain = aot.compile_kernel(add_kernel, ADD_SIG, {"BLOCK_SIZE": 1024}, target="cuda", native=True, vmfb=False)
    assert "flow.dispatch @add_kernel_native::@add_kernel" in plain.module


def test_native_mode_bad_input():
    r = cli("compile", f"{KERNELS}:add_kernel", "--signature", ADD_SIG, "--constexpr", "BLOCK_SIZE=1024",
            "--native", "-o", "x.vmfb")
    assert "native mode is for --target cuda" in one_line_error(r)
    r = cli("compile", f"{KERNELS}:add_kernel", "--signature", ADD_SIG, "--constexpr", "BLOCK_SIZE=1024",
            "--target", "cuda", "--native", "--arch", "gfx942", "-o", "x.vmfb")
    assert "must name a compute capability" in one_line_error(r)


def test_regular_parameter_specialized_to_a_constant():
    """As Triton's launcher does for integers equal to 1: the stride becomes a constant and
    the compiled module no longer takes it."""
    from triton_iree.kernels import strided_copy_kernel
    k = aot.compile_kernel(strided_copy_kernel, "x_ptr=*fp32,out_ptr=*fp32,n=i32", {"stride": 1, "BLOCK": 64})
    n, block = 100, 64
    x = np.arange(n, dtype=np.float32)
    out = np.zeros(n, np.float32)
    res = run_vmfb(k.vmfb, "strided_copy_kernel", x, out, n, (n + block - 1) // block, 1, 1, 0, 0)
    np.testing.assert_array_equal(res, x)
    with pytest.raises(InputError, match="both a type in the signature and a --constexpr value"):
        aot.compile_kernel(strided_copy_kernel, "x_ptr=*fp32,out_ptr=*fp32,n=i32,stride=i32", {"stride": 1, "BLOCK": 64})


def test_launching_needs_neither_triton_nor_the_iree_compiler():
    """The machine that runs a compiled module needs iree-base-runtime (and torch) only."""
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path, target=None):\n"
            "        if name == 'triton' or name.startswith(('triton.', 'iree.compiler')):\n"
            "            raise ImportError('blocked ' + name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "from triton_iree.aot import Launcher\n"
            "import triton_iree.runtime\n"
            "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_launcher_refuses_an_unknown_target_as_an_input_error():
    with pytest.raises(InputError, match="unknown target 'nope'"):
        aot.Launcher(b"", "k", "x_ptr=*fp32", target="nope")
