"""The backend's compilation pipeline, as Triton stages: ttir -> iree (MLIR) -> vmfb."""
from __future__ import annotations

import functools
import hashlib
import logging
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, Tuple

from triton.backends.compiler import BaseBackend, GPUTarget, Language

from .. import compile as iree_compile, targets
from ..errors import CompileError, ResourceLimitError, UnsupportedError

log = logging.getLogger(__name__)

# Bounds checks of every access (checked mode) for every launch that does not pass `check_bounds`;
# read once, as Triton reads TRITON_DEBUG, so that its in-memory kernel cache stays consistent.
CHECK_BOUNDS_VAR = "TRITON_IREE_CHECK_BOUNDS"
_CHECK_BOUNDS_DEFAULT = os.environ.get(CHECK_BOUNDS_VAR, "") not in ("", "0")


@functools.lru_cache()
def source_key() -> str:
    """Hash of triton-iree's own sources: a change to the lowering invalidates Triton's cache."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _without_internal_frames(stage):
    """The stage, raising its UnsupportedError without triton-iree's internal frames: the
    message names the construct, the kernel and the user's source line already."""
    def run(src, metadata):
        try:
            return stage(src, metadata)
        except UnsupportedError as e:
            raise e.with_traceback(None) from None
    return run


@dataclass(frozen=True)
class IreeOptions:
    num_warps: int = 4          # accepted; IREE chooses its own parallelism
    num_ctas: int = 1
    num_stages: int = 1         # accepted and ignored on CPU
    warp_size: int = 1
    debug: bool = False         # Triton's: keeps tl.device_assert (checked at run time)
    check_bounds: bool = False  # checked mode: every access checked against its tensor's storage
    sanitize_overflow: bool = False
    arch: str = "llvm-cpu"
    backend_name: str = "iree"
    enable_fp_fusion: bool = True
    extern_libs: Any = None
    supported_fp8_dtypes: Tuple[str, ...] = ("fp8e5", "fp8e4nv")
    deprecated_fp8_dot_operand_dtypes: Tuple[str, ...] = ()
    default_dot_input_precision: str = "ieee"
    allowed_dot_input_precisions: Tuple[str, ...] = ("ieee", "tf32", "tf32x3", "bf16x3", "bf16x6")
    max_num_imprecise_acc_default: int = 0
    instrumentation_mode: str = ""
    fpsan_homomorphic_casts: bool = False   # Triton >= 3.9 passes it with every launch
    launch_cooperative_grid: bool = False
    launch_pdl: bool = False

    def __post_init__(self):
        # As Triton's own backends check it (an AssertionError, which Triton's tests expect).
        if self.num_warps <= 0 or self.num_warps & (self.num_warps - 1):
            raise AssertionError(f"num_warps must be a power of 2, got {self.num_warps}")

    def hash(self) -> str:
        key = "_".join(f"{k}-{v}" for k, v in sorted(self.__dict__.items()))
        return hashlib.sha256(key.encode()).hexdigest()


