import os
import re
import shlex
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
    from importlib.metadata import version
    assert f"iree {version('iree-base-compiler')}, torch {version('torch')})" in r.stdout
    r = cli("--help")
    assert r.returncode == 0
    assert "prepare" in r.stdout and "compile" in r.stdout


def test_python_dash_m_triton_iree_is_the_command():
    r = subprocess.run([sys.executable, "-m", "triton_iree", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == cli("--version").stdout, r.stderr
    r = subprocess.run([sys.executable, "-m", "triton_iree", "compile", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--signature" in r.stdout, r.stderr


_TWO_KERNELS = """
import triton
import triton.language as tl


@triton.jit
def copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@triton.autotune(configs=[triton.Config({})], key=[])
@triton.jit
def scale(x_ptr, n):
    pass


if __name__ == "__main__":
    raise SystemExit("the file's launch code ran")
"""


def test_compile_of_a_python_file_without_kernel_names_the_kernel_to_give(tmp_path):
    src, out = tmp_path / "two.py", tmp_path / "out.vmfb"
    src.write_text(_TWO_KERNELS)
    for spec in (str(src), f"{src}:"):
        line = one_line_error(cli("compile", spec, "-o", str(out)))
        assert line == (f"triton-iree: error: {spec!r} names no kernel: give FILE.py:KERNEL "
                        f"(its @triton.jit functions: copy, scale)")
        assert not out.exists()
    # The file is imported, not run as __main__: its guarded launch code does not run.
    r = cli("compile", f"{src}:copy", "-o", str(out), "--signature", "x_ptr=*fp32,out_ptr=*fp32,n=i32",
            "--constexpr", "BLOCK=16", "--emit-mlir")
    assert r.returncode == 0 and "flow.dispatch.workgroups" in out.read_text(), r.stderr


def test_compile_help_lists_targets_and_arches():
    r = cli("compile", "--help")
    options = r.stdout[r.stdout.index("options:"):]
    target = options[options.index("--target {"):options.index("--arch ARCH")]
    arch = options[options.index("--arch ARCH"):options.index("--signature SIGNATURE")]
    assert all(t in target for t in ("llvm-cpu (this CPU", "TRITON_IREE_UNVALIDATED_TARGETS")), target
    assert all(a in " ".join(arch.split()) for a in ("sm_80", "gfx942", "ampere")), arch


def test_missing_input_is_one_line_error_without_traceback(tmp_path):
    r = cli("prepare", str(tmp_path / "missing.mlir"), "-o", str(tmp_path / "out.mlir"))
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "missing.mlir" in r.stderr
    assert not (tmp_path / "out.mlir").exists()


def test_unknown_option_is_rejected():
    r = cli("--no-such-flag")
    assert r.returncode != 0 and "Traceback" not in r.stderr


ROOT = Path(__file__).parents[1]
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


def test_compile_refuses_gpu_targets_for_triton_shared_input(tmp_path):
    """No GPU target is validated for linalg input (cuda is, for Triton kernels)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_IREE_UNVALIDATED_TARGETS"}
    for target in ("cuda", "hip", "vulkan"):
        r = subprocess.run([sys.executable, "-m", "triton_iree.cli", "compile", str(SEED), "--target", target,
                            "-o", str(tmp_path / "out.vmfb")], capture_output=True, text=True, env=env)
        assert "not validated yet" in one_line_error(r) and "TRITON_IREE_UNVALIDATED_TARGETS=1" in r.stderr
        assert not (tmp_path / "out.vmfb").exists()


def test_print_flags_go_to_stdout_with_the_environment_flags(tmp_path):
    out = tmp_path / "add.iree.mlir"
    env = dict(os.environ, TRITON_IREE_COMPILE_FLAGS="--iree-opt-level=O2")
    r = subprocess.run([sys.executable, "-m", "triton_iree.cli", "prepare", str(SEED), "-o", str(out),
                        "--print-flags"], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    flags = r.stdout.split()
    assert flags[0] == "--iree-hal-target-backends=llvm-cpu" and flags[-1] == "--iree-opt-level=O2"
    assert "--iree-llvmcpu-disable-distribution" in flags and "flow.dispatch.workgroups" in out.read_text()
    # stdout cannot carry both the module and the flags.
    assert "give -o FILE" in one_line_error(cli("prepare", str(SEED), "--print-flags"))


def test_print_command_is_the_real_command_and_reproduces_the_vmfb(tmp_path):
    out = tmp_path / "add.vmfb"
    env = dict(os.environ, TRITON_IREE_COMPILE_FLAGS="--iree-opt-level=O2")
    r = subprocess.run([sys.executable, "-m", "triton_iree.cli", "compile", str(SEED), "-o", str(out),
                        "--print-command"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    command = shlex.split(r.stdout)
    kept = tmp_path / "add.iree.mlir"          # the prepared module, kept next to the output
    assert Path(command[0]).is_absolute() and Path(command[0]).name == "iree-compile"
    assert command[1] == str(kept) and "flow.dispatch.workgroups" in kept.read_text()
    assert "--iree-opt-level=O2" in command and f"-o={out}" in command
    again = tmp_path / "again.vmfb"
    rerun = subprocess.run([*command, f"-o={again}"], capture_output=True, text=True,
                           env=dict(os.environ, PATH="/usr/bin:/bin"))
    assert rerun.returncode == 0, rerun.stderr
    # The same program (the bytes may differ: debug locations name the input file).
    import iree.runtime as rt
    import numpy as np
    n = 3000
    x, y = np.arange(n, dtype=np.float32), np.full(n, 0.25, np.float32)
    for vmfb in (out, again):
        ctx = rt.SystemContext(config=rt.Config("local-task"))
        ctx.add_vm_module(rt.VmModule.copy_buffer(ctx.instance, vmfb.read_bytes()))
        res = ctx.modules.module["add_kernel"](x, y, np.zeros(n, np.float32), n, 3, 1, 1)
        np.testing.assert_array_equal(np.asarray(res), x + y)
    assert "give -o FILE" in one_line_error(cli("compile", str(SEED), "-o", "-", "--print-command"))


def _readme_error_examples():
    """The `$ triton-iree ...` commands of docs/ttshared.md's Errors block and the line each prints."""
    text = (ROOT / "docs" / "ttshared.md").read_text()
    block = text.split("## Errors", 1)[1].split("```", 2)[1]
    lines = [ln for ln in block.splitlines() if ln.strip()]
    return [(lines[i][2:], lines[i + 1]) for i in range(0, len(lines), 2)]


def test_readme_error_examples_reproduce_exactly():
    examples = _readme_error_examples()
    assert [shlex.split(c)[2] for c, _ in examples] == [
        "examples/ttshared/bad_op.mlir", "examples/ttshared/bad_parse.mlir", "examples/ttshared/latin1.mlir"]
    for command, expected in examples:
        args = shlex.split(command)
        assert args[0] == "triton-iree"
        r = subprocess.run([sys.executable, "-m", "triton_iree.cli", *args[1:]], capture_output=True, text=True,
                           cwd=ROOT)
        assert one_line_error(r) == expected
        assert not (ROOT / args[args.index("-o") + 1]).exists()


_LAUNCH = """
import sys, torch
sys.path.insert(0, {examples!r})
from kernels import add_kernel
x = torch.rand(100)
add_kernel[(1,)](x, torch.rand(100), torch.empty(100), 100, BLOCK_SIZE=128)
"""


def test_slow_compiles_print_one_line_unless_quiet(tmp_path):
    script = tmp_path / "launch.py"
    script.write_text(_LAUNCH.format(examples=str(ROOT / "examples")))
    base = dict(os.environ, TRITON_IREE_SLOW_COMPILE_SECONDS="0", TRITON_ALWAYS_COMPILE="1",
                TRITON_CACHE_DIR=str(tmp_path / "cache"))
    base.pop("TRITON_IREE_QUIET", None)
    for quiet in (False, True):
        env = dict(base, TRITON_IREE_QUIET="1") if quiet else base
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
        shown = re.findall(r"^triton-iree: compiling add_kernel for llvm-cpu took \d+\.\d s$", r.stderr, re.M)
        assert len(shown) == (0 if quiet else 1), r.stderr
