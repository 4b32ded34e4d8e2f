"""Compile: the IREE input module to a .vmfb, through `iree.compiler`, with an on-disk cache.

The exact iree-compile command line is always reconstructible (`command_line`) and is part
of every CompileError, so a failure can be reproduced outside Python. iree-compile runs as a
child process under a time limit, and dies with the process that started it.
"""
from __future__ import annotations

import hashlib
import logging
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import CompileError, ResourceLimitError
from . import host
from .targets import Target

log = logging.getLogger(__name__)


def iree_version() -> str:
    from importlib.metadata import version
    return version("iree-base-compiler")


# IREE demotes f64 to f32 by default; Triton's fp64 must stay fp64.
COMMON_FLAGS = ("--iree-input-demote-f64-to-f32=false",)


def flags(target: Target, extra: tuple[str, ...] = ()) -> list[str]:
    """Every iree-compile flag for `target` (besides the input and -o)."""
    return [f"--iree-hal-target-backends={target.backend}", *COMMON_FLAGS, *target.flags, *extra]


def env_flags() -> tuple[str, ...]:
    """Extra iree-compile flags from TRITON_IREE_COMPILE_FLAGS (for experiments and tuning)."""
    return tuple(shlex.split(os.environ.get("TRITON_IREE_COMPILE_FLAGS", "")))


def command_line(target: Target, input_path: str = "input.mlir", output_path: str = "out.vmfb",
                 extra: tuple[str, ...] = ()) -> list[str]:
    """The iree-compile command that compiles `input_path`, exactly as `compile_module` runs it:
    the installed iree-compile by its absolute path, as `iree.compiler` builds the command."""
    from iree.compiler import tools
    from iree.compiler.tools.core import build_compile_command_line
    options = tools.CompilerOptions(target_backends=[target.backend], output_file=output_path,
                                    extra_args=[*COMMON_FLAGS, *target.flags, *extra])
    with tools.TempFileSaver.implicit() as tfs:
        return build_compile_command_line(input_path, tfs, options)


# Where iree-compile stops for a target's `executable_rewrite` and starts again after it: IREE's
# code generation is done, its executables are not serialized yet.
REWRITE_PHASE = "executable-targets"


def commands(target: Target, input_path: str = "input.mlir", output_path: str = "out.vmfb",
             extra: tuple[str, ...] = ()) -> list[list[str]]:
    """The commands that compile `input_path` to `output_path`, as `build` runs them: the one of
    `command_line`; or, for a target with an `executable_rewrite`, iree-compile to REWRITE_PHASE
    (into `<output>.executables.mlir`), the rewrite of that file in place (`python -m
    triton_iree.compile`), and iree-compile from it."""
    if not target.executable_rewrite:
        return [command_line(target, input_path, output_path, extra)]
    stage = executables_path(output_path)
    return [command_line(target, input_path, stage, (*extra, f"--compile-to={REWRITE_PHASE}")),
            [sys.executable, "-m", "triton_iree.compile", target.name, target.arch, stage],
            command_line(target, stage, output_path, (*extra, f"--compile-from={REWRITE_PHASE}"))]


def executables_path(output_path: str) -> str:
    """Where a two-stage compile (`commands`) keeps its executables: next to the output."""
    base = output_path[:-len(".vmfb")] if output_path.endswith(".vmfb") else output_path
    return base + ".executables.mlir"


def shell_command(cl: list[str]) -> str:
    return " ".join(shlex.quote(c) for c in cl)


def host_cpu_id() -> str:
    """Identifies this CPU for cache keys: modules built with --iree-llvmcpu-target-cpu=host
    only run on CPUs with the same features."""
    model, features = host.host_cpu_info()
    if not model and not features:
        import platform
        return platform.machine()
    return hashlib.sha256(f"{model}\0{' '.join(features)}".encode()).hexdigest()[:16]


