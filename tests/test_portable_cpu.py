"""The CPU target's choices: TRITON_IREE_CPU (modules built for a named CPU instead of the host,
caches shared between machines) and CpuTiling's configuration of row reductions."""
import os
import subprocess
import sys

from triton_iree import compile as iree_compile
from triton_iree import targets
from triton_iree.targets import cpu


def test_named_cpu_is_in_the_flags_and_the_cache_key_has_no_host_identity(monkeypatch):
    monkeypatch.delenv(cpu.CPU_VAR, raising=False)
    host = targets.make_target("llvm-cpu")
    assert "--iree-llvmcpu-target-cpu=host" in host.flags
    assert iree_compile.cpu_key(host) == iree_compile.host_cpu_id() != ""
    monkeypatch.setenv(cpu.CPU_VAR, "x86-64-v3")
    v3 = targets.make_target("llvm-cpu")
    assert "--iree-llvmcpu-target-cpu=x86-64-v3" in v3.flags
    assert iree_compile.cpu_key(v3) == ""
    assert iree_compile.cache_key("m", v3) != iree_compile.cache_key("m", host)
    monkeypatch.setenv(cpu.CPU_VAR, "generic")
    assert iree_compile.cache_key("m", targets.make_target("llvm-cpu")) != iree_compile.cache_key("m", v3)


def test_the_host_cpu_is_read_in_one_place(monkeypatch):
    """The cache key, the vector width and bench's machine record agree on this CPU's features."""
    from triton_iree import bench, host
    monkeypatch.setattr(cpu.platform, "machine", lambda: "x86_64")
    ids = set()
    for flags, width, isa in ((("fpu", "avx2"), 32, "avx2"), (("avx2", "avx512f"), 64, "avx512"), (("sse2",), 16, None)):
        monkeypatch.setattr(host, "host_cpu_info", lambda: ("A test CPU", flags))
        assert cpu.host_vector_bytes() == width
        record = bench.machine()
        assert record["cpu"] == "A test CPU" and record["isa"] == (isa or bench.platform.machine())
        ids.add(iree_compile.host_cpu_id())
    assert len(ids) == 3


def test_vector_width_follows_the_named_cpu():
    assert cpu.target_vector_bytes("x86-64-v4") == 64
    assert cpu.target_vector_bytes("znver3") == 32
    assert cpu.target_vector_bytes("generic") == 16
    assert cpu.target_vector_bytes("host") == cpu.host_vector_bytes()


def test_kernels_built_for_generic_cpu_compute_the_right_result(tmp_path):
    code = ("import torch\n"
            "from triton_iree import kernels as K\n"
            "x, y = torch.rand(5000), torch.rand(5000)\n"
            "assert torch.equal(K.run_add(x, y), x + y)\n"
            "a, b = torch.randn(70, 40), torch.randn(40, 90)\n"
            "torch.testing.assert_close(K.run_matmul(a, b), a @ b, rtol=1e-4, atol=1e-4)\n")
    env = dict(os.environ, TRITON_IREE_CPU="generic", TRITON_CACHE_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    vmfbs = list(tmp_path.rglob("*.vmfb"))
    assert vmfbs   # the cache holds what was compiled


def _lower(kernel, sig, consts, tiling):
    from helpers import tile_program
    from triton_iree import lowering
    return lowering.lower(tile_program(kernel, sig, consts),
                          lowering.EmitOptions(max_workgroups=128, cpu_tiling=tiling))


def test_row_reductions_get_several_vector_accumulators_and_2d_ones_keep_iree_s_config():
    from triton_iree import kernels as K
    from triton_iree.targets.cpu import CpuTiling
    tiling = CpuTiling(vector_bytes=32, elementwise_bytes=32, matmul_rows=4)
    sig = dict(out_ptr="*fp32", in_ptr="*fp32", in_row_stride="i32", out_row_stride="i32", n_rows="i32",
               n_cols="i32", BLOCK_SIZE="constexpr")
    text = _lower(K.softmax_kernel, sig, dict(BLOCK_SIZE=1024), tiling)
    assert "vector_reduction = [32]" in text          # 4 vectors of 8 f32
    assert text.count("compilation_info = ") == 1   # one root
    one = _lower(K.softmax_kernel, sig, dict(BLOCK_SIZE=1024), CpuTiling(vector_bytes=32, reduction_vectors=1))
    assert "lowering_config" not in one              # one vector: IREE's own choice, left to it
    sig2 = dict(x_ptr="*fp32", out_ptr="*fp32", M="i32", N="i32", stride_m="i32", BLOCK_M="constexpr",
                BLOCK_N="constexpr")
    two_d = _lower(K.row_sum_kernel, sig2, dict(BLOCK_M=8, BLOCK_N=64), tiling)
    assert "lowering_config" not in two_d            # 2-D reductions keep IREE's configuration
