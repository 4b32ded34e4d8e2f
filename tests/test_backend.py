"""The Triton plugin: registration, driver activation, launch semantics, caching, errors."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

import triton_iree
from triton_iree import LaunchError, UnsupportedError
from triton_iree import compile as iree_compile
from triton_iree import runtime, targets

import kernels as K


def test_entry_point_and_active_driver():
    from triton.backends import backends
    from triton.runtime.driver import driver
    from triton_iree.backend.driver import IreeDriver
    assert "cpu" in backends
    assert isinstance(driver.active, IreeDriver)
    assert driver.active.get_current_target().backend == "cpu"


def test_loading_the_backend_needs_no_iree_compiler():
    """Triton imports every registered backend when it loads: on a machine with IREE's runtime
    alone (running .vmfb files), `import triton` and the active driver must not need the compiler."""
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path, target=None):\n"
            "        if name == 'iree.compiler' or name.startswith('iree.compiler.'):\n"
            "            raise ImportError('blocked ' + name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "import triton\n"
            "from triton.backends import backends\n"
            "from triton.runtime.driver import driver\n"
            "assert backends['cpu'].compiler.__name__ == 'IreeBackend', backends\n"
            "print(type(driver.active).__name__)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "IreeDriver", r.stderr


@pytest.mark.parametrize("gpu", [False, True])
def test_driver_is_active_only_without_a_gpu(monkeypatch, gpu):
    # Triton's CUDA driver is active where torch sees a GPU: exactly one driver may be.
    from triton_iree.backend.driver import IreeDriver
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
    assert IreeDriver.is_active() is not gpu


def test_activate_selects_the_driver():
    from triton.runtime.driver import driver
    from triton_iree.backend.driver import IreeDriver
    triton_iree.activate("llvm-cpu")
    assert isinstance(driver.active, IreeDriver)
    with pytest.raises(ValueError, match="unknown target"):
        triton_iree.activate("tpu")


@triton.jit
def _grid_kernel(out_ptr):
    # out[z, y, x] = (num_programs, program ids) packed into one int
    x, y, z = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    nx, ny, nz = tl.num_programs(0), tl.num_programs(1), tl.num_programs(2)
    idx = (z * ny + y) * nx + x
    tl.store(out_ptr + idx, x + 10 * y + 100 * z + 1000 * nx + 10000 * ny + 100000 * nz)


@pytest.mark.parametrize("grid", [(5,), (3, 4), (2, 3, 4), lambda meta: (2, 2)])
def test_grids_of_one_to_three_dims(grid):
    g = grid({}) if callable(grid) else grid
    g = tuple(g) + (1,) * (3 - len(g))
    out = torch.full((g[0] * g[1] * g[2],), -1, dtype=torch.int32)
    _grid_kernel[grid](out)
    ref = torch.tensor([x + 10 * y + 100 * z + 1000 * g[0] + 10000 * g[1] + 100000 * g[2]
                        for z in range(g[2]) for y in range(g[1]) for x in range(g[0])], dtype=torch.int32)
    assert torch.equal(out, ref)


def test_constexpr_specialization_and_launch_options():
    x, y = torch.rand(3000), torch.rand(3000)
    outs = []
    for block in (64, 512, 4096):
        out = torch.zeros(3000)
        grid = (triton.cdiv(3000, block),)
        K.add_kernel[grid](x, y, out, 3000, BLOCK_SIZE=block, num_warps=8, num_stages=3)
        outs.append(out)
    for out in outs:
        torch.testing.assert_close(out, x + y, rtol=0, atol=0)


@triton.jit
def _scalars_kernel(out_ptr, a, b, c, d):
    tl.store(out_ptr + 0, a.to(tl.float64))
    tl.store(out_ptr + 1, b.to(tl.float64))
    tl.store(out_ptr + 2, c.to(tl.float64))
    tl.store(out_ptr + 3, d.to(tl.float64))


def test_scalar_argument_types():
    out = torch.zeros(4, dtype=torch.float64)
    _scalars_kernel[(1,)](out, -7, 2 ** 40 + 1, 0.25, 2 ** 31 + 5)   # i32, i64, f32, i64
    assert out.tolist() == [-7.0, float(2 ** 40 + 1), 0.25, float(2 ** 31 + 5)]


def test_second_launch_neither_recompiles_nor_reloads():
    x, y, out = torch.rand(777), torch.rand(777), torch.zeros(777)
    K.add_kernel[(7,)](x, y, out, 777, BLOCK_SIZE=128)
    compiles, loads = iree_compile.COMPILE_STATS["compiles"], runtime.LOAD_STATS["loads"]
    for _ in range(3):
        K.add_kernel[(7,)](x, y, out, 777, BLOCK_SIZE=128)
    assert iree_compile.COMPILE_STATS["compiles"] == compiles
    assert runtime.LOAD_STATS["loads"] == loads
    torch.testing.assert_close(out, x + y, rtol=0, atol=0)


_PROBE = """
import logging, sys, torch, triton, triton.language as tl
import triton_iree
from triton_iree import compile as c

