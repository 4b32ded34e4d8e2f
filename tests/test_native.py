"""Native mode (`native`): Triton's own CUDA kernel inside an IREE module. These tests need no GPU:
they check the PTX calling-convention rewrite and that the modules compile for CUDA. Running them
on a GPU is benchmarks/gpu/run.py's job (see BENCHMARKS.md)."""
import re
import subprocess

import pytest
import triton
import triton.language as tl
from iree.compiler.tools.binaries import find_tool
from triton.backends.compiler import GPUTarget
from triton.compiler.compiler import ASTSource
from triton.language.extra import libdevice

from triton_iree import aot, native
from triton_iree import compile as iree_compile
from triton_iree.errors import CompileError, UnsupportedError
from triton_iree.kernels import add_kernel, scalar_io_kernel, scatter_kernel

_PTX = """//
.version 8.7
.target sm_90a
.address_size 64

.visible .entry k(
	.param .u64 .ptr .global .align 1 k_param_0,
	.param .f64 k_param_1,
	.param .u64 .ptr .global .align 1 k_param_2,
	.param .u32 k_param_3,
	.param .u64 .ptr .global .align 1 k_param_4,
	.param .u64 .ptr .global .align 1 k_param_5
)
.reqntid 128
{
	.reg .b64 	%rd<9>;
	.reg .b32 	%r<3>;
	.reg .f64 	%fd<2>;
	ld.param.b64 	%rd1, [k_param_0];
	ld.param.f64 	%fd1, [k_param_1];
	ld.param.b64 	%rd2, [k_param_2];
	ld.param.b32 	%r1, [k_param_3];
	ld.param.b64 	%rd3, [k_param_4];
	ld.param.b64 	%rd4, [k_param_5];
	ret;
}
"""


def _kernel(ptx=_PTX, scratch=(0, 0)):
    args = native.kernel_args({"x": "*fp32", "scale": "fp64", "out": "*fp16", "n": "i32", "BLOCK": "constexpr"}, "k")
    return native.NativeKernel("k", ptx, tuple(args), 4, 0, scratch)


def _entry_params(ptx):
    head = ptx[ptx.index(".entry"):ptx.index(")")]
    return [line.split()[-1].rstrip(",") for line in head.splitlines() if ".param" in line]


def test_parameters_in_iree_order():
    """Bindings first (each buffer in order), then 32-bit constants: scalars (a 64-bit one as two
    halves), then each buffer's byte offset; unused scratch pointers are gone."""
    out = native.rewrite_abi(_kernel())
    assert _entry_params(out) == ["k_param_0", "k_param_2", "k_param_1_lo", "k_param_1_hi", "k_param_3",
                                  "k_param_0_offset", "k_param_2_offset"]
    assert native.constant_words(_kernel()) == 5


def test_loads_of_rewritten_parameters():
    out = native.rewrite_abi(_kernel())
    # The f64 scalar is reassembled from its halves into the register the kernel reads.
    assert "ld.param.b32 %tio_l1, [k_param_1_lo]" in out and "mov.b64 %fd1, {%tio_l1, %tio_h1}" in out
    # Each pointer is advanced by its buffer's byte offset.
    assert "ld.param.b32 %tio_o0, [k_param_0_offset]; cvt.u64.u32 %tio_d0, %tio_o0; add.s64 %rd1, %rd1, %tio_d0;" in out
    # Scratch pointers of size 0 are null.
    assert "mov.b64 %rd3, 0;" in out and "mov.b64 %rd4, 0;" in out and "k_param_4" not in out
    # 32-bit scalars are read as they were.
    assert "ld.param.b32 \t%r1, [k_param_3];" in out


def test_scratch_memory_is_refused():
    with pytest.raises(UnsupportedError, match="scratch memory"):
        native.rewrite_abi(_kernel(scratch=(256, 0)))


