"""Ahead-of-time compilation of a @triton.jit kernel, without launching it: the IREE input
module and the .vmfb that `kernel[grid](...)` would run, for a signature given as text.

Triton's own frontend makes the TTIR (`ASTSource`), and the backend's stages (the same that a
launch runs) lower and compile it. The result's public function, named after the kernel, has
the ABI that `triton_iree.abi` describes (the arguments, the grid, each pointer's element offset
inside its buffer, 0 for a whole array; the written buffers as results). A kernel that calls
`tl.device_print` also takes print logs, and its function's reflection entry
`triton_iree.prints` says how to print them: `Launcher` passes the logs and prints them after
the launch.

Native mode (`native=True`, CUDA only) compiles the kernel with Triton's own CUDA backend and
wraps its PTX in a module with the same ABI (see `triton_iree.native`). A type may carry
Triton's divisibility hint, as in Triton's own AOT tool: `*fp32:16` (the pointer is 16-byte
aligned), `i32:16` (the value is a multiple of 16); the kernel may then use wider memory accesses,
and callers must keep the promise.

`Launcher` runs a compiled module on torch tensors with IREE's runtime alone (no compiler, no
Triton): the other half of the ahead-of-time workflow.
"""
from __future__ import annotations

import hashlib
import importlib.util
import inspect
import operator
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from . import types
from .errors import InputError

__all__ = ["AotKernel", "Launcher", "compile_kernel", "load_kernel", "parse_constexpr", "parse_signature"]

# Triton's names of the element types a pointer argument or a scalar can have.
POINTER_TYPES = tuple(types.POINTER_TYPES)
SCALAR_TYPES = tuple(types.SCALAR_TYPES)


@dataclass(frozen=True)
class AotKernel:
    name: str                # the kernel's name: the module's public function
    module: str              # the IREE input module (MLIR text)
    vmfb: Optional[bytes]    # the compiled module, None when only the module was asked for


def parse_signature(text: str) -> dict[str, str]:
    """'x_ptr=*fp32, n=i32' -> {'x_ptr': '*fp32', 'n': 'i32'}."""
    signature: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, eq, ty = (s.strip() for s in item.partition("="))
        if not eq or not name or not ty:
            raise InputError(f"bad signature entry {item!r}: expected NAME=TYPE, e.g. x_ptr=*fp32 or n=i32")
        if name in signature:
            raise InputError(f"argument '{name}' appears twice in the signature")
        signature[name] = ty
    return signature


def parse_constexpr(text: str) -> tuple[str, Any]:
    """'BLOCK=1024' -> ('BLOCK', 1024); values are ints, floats or True / False."""
    name, eq, value = (s.strip() for s in text.partition("="))
    if not eq or not name or not value:
        raise InputError(f"bad constexpr {text!r}: expected NAME=VALUE, e.g. BLOCK=1024")
    if value in ("True", "true", "False", "false"):
        return name, value in ("True", "true")
    for kind in (int, float):
        try:
            return name, kind(value)
        except ValueError:
            pass
    raise InputError(f"constexpr {name}={value!r} is not an int, a float, True or False")


def split_hints(signature: dict[str, str]) -> tuple[dict[str, str], set[str]]:
    """({name: type} without divisibility hints, the names hinted ':16')."""
    plain, hinted = {}, set()
    for name, ty in signature.items():
        ty, colon, hint = ty.partition(":")
        if colon:
            if hint.strip() != "16":
                raise InputError(f"argument '{name}': the only divisibility hint is ':16', got ':{hint}'")
            hinted.add(name)
        plain[name] = ty.strip()
    return plain, hinted


def _check_type(name: str, ty: str) -> None:
    ok = ty[1:] in POINTER_TYPES if ty.startswith("*") else ty in SCALAR_TYPES
    if not ok:
        raise InputError(f"argument '{name}': unknown type '{ty}' (pointers: *{', *'.join(POINTER_TYPES[:6])}, "
                         f"*i32, ...; scalars: {', '.join(SCALAR_TYPES)})")


def full_signature(fn, signature: dict[str, str], constexprs: dict[str, Any]) -> tuple[dict, dict]:
    """Triton's signature of `fn` (every parameter, constexprs as 'constexpr') and the
    constexpr values, checked against the kernel's parameters."""
    params = {p.name: p for p in fn.params}
    for name in (*signature, *constexprs):
        if name not in params:
            raise InputError(f"kernel '{fn.__name__}' has no parameter '{name}' (it has {', '.join(params)})")
    full, values = {}, {}
    for name, p in params.items():
        if p.is_constexpr:
            if name in signature:
                raise InputError(f"'{name}' is a tl.constexpr parameter: give its value with --constexpr {name}=...")
            if name in constexprs:
                values[name] = constexprs[name]
            elif p.default is not inspect.Parameter.empty:
                values[name] = p.default
            else:
                raise InputError(f"no value for the tl.constexpr parameter '{name}' (--constexpr {name}=...)")
            full[name] = "constexpr"
        else:
            if name in constexprs:
                # A regular parameter with a fixed value: Triton specializes it as a constant (its
                # launcher does so for integers equal to 1); the compiled kernel does not take it.
                if name in signature:
                    raise InputError(f"'{name}' has both a type in the signature and a --constexpr value")
                values[name] = constexprs[name]
                full[name] = "constexpr"
                continue
            if name not in signature:
                raise InputError(f"the signature has no type for '{name}' (e.g. {name}=*fp32 or {name}=i32)")
            _check_type(name, signature[name])
            full[name] = signature[name]
    return full, values