lowered = []
class Lowered(logging.Handler):
    def emit(self, record):
        lowered.append(record.getMessage().startswith("lowering"))
logging.getLogger("triton_iree").setLevel(logging.INFO)
logging.getLogger("triton_iree").addHandler(Lowered())

@triton.jit
def probe_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) OP)

x, out = torch.arange(16.0), torch.zeros(16)
probe_kernel[(1,)](x, out, BLOCK=16)
print(triton_iree.__file__, sum(lowered), c.COMPILE_STATS["compiles"], out[3].item())
"""


def test_on_disk_cache_is_reused_and_invalidated_by_kernel_and_backend_changes(tmp_path):
    # Fresh processes sharing one cache directory, with triton-iree imported from a copy of
    # the package: a process lowers the kernel (it logs that) only where Triton's cache
    # has no binary for it. A change to the kernel's source or to the backend's lowering (any
    # source file of the package) must lower it again.
    pkg = tmp_path / "pkg" / "triton_iree"
    shutil.copytree(Path(triton_iree.__file__).parent, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    probe = tmp_path / "probe.py"

    def run(op):
        probe.write_text(_PROBE.replace("OP", op))
        env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "cache"),
                   PYTHONPATH=os.pathsep.join([str(pkg.parent), os.environ.get("PYTHONPATH", "")]))
        r = subprocess.run([sys.executable, str(probe)], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]
        module, lowered, compiles, value = r.stdout.split()
        assert Path(module).parent == pkg
        return int(lowered), int(compiles), float(value)

    assert run("+ 1") == (1, 1, 4.0)              # lowered and compiled
    assert run("+ 1") == (0, 0, 4.0)              # Triton's cache
    assert run("* 3") == (1, 1, 9.0)              # the kernel changed
    with open(pkg / "analysis.py", "a") as f:
        f.write("\n# a change to the lowering\n")
    lowered, _, value = run("* 3")
    assert lowered and value == 9.0               # the backend changed
    assert any(p.suffix == ".vmfb" for p in (tmp_path / "cache").rglob("*"))


def test_triton_always_compile_runs_iree_compile_despite_its_cache(tmp_path, monkeypatch):
    import iree.runtime as rt
    import numpy as np
    module = ("func.func @neg(%x: tensor<7xf32>) -> tensor<7xf32> {\n"
              "  %y = arith.negf %x : tensor<7xf32>\n  return %y : tensor<7xf32>\n}\n")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    target = targets.make_target("llvm-cpu")

    def compiles(always: str) -> int:
        monkeypatch.setenv("TRITON_ALWAYS_COMPILE", always)
        before = iree_compile.COMPILE_STATS["compiles"]
        vmfb = iree_compile.compile_module(module, target, name="neg")
        ctx = rt.SystemContext(config=rt.Config("local-task"))
        ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb))
        x = np.linspace(-3, 3, 7, dtype=np.float32)
        np.testing.assert_array_equal(np.asarray(ctx.modules.module["neg"](x)), -x)
        return iree_compile.COMPILE_STATS["compiles"] - before

    assert compiles("0") == 1   # compiled, and cached
    assert compiles("0") == 0   # from the cache
    assert compiles("1") == 1   # compiled regardless of the cache
    assert any(p.suffix == ".vmfb" for p in (tmp_path / "cache").rglob("*"))


@triton.jit
def _binary_only_probe(x_ptr, out_ptr, n, BLOCK: tl.constexpr):   # compiled by this test only
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def test_triton_store_binary_only_is_refused_clearly(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TRITON_STORE_BINARY_ONLY", "1")
    x = torch.rand(100)
    with pytest.raises(UnsupportedError, match="TRITON_STORE_BINARY_ONLY=1 is not supported"):
        _binary_only_probe[(1,)](x, torch.empty(100), 100, BLOCK=128)


_OVERRIDE_PROBE = """
import sys, torch
sys.path.insert(0, {examples!r})
from kernels import add_kernel
x = torch.rand(100)
out = torch.empty(100)
add_kernel[(1,)](x, x, out, 100, BLOCK_SIZE=128)
print((out - 2 * x).abs().max().item())
"""


def test_triton_kernel_override_of_ttir_works_and_of_the_iree_module_is_refused(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(_OVERRIDE_PROBE.format(examples=str(Path(__file__).parents[1] / "examples")))
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "cache"), TRITON_ALWAYS_COMPILE="1")

    def run(**knobs):
        return subprocess.run([sys.executable, str(probe)], capture_output=True, text=True, env={**env, **knobs})
    r = run(TRITON_KERNEL_DUMP="1", TRITON_DUMP_DIR=str(tmp_path / "dump"))
    assert r.returncode == 0 and float(r.stdout) == 0.0, r.stderr
    dumped, = (tmp_path / "dump").iterdir()
    override = tmp_path / "override" / dumped.name
    override.mkdir(parents=True)
    knobs = dict(TRITON_KERNEL_OVERRIDE="1", TRITON_OVERRIDE_DIR=str(tmp_path / "override"))
    ttir = (dumped / "add_kernel.ttir").read_text()
    (override / "add_kernel.ttir").write_text(ttir.replace("arith.addf", "arith.subf"))
    r = run(**knobs)   # x - x: 2x off
    assert r.returncode == 0 and float(r.stdout.split()[-1]) > 0.5, r.stderr
    (override / "add_kernel.ttir").unlink()
    (override / "add_kernel.iree").write_text((dumped / "add_kernel.iree").read_text())
    r = run(**knobs)
    assert r.returncode != 0 and "UnsupportedError: overriding add_kernel.iree is not supported" in r.stderr, r.stderr


def test_iree_cache_key_covers_module_target_flags_version_and_cpu(monkeypatch):
    t = targets.make_target("llvm-cpu")
    key = iree_compile.cache_key("m", t)
    assert key == iree_compile.cache_key("m", targets.make_target("llvm-cpu"))
    assert key != iree_compile.cache_key("m2", t)
    assert key != iree_compile.cache_key("m", targets.make_target("llvm-cpu", cpu="generic"))
    assert key != iree_compile.cache_key("m", t, ("--iree-opt-level=O3",))
    with monkeypatch.context() as mp:
        mp.setattr(iree_compile, "iree_version", lambda: "0.0.1")
        assert key != iree_compile.cache_key("m", t)
    with monkeypatch.context() as mp:
        mp.setattr(iree_compile, "host_cpu_id", lambda: "another cpu")
        assert key != iree_compile.cache_key("m", t)


def test_backend_hash_covers_sources_version_and_cpu(monkeypatch):
    # Triton's cache key includes the backend's hash: it must change with the lowering's
    # sources, the IREE version and the host CPU.
    from triton.runtime.driver import driver
    from triton_iree.backend import compiler

    def backend_hash():
        return compiler.IreeBackend(driver.active.get_current_target()).hash()

    h = backend_hash()
    assert compiler.source_key() in h
    for mod, name, value in ((compiler, "source_key", "0123456789abcdef"), (iree_compile, "iree_version", "0.0.1"),
                             (iree_compile, "host_cpu_id", "another cpu")):
        with monkeypatch.context() as mp:
            mp.setattr(mod, name, lambda v=value: v)
            assert backend_hash() != h, name


def test_dump_dir_has_every_stage_and_the_command_reproduces(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_IREE_DUMP_DIR", str(tmp_path))
    monkeypatch.setenv("TRITON_ALWAYS_COMPILE", "1")
    x = torch.rand(50)
    out = torch.zeros(50)
    K.run_add(x, torch.rand(50), out, BLOCK_SIZE=16)
    (d,) = (tmp_path / "add_kernel").iterdir()     # one specialization
    assert (d / "add_kernel.ttir").read_text().count('"tt.load"') == 2
    assert "flow.dispatch.workgroups" in (d / "add_kernel.iree.mlir").read_text()
    assert "--iree-llvmcpu-disable-distribution" in (d / "iree-compile.sh").read_text()
    # The script names the installed iree-compile: it runs without one on PATH, from anywhere.
    r = subprocess.run(["sh", str(d / "iree-compile.sh")], cwd=tmp_path, capture_output=True, text=True,
                       env=dict(os.environ, PATH="/usr/bin:/bin"))
    assert r.returncode == 0, r.stderr
    assert (d / "add_kernel.vmfb").stat().st_size > 0


_DUMP_PROBE = """
import sys, torch
sys.path.insert(0, {examples!r})
from kernels import add_kernel
x, y = torch.rand(300), torch.rand(300)
for block, dtype in ((64, torch.float32), (128, torch.float32), (64, torch.float16)):
    add_kernel[(5,)](x.to(dtype), y.to(dtype), torch.empty(300, dtype=dtype), 300, BLOCK_SIZE=block)
