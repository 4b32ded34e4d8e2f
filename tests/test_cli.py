import subprocess
import sys

import triton_iree


def cli(*args, input=None):
    return subprocess.run([sys.executable, "-m", "triton_iree.cli", *args], capture_output=True,
                          text=True, input=input)


def test_version_and_help():
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"triton-iree {triton_iree.__version__}"
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
