"""Mistakes in the input (a kernel, triton-shared IR, the arguments of a launch): each is the
project's own error, naming the input's line or the argument, never a crash or a traceback."""
import inspect
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
import warnings
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from triton_iree import aot
from triton_iree.errors import InputError, LaunchError
from triton_iree.ttshared import prepare

DATA = Path(__file__).parent / "data" / "ttshared"


def _add_kernel_scaled(factor: int) -> str:
    """triton-shared's add kernel with its block offset multiplied by `factor`."""
    text = (DATA / "ttshared_add_kernel_ranked.mlir").read_text()
    text = text.replace("%c1024 = arith.constant 1024 : index",
                        f"%c1024 = arith.constant 1024 : index\n    %factor = arith.constant {factor} : index", 1)
    return text.replace("%1 = arith.index_cast %0 : i32 to index",
                        "%scaled = arith.index_cast %0 : i32 to index\n"
                        "    %1 = arith.muli %scaled, %factor : index", 1)


def test_index_arithmetic_overflowing_i64_in_triton_shared_input_is_the_inputs_error_at_its_line():
    assert "flow.dispatch.workgroups" in prepare(_add_kernel_scaled(3), "add.mlir")
    text = _add_kernel_scaled(2 ** 62)
    line = text.splitlines().index("    %1 = arith.muli %scaled, %factor : index") + 1
    with pytest.raises(InputError, match="overflow") as e:
        prepare(text, "add.mlir")
    assert e.value.loc.startswith(f"add.mlir:{line}:") and "a bug" not in str(e.value)


@triton.jit
def _huge_stride_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    big = offs.to(tl.int64) * 4611686018427387904 * 8
    tl.store(y_ptr + big, tl.load(x_ptr + big, mask=mask), mask=mask)


def test_index_arithmetic_overflowing_i64_in_a_kernel_is_the_inputs_error_at_its_line():
    src, first = inspect.getsourcelines(_huge_stride_kernel.fn)
    line = first + next(i for i, s in enumerate(src) if "4611686018427387904" in s)
    with pytest.raises(InputError, match="overflow") as e:
        aot.compile_kernel(_huge_stride_kernel, "x_ptr=*fp32,y_ptr=*fp32,n=i32", {"BLOCK": 64}, vmfb=False)
    assert f"{Path(__file__).name}:{line}:" in e.value.loc and "a bug" not in str(e.value)


def test_prepare_dumps_its_stages_to_the_dump_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_IREE_DUMP_DIR", str(tmp_path))
    text = (DATA / "ttshared_add_kernel_ranked.mlir").read_text()
    module = prepare(text, "add.mlir")
    where, = (tmp_path / "add_kernel").iterdir()
    assert (where / "add_kernel.ttshared.mlir").read_text() == text
    assert (where / "add_kernel.iree.mlir").read_text() == module
    script = (where / "iree-compile.sh").read_text()
    assert "add_kernel.iree.mlir" in script and "--iree-hal-target-backends=llvm-cpu" in script


def test_prepare_dumps_a_module_that_does_not_verify(tmp_path, monkeypatch):
    """The advice of the invalid-module error (report it with the dumped module) can be followed."""
    from triton_iree import CompileError, lowering
    monkeypatch.setenv("TRITON_IREE_DUMP_DIR", str(tmp_path))
    monkeypatch.setattr(lowering.Emitter, "module", lambda self: "module { not.mlir }")
    with pytest.raises(CompileError, match="invalid module"):
        prepare(_add_kernel_scaled(3), "add.mlir")
    where, = (tmp_path / "add_kernel").iterdir()
    assert (where / "add_kernel.iree.mlir").read_text() == "module { not.mlir }"


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "triton_iree.cli", *args], capture_output=True, text=True)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_compile_and_prepare_given_prepared_output_say_it_is_already_prepared(tmp_path, dtype):
    text = (DATA / "ttshared_add_kernel_ranked.mlir").read_text().replace("f32", dtype)
    prepared = tmp_path / "add.iree.mlir"
    prepared.write_text(prepare(text, "add.mlir"))
    for command in ("compile", "prepare"):
        r = _cli(command, str(prepared), "-o", str(tmp_path / "out"))
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        line, = r.stderr.strip().splitlines()
        assert line.startswith("triton-iree: error: the input is already prepared") and str(prepared) in line
        assert not (tmp_path / "out").exists()


