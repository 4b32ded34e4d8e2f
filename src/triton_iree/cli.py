"""The `triton-iree` command line.

User mistakes (bad input, unsupported constructs, compile failures) print one line to stderr
and exit non-zero; tracebacks are for triton-iree's own bugs.
"""
from __future__ import annotations

import argparse
import sys
from importlib import metadata

from . import __version__
from .errors import CompileError, TritonIreeError


def _versions() -> str:
    """triton-iree's version and those of the packages it runs with."""
    def of(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"
    return (f"triton-iree {__version__} (triton {of('triton')}, iree {of('iree-base-compiler')}, "
            f"torch {of('torch')})")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="triton-iree",
        description="Run Triton kernels through IREE. Installing the package registers a Triton "
                    "backend, so kernel[grid](...) runs on IREE's llvm-cpu target; this command "
                    "works on IR files.")
    p.add_argument("--version", action="version", version=_versions())
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    prep = sub.add_parser("prepare", help="make triton-shared's linalg+memref output compilable by iree-compile")
    prep.add_argument("input", help="triton-shared MLIR file ('-' for stdin)")
    prep.add_argument("-o", "--output", default="-", help="output MLIR file (default: stdout)")
    prep.add_argument("--print-flags", action="store_true",
                      help="print the iree-compile flags for llvm-cpu to stderr")

    comp = sub.add_parser("compile", help="prepare + iree-compile a triton-shared MLIR file to a .vmfb")
    comp.add_argument("input", help="triton-shared MLIR file ('-' for stdin)")
    comp.add_argument("-o", "--output", required=True, help="output .vmfb")
    comp.add_argument("--target", default="llvm-cpu", choices=["llvm-cpu", "cuda", "hip", "vulkan"])
    comp.add_argument("--arch", default=None, help="GPU architecture (e.g. sm_80, gfx942, ampere)")
    comp.add_argument("--print-command", action="store_true", help="print the iree-compile command line")

    from .bench import add_arguments as bench_arguments
    bench_arguments(sub.add_parser("bench", help="run the CPU workload suite against torch (needs torch)"))
    return p


def _read(path: str) -> str:
    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise SystemExit(f"triton-iree: error: cannot read {path}: {e.strerror}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise SystemExit(f"triton-iree: error: {_source_name(path)}:{line}: not UTF-8 text "
                         f"(byte {data[e.start]:#04x} at offset {e.start})")


def _write(path: str, data: str | bytes) -> None:
    if path == "-":
        sys.stdout.write(data if isinstance(data, str) else data.decode())
        return
    try:
        with open(path, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
    except OSError as e:
        raise SystemExit(f"triton-iree: error: cannot write {path}: {e.strerror}")


def _source_name(path: str) -> str:
    return "<stdin>" if path == "-" else path


def _cmd_prepare(args) -> None:
    text = _read(args.input)
    from . import compile as iree_compile
    from .ttshared import prepare
    out = prepare(text, _source_name(args.input))
    _write(args.output, out)
    if args.print_flags:
        print(" ".join(iree_compile.flags(iree_compile.make_target("llvm-cpu"))), file=sys.stderr)


def _cmd_compile(args) -> None:
    import shlex

    text = _read(args.input)
    from . import compile as iree_compile
    from .ttshared import prepare
    target = iree_compile.make_target(args.target, arch=args.arch)
    module = prepare(text, _source_name(args.input))
    if args.print_command:
        print(" ".join(shlex.quote(c) for c in iree_compile.command_line(target, "<prepared>.mlir", args.output)),
              file=sys.stderr)
    vmfb = iree_compile.compile_module(module, target, name="prepared", use_cache=False)
    _write(args.output, vmfb)


def _one_line(e: TritonIreeError) -> str:
    """The error as one line: its first line, or for a failed iree-compile its first diagnostic."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    if not lines:
        return type(e).__name__
    if isinstance(e, CompileError):
        diag = next((ln for ln in lines[1:] if "error:" in ln), None)
        if diag is not None:
            return f"{lines[0]} {diag}"
    return lines[0]


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        if args.command == "bench":
            from .bench import run as bench_run
            return bench_run(args)
        {"prepare": _cmd_prepare, "compile": _cmd_compile}[args.command](args)
    except TritonIreeError as e:
        print(f"triton-iree: error: {_one_line(e)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