def cpu_key(target: Target) -> str:
    """The host CPU's identity for the cache keys of modules built for it (target CPU "host");
    "" otherwise: a module built for a named CPU (TRITON_IREE_CPU) runs on any CPU of that kind,
    so caches of such modules can be shared between machines."""
    return host_cpu_id() if target.is_cpu and "--iree-llvmcpu-target-cpu=host" in target.flags else ""


def cache_key(module_text: str, target: Target, extra: tuple[str, ...] = ()) -> str:
    h = hashlib.sha256()
    rewrite = (target.executable_rewrite,) if target.executable_rewrite else ()
    for part in (module_text, target.name, *COMMON_FLAGS, *target.flags, *extra, iree_version(),
                 cpu_key(target), *rewrite):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


@dataclass(frozen=True)
class Compiled:
    """A compiled module. `stack_bytes` (llvm-cpu): the stack its code needs at most, as LLVM
    reports it for each function (`--stack-usage-file`), summed; None where that is unknown
    (other targets) or unbounded (a dynamically sized stack allocation)."""
    vmfb: bytes
    stack_bytes: int | None = None


def compile_module(module_text: str, target: Target, **kwargs) -> bytes:
    """The vmfb of `build`."""
    return build(module_text, target, **kwargs).vmfb


def build(module_text: str, target: Target, *, name: str = "kernel", extra: tuple[str, ...] = (),
          use_cache: bool = True, dump_dir: str | None = None, started: float | None = None) -> Compiled:
    """Compiles an IREE input module to a vmfb, using the on-disk cache when it can.

    The cache lives in Triton's cache directory (TRITON_CACHE_DIR), keyed by the module text,
    target, flags, IREE version and (for llvm-cpu) the host CPU. `dump_dir` is the module's
    directory under TRITON_IREE_DUMP_DIR (default `<name>/<short cache key>`); `started` the
    `time.perf_counter()` at which compiling it began (for `report_compile_time`).
    """
    from triton import knobs
    from triton.runtime.cache import get_cache_manager
    started = time.perf_counter() if started is None else started
    # Extra iree-compile flags for experiments and tuning; part of the cache key like any flag.
    extra = (*extra, *env_flags())
    module_text = target.finish_module(module_text)
    key = cache_key(module_text, target, extra)
    dump_module(dump_dir or f"{name}/{key[:SPEC_DIGITS]}", name, module_text, target, extra)
    cache = get_cache_manager(key) if use_cache else None
    fname, sname = f"{name}.vmfb", f"{name}.stack"
    # TRITON_ALWAYS_COMPILE: Triton's "compile regardless of the cache"; the result is still cached.
    if cache is not None and not knobs.compilation.always_compile:
        path, stack = cache.get_file(fname), cache.get_file(sname)
        if path is not None and (stack is not None or not target.is_cpu):
            log.debug("iree cache hit for %s: %s", name, path)
            return Compiled(Path(path).read_bytes(), _read_stack(Path(stack).read_text()) if stack else None)
    log.info("iree-compile %s for %s", name, target.name)
    progress = _announce_after(PROGRESS_AFTER_S - (time.perf_counter() - started), name, target)
    try:
        try:
            vmfb, usage = _run_iree_compile(module_text, target, name, extra)
        except ResourceLimitError as refused:
            # IREE counts each tile's workgroup memory apart; the target's rewrite shares it
            # between tiles used one after another and checks its limit on the shared total.
            relaxed = target.relaxed_module(module_text)
            if relaxed is None:
                raise
            dump_module(dump_dir or f"{name}/{key[:SPEC_DIGITS]}", name, relaxed, target, extra)
            try:
                vmfb, usage = _run_iree_compile(relaxed, target, name, extra)
            except CompileError as e:
                # The rewrite's refusal at the target's own limit; otherwise IREE's first one.
                raise (e if isinstance(e, ResourceLimitError) and e.limit == refused.limit else refused) from None
    finally:
        if progress is not None:
            progress.cancel()
    if cache is not None:
        if usage is not None:
            cache.put(usage, sname)
        cache.put(vmfb, fname, binary=True)
    report_compile_time(name, target, time.perf_counter() - started, announced=bool(progress and progress.said))
    return Compiled(vmfb, _read_stack(usage) if usage is not None else None)


