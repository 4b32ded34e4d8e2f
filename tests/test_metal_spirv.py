"""metal-spirv: a compile-only target (IREE's metal-spirv backend: the SPIR-V code generation
of vulkan, translated to Metal Shading Language). Every kernel of the corpus (kernels.py) is
cross-compiled for it through iree-compile, on any machine; launching is refused, since IREE's
metal driver runs on macOS and iOS only.

It also shows that a target is one class plus one registry line: the command line, `aot`,
`activate` and `Launcher` know metal-spirv from the registry alone.
"""
import dataclasses
import re
import subprocess
import sys

import pytest

from triton_iree import aot, kernels as K, targets
from triton_iree.errors import LaunchError
from triton_iree.targets.spirv import VECTOR_MATMUL_ARCHES

F32_1D = "x_ptr=*fp32,out_ptr=*fp32,n=i32"
MATMUL_SIG = K.matmul_signature()
TILES = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}

# (kernel, signature, constexprs): the whole corpus.
CORPUS = [
    (K.add_kernel, "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n_elements=i32", {"BLOCK_SIZE": 1024}),
    (K.softmax_kernel, "out_ptr=*fp32,in_ptr=*fp32,in_row_stride=i32,out_row_stride=i32,n_rows=i32,n_cols=i32",
     {"BLOCK_SIZE": 1024}),
    (K.matmul_kernel, MATMUL_SIG, TILES),
    (K.layer_norm_fwd_kernel, "X=*fp32,Y=*fp32,W=*fp32,B=*fp32,Mean=*fp32,Rstd=*fp32,stride=i32,N=i32,eps=fp32",
     {"BLOCK_SIZE": 256}),
    (K.scale_shift_2d_kernel, "x_ptr=*fp32,out_ptr=*fp32,M=i32,N=i32,stride_xm=i32,stride_xn=i32,stride_om=i32,"
     "stride_on=i32,scale=fp32,shift=fp32", {"BLOCK_M": 16, "BLOCK_N": 32}),
    (K.gather_kernel, "x_ptr=*fp32,idx_ptr=*i32,out_ptr=*fp32,n=i32", {"BLOCK": 128}),
    (K.scatter_kernel, "x_ptr=*fp32,idx_ptr=*i32,out_ptr=*fp32,n=i32", {"BLOCK": 128}),
    (K.mod_div_index_kernel, "x_ptr=*fp32,out_ptr=*fp32,xnumel=i32", {"COLS": 16, "XBLOCK": 128}),
    (K.row_sum_kernel, "x_ptr=*fp32,out_ptr=*fp32,M=i32,N=i32,stride_m=i32", {"BLOCK_M": 8, "BLOCK_N": 64}),
    (K.argmax_kernel, "x_ptr=*fp32,out_idx_ptr=*i32,out_val_ptr=*fp32,N=i32,stride=i32", {"BLOCK": 128}),
    (K.scalar_io_kernel, "x_ptr=*fp32,out_ptr=*fp32,scale=fp32,offset_i64=i64", {"FLAG": True}),
    (K.where_int_kernel, "x_ptr=*i32,y_ptr=*i32,out_ptr=*i32,n=i32", {"BLOCK": 128}),
    (K.bool_mask_kernel, "x_ptr=*fp32,keep_ptr=*i1,out_ptr=*fp32,n=i32", {"BLOCK": 128}),
    (K.inplace_rmw_kernel, "x_ptr=*fp32,n=i32", {"BLOCK": 128}),
    (K.store_then_load_kernel, F32_1D, {"BLOCK": 128}),
    (K.reversed_copy_kernel, F32_1D, {"BLOCK": 128}),
    (K.even_mask_kernel, F32_1D, {"BLOCK": 128}),
    (K.strided_copy_kernel, "x_ptr=*fp32,out_ptr=*fp32,n=i32,stride=i32", {"BLOCK": 128}),
    (K.low_precision_kernel, "x_ptr=*fp16,y_ptr=*fp16,out_ptr=*fp16,sum_ptr=*fp32,n=i32", {"BLOCK": 128}),
    (K.rand_kernel, "out_ptr=*fp32,seed=i32,n=i32", {"BLOCK": 128}),
    (K.guarded_copy_kernel, "x_ptr=*fp32,out_ptr=*fp32,n=i32,limit=i32", {"BLOCK": 128}),
    (K.row_tile_copy_kernel, "x_ptr=*fp32,out_ptr=*fp32,M=i32,N=i32,stride=i32", {"BLOCK_N": 64}),
    (K.broadcast_masked_kernel, "x_ptr=*fp32,out_ptr=*fp32,M=i32,N=i32", {"BLOCK_M": 8, "BLOCK_N": 32}),
    (K.matmul_stepped_kernel, MATMUL_SIG, TILES),
    (K.two_dots_rowsum_kernel, "a_ptr=*fp32,b_ptr=*fp32,d_ptr=*fp32,c_ptr=*fp32,e_ptr=*fp32,s_ptr=*fp32,M=i32,"
     "N=i32,K=i32", TILES),
    (K.decayed_dot_kernel, "a_ptr=*fp32,b_ptr=*fp32,c_ptr=*fp32,M=i32,N=i32,K=i32,decay=fp32", TILES),
    (K.int8_matmul_kernel, "a_ptr=*i8,b_ptr=*i8,c_ptr=*i32,M=i32,N=i32,K=i32", TILES),
    (K.window_kernel, "x_ptr=*fp32,out_ptr=*fp32,R=i32,C=i32,stride=i32", {"BLOCK_R": 8, "BLOCK_C": 32}),
    (K.attention_kernel, "q_ptr=*fp32,k_ptr=*fp32,v_ptr=*fp32,o_ptr=*fp32,L=i32,scale=fp32",
     {"D": 32, "BLOCK_M": 32, "BLOCK_N": 32}),
    (K.mask_forms_kernel, "x_ptr=*fp32,out_ptr=*fp32,lo=i32,hi=i32", {"BLOCK": 128, "FORM": 0}),
    (K.runtime_if_kernel, "x_ptr=*fp32,out_ptr=*fp32,n=i32,mode=i32", {"BLOCK": 128}),
    (K.trans_pointer_kernel, "x_ptr=*fp32,out_ptr=*fp32,M=i32,N=i32,stride_x=i32", {"BLOCK_M": 16, "BLOCK_N": 32}),
    (K.masked_scalar_kernel, "x_ptr=*fp32,out_ptr=*fp32,loaded_ptr=*fp32,n=i32", {}),
    (K.special_values_kernel, "x_ptr=*fp32,out_ptr=*fp32,k=i32,n=i32", {"BLOCK": 128}),
]