"""


def test_dump_dir_keeps_specializations_apart_and_is_written_on_a_cache_hit(tmp_path):
    # Three specializations of one kernel (two BLOCKs, two dtypes), each in its own directory;
    # a second process finds them in Triton's cache and dumps them again, the same.
    probe = tmp_path / "probe.py"
    probe.write_text(_DUMP_PROBE.format(examples=str(Path(__file__).parents[1] / "examples")))
    dumps = []
    for run in range(2):
        dump = tmp_path / f"dump{run}"
        env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "cache"), TRITON_IREE_DUMP_DIR=str(dump))
        r = subprocess.run([sys.executable, str(probe)], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-3000:]
        dumps.append({p.relative_to(dump): p.read_text() for p in dump.rglob("*") if p.is_file()})
    assert len({p.parent for p in dumps[0]}) == 3
    assert sorted(p.name for p in dumps[0] if p.name.endswith(".ttir")) == ["add_kernel.ttir"] * 3
    assert dumps[1] == dumps[0]


@triton.jit
def _unsupported_kernel(x_ptr):
    offs = tl.arange(0, 8)
    x = tl.load(x_ptr + offs)
    tl.store(x_ptr + offs, tl.inline_asm_elementwise("mov $0, $1;", "=r,r", [x], dtype=tl.float32,
                                                     is_pure=True, pack=1))


def test_unsupported_op_raises_before_touching_data():
    x = torch.zeros(8)
    with pytest.raises(UnsupportedError, match=r"inline_asm.*test_backend\.py:\d+"):
        _unsupported_kernel[(1,)](x)
    assert torch.equal(x, torch.zeros(8))


def test_bad_arguments_raise_launch_errors_and_leave_tensors_alone():
    import numpy as np
    y = torch.rand(64)
    out = torch.full((64,), 5.0)
    # Memory that IREE cannot import (not aligned to its elements): refused before anything runs.
    x = torch.from_numpy(np.ndarray((64,), np.float32, np.zeros(260, dtype=np.uint8).data, 1))
    assert x.data_ptr() % 4 == 1
    with pytest.raises(LaunchError, match="cannot be imported"):
        K.run_add(x, y, out, BLOCK_SIZE=64)
    assert torch.all(out == 5.0)


@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 256}, num_warps=8)],
                 key=["n"])
@triton.jit
def _autotuned_scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 3, mask=offs < n)


@triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def _heuristic_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) + 1)
    else:
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 2, mask=offs < n)


def test_autotune_and_heuristics():
    x = torch.randn(1000)
    out = torch.zeros(1000)
    _autotuned_scale[lambda meta: (triton.cdiv(1000, meta["BLOCK"]),)](x, out, 1000)
    torch.testing.assert_close(out, x * 3, rtol=0, atol=0)
    # Both configs ran and were timed; the fastest one is kept.
    timings = {c.kwargs["BLOCK"]: t for c, t in _autotuned_scale.configs_timings.items()}
    assert set(timings) == {64, 256}
    assert _autotuned_scale.best_config.kwargs["BLOCK"] == min(timings, key=timings.get)
    for n, add in ((1024, 1.0), (1000, 2.0)):
        x = torch.randn(n)
        out = torch.zeros(n)
        _heuristic_copy[(triton.cdiv(n, 128),)](x, out, n, BLOCK=128)
        torch.testing.assert_close(out, x + add, rtol=0, atol=0)


@triton.jit
def _load_only_kernel(x_ptr):
    tl.load(x_ptr + tl.arange(0, 16))


def test_empty_grid_kernel_without_stores_and_a_million_programs():
    x = torch.rand(10)
    out = torch.full((10,), 3.0)
    K.add_kernel[(0,)](x, x, out, 10, BLOCK_SIZE=16)
    assert torch.all(out == 3.0)
    _load_only_kernel[(4,)](torch.rand(16))
    n = 1 << 22
    x, out = torch.rand(n), torch.zeros(n)
    K.run_add(x, x, out, BLOCK_SIZE=4)          # 2^20 programs
    assert torch.equal(out, x + x)


def test_extra_compile_flags_reach_iree_compile_and_errors_show_the_command(monkeypatch):
    from triton_iree import CompileError
    monkeypatch.setenv("TRITON_IREE_COMPILE_FLAGS", "--no-such-iree-flag")
    monkeypatch.setenv("TRITON_ALWAYS_COMPILE", "1")
    x = torch.rand(8)
    with pytest.raises(CompileError) as e:
        K.run_add(x, x, torch.zeros(8), BLOCK_SIZE=8)
    assert "iree-compile" in str(e.value) and "--no-such-iree-flag" in str(e.value)