class IreeBackend(BaseBackend):
    binary_ext = "vmfb"
    native_fallback = True    # the JIT path's; ahead of time, code generation or `native=True` is asked for

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend in ("cpu", "iree")

    def __init__(self, target: GPUTarget) -> None:
        super().__init__(target)
        self.iree_target = targets.from_triton(target)

    @functools.lru_cache()
    def hash(self) -> str:
        t = self.iree_target
        cpu = iree_compile.cpu_key(t)
        return f"iree-{iree_compile.iree_version()}-{source_key()}-{'-'.join(iree_compile.flags(t))}-{cpu}"

    def parse_options(self, opts: dict) -> IreeOptions:
        fields = IreeOptions.__dataclass_fields__
        args = {k: v for k, v in opts.items() if k in fields and v is not None}
        args["arch"] = self.iree_target.name
        args.setdefault("check_bounds", _CHECK_BOUNDS_DEFAULT)
        if "supported_fp8_dtypes" in args:
            args["supported_fp8_dtypes"] = tuple(sorted(args["supported_fp8_dtypes"]))
        if "allowed_dot_input_precisions" in args:
            args["allowed_dot_input_precisions"] = tuple(args["allowed_dot_input_precisions"])
        return IreeOptions(**args)

    def pack_metadata(self, metadata):
        # Triton calls this for every kernel it loads, compiled now or found in its cache.
        _dump_cached(metadata, self.iree_target)
        return (metadata.num_warps, metadata.num_ctas, metadata.shared)

    def get_codegen_implementation(self, options) -> dict:
        # Any dot shape is fine: IREE lowers linalg.matmul of any static size.
        return {"min_dot_size": lambda lhs_type, rhs_type: (1, 1, 1)}

    def get_module_map(self) -> Dict[str, Any]:
        from .. import libdevice   # tl.extra.libdevice's stubs, bound to arith/math ops
        return {libdevice.MODULE: libdevice}

    def load_dialects(self, context) -> None:
        return None

    def add_stages(self, stages: dict, options: IreeOptions, language=Language.TRITON) -> None:
        if language != Language.TRITON:
            raise NotImplementedError("triton-iree runs Triton kernels; Gluon is not supported")
        from triton import knobs
        if knobs.compilation.store_binary_only:   # Triton then caches cubin and hsaco files only
            raise UnsupportedError("TRITON_STORE_BINARY_ONLY=1 is not supported: Triton then keeps only CUDA "
                                   "and ROCm binaries (cubin, hsaco), not triton-iree's .vmfb, and could not "
                                   "load the compiled kernel; unset it")
        stages["ttir"] = lambda src, metadata: self._make_ttir(src, metadata, options)
        stages["iree"] = _without_internal_frames(lambda src, metadata: self._lower(src, metadata, options))
        stages["vmfb"] = lambda src, metadata: self._compile(src, metadata)

    def _make_ttir(self, mod, metadata: dict, options: IreeOptions):
        self._started = time.perf_counter()   # a backend object compiles one kernel
        self._options = options
        from .. import frontend   # the stages import iree.compiler: a machine that only runs needs none
        return frontend.make_ttir(mod, metadata, options)

    def _lower(self, mod, metadata: dict, options: IreeOptions) -> str:
        from .. import checks, frontend, prints, reader
        from ..analysis import analyze
        from ..lowering import emit_module
        text = frontend.generic_text(mod)
        name = mod.get_entry_func_name()
        log.info("lowering %s for %s (TTIR -> IREE input module)", name, self.iree_target.name)
        iree_compile.dump(_spec_dir(name, metadata), f"{name}.ttir", text)
        kernel = reader.read_ttir(text, sort_loops=self.iree_target.sort_loops)
        self._kernel = kernel
        self._ttir, self._params = text, [p.name for p in kernel.params]   # for `_native_fallback`
        metadata["name"] = kernel.name
        metadata["shared"] = 0
        buffers, stored = kernel.buffers, kernel.stored_buffers()   # the kernel's own pointer arguments
        metadata["prints"] = prints.instrument(kernel)   # tl.device_print: the launcher prints
        # Checked mode (`checks`): the runtime reads the failures back.
        if options.check_bounds or options.debug and checks.has_asserts(kernel):
            sites = checks.instrument(kernel, bounds=options.check_bounds)
            metadata["checks"] = {"sites": [vars(s) for s in sites], "written": [p.name for p in stored],
                                  "bounds": options.check_bounds}
        target = self.iree_target
        emit_options = target.emit_options(options.num_warps)
        target.prepare(kernel)   # the target's rewrites of the tile program
        try:
            facts = analyze(kernel)   # once: both modules are emitted from the same facts
            module = emit_module(kernel, facts, emit_options)
            # The variant for pointer arguments that share memory (verified as the other); the
            # launcher picks it.
            metadata["iree_written"] = [i for i, p in enumerate(buffers) if p in stored]
            shared = emit_module(kernel, facts, replace(emit_options, may_alias=True)) \
                if stored and len(buffers) > 1 else module
            metadata["iree_shared_memory_module"] = shared if shared != module else ""
            return module
        except CompileError as e:
            if hasattr(e, "module_text"):
                iree_compile.dump(_spec_dir(name, metadata), f"{name}.iree.mlir", e.module_text)
            raise

    def _compile(self, module_text: str, metadata: dict) -> bytes:
        name = metadata["name"]
        if module_text is None:   # what Triton's override (TRITON_KERNEL_OVERRIDE, ir_override) reads from a .iree file
            raise UnsupportedError(f"overriding {name}.iree is not supported: Triton reads back only its own IR "
                                   f"kinds (.ttir, .ttgir, .llir, ...); override {name}.ttir instead", kernel=name)
        try:
            compiled = iree_compile.build(module_text, self.iree_target, name=name,
                                          dump_dir=_spec_dir(name, metadata), started=getattr(self, "_started", None))
            metadata["iree_stack_bytes"] = compiled.stack_bytes
            return compiled.vmfb
        except ResourceLimitError as e:
            kernel = getattr(self, "_kernel", None)
            if kernel is None or e.loc:
                raise
            tile = max(_tiles(kernel), key=lambda x: x[0], default=None)
            loc = (tile[3].loc if tile is not None else "") or kernel.loc or None
            what = "" if tile is None else \
                f"the largest tile, {'x'.join(map(str, tile[1]))} {tile[2]} ({tile[0]} bytes), is made at {loc}; "
            raise ResourceLimitError(what + e.message, needed=e.needed, limit=e.limit, kernel=e.kernel,
                                     loc=loc) from None
        except CompileError as e:
            vmfb = self._native_fallback(e, metadata)
            if vmfb is None:
                raise
            return vmfb

    def _native_fallback(self, error: CompileError, metadata: dict) -> bytes | None:
        """CUDA: where IREE's code generation failed, Triton's own kernel in an IREE module
        (`native`), when native mode can take the kernel: not in checked mode, without
        tl.device_print, without our tl.extra.libdevice functions (all of which need the
        generated module). None where it cannot, and the CompileError stands."""
        from .. import libdevice, native
        target = self.iree_target
        ttir = getattr(self, "_ttir", None)
        if not self.native_fallback or not target.native_mode or ttir is None or metadata.get("checks") \
                or metadata.get("prints") or libdevice.LIBRARY in ttir:
            return None
        name, options = metadata["name"], self._options
        arch = _native_arch(target)
        try:
            k = native.compile_ttir(ttir, name, self._params, arch=arch, num_warps=options.num_warps,
                                    num_stages=options.num_stages, enable_fp_fusion=options.enable_fp_fusion)
            vmfb = iree_compile.compile_module(native.module(k), target, name=name)
        except Exception as e:   # Triton's compile raises its own errors: the first error stands
            log.info("native mode cannot take %s either: %s", name, e)
            return None
        # Triton's kernel writes through its pointers as they are: every buffer is an output,
        # and arguments that share memory need no module of their own.
        metadata["iree_written"] = list(range(sum(a.is_buffer for a in k.args)))
        metadata["iree_shared_memory_module"] = ""
        why = next((ln.split("error: ", 1)[1] for ln in str(error).splitlines() if "error: " in ln),
                   str(error).splitlines()[0])
        if os.environ.get(iree_compile.QUIET_VAR, "") in ("", "0"):
            print(f"triton-iree: {name}: IREE's CUDA code generation failed ({why.strip()}); "
                  f"running Triton's own kernel (native mode)", file=sys.stderr)
        return vmfb