def _jit_function(obj, where: str):
    """The JITFunction behind `obj` (autotuners and heuristics wrap one in `.fn`)."""
    from triton.runtime.jit import JITFunction
    while not isinstance(obj, JITFunction) and hasattr(obj, "fn"):
        obj = obj.fn
    if not isinstance(obj, JITFunction):
        raise InputError(f"{where} is not a @triton.jit function")
    return obj


def split_kernel_spec(spec: str) -> tuple[str, str]:
    """'FILE.py:KERNEL' -> (FILE.py, KERNEL), the file checked to exist. Without a kernel name,
    the error lists the file's @triton.jit functions, found without running the file."""
    path, _, name = spec.rpartition(":")
    if spec.endswith(".py") and not path:
        path, name = spec, ""
    if not path.endswith(".py"):
        raise InputError(f"{spec!r}: expected FILE.py:KERNEL")
    file = Path(path)
    if not file.is_file():
        raise InputError(f"cannot read {path}: no such file")
    if not name:
        import ast
        try:
            tree = ast.parse(file.read_bytes(), filename=path)
            jitted = [f.name for f in tree.body if isinstance(f, ast.FunctionDef)
                      and any("jit" in ast.unparse(d) for d in f.decorator_list)]
        except (SyntaxError, ValueError):
            jitted = []
        found = f" (its @triton.jit functions: {', '.join(jitted)})" if jitted else ""
        raise InputError(f"{spec!r} names no kernel: give FILE.py:KERNEL{found}")
    return path, name


def load_kernel(spec: str):
    """The @triton.jit function that 'FILE.py:KERNEL' names. The file's directory is put on
    sys.path, and the file runs as a module named other than __main__: code under
    `if __name__ == "__main__":` does not run, the rest of its top-level code does."""
    path, name = split_kernel_spec(spec)
    file = Path(path)
    folder = str(file.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module_spec = importlib.util.spec_from_file_location(f"_triton_iree_aot_{file.stem}", file)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_spec.name] = module   # as an import does (dataclasses and pickle look it up)
    try:
        module_spec.loader.exec_module(module)
    except Exception as e:   # the user's file: any error it raises is theirs
        line = f" (line {e.lineno})" if isinstance(e, SyntaxError) else ""
        raise InputError(f"cannot import {path}{line}: {type(e).__name__}: {e}") from None
    if not hasattr(module, name):
        raise InputError(f"{path} has no kernel '{name}'")
    return _jit_function(getattr(module, name), f"{path}:{name}")


def compile_kernel(fn, signature: str | dict[str, str], constexprs: Optional[dict[str, Any]] = None,
                   target: str = "llvm-cpu", arch: Optional[str] = None, vmfb: bool = True,
                   native: bool = False, num_warps: int = 4, num_stages: int = 3) -> AotKernel:
    """Compiles the @triton.jit function `fn` for `target` without launching it.

    `signature` gives each non-constexpr parameter's Triton type, as a dict or as text
    ('x_ptr=*fp32:16,n=i32'); `constexprs` each tl.constexpr parameter's value (parameters with a
    default may be left out). With `vmfb=False` only the IREE input module is made. `native`
    (cuda): Triton's own kernel for compute capability `arch` ('sm_90', the default), launched
    with `num_warps` warps; the IREE module runs on any NVIDIA GPU that runs that PTX.
    """
    from triton._C.libtriton import ir
    from triton.compiler.compiler import ASTSource

    from .backend.compiler import IreeBackend
    from .targets import make_target

    fn = _jit_function(fn, repr(fn))
    if isinstance(signature, str):
        signature = parse_signature(signature)
    signature, hinted = split_hints(signature)
    full, values = full_signature(fn, signature, dict(constexprs or {}))
    attrs = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(full) if name in hinted}
    if native:
        return _compile_native(fn, full, values, attrs, target, arch, vmfb, num_warps, num_stages)
    gpu_target = make_target(target, arch=arch).triton_target()   # refuses unknown and unvalidated targets
    backend = IreeBackend(gpu_target)
    backend.native_fallback = False
    options = backend.parse_options({"num_warps": num_warps})
    src = ASTSource(fn, full, constexprs=values, attrs=attrs)
    stages: dict = {}
    backend.add_stages(stages, options)
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    mod = src.make_ir(gpu_target, options, backend.get_codegen_implementation(options),
                      backend.get_module_map(), context)
    # As Triton's compile hash, it names this specialization's TRITON_IREE_DUMP_DIR directory.
    metadata = {"hash": hashlib.sha256(f"{src.hash()}-{backend.hash()}-{options.hash()}".encode()).hexdigest()}
    module = stages["iree"](stages["ttir"](mod, metadata), metadata)
    return AotKernel(metadata["name"], module, stages["vmfb"](module, metadata) if vmfb else None)