def test_parameter_used_otherwise_is_refused():
    """A pointer read other than by ld.param (its address taken) would miss its offset."""
    ptx = _PTX.replace("ret;", "mov.b64 %rd5, k_param_0;\n\tret;")
    with pytest.raises(UnsupportedError, match="other than by ld.param"):
        native.rewrite_abi(_kernel(ptx))


def test_parameter_count_must_match():
    with pytest.raises(UnsupportedError, match="expected 4 arguments and 1 scratch"):
        native.rewrite_abi(_kernel(scratch=(0,)))


def test_unsupported_argument_type():
    with pytest.raises(UnsupportedError, match="argument 'd' of type nvTmaDesc"):
        native.kernel_args({"d": "nvTmaDesc"}, "k")


@pytest.fixture(scope="module")
def add_native():
    return native.compile_triton(add_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
                                              "n_elements": "i32", "BLOCK_SIZE": "constexpr"},
                                 {"BLOCK_SIZE": 1024}, num_warps=4)


def test_triton_compiles_for_cuda_without_a_gpu(add_native):
    assert add_native.name == "add_kernel" and add_native.num_warps == 4
    assert ".entry add_kernel(" in add_native.ptx
    assert [a.name for a in add_native.args] == ["x_ptr", "y_ptr", "out_ptr", "n_elements"]


