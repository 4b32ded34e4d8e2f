"""Native mode: Triton's own CUDA kernel inside an IREE module.

Triton compiles the kernel for NVIDIA GPUs itself (its wheel carries everything needed, and no
GPU is needed to compile). This module wraps the PTX it produces in an IREE input module with
the same ABI as every other triton-iree module, so IREE's runtime launches Triton's code:

- a `hal.executable.source` whose one export is Triton's kernel, with the PTX as its object,
  its block size (32 x num_warps threads) and its dynamic shared memory;
- a host function with the ABI of every module (`abi`), which dispatches the export over the grid.

IREE's CUDA runtime passes a kernel its bindings first (device pointers), then each 32-bit
constant (`abi.Abi.push_constants`), while Triton's kernel takes its arguments in declaration
order, then scratch pointers. `rewrite_abi` reorders the PTX entry's parameter list to IREE's
order and rewrites the few `ld.param` instructions that read them: 64-bit scalars arrive as two
32-bit halves, each pointer is advanced by its buffer's byte offset, and scratch pointers that
the kernel does not use (a scratch size of 0) become null.

The rewrite edits PTX as text, with patterns for exactly the two constructs it changes (the
`.entry` parameter list and `ld.param` of those parameters): PTX is an assembly language, and
neither Triton nor IREE nor LLVM's Python-facing packages offer a PTX parser; Triton's own CUDA
backend edits its PTX the same way (`.version` and `.target` lines). Every use of a parameter is
accounted for: one other than an `ld.param` is refused rather than left pointing at the wrong
argument.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from .abi import BASE, BUFFER, GRID, SCALAR, Abi, Slot
from . import types
from .errors import UnsupportedError, invalid_module

# Triton's scalar and pointer element types: (MLIR type of the argument or element, bytes).
SCALAR_TYPES = {ty: (m, types.ELEMENT_BYTES[m]) for ty, m in types.SCALAR_TYPES.items()}
_POINTER_TYPES = {ty: (m, types.ELEMENT_BYTES[m]) for ty, (m, _) in types.POINTER_TYPES.items()}


@dataclass(frozen=True)
class Arg:
    """One non-constexpr kernel argument: a buffer of `dtype` elements, or a scalar."""
    name: str
    triton_type: str          # '*fp32', 'i32', ...
    dtype: str                # MLIR element type (buffers) or scalar type
    nbytes: int               # element size (buffers) or scalar size

    @property
    def is_buffer(self) -> bool:
        return self.triton_type.startswith("*")


def kernel_args(signature: dict, kernel: str) -> list[Arg]:
    """The non-constexpr arguments of Triton's `signature` ({name: '*fp32' | 'i32' | 'constexpr'})."""
    args = []
    for name, ty in signature.items():
        if ty == "constexpr":
            continue
        table, key = (_POINTER_TYPES, ty[1:].lstrip("k")) if ty.startswith("*") else (SCALAR_TYPES, ty)
        if key not in table:
            raise UnsupportedError(f"native mode: argument '{name}' of type {ty} is not supported", kernel=kernel)
        args.append(Arg(name, ty, *table[key]))
    return args


@dataclass(frozen=True)
class NativeKernel:
    """Triton's compiled kernel: the PTX and what launching it needs."""
    name: str
    ptx: str
    args: tuple[Arg, ...]
    num_warps: int
    shared: int               # dynamic shared memory, bytes
    scratch: tuple[int, ...]  # sizes of the scratch buffers Triton appends (global, profile)

    @property
    def abi(self) -> Abi:
        """The host function's ABI: every buffer written."""
        return Abi([Slot(BUFFER if a.is_buffer else SCALAR, a.name, a.dtype, a.is_buffer) for a in self.args])


def from_compiled(compiled, signature: dict) -> NativeKernel:
    """The NativeKernel of a `triton.compile` result for a CUDA target."""
    md = compiled.metadata
    scratch = tuple(getattr(md, f, 0) or 0 for f in ("global_scratch_size", "profile_scratch_size")
                    if hasattr(md, f))
    if getattr(md, "num_ctas", 1) != 1:
        raise UnsupportedError("native mode: thread block clusters (num_ctas > 1) are not supported", kernel=md.name)
    return NativeKernel(md.name, compiled.asm["ptx"], tuple(kernel_args(signature, md.name)), md.num_warps,
                        md.shared, scratch)