def _read_stack(usage: str) -> int | None:
    """The sum of the frames in LLVM's stack usage report (lines `function<TAB>bytes<TAB>kind`,
    kind static, dynamic or 'dynamic,bounded'): a bound of what one workgroup's code needs,
    wherever a dispatch calls its helpers from. None for an unbounded dynamic frame, or none."""
    total, found = 0, False
    for line in usage.splitlines():
        parts = line.rsplit("\t", 2)
        if len(parts) != 3 or not parts[1].isdigit():
            continue
        if parts[2].strip() == "dynamic":
            return None
        total, found = total + int(parts[1]), True
    return total if found else None


# Compiles that take at least this many seconds print one line on stderr (a first launch is
# otherwise silent while it compiles); TRITON_IREE_QUIET=1 turns the line off.
SLOW_COMPILE_VAR, QUIET_VAR = "TRITON_IREE_SLOW_COMPILE_SECONDS", "TRITON_IREE_QUIET"
DEFAULT_SLOW_COMPILE_S = 3.0


def report_compile_time(name: str, target: Target, seconds: float, announced: bool = False) -> None:
    """`announced`: the compile's start was printed (`_announce_after`), so its end is too."""
    log.info("compiled %s for %s in %.2f s", name, target.name, seconds)
    if os.environ.get(QUIET_VAR, "") not in ("", "0"):
        return
    try:
        slow = float(os.environ.get(SLOW_COMPILE_VAR) or DEFAULT_SLOW_COMPILE_S)
    except ValueError:
        slow = DEFAULT_SLOW_COMPILE_S
    if seconds >= slow or announced:
        print(f"triton-iree: compiling {name} for {target.name} took {seconds:.1f} s", file=sys.stderr)


# A compile still running this many seconds after it began says once on stderr what it compiles
# (iree-compile may run for minutes before its time limit); TRITON_IREE_QUIET=1 turns it off.
PROGRESS_AFTER_S = 2.0


def _announce_after(delay: float, name: str, target: Target) -> threading.Timer | None:
    """A started timer that prints the line after `delay` s unless cancelled; None when quiet."""
    if os.environ.get(QUIET_VAR, "") not in ("", "0"):
        return None
    where = f"{target.name} ({target.arch})" if target.arch else target.name

    def say() -> None:
        timer.said = True
        print(f"triton-iree: compiling {name} for {where} ...", file=sys.stderr, flush=True)
    timer = threading.Timer(max(0.0, delay), say)
    timer.said, timer.daemon = False, True
    timer.start()
    return timer


COMPILE_STATS = {"compiles": 0, "seconds": 0.0}


# iree-compile is stopped after this many seconds (TRITON_IREE_COMPILE_TIMEOUT overrides it):
# some kernels make it run for hours instead of failing.
TIMEOUT_VAR = "TRITON_IREE_COMPILE_TIMEOUT"
DEFAULT_TIMEOUT_S = 600.0


