import os
import subprocess
import sys
from pathlib import Path

import triton_iree


def cli(*args, input=None):
    return subprocess.run([sys.executable, "-m", "triton_iree.cli", *args], capture_output=True,
                          text=True, input=input)


def test_version_and_help():
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.startswith(f"triton-iree {triton_iree.__version__} (triton ")
    r = cli("--help")
    assert r.returncode == 0
    assert "prepare" in r.stdout and "compile" in r.stdout


def test_missing_input_is_one_line_error_without_traceback(tmp_path):
    r = cli("prepare", str(tmp_path / "missing.mlir"), "-o", str(tmp_path / "out.mlir"))
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "missing.mlir" in r.stderr
    assert not (tmp_path / "out.mlir").exists()


def test_unknown_option_is_rejected():
    r = cli("--no-such-flag")
    assert r.returncode != 0 and "Traceback" not in r.stderr


SEED = Path(__file__).parent / "data" / "ttshared" / "ttshared_add_kernel_ranked.mlir"


def one_line_error(r) -> str:
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("triton-iree: error: "), r.stderr
    return lines[0]


def test_non_utf8_input_is_a_one_line_error(tmp_path):
    data = SEED.read_bytes().replace(b"module {", b"module { \xff", 1)
    line = data[:data.index(b"\xff")].count(b"\n") + 1
    bad, out = tmp_path / "bad.mlir", tmp_path / "out"
    bad.write_bytes(data)
    for args, stdin in [(["prepare", str(bad), "-o", str(out)], None), (["prepare", "-", "-o", str(out)], data),
                        (["compile", str(bad), "-o", str(out)], None)]:
        r = subprocess.run([sys.executable, "-m", "triton_iree.cli", *args], capture_output=True, input=stdin)
        r.stderr = r.stderr.decode()
        assert "not UTF-8" in one_line_error(r) and f":{line}: " in r.stderr
        assert not out.exists()


def test_a_crashing_iree_compile_is_one_line_with_its_signal_and_a_reproducer(tmp_path):
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "iree-compile").write_text("#!/bin/sh\nkill -SEGV $$\n")
    (tools / "iree-compile").chmod(0o755)
    out = tmp_path / "add.vmfb"
    r = subprocess.run([sys.executable, "-m", "triton_iree.cli", "compile", str(SEED), "-o", str(out)],
                       capture_output=True, text=True, env={**os.environ, "IREE_TOOL_PATH": str(tools), "TMPDIR": str(tmp_path)})
    line = one_line_error(r)
    assert "killed by signal SIGSEGV (11)" in line and "to reproduce: " in line
    kept = Path(line.split("to reproduce: ", 1)[1].split()[1])
    assert "flow.dispatch.workgroups" in kept.read_text()
    assert not out.exists()


def test_compile_refuses_gpu_targets_until_validated(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_IREE_UNVALIDATED_TARGETS"}
    for target in ("cuda", "hip", "vulkan"):
        r = subprocess.run([sys.executable, "-m", "triton_iree.cli", "compile", str(SEED), "--target", target,
                            "-o", str(tmp_path / "out.vmfb")], capture_output=True, text=True, env=env)
        assert "not validated yet" in one_line_error(r) and "TRITON_IREE_UNVALIDATED_TARGETS=1" in r.stderr
        assert not (tmp_path / "out.vmfb").exists()