# PTX is rewritten as text: none of the dependencies parses PTX (LLVM's NVPTX backend only emits
# it; Triton and IREE do not read it back). The rewrite is narrow and checked: the entry's parameter
# list, and `ld.param` of those parameters; a parameter used any other way is refused (`sub_loads`).
_ENTRY = re.compile(r"(\.visible\s+\.entry\s+)(\w+)(\s*\()(.*?)(\)\s*)", re.S)


def _params(block: str) -> list[tuple[str, str]]:
    """(PTX type, name) of each parameter of an entry's parameter list."""
    out = []
    for item in filter(None, (s.strip() for s in block.split(","))):
        tokens = item.split()
        if tokens[0] != ".param" or "[" in item:
            raise UnsupportedError(f"native mode: unexpected kernel parameter '{item}' in Triton's PTX")
        out.append((tokens[1], tokens[-1]))
    return out


def rewrite_abi(k: NativeKernel) -> str:
    """Triton's PTX with its entry in IREE's calling convention (see the module docstring):
    bindings (each buffer, in order), then the 32-bit constants of `Abi.push_constants` (64-bit
    scalars as low, high; base offsets in bytes)."""
    m = _ENTRY.search(k.ptx)
    if m is None or m.group(2) != k.name:
        raise UnsupportedError(f"native mode: no entry '{k.name}' in Triton's PTX", kernel=k.name)
    params = _params(m.group(4))
    if len(params) != len(k.args) + len(k.scratch):
        raise UnsupportedError(f"native mode: Triton's PTX entry has {len(params)} parameters; expected "
                               f"{len(k.args)} arguments and {len(k.scratch)} scratch pointers", kernel=k.name)
    body = k.ptx[m.end():]
    abi = k.abi
    decls: dict[Slot, list[str]] = {}   # the PTX parameters of each slot
    fresh = iter(range(1 << 30))

    def sub_loads(name: str, repl) -> None:
        nonlocal body
        pattern = re.compile(rf"ld\.param\.(\w+)\s+(%\w+),\s*\[{name}\];")
        if len(pattern.findall(body)) != len(re.findall(rf"\b{name}\b", body)):
            raise UnsupportedError(f"native mode: Triton's PTX uses parameter {name} other than by ld.param",
                                   kernel=k.name)
        body = pattern.sub(lambda mm: repl(mm.group(1), mm.group(2)), body)

    for slot, arg, (ptype, pname) in zip(abi.params, k.args, params):
        if arg.is_buffer:
            off = f"{pname}_offset"
            decls[slot] = [f".param .u64 .ptr .global .align 1 {pname}"]
            decls[abi.bases[slot.number]] = [f".param .u32 {off}"]

            def advance(ty, reg, off=off, pname=pname):
                i = next(fresh)
                return (f"ld.param.{ty} {reg}, [{pname}];\n\t{{ .reg .b32 %tio_o{i}; .reg .b64 %tio_d{i}; "
                        f"ld.param.b32 %tio_o{i}, [{off}]; cvt.u64.u32 %tio_d{i}, %tio_o{i}; "
                        f"add.s64 {reg}, {reg}, %tio_d{i}; }}")
            sub_loads(pname, advance)
        elif arg.nbytes == 8:
            lo, hi = f"{pname}_lo", f"{pname}_hi"
            decls[slot] = [f".param .u32 {lo}", f".param .u32 {hi}"]

            def halves(ty, reg, lo=lo, hi=hi):
                i = next(fresh)
                return (f"{{ .reg .b32 %tio_l{i}; .reg .b32 %tio_h{i}; ld.param.b32 %tio_l{i}, [{lo}]; "
                        f"ld.param.b32 %tio_h{i}, [{hi}]; mov.b64 {reg}, {{%tio_l{i}, %tio_h{i}}}; }}")
            sub_loads(pname, halves)
        else:
            decls[slot] = [f".param {ptype} {pname}"]
    for size, (_, pname) in zip(k.scratch, params[len(k.args):]):
        if size:
            raise UnsupportedError(f"native mode: the kernel needs {size} bytes of scratch memory per program, "
                                   f"which is not supported yet", kernel=k.name)
        sub_loads(pname, lambda ty, reg: f"mov.b64 {reg}, 0;")
    plist = ",\n\t".join(d for s in (*abi.buffers, *abi.push_constants()) for d in decls[s])
    return f"{k.ptx[:m.start()]}{m.group(1)}{k.name}{m.group(3)}\n\t{plist}\n{m.group(5)}{body}"