def compile_timeout() -> float:
    raw = os.environ.get(TIMEOUT_VAR, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise CompileError(f"{TIMEOUT_VAR}={raw!r} is not a positive number of seconds")
    return seconds


def _die_with_parent():
    """A subprocess preexec_fn (Linux): the child gets SIGKILL when the thread that started it
    exits, and exits at once if the parent is already gone. That thread waits for the child,
    so a killed Python process never leaves an iree-compile running."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()
    pr_set_pdeathsig = 1

    def setup() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGKILL))
        if os.getppid() != parent:
            os._exit(1)
    return setup


_CRASH_SIGNALS = (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT)


def _describe_signal(signum: int) -> str:
    """'SIGSEGV (11): <why a process gets it>'."""
    try:
        sig = signal.Signals(signum)
    except ValueError:
        return f"signal {signum}: iree-compile was stopped from outside"
    if sig in _CRASH_SIGNALS:
        why = "iree-compile crashed (an iree-compile bug, or a module it cannot handle)"
    elif sig == signal.SIGKILL:
        why = "something killed iree-compile, for example the out-of-memory killer"
    else:
        why = "iree-compile was stopped from outside"
    return f"{sig.name} ({signum}): {why}"


# A compile's working directory in the temporary directory is
# `triton-iree-<pid>-<host>-<kernel>-XXXX`; `_KEPT` in it marks the input of a failed compile,
# kept for its reproducer. Others whose process is gone (killed during a compile) are removed.
_KEPT = "KEPT"


def _host_tag() -> str:
    import socket
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:   # another user's process
        return True
    return True


def _make_workdir(name: str) -> Path:
    """A fresh working directory for one iree-compile run, after removing those that
    processes on this host left behind when they died during a compile."""
    host = _host_tag()
    if os.name == "posix":   # elsewhere os.kill does not only probe
        for d in Path(tempfile.gettempdir()).glob(f"triton-iree-*-{host}-*"):
            pid, _, rest = d.name[len("triton-iree-"):].partition("-")
            if pid.isdigit() and rest.startswith(f"{host}-") \
                    and not (d / _KEPT).exists() and not _alive(int(pid)):
                shutil.rmtree(d, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"triton-iree-{os.getpid()}-{host}-{name}-"))


def _run_iree_compile(module_text: str, target: Target, name: str,
                      extra: tuple[str, ...]) -> tuple[bytes, str | None]:
    """The vmfb, and for llvm-cpu LLVM's stack usage report of its code. A target with an
    `executable_rewrite` compiles in two stages with the rewrite between them (`commands`)."""
    deadline = time.perf_counter() + compile_timeout()
    workdir = _make_workdir(name)
    src, out, usage = workdir / f"{name}.iree.mlir", workdir / f"{name}.vmfb", workdir / f"{name}.stack"
    src.write_text(module_text)
    stages = commands(target, str(src), str(out), extra)
    if target.is_cpu:
        stages[-1].append(f"--stack-usage-file={usage}")   # LLVM appends each function's frame size
    stderr = _run_stage(stages[0], target, name, workdir, deadline)
    if len(stages) > 1:   # the rewrite of the first stage's output, and iree-compile from there
        stage = Path(stages[1][-1])
        stage.write_text(target.rewrite_executables(stage.read_text()))
        stderr = _run_stage(stages[2], target, name, workdir, deadline)
    try:
        if stderr:
            log.debug("iree-compile for %s: %s", name, stderr)
        return out.read_bytes(), (usage.read_text() if usage.exists() else "") if target.is_cpu else None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _run_stage(cl: list[str], target: Target, name: str, workdir: Path, deadline: float) -> str:
    """Runs one iree-compile command until `deadline` (a `time.perf_counter()`); its stderr, or
    CompileError / ResourceLimitError with the command that reproduces the failure on the
    input kept in `workdir`."""
    timeout = compile_timeout()
    kept = f"the input is kept in {workdir}; to reproduce: {shell_command(cl)}"
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cl, capture_output=True, timeout=max(0.0, deadline - t0), preexec_fn=_die_with_parent())
    except subprocess.TimeoutExpired:
        (workdir / _KEPT).touch()
        raise CompileError(f"iree-compile ran longer than the {timeout:g} s limit and was stopped (set "
                           f"{TIMEOUT_VAR} to change the limit); {kept}", kernel=name) from None
    finally:
        COMPILE_STATS["compiles"] += 1
        COMPILE_STATS["seconds"] += time.perf_counter() - t0
    stderr = proc.stderr.decode(errors="replace").strip()
    if proc.returncode < 0:
        (workdir / _KEPT).touch()
        raise CompileError(f"iree-compile was killed by signal {_describe_signal(-proc.returncode)}; "
                           f"{kept}\n{_trim(stderr)}", kernel=name)
    if proc.returncode != 0:
        # The input stays in `workdir`, so that the command shown reproduces the failure.
        stack = _STACK_LIMIT.search(stderr)
        if stack is not None:
            limit, need = int(stack.group(1)), int(stack.group(2))
            raise ResourceLimitError(
                f"the kernel's tiles need {need} bytes of stack in one program, more than the {limit} bytes "
                f"IREE's llvm-cpu code allows: use smaller block sizes (the tl.constexpr arguments that set "
                f"the tiles' shapes); {kept}\n{_trim(stderr)}", needed=need, limit=limit, kernel=name)
        shared = _WORKGROUP_MEMORY_LIMIT.search(stderr)
        if shared is not None:
            need, limit = int(shared.group(1)), int(shared.group(2))
            arch = f" ({target.arch})" if target.arch else ""
            raise ResourceLimitError(
                f"the kernel's tiles need {need} bytes of workgroup memory in one program, more than the {limit} "
                f"bytes {target.name}{arch} has: use smaller block sizes (the tl.constexpr arguments that set "
                f"the tiles' shapes); {kept}\n{_trim(stderr)}", needed=need, limit=limit, kernel=name)
        hint = "" if target.is_cpu else (
            " (IREE's GPU code generation does not handle every Triton kernel yet; on CUDA, native mode, "
            "`triton-iree compile --native`, runs Triton's own kernel)")
        raise CompileError(f"iree-compile failed{hint}:\n  $ {shell_command(cl)}\n{_trim(stderr)}", kernel=name)
    return stderr


# iree-compile's llvm-cpu diagnostic for a dispatch whose stack allocations exceed the limit.
_STACK_LIMIT = re.compile(r"exceeded stack allocation limit of (\d+) bytes for function\. Got (\d+) bytes")
# Its GPU diagnostic for a dispatch whose workgroup memory (on SPIR-V, every tile's) exceeds the limit.
_WORKGROUP_MEMORY_LIMIT = re.compile(r"uses (\d+) bytes of shared memory; exceeded the limit of (\d+) bytes")


def _trim(text: str, limit: int = 4000) -> str:
    return text if len(text) <= limit else text[:limit] + "\n  ... (truncated)"


# Each compiled module has its own dump directory, `<kernel>/<the first digits of a hash>`:
# Triton's compile hash for a kernel specialization (constexprs, dtypes, target, options), the
# IREE cache key for other modules. Specializations of one kernel never share a directory.
SPEC_DIGITS = 12


def dump_root() -> Path | None:
    root = os.environ.get("TRITON_IREE_DUMP_DIR")
    return Path(root) if root else None


def dump(where: str, filename: str, text: str | bytes) -> None:
    """Writes one pipeline stage to $TRITON_IREE_DUMP_DIR/<where>/ when that is set."""
    root = dump_root()
    if root is None:
        return
    d = root / where
    d.mkdir(parents=True, exist_ok=True)
    p = d / filename
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)


def dump_module(where: str, name: str, module_text: str, target: Target, extra: tuple[str, ...]) -> None:
    """The IREE input module and the script that compiles it (`commands`), into `where`."""
    if dump_root() is None:
        return
    dump(where, f"{name}.iree.mlir", module_text)
    *first, last = (shell_command(cl) for cl in commands(target, f"{name}.iree.mlir", f"{name}.vmfb", extra))
    steps = "".join(f"{c} || exit 1\n" for c in first)
    dump(where, "iree-compile.sh", f'#!/bin/sh\ncd "$(dirname "$0")" || exit 1\n{steps}exec {last}\n')
    (dump_root() / where / "iree-compile.sh").chmod(0o755)


def _rewrite_main(argv: list[str]) -> None:
    """`python -m triton_iree.compile TARGET ARCH FILE`: the executable rewrite of `commands`,
    on FILE in place."""
    from .targets import target_class
    name, arch, path = argv
    file = Path(path)
    file.write_text(target_class(name)(arch=arch).rewrite_executables(file.read_text()))


if __name__ == "__main__":
    _rewrite_main(sys.argv[1:])