def _is_vmfb(data: bytes) -> bool:
    """An IREE module: a zip archive whose first member is the module's FlatBuffer."""
    return data[:4] == b"PK\x03\x04" and b"module.fb" in data[:64]


@pytest.fixture(autouse=True)
def _unvalidated(monkeypatch):
    monkeypatch.setenv(targets.UNVALIDATED_TARGETS_VAR, "1")   # metal-spirv has run on no device


def test_the_corpus_is_covered():
    jitted = {name for name, v in vars(K).items() if type(v).__name__ == "JITFunction"}
    assert jitted == {fn.__name__ for fn, _, _ in CORPUS}


@pytest.mark.parametrize("fn, signature, constexprs", CORPUS, ids=[fn.__name__ for fn, _, _ in CORPUS])
def test_corpus_kernel_cross_compiles(fn, signature, constexprs):
    k = aot.compile_kernel(fn, signature, constexprs, target="metal-spirv")
    # The SPIR-V pipelines Vulkan's configurations name (BaseDistribute, SubgroupReduce), or IREE's own choice.
    assert all(p.startswith("#iree_gpu.spirv_pipeline<") for p in re.findall(r"pipeline = (#[\w.]+<)", k.module))
    assert _is_vmfb(k.vmfb)


def test_the_target_inherits_spirv_code_generation():
    metal, vulkan = targets.make_target("metal-spirv"), targets.make_target("vulkan")
    assert isinstance(metal, targets.Vulkan) and metal.arch == "macos" and metal.compile_only
    # The same emitter choices, but the device: Vulkan's ampere names its own, with its workgroup
    # memory; Apple GPUs have 32 KiB, and their matmuls keep the register dot (IREE's SPIR-V
    # matmul pipeline has not run on them).
    ampere = vulkan.emit_options(4)
    assert metal.workgroup_memory == 32768 < vulkan.workgroup_memory
    assert ampere.gpu_tiling.matmul_pipeline and metal.arch not in VECTOR_MATMUL_ARCHES
    assert metal.emit_options(4) == dataclasses.replace(
        ampere, device_target=None,
        gpu_tiling=dataclasses.replace(ampere.gpu_tiling, workgroup_memory=32768, matmul_pipeline=False))
    assert metal.device_target is None
    assert metal.flags == ("--iree-metal-target-platform=macos", "--iree-metal-compile-to-metallib=false")
    assert targets.from_triton(metal.triton_target()) == metal


def test_launching_is_refused_in_one_line():
    vmfb = aot.compile_kernel(K.add_kernel, CORPUS[0][1], {"BLOCK_SIZE": 128}, target="metal-spirv").vmfb
    with pytest.raises(LaunchError, match="^target 'metal-spirv' is compile-only") as e:
        aot.Launcher(vmfb, "add_kernel", CORPUS[0][1], target="metal-spirv")
    assert "\n" not in str(e.value)
    import triton_iree
    with pytest.raises(LaunchError, match="compile-only"):
        triton_iree.activate("metal-spirv")


def test_the_command_line_compiles_for_it(tmp_path):
    src = tmp_path / "k.py"
    src.write_text("import triton\nimport triton.language as tl\n\n@triton.jit\n"
                   "def copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
                   "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
                   "    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)\n")
    out = tmp_path / "copy.vmfb"
    r = subprocess.run([sys.executable, "-m", "triton_iree", "compile", f"{src}:copy", "-o", str(out),
                        "--target", "metal-spirv", "--arch", "ios", "--signature", "x_ptr=*fp32,out_ptr=*fp32,n=i32",
                        "--constexpr", "BLOCK=64", "--print-command"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "--iree-hal-target-backends=metal-spirv" in r.stdout and "--iree-metal-target-platform=ios" in r.stdout
    assert _is_vmfb(out.read_bytes())