def constant_words(k: NativeKernel) -> int:
    """The 32-bit push constants of `k`: 64-bit scalars take two."""
    return sum(2 if s.kind == SCALAR and s.dtype in ("i64", "f64") else 1 for s in k.abi.push_constants())


def module(k: NativeKernel) -> str:
    """The IREE input module (MLIR text) that launches `k` over the grid (see `_host_function`)."""
    buffers = [a for a in k.args if a.is_buffer]
    if not buffers:
        raise UnsupportedError("native mode: a kernel without pointer arguments has no effect", kernel=k.name)
    data = rewrite_abi(k).encode()
    lines = []
    w = lines.append
    bindings = ", ".join("#hal.pipeline.binding<storage_buffer>" for _ in buffers)
    w('#cuda = #hal.executable.target<"cuda", "cuda-nvptx-fb">')
    w("module {")
    # Generic form: IREE 3.13 cannot parse `objects` in this op's custom form.
    w(f'  "hal.executable.source"() <{{sym_name = "{k.name}_native", sym_visibility = "private", '
      f'objects = #hal.executable.objects<{{#cuda = [#hal.executable.object<{{data = '
      f'dense<"0x{data.hex().upper()}"> : vector<{len(data)}xi8>}}>]}}>}}> ({{')
    w(f'    "hal.executable.export"() <{{sym_name = "{k.name}", sym_visibility = "public", ordinal = 0 : index, '
      f"layout = #hal.pipeline.layout<constants = {constant_words(k)}, bindings = [{bindings}]>, "
      f"workgroup_size = [{32 * k.num_warps} : index, 1 : index, 1 : index], "
      f"workgroup_local_memory = {k.shared} : index}}> ({{")
    w("    ^bb0(%device: !hal.device, %x: index, %y: index, %z: index):")
    w("      hal.return %x, %y, %z : index, index, index")
    w("    }, {}) : () -> ()")
    w('    "hal.executable.source_end"() : () -> ()')
    w("  }) : () -> ()")
    _host_function(lines, k)
    w("}")
    return _verified("\n".join(lines) + "\n", k.name)


def _verified(text: str, kernel: str) -> str:
    """`text`, once IREE's MLIR bindings parsed and verified it: an invalid module is a bug of
    triton-iree's, reported as such rather than by iree-compile."""
    from iree.compiler import ir
    with ir.Context(load_on_create_dialects=[]):
        try:
            ir.Module.parse(text).operation.verify()
        except ir.MLIRError as e:
            raise invalid_module("native-mode module", text, e, kernel) from None
    return text


def _host_function(lines: list, k: NativeKernel) -> None:
    """The host function (`abi`): one dispatch of the kernel over the grid, writing every buffer
    in place."""
    abi = k.abi
    names = {BUFFER: "%b", SCALAR: "%s", BASE: "%o"}
    args = abi.arguments(lambda s: f"%{s.name}" if s.kind == GRID else f"{names[s.kind]}{s.number}")
    results = ", ".join(abi.results())
    lines.append(f"  func.func @{k.name}({', '.join(args)}) -> ({results}) {{")
    host = _Host(lines)
    host.w("%c0 = arith.constant 0 : index")
    words = []
    buffers = [a for a in k.args if a.is_buffer]
    for s in abi.push_constants():
        i = s.number
        if s.kind == SCALAR:
            words += host.words(f"%s{i}", s.dtype, f"s{i}")
        else:
            host.w(f"%ob{i} = arith.muli %o{i}, {host.const(buffers[i].nbytes)} : i64")
            host.w(f"%ow{i} = arith.trunci %ob{i} : i64 to i32")
            words.append(f"%ow{i}")
    for s in abi.buffers:
        host.w(f"%d{s.number} = tensor.dim %b{s.number}, %c0 : {s.mlir_type}")
    for s in abi.grid:
        host.w(f"%g{s.name[-1]} = arith.index_castui %{s.name} : i32 to index")
    types = ["i32"] * len(words) + [f"{s.mlir_type}{{%d{s.number}}}" for s in abi.buffers]
    tied = ", ".join(f"%b{s.number}{{%d{s.number}}}" for s in abi.buffers)
    host.w(f"%r:{len(abi.buffers)} = flow.dispatch @{k.name}_native::@{k.name}[%gx, %gy, %gz]"
           f"({', '.join(words + [f'%b{s.number}' for s in abi.buffers])}) : ({', '.join(types)}) -> ({tied})")
    host.w(f"return {', '.join(f'%r#{s.number}' for s in abi.buffers)} : {results}")
    lines.append("  }")


