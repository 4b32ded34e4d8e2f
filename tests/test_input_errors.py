"""Mistakes in the input (a kernel, triton-shared IR, the arguments of a launch): each is the
project's own error, naming the input's line or the argument, never a crash or a traceback."""
import inspect
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
import triton
import triton.language as tl

from triton_iree import aot
from triton_iree.errors import InputError
from triton_iree.ttshared import prepare

DATA = Path(__file__).parent / "data" / "ttshared"


def _add_kernel_scaled(factor: int) -> str:
    """triton-shared's add kernel with its block offset multiplied by `factor` (line 9)."""
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
    monkeypatch.setattr(lowering, "emit_module", lambda *a, **k: "module { not.mlir }")
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
        from triton_iree import compile as c
        c.compile_module("module {{}}", c.make_target(), name="{name}", use_cache=False)
    """)], stderr=subprocess.DEVNULL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="kills a child process")
def test_the_working_directory_of_a_compile_killed_midway_is_removed_by_the_next_compile(tmp_path, monkeypatch):
    from triton_iree import CompileError
    from triton_iree import compile as iree_compile
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
    with pytest.raises(CompileError):
        iree_compile.compile_module("module {}", iree_compile.make_target(), name="next", use_cache=False)
    assert not any(v.exists() for v in victims)
    assert (kept / "crashed.iree.mlir").read_text() == "module {}"
    assert not list(tmp_path.glob("triton-iree-*next-*"))