def _native_arch(target: targets.Target) -> int:
    """The compute capability Triton compiles native mode's kernel for: the visible GPU's, as
    Triton's own launch does (code generation's sm_80 PTX runs on newer GPUs, but Triton refuses
    some constructs below sm_90: tl.dot_scaled), else the code generation's arch."""
    try:
        import torch
        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return 10 * major + minor
    except ImportError:
        pass
    return int("".join(c for c in (target.arch or "sm_80") if c.isdigit()))


def _tiles(kernel):
    """(bytes, shape, dtype, op) of each tile the kernel's ops make, in program order."""
    from ..lowering.values import _bytes
    for op in kernel.walk():
        for r in op.results:
            if r.is_tile:
                yield r.type.numel * _bytes(r.type.dtype), r.type.shape, r.type.dtype, op


def _spec_dir(name: str, metadata) -> str:
    """A kernel specialization's directory under TRITON_IREE_DUMP_DIR: `<kernel>/<Triton's
    compile hash, shortened>`."""
    h = metadata["hash"] if isinstance(metadata, dict) else metadata.hash
    return f"{name}/{h[:iree_compile.SPEC_DIGITS]}"


def _dump_cached(metadata, target: targets.Target) -> None:
    """The dumps of a kernel that Triton found in its cache (no stage ran), from the files
    Triton keeps there; nothing when they are dumped already."""
    root = iree_compile.dump_root()
    name = metadata.name
    where = _spec_dir(name, metadata)
    if root is None or (root / where / f"{name}.iree.mlir").exists():
        return
    from triton._C.libtriton import ir
    from triton.runtime.cache import get_cache_manager

    from .. import frontend
    cache = get_cache_manager(metadata.hash)
    ttir, module = cache.get_file(f"{name}.ttir"), cache.get_file(f"{name}.iree")
    if ttir is not None:
        context = ir.context()
        ir.load_dialects(context)
        mod = ir.parse_mlir_module(ttir, context)
        mod.context = context
        iree_compile.dump(where, f"{name}.ttir", frontend.generic_text(mod))
    if module is not None:
        iree_compile.dump_module(where, name, Path(module).read_text(), target, iree_compile.env_flags())


def kernel_ttir(fn, signature: dict, constexprs: dict | None = None) -> str:
    """Generic-form TTIR of a @triton.jit function, as this backend's 'ttir' stage makes it for
    the CPU, without compiling or launching the kernel.

    `signature` maps argument names to Triton types ('*fp32', 'i32', 'constexpr', ...).
    """
    from triton._C.libtriton import ir
    from triton.compiler.compiler import ASTSource

    from .. import frontend
    backend = IreeBackend(targets.make_target("llvm-cpu").triton_target())
    options = backend.parse_options({})
    src = ASTSource(fn, signature, constexprs=constexprs or {})
    context = ir.context()
    ir.load_dialects(context)
    mod = src.make_ir(backend.target, options, backend.get_codegen_implementation(options),
                      backend.get_module_map(), context)
    return frontend.generic_text(frontend.make_ttir(mod, {}, options))