def test_a_native_mode_module_is_recognized_as_already_prepared():
    from triton_iree import native
    args = tuple(native.kernel_args({"x_ptr": "*fp32", "n": "i32"}, "k"))
    ptx = (".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(\n .param .u64 k_param_0,\n"
           " .param .u32 k_param_1,\n .param .u64 k_param_2,\n .param .u64 k_param_3\n)\n{\n ret;\n}\n")
    text = native.module(native.NativeKernel("k", ptx, args, 4, 0, (0, 0)))
    line = next(i for i, s in enumerate(text.splitlines(), 1) if "hal.executable.source" in s)
    with pytest.raises(InputError, match="already prepared") as e:
        prepare(text, "k.iree.mlir")
    assert e.value.loc.startswith(f"k.iree.mlir:{line}:")


def _fake_iree_compile(tmp_path, monkeypatch, body: str) -> None:
    """Makes iree.compiler find a shell script as iree-compile; temporary files go to tmp_path."""
    tools = tmp_path / "tools"
    tools.mkdir(exist_ok=True)
    exe = tools / "iree-compile"
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(0o755)
    monkeypatch.setenv("IREE_TOOL_PATH", str(tools))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)


def _compile_in_child(name: str) -> "subprocess.Popen":
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        from triton_iree import compile as c, targets
        c.compile_module("module {{}}", targets.make_target(), name="{name}", use_cache=False)
    """)], stderr=subprocess.DEVNULL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="kills a child process")
def test_the_working_directory_of_a_compile_killed_midway_is_removed_by_the_next_compile(tmp_path, monkeypatch):
    from triton_iree import CompileError
    from triton_iree import compile as iree_compile
    from triton_iree.targets import make_target
    started = tmp_path / "started"
    _fake_iree_compile(tmp_path, monkeypatch, f"touch {started}\nexec sleep 120")
    victims = []
    for i in range(2):
        started.unlink(missing_ok=True)
        child = _compile_in_child(f"victim{i}")
        deadline = time.monotonic() + 60
        while not started.exists():
            assert child.poll() is None and time.monotonic() < deadline, "iree-compile never started"
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()
        victims += list(tmp_path.glob(f"triton-iree-*victim{i}-*"))
    assert len(victims) == 2
    # A crashed compile keeps its input for the reproducer; the next compile keeps it too.
    _fake_iree_compile(tmp_path, monkeypatch, "kill -SEGV $$")
    crashed = _compile_in_child("crashed")
    assert crashed.wait() != 0
    kept, = tmp_path.glob("triton-iree-*crashed-*")
    _fake_iree_compile(tmp_path, monkeypatch, "exit 1")
    with pytest.raises(CompileError) as e:
        iree_compile.compile_module("module {}", make_target(), name="next", use_cache=False)
    assert not any(v.exists() for v in victims)
    assert (kept / "crashed.iree.mlir").read_text() == "module {}"
    # A failed compile keeps the input its message names (removed once its process is gone).
    failed, = tmp_path.glob("triton-iree-*next-*")
    assert str(failed / "next.iree.mlir") in str(e.value)


@triton.jit
def _scale_kernel(x_ptr, y_ptr, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * s, mask=m)


_SCALE_SIGNATURE = "x_ptr=*fp32,y_ptr=*fp32,n=i32,s=fp32"


@pytest.fixture(scope="module")
def scale_launcher():
    k = aot.compile_kernel(_scale_kernel, _SCALE_SIGNATURE, {"BLOCK": 16})
    return aot.Launcher(k.vmfb, k.name, _SCALE_SIGNATURE)


def _quantized():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.quantize_per_tensor(torch.rand(64), 0.1, 0, torch.qint8)


def test_launcher_refuses_tensors_of_another_dtype_than_the_signature_before_anything_runs(scale_launcher):
    x = torch.rand(53)
    y = torch.full((64,), 7.0)
    for bad in (torch.rand(64, dtype=torch.float16), torch.zeros(64, dtype=torch.complex64),
                torch.zeros(64, dtype=torch.int32), torch.zeros(64, dtype=torch.bool), _quantized()):
        with pytest.raises(LaunchError, match=rf"argument 'x_ptr' is a tensor of {str(bad.dtype)[6:]}, .*float32"):
            scale_launcher(bad, y, 53, 2.0, grid=(4,))
        with pytest.raises(LaunchError, match="argument 'y_ptr'"):
            scale_launcher(x, bad, 53, 2.0, grid=(4,))
        assert torch.all(y == 7.0)
    with pytest.raises(LaunchError, match="argument 'x_ptr' is on meta"):
        scale_launcher(torch.empty(64, device="meta"), y, 53, 2.0, grid=(4,))
    xs = torch.rand(107)[3:56]   # at an offset in its storage, not a multiple of the block
    scale_launcher(xs, y, 53, 2.0, grid=(4,))
    assert torch.equal(y[:53], xs * 2.0) and torch.all(y[53:] == 7.0)


@pytest.mark.parametrize("grid", [(), (1, 1, 1, 1), (1.5,), 4, None])
def test_launcher_refuses_grids_that_are_not_1_to_3_integers(scale_launcher, grid):
    y = torch.full((64,), 7.0)
    with pytest.raises(LaunchError, match="grid must be 1 to 3 integers"):
        scale_launcher(torch.rand(64), y, 53, 2.0, grid=grid)
    assert torch.all(y == 7.0)


@pytest.mark.parametrize("n,s,match", [(2 ** 64, 1.0, "argument 'n'"), (4, 2 ** 2000, "argument 's' must be a fp32"),
                                       (4, "a", "argument 's' must be a fp32"), (4, None, "argument 's'")],
                         ids=["n=2**64", "s=2**2000", "s='a'", "s=None"])
def test_launcher_refuses_scalars_that_do_not_fit_with_the_arguments_name(scale_launcher, n, s, match):
    y = torch.full((64,), 7.0)
    with pytest.raises(LaunchError, match=match):
        scale_launcher(torch.rand(64), y, n, s, grid=(1,))
    assert torch.all(y == 7.0)


@pytest.mark.parametrize("case,error,match", [
    ("complex64", KeyError, "complex64"), ("qint8", KeyError, "qint8"), ("empty grid", IndexError, "out of range"),
    ("2**64", OverflowError, "too large"), ("-2**63-1", OverflowError, "too large")])
def test_triton_refuses_these_launches_itself_before_the_backend_runs(case, error, match, monkeypatch):
    """kernel[grid](...) with these arguments fails in Triton's own launch code (its signature
    and specialization), before triton-iree's backend sees the launch: they stay Triton's errors."""
    import triton_iree
    from triton_iree import runtime
    launched = []
    monkeypatch.setattr(runtime.LoadedKernel, "launch", lambda *a, **k: launched.append(a))
    x, y = torch.rand(64), torch.zeros(64)
    args = {"complex64": lambda: ((1,), torch.zeros(64, dtype=torch.complex64), y, 64),
            "qint8": lambda: ((1,), _quantized(), y, 64), "empty grid": lambda: ((), x, y, 64),
            "2**64": lambda: ((1,), x, y, 2 ** 64), "-2**63-1": lambda: ((1,), x, y, -2 ** 63 - 1)}[case]
    grid, *rest = args()
    with pytest.raises(error, match=match) as e:
        _scale_kernel[grid](*rest, 2.0, BLOCK=16)
    files = [f.filename for f in traceback.extract_tb(e.tb)]
    ours = str(Path(triton_iree.__file__).parent)
    assert not [f for f in files if f.startswith(ours)], files
    assert any(f.startswith(str(Path(triton.__file__).parent)) for f in files) and not launched


def test_an_offset_plus_a_constant_beyond_i64_is_the_inputs_error_at_the_access():
    """The overflow is in the bound that the full-tile version of the program checks (offset +
    tile size), computed from the input's constants: reported at the access it bounds."""
    text = _add_kernel_scaled(3).replace("%1 = arith.muli %scaled, %factor", "%1 = arith.addi %scaled, %factor")
    assert "flow.dispatch.workgroups" in prepare(text, "add.mlir")
    text = _add_kernel_scaled(2 ** 63 - 1).replace("%1 = arith.muli %scaled, %factor",
                                                   "%1 = arith.addi %scaled, %factor")
    line = 1 + next(i for i, s in enumerate(text.splitlines()) if s.strip().startswith("memref.copy"))
    with pytest.raises(InputError, match="overflow.*9223372036854776831") as e:
        prepare(text, "add.mlir")
    assert e.value.loc.startswith(f"add.mlir:{line}:")