class _Host:
    """Lines of the host function, with each i64 constant defined once."""

    def __init__(self, lines: list):
        self.lines, self.consts = lines, set()

    def w(self, line: str) -> None:
        self.lines.append(f"    {line}")

    def const(self, value: int) -> str:
        if value not in self.consts:
            self.consts.add(value)
            self.w(f"%k{value} = arith.constant {value} : i64")
        return f"%k{value}"

    def words(self, value: str, dtype: str, tag: str) -> list[str]:
        """Converts a scalar to the i32 words IREE passes; returns their names."""
        if dtype == "i32":
            return [value]
        if dtype == "f32":
            self.w(f"%{tag}w = arith.bitcast {value} : f32 to i32")
            return [f"%{tag}w"]
        if dtype in ("i1", "i8", "i16"):
            self.w(f"%{tag}w = arith.extui {value} : {dtype} to i32")
            return [f"%{tag}w"]
        if dtype in ("f16", "bf16"):
            self.w(f"%{tag}i = arith.bitcast {value} : {dtype} to i16")
            self.w(f"%{tag}w = arith.extui %{tag}i : i16 to i32")
            return [f"%{tag}w"]
        if dtype == "f64":
            self.w(f"%{tag}b = arith.bitcast {value} : f64 to i64")
            value = f"%{tag}b"
        self.w(f"%{tag}lo = arith.trunci {value} : i64 to i32")
        self.w(f"%{tag}sh = arith.shrui {value}, {self.const(32)} : i64")
        self.w(f"%{tag}hi = arith.trunci %{tag}sh : i64 to i32")
        return [f"%{tag}lo", f"%{tag}hi"]


def compile_ttir(ttir: str, name: str, params: list[str], *, arch: int, num_warps: int, num_stages: int,
                 enable_fp_fusion: bool = True) -> NativeKernel:
    """Triton's CUDA compile (no GPU needed) of a kernel's TTIR (Triton's 'ttir' stage output,
    constants already specialized) whose arguments are `params`, as a NativeKernel."""
    import tempfile
    from pathlib import Path

    import triton
    from triton.backends.compiler import GPUTarget
    with tempfile.TemporaryDirectory(prefix="triton-iree-native-") as tmp:
        path = Path(tmp) / f"{name}.ttir"
        path.write_text(ttir)
        compiled = triton.compile(str(path), target=GPUTarget("cuda", arch, 32),
                                  options={"num_warps": num_warps, "num_stages": num_stages,
                                           "enable_fp_fusion": enable_fp_fusion})
    # The TTIR function's argument types are MLIR's ('*f32'); the tables here take Triton's.
    mlir_types = {m: ty for table in (_POINTER_TYPES, SCALAR_TYPES) for ty, (m, _) in reversed(table.items())}
    signature = {p: ("*" if ty.startswith("*") else "") + mlir_types.get(ty.lstrip("*"), ty)
                 for p, ty in zip(params, compiled.src.signature.values(), strict=True)}
    return from_compiled(compiled, signature)


def compile_triton(fn, signature: dict, constexprs: dict, *, arch: int = 90, num_warps: int = 4,
                   num_stages: int = 3, attrs: Optional[dict] = None) -> NativeKernel:
    """Triton's CUDA compile of `fn` (no GPU needed), as a NativeKernel."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    full = {name: "constexpr" if name in constexprs else ty for name, ty in signature.items()}
    src = ASTSource(fn=fn, signature=full, constexprs=constexprs, attrs=attrs or {})
    compiled = triton.compile(src, target=GPUTarget("cuda", arch, 32),
                              options={"num_warps": num_warps, "num_stages": num_stages})
    return from_compiled(compiled, full)