def _compiles_for_cuda(module_text, tmp_path):
    src = tmp_path / "m.mlir"
    src.write_text(module_text)
    out = tmp_path / "m.vmfb"
    r = subprocess.run([find_tool("iree-compile"), str(src), "--iree-hal-target-backends=cuda", "--iree-cuda-target=sm_80", "-o", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out.read_bytes()


def test_module_compiles_for_cuda(add_native, tmp_path):
    text = native.module(add_native)
    # The block is 32 x num_warps threads; the workgroup count is Triton's grid.
    assert "workgroup_size = [128 : index, 1 : index, 1 : index]" in text
    assert "hal.return %x, %y, %z" in text
    vmfb = _compiles_for_cuda(text, tmp_path)
    assert b"add_kernel" in vmfb and b".entry add_kernel(" in vmfb


def test_scalar_types_compile(tmp_path):
    """f32 and i64 scalars (the i64 as two 32-bit constants) and a constexpr branch."""
    k = native.compile_triton(scalar_io_kernel, {"x_ptr": "*fp32", "out_ptr": "*fp32", "scale": "fp32",
                                                 "offset_i64": "i64", "FLAG": "constexpr"}, {"FLAG": True})
    text = native.module(k)
    assert "arith.bitcast %s0 : f32 to i32" in text and "arith.shrui %s1" in text
    assert native.constant_words(k) == 1 + 2 + 2
    _compiles_for_cuda(text, tmp_path)


def test_an_invalid_module_is_reported_as_ours_before_iree_compile(monkeypatch):
    monkeypatch.setattr(native, "_host_function", lambda lines, k: lines.append("  func.func @broken() { return %x }"))
    with pytest.raises(CompileError, match="triton-iree made an invalid native-mode module") as e:
        native.module(_kernel())
    assert "func.func @broken" in e.value.module_text


def test_host_function_takes_the_arguments_in_declaration_order():
    """The runtime passes the arguments in the kernel's order (`arguments.build_arguments`), a
    scalar between two buffers included; the dispatch still passes bindings first."""
    text = native.module(_kernel())
    head = next(line for line in text.splitlines() if "func.func @k(" in line)
    assert re.findall(r"(%\w+): ", head)[:4] == ["%b0", "%s0", "%b1", "%s1"], head


# --- the JIT path on CUDA: a kernel IREE's code generation cannot compile runs natively --------

def _jit_compile(fn, signature, constexprs=None, **options):
    """Triton's compile of `fn` for IREE's CUDA target, as a launch on CUDA makes it (no GPU needed)."""
    src = ASTSource(fn, signature, constexprs=constexprs or {})
    return triton.compile(src, target=GPUTarget("iree", "cuda:sm_80", 32), options={"num_warps": 4, **options})


@pytest.fixture
def codegen_fails(tmp_path, monkeypatch):
    """iree-compile refuses every generated module (as it did some on the H200); native
    modules (an executable source of PTX) compile as usual. Every stage runs (a fresh cache)."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRITON_IREE_QUIET", raising=False)
    real = iree_compile.build

    def build(text, target, *, name="kernel", **kw):
        if "hal.executable.source" not in text:
            raise CompileError("iree-compile failed:\nm.mlir:10:11: error: 'func.func' op failed to distribute\n",
                               kernel=name)
        return real(text, target, name=name, **kw)
    monkeypatch.setattr(iree_compile, "build", build)   # compile_module builds through it too


ADD_SIG = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32"}


def test_jit_path_falls_back_to_native_mode_where_code_generation_fails(codegen_fails, capfd):
    k = _jit_compile(add_kernel, ADD_SIG, {"BLOCK_SIZE": 128})
    vmfb = k.asm["vmfb"]
    assert b"add_kernel_native" in vmfb and b".entry add_kernel(" in vmfb
    # Triton's kernel writes every buffer through its pointer; no second module for aliasing.
    assert k.metadata.iree_written == [0, 1, 2] and k.metadata.iree_shared_memory_module == ""
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "add_kernel" in err and "failed to distribute" in err and "native mode" in err


def test_the_fallback_note_is_quiet_with_triton_iree_quiet(codegen_fails, monkeypatch, capfd):
    monkeypatch.setenv("TRITON_IREE_QUIET", "1")
    k = _jit_compile(add_kernel, ADD_SIG, {"BLOCK_SIZE": 128})
    assert b"add_kernel_native" in k.asm["vmfb"]
    assert "native mode" not in capfd.readouterr().err


def test_ahead_of_time_compiles_do_not_fall_back(codegen_fails):
    """`aot.compile_kernel` asks for code generation (native=True asks for Triton's kernel)."""
    with pytest.raises(CompileError, match="failed to distribute"):
        aot.compile_kernel(add_kernel, ADD_SIG, {"BLOCK_SIZE": 128}, target="cuda", arch="sm_80")


@triton.jit
def _print_kernel(x_ptr, out_ptr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    tl.device_print("x", x)
    tl.store(out_ptr + tl.arange(0, 16), x)


@triton.jit
def _libdevice_kernel(x_ptr, out_ptr):
    offs = tl.arange(0, 16)
    tl.store(out_ptr + offs, libdevice.exp(tl.load(x_ptr + offs)))


@pytest.mark.parametrize("fn, options", [(scatter_kernel, {"check_bounds": True}), (_print_kernel, {}),
                                         (_libdevice_kernel, {})], ids=["checked", "print", "libdevice"])
def test_kernels_that_need_the_generated_module_do_not_fall_back(codegen_fails, fn, options):
    """Checked mode's bounds checks, tl.device_print's logs and our tl.extra.libdevice functions
    live in the generated module; Triton's kernel has none of them, so the CompileError stands."""
    sig = {"x_ptr": "*fp32", "idx_ptr": "*i32", "out_ptr": "*fp32", "n": "i32"} if fn is scatter_kernel else \
        {"x_ptr": "*fp32", "out_ptr": "*fp32"}
    with pytest.raises(CompileError, match="failed to distribute"):
        _jit_compile(fn, sig, {"BLOCK": 128} if fn is scatter_kernel else {}, **options)


@pytest.mark.parametrize("capability, ptx_target", [(None, b".target sm_80"), ((9, 0), b".target sm_90")])
def test_the_fallback_compiles_for_the_visible_gpu(codegen_fails, monkeypatch, capability, ptx_target):
    """Triton's kernel is compiled for the GPU the launch runs on, as Triton's own launch is
    (Triton refuses tl.dot_scaled below sm_90); without a visible GPU, for code generation's arch."""
    import torch
    if capability is not None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: capability)
    else:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    k = _jit_compile(add_kernel, ADD_SIG, {"BLOCK_SIZE": 128})
    assert ptx_target in k.asm["vmfb"]
