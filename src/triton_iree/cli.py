"""The `triton-iree` command line.

User mistakes (bad input, unsupported constructs, compile failures) print one line to stderr
and exit non-zero; tracebacks are for triton-iree's own bugs.
"""
from __future__ import annotations

import argparse
import sys
from importlib import metadata

from . import __version__, targets
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


def _target_help() -> str:
    """The targets, for --target's help: which are validated, which compile only."""
    unvalidated = [n if not c.validated_for_triton else f"{n} for arches other than {', '.join(c.validated_arches)}"
                   for n, c in targets.REGISTRY.items() if not c.validated_for_triton or c.validated_arches]
    only = [n for n, c in targets.REGISTRY.items() if c.compile_only]
    listed = ", ".join(f"{n} (this CPU, or TRITON_IREE_CPU; the default)" if n == "llvm-cpu" else n
                       for n in targets.NAMES)
    return (f"{listed}; {', '.join(unvalidated)} are refused unless {targets.UNVALIDATED_TARGETS_VAR}=1; "
            f"{', '.join(only)}: compile only (its modules cannot be launched here)")


def _arch_help() -> str:
    """Each GPU target's default and known architectures, for --arch's help."""
    def arches(c) -> str:
        return ", ".join(a for a in c.known_arches if a != c.default_arch)
    return "; ".join(f"for {n} {c.default_arch} (the default), {arches(c)}, ..."
                     for n, c in targets.REGISTRY.items() if c.default_arch)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="triton-iree",
        description="Run Triton kernels through IREE. Installing the package registers a Triton "
                    "backend, so kernel[grid](...) runs on IREE's llvm-cpu target; this command "
                    "compiles triton-shared IR files and Python kernels ahead of time.")
    p.add_argument("--version", action="version", version=_versions())
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    prep = sub.add_parser("prepare", help="make triton-shared's linalg+memref output compilable by iree-compile")
    prep.add_argument("input", help="triton-shared MLIR file ('-' for stdin)")
    prep.add_argument("-o", "--output", default="-", help="output MLIR file (default: stdout)")
    prep.add_argument("--print-flags", action="store_true",
                      help="print the iree-compile flags for llvm-cpu to stdout (needs -o FILE)")

    comp = sub.add_parser("compile", help="compile a triton-shared MLIR file, or a @triton.jit kernel "
                                          "(FILE.py:KERNEL), to a .vmfb")
    comp.add_argument("input", help="triton-shared MLIR file ('-' for stdin), or FILE.py:KERNEL (FILE.py is "
                                    "imported: its top-level code runs, except under "
                                    "`if __name__ == \"__main__\":`)")
    comp.add_argument("-o", "--output", required=True, help="output .vmfb (with --emit-mlir: MLIR, '-' for stdout)")
    comp.add_argument("--target", default="llvm-cpu", choices=targets.NAMES,
                      help=f"what to compile for: {_target_help()}")
    comp.add_argument("--arch", default=None, help=f"GPU architecture: {_arch_help()}; not for llvm-cpu")
    comp.add_argument("--signature", help="FILE.py:KERNEL only: each non-constexpr parameter's type, "
                                          "e.g. 'x_ptr=*fp32,y_ptr=*fp32,n=i32'")
    comp.add_argument("--constexpr", action="append", default=[], metavar="NAME=VALUE",
                      help="FILE.py:KERNEL only: a tl.constexpr parameter's value (repeatable)")
    comp.add_argument("--native", action="store_true",
                      help="FILE.py:KERNEL with --target cuda: embed Triton's own CUDA kernel (for --arch, "
                           "default sm_90) instead of IREE's code generation")
    comp.add_argument("--num-warps", type=int, default=4, help="FILE.py:KERNEL only: warps per program")
    comp.add_argument("--num-stages", type=int, default=3, help="FILE.py:KERNEL with --native: pipeline stages")
    comp.add_argument("--emit-mlir", action="store_true",
                      help="write the IREE input module to -o instead of compiling it")
    comp.add_argument("--print-command", action="store_true",
                      help="print the iree-compile command to stdout; its input, the IREE input module, "
                           "is kept next to the output (OUTPUT without .vmfb, plus .iree.mlir); for vulkan "
                           "and metal-spirv three commands, one a line: iree-compile to the executables "
                           "(OUTPUT without .vmfb, plus .executables.mlir), triton-iree's rewrite of them, "
                           "iree-compile from there")

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
        if isinstance(data, str):
            sys.stdout.write(data)
        else:
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
        return
    try:
        with open(path, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
    except OSError as e:
        raise SystemExit(f"triton-iree: error: cannot write {path}: {e.strerror}")


def _source_name(path: str) -> str:
    return "<stdin>" if path == "-" else path


def _stdout_taken(args, option: str) -> None:
    """`option` prints to stdout: refused when the output goes there too."""
    if args.output == "-":
        raise SystemExit(f"triton-iree: error: {option} prints to stdout, where -o - writes the output; "
                         f"give -o FILE")


def _cmd_prepare(args) -> None:
    from . import compile as iree_compile
    from .ttshared import prepare
    if args.print_flags:
        _stdout_taken(args, "--print-flags")
    out = prepare(_read(args.input), _source_name(args.input))
    _write(args.output, out)
    if args.print_flags:
        target = targets.make_target("llvm-cpu")
        print(iree_compile.shell_command(iree_compile.flags(target, iree_compile.env_flags())))


def _triton_error(e) -> str:
    """Triton's CompilationError in one line: its message and the source line it points at."""
    what = (e.error_message or type(e).__name__).strip().splitlines()[-1]
    lineno = getattr(e.node, "lineno", None)
    lines = (e.src or "").splitlines()
    if lineno is None or not 0 < lineno <= len(lines):
        return what
    return f"{what} (at `{lines[lineno - 1].strip()}`)"


def _kept_module_path(output: str) -> str:
    """Where --print-command keeps the IREE input module: next to the output."""
    base = output[:-len(".vmfb")] if output.endswith(".vmfb") else output
    return base + ".iree.mlir"


def _cmd_compile(args) -> None:
    from . import compile as iree_compile
    triton_input = args.input.endswith(".py") or ".py:" in args.input   # FILE.py:KERNEL
    target = targets.make_target(args.target, arch=None if args.native else args.arch, triton=triton_input)
    if args.print_command:
        _stdout_taken(args, "--print-command")
    if triton_input:
        from . import aot
        aot.split_kernel_spec(args.input)   # FILE.py without :KERNEL names the missing kernel
        if args.signature is None:
            raise SystemExit("triton-iree: error: compiling FILE.py:KERNEL needs --signature, "
                             "e.g. --signature 'x_ptr=*fp32,n=i32'")
        from triton.compiler.errors import CompilationError
        constexprs = dict(aot.parse_constexpr(c) for c in args.constexpr)
        try:
            kernel = aot.compile_kernel(aot.load_kernel(args.input), args.signature, constexprs,
                                        target=target.name, arch=args.arch, vmfb=not args.emit_mlir,
                                        native=args.native, num_warps=args.num_warps, num_stages=args.num_stages)
        except CompilationError as e:   # Triton's frontend rejects the kernel: the user's code
            raise SystemExit(f"triton-iree: error: {args.input}: {_triton_error(e)}") from None
        name, module, vmfb = kernel.name, kernel.module, kernel.vmfb
    else:
        from .ttshared import prepare
        if args.signature is not None or args.constexpr or args.native:
            raise SystemExit("triton-iree: error: --signature, --constexpr and --native are for FILE.py:KERNEL inputs")
        name, module, vmfb = "prepared", prepare(_read(args.input), _source_name(args.input)), None
    module = target.finish_module(module)   # as iree-compile gets it
    if args.emit_mlir:
        _write(args.output, module)
        return
    if args.print_command:
        kept = _kept_module_path(args.output)
        _write(kept, module)
        for cl in iree_compile.commands(target, kept, args.output, iree_compile.env_flags()):
            print(iree_compile.shell_command(cl), flush=True)
    if vmfb is None:
        vmfb = iree_compile.compile_module(module, target, name=name, use_cache=False)
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