def _compile_native(fn, full, values, attrs, target, arch, vmfb, num_warps, num_stages) -> AotKernel:
    from . import native
    from .compile import compile_module
    from .targets import make_target, target_class
    chosen = target_class(target)
    if not chosen.native_mode:
        raise InputError(f"native mode is for --target cuda (Triton's own CUDA kernel), not {target}")
    arch = arch or "sm_90"
    if not arch.startswith("sm_") or not arch[3:].rstrip("a").isdigit():
        raise InputError(f"native mode: --arch must name a compute capability, e.g. sm_90, not {arch!r}")
    k = native.compile_triton(fn, full, values, arch=int(arch[3:].rstrip("a")), num_warps=num_warps,
                              num_stages=num_stages, attrs=attrs)
    module = native.module(k)
    out = compile_module(module, make_target(chosen.name), name=k.name, use_cache=False) if vmfb else None
    return AotKernel(k.name, module, out)


class Launcher:
    """A compiled module, ready to run on torch tensors: `launcher(*args, grid=(gx, gy, gz))`.

    `signature`: the non-constexpr parameters' types as given to `compile_kernel` (hints are
    ignored here); `args` are those parameters' values in order: torch tensors for pointers
    (CUDA tensors for cuda) of the signature's dtypes, Python numbers for scalars. Kernels write
    into the tensors in place.
    Needs iree-base-runtime and torch only.
    """

    def __init__(self, vmfb: bytes | str | Path, kernel: str, signature: str | dict[str, str],
                 target: str = "llvm-cpu"):
        from . import abi, runtime, targets
        try:
            cls = targets.target_class(target)
        except ValueError as e:
            raise InputError(str(e)) from None
        driver = cls.of().runtime_driver()   # refuses compile-only targets
        if not isinstance(vmfb, bytes):
            vmfb = Path(vmfb).read_bytes()
        if isinstance(signature, str):
            signature = parse_signature(signature)
        signature, _ = split_hints(signature)
        self._runtime = runtime
        self.kernel = runtime.LoadedKernel(vmfb, kernel, driver)
        self.kernel.allow_inline(None)   # a .vmfb file does not say how much stack its code needs
        self.abi = abi.of_signature(list(signature), signature, kernel,
                                    abi.written_of_reflection(self.kernel.main.function.reflection))
        # The torch dtype each pointer argument's tensor must have, as Triton's launcher types it.
        self.dtypes = {name: types.POINTER_TYPES[ty[1:].lstrip("k")][1] for name, ty in signature.items()
                       if ty.startswith("*")}
        # (index, torch dtype) of each pointer argument: a tensor of that dtype passes at once.
        torch = sys.modules.get("torch")   # None: arrays only, each checked by its dtype's name
        self._pointer_dtypes = [(i, getattr(torch, self.dtypes[p.name], None)) for i, p in enumerate(self.abi.params)
                                if p.name in self.dtypes]
        # tl.device_print: the module logs what it prints, and this prints the logs (`prints`).
        from . import prints
        self.printer = prints.Printer.of_reflection(self.kernel.main.function.reflection)

    def __call__(self, *args, grid) -> None:
        from .errors import LaunchError
        params = self.abi.params
        if len(args) != len(params):
            raise LaunchError(f"expected {len(params)} arguments ({', '.join(p.name for p in params)}), "
                              f"got {len(args)}", kernel=self.kernel.name)
        for i, dtype in self._pointer_dtypes:
            v = args[i]
            if getattr(v, "dtype", None) is not dtype:
                got = str(getattr(v, "dtype", "")).removeprefix("torch.")
                want = self.dtypes[params[i].name]
                if got and got != want:
                    raise LaunchError(f"argument '{params[i].name}' is a tensor of {got}, but the kernel takes a "
                                      f"pointer to {want} there (its memory would be read as {want})",
                                      kernel=self.kernel.name)
        try:
            dims = tuple(map(operator.index, grid))
        except TypeError:
            dims = ()
        if not 1 <= len(dims) <= 3:
            raise LaunchError(f"the grid must be 1 to 3 integers, e.g. grid=(n,), got grid={grid!r}",
                              kernel=self.kernel.name)
        self.launch(args, dims)

    def launch(self, args, grid, shared=None) -> None:
        """Runs the module on `args` over `grid` (up to 3 dims); `shared`: its variant for pointer
        arguments that share memory (`runtime.SharedMemory`), picked where they do."""
        grid = tuple(grid) + (1,) * (3 - len(tuple(grid)))
        if self.printer is not None:
            self.printer.launch(self.kernel, self.abi, args, grid, None, shared)
        else:
            self.kernel.launch(self.abi, args, grid, shared=shared)
