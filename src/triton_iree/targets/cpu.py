"""llvm-cpu: the target (`LlvmCpu`), per-op vector tile sizes (`CpuTiling`), the target CPU's
vector width, and the emitter options for the CPU."""
from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from .. import tile as t
from .base import HOST, Target

if TYPE_CHECKING:
    from ..lowering.options import EmitOptions


def _fit(n: int, want: int) -> int:
    """The largest power of two that divides `n` and is at most `want` (at least 1)."""
    t = 1
    while t * 2 <= want and n % (t * 2) == 0:
        t *= 2
    return t



@dataclass(frozen=True)
class CpuTiling:
    """Vector tile sizes for IREE's llvm-cpu codegen, set per linalg op.

    Left to itself, IREE configures one root op per dispatch (and what it can fuse with it);
    every other linalg op is vectorized whole: a 64x64x64 matmul becomes one huge vector
    contraction (slow code, seconds of compile time, large stacks). So the emitter gives every
    linalg op a `lowering_config` and exactly one of them (the root, see `_LinalgOp.heat`) the
    `compilation_info` that carries the dispatch's translation_info. Two compilation_infos in a
    dispatch are an error; bare lowering_configs whose root was folded away are too.

    vector_bytes: the native vector register width (matmul accumulators, reductions).
    elementwise_bytes: the vector width of elementwise ops and fills.
    matmul_rows, matmul_vectors: the matmul micro-tile: rows x (vectors x native vector) of the
      accumulator, the K loop one step at a time.

    reduction_vectors: a reduction along the last dim is tiled to this many native vectors, so
      that it keeps as many independent partial sums (IREE's own config keeps one vector: a
      serial chain of adds, bound by their latency). Hand-configured with 4 on a 2-core AVX2
      host (iree-benchmark-module, three alternating passes): softmax 4096x1024
      3.82/3.51/2.98 -> 3.10/2.82/2.70 ms, layer norm 4096x1024 4.10/4.30/3.93 -> 3.18/3.69/3.40 ms.

    Dispatches with a matmul are configured, and the root is a matmul; so are dispatches whose
    ops are all 1-D with 4-byte elements and include a reduction (`configures`: softmax and
    layer norm rows), the root the hottest op. IREE rewrites
    linalg.generic ops of a dispatch (collapsing dimensions, fusing producers into consumers)
    and the rewritten ops lose their attributes; when the root's compilation_info is lost and
    other lowering_configs remain, configuration fails. Named matmuls keep theirs. Other
    dispatches are left to IREE's own heuristics: configuring every dispatch with a reduction
    failed to compile 14 kernel and conformance tests (2-D, fp16, bool and keep_dims
    reductions); elementwise-only ones gained little (vector add, 8-wide f32).
    """

    def configures(self, ops) -> bool:
        """Whether a dispatch with these linalg ops (`_LinalgOp`) gets per-op configs."""
        if any(o.kind == "matmul" for o in ops):
            return True
        shaped = [o for o in ops if o.loops]
        return (self.reduction_vectors > 1 and any("reduction" in o.iterators for o in shaped)
                and all(len(o.loops) == 1 and o.elt_bytes == 4 and o.kind in ("generic", "fill")
                        for o in shaped))
    vector_bytes: int = 64
    elementwise_bytes: int = 32
    matmul_rows: int = 8
    matmul_vectors: int = 2
    reduction_vectors: int = 4

    def tile_sizes(self, kind: str, loops: tuple[int, ...], iterators: tuple[str, ...],
                   elt_bytes: int, math: bool = False) -> tuple[list[int], list[int]]:
        """(vector_common_parallel, vector_reduction) tile sizes of one op. Elementwise ops
        that call math functions (or divide) use native vectors, others `elementwise_bytes`."""
        rank = len(loops)
        if kind == "matmul":
            m, n, _ = loops
            vec = max(1, self.vector_bytes // elt_bytes)
            return ([_fit(m, self.matmul_rows), _fit(n, self.matmul_vectors * vec), 0], [0, 0, 1])
        if "reduction" not in iterators:
            par = [1] * rank
            width = self.vector_bytes if math else self.elementwise_bytes
            par[-1] = _fit(loops[-1], max(1, width // elt_bytes))
            return par, []
        par = [1 if it == "parallel" else 0 for it in iterators]
        red = [1 if it == "reduction" else 0 for it in iterators]
        vectors = self.reduction_vectors if iterators[-1] == "reduction" else 1
        last = _fit(loops[-1], max(1, vectors * self.vector_bytes // elt_bytes))
        (red if iterators[-1] == "reduction" else par)[-1] = last
        return par, red

    def lowering_config(self, kind: str, loops: tuple[int, ...], iterators: tuple[str, ...],
                        elt_bytes: int, math: bool = False) -> str:
        par, red = self.tile_sizes(kind, loops, iterators, elt_bytes, math)
        fields = [f"distribution = [{', '.join('0' for _ in loops)}]",
                  f"vector_common_parallel = [{', '.join(map(str, par))}]"]
        if red:
            fields.append(f"vector_reduction = [{', '.join(map(str, red))}]")
        return f"#iree_cpu.lowering_config<{', '.join(fields)}>"

    @staticmethod
    def compilation_info(lowering_config: str) -> str:
        return (f"#iree_codegen.compilation_info<lowering_config = {lowering_config}, translation_info = "
                f"#iree_codegen.translation_info<pipeline = #iree_cpu.pipeline<DoubleTilingExpert>>>")



def host_vector_bytes() -> int:
    """The widest vector registers of this CPU that IREE targets with --iree-llvmcpu-target-cpu=host."""
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        from ..host import host_cpu_info
        flags = host_cpu_info()[1]
        return 64 if "avx512f" in flags else 32 if "avx2" in flags else 16
    return 16


# The CPU that iree-compile generates code for. "host" (the default) is the CPU of this
# machine: the fastest code, but a module may use instructions that other CPUs lack, so
# compiled modules are cached per host CPU. Any other LLVM CPU name builds code that runs on
# every CPU of that level: "generic" (baseline x86-64 / AArch64), "x86-64-v2", "x86-64-v3"
# (AVX2, FMA), "x86-64-v4" (AVX-512), or a model ("znver3", "skylake", "neoverse-n1");
# modules built for them are cached without the host's identity, so a cache directory can
# be shared between machines.
CPU_VAR = "TRITON_IREE_CPU"

# Vector width (bytes) of named x86 CPUs; any other name gets 16 (SSE / NEON).
_AVX512_CPUS = ("x86-64-v4", "skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "icelake-client",
                "icelake-server", "tigerlake", "rocketlake", "sapphirerapids", "emeraldrapids",
                "graniterapids", "znver4", "znver5")
_AVX2_CPUS = ("x86-64-v3", "haswell", "broadwell", "skylake", "alderlake", "raptorlake", "meteorlake",
              "arrowlake", "lunarlake", "gracemont", "znver1", "znver2", "znver3")


def target_cpu() -> str:
    """The LLVM CPU name iree-compile targets: $TRITON_IREE_CPU, or "host"."""
    return os.environ.get(CPU_VAR, "").strip() or "host"


def target_vector_bytes(cpu: str | None = None) -> int:
    """The vector register width of the target CPU (`target_cpu()` by default)."""
    cpu = (cpu or target_cpu()).lower()
    if cpu == "host":
        return host_vector_bytes()
    return 64 if cpu in _AVX512_CPUS else 32 if cpu in _AVX2_CPUS else 16


def matmul_rows(vector_bytes: int, cpu: str | None = None) -> int:
    """Rows of the matmul micro-tile: the accumulator is rows x 2 vectors, and it must leave
    registers for the B vectors and the broadcast A element. x86 without AVX-512 has 16 vector
    registers: 4 x 2 accumulators (8 x 2 filled all 16, and LLVM spilled them inside the K
    loop: 512^3 f32 measured 1.6x faster with 4 rows on a 2-core AVX2 host). AVX-512 and
    AArch64 have 32: 8 x 2."""
    cpu = (cpu or target_cpu()).lower()
    x86 = platform.machine().lower() in ("x86_64", "amd64") if cpu == "host" else \
        cpu in _AVX512_CPUS or cpu in _AVX2_CPUS or cpu.startswith("x86-64") or \
        (cpu == "generic" and platform.machine().lower() in ("x86_64", "amd64"))
    return 4 if x86 and vector_bytes < 64 else 8


# f64 math that IREE's llvm-cpu code computes by calling libm (measured with iree-compile 3.13:
# "undefined symbol: sin"; math.erf and math.cbrt do not lower at all). Its f64 exp, exp2, log,
# log1p, expm1, sqrt, rsqrt, sinh, cosh, powf and the rounding ops are inline code. The TTIR
# reader and libdevice write every op of this list as inline f64 ops (f64_math.py, f64_trig.py),
# so none of them reaches the emitter from there; the emitter still refuses them where a reader
# without that expansion (triton-shared's memref IR) hands them over.
NO_LIBM_F64 = frozenset((op, "f64") for op in (
    "math.sin", "math.cos", "math.tan", "math.tanh", "math.asin", "math.acos", "math.atan", "math.atan2",
    "math.log2", "math.log10", "math.erf", "math.cbrt", "arith.remf"))


@dataclass(frozen=True)
class LlvmCpu(Target):
    """IREE's llvm-cpu target on this machine: one Triton program is one workgroup, and IREE's
    local-task driver runs the workgroups on a thread pool over all cores; launches with little
    work run inline on the calling thread (local-sync). `cpu`: the LLVM CPU (see CPU_VAR)."""
    cpu: str = "host"

    name: ClassVar[str] = "llvm-cpu"
    backend: ClassVar[str] = "llvm-cpu"
    driver: ClassVar[str] = "local-task"
    other_drivers: ClassVar[tuple[str, ...]] = ("local-sync",)
    memory: ClassVar[str] = HOST
    validated_for_triton: ClassVar[bool] = True
    validated_for_linalg: ClassVar[bool] = True

    @classmethod
    def of(cls, arch: str | None = None, cpu: str | None = None) -> "LlvmCpu":
        return cls(cpu=target_cpu() if cpu is None else cpu)

    @property
    def is_cpu(self) -> bool:
        return True

    @property
    def flags(self) -> tuple[str, ...]:
        return (f"--iree-llvmcpu-target-cpu={self.cpu}",
                # One Triton program = one workgroup: IREE must not tile and distribute again.
                "--iree-llvmcpu-disable-distribution",
                # tl.sum and friends leave the order of a reduction unspecified; let IREE vectorize it.
                "--iree-llvmcpu-reassociate-fp-reductions",
                # Triton tiles are large (a 64x64 f32 tile is 16 KiB); allow them on the stack.
                "--iree-llvmcpu-stack-allocation-limit=1048576",
                # Loop-carried tiles other than dot accumulators are vectors (16 KiB for 64x64 f32),
                # and ops IREE rewrites lose their lowering_config and are vectorized whole.
                "--iree-llvmcpu-fail-on-large-vector=false")

    def triton_target(self):
        """Triton's own name for a CPU target: its frontend needs the 'cpu' backend."""
        from triton.backends.compiler import GPUTarget
        return GPUTarget("cpu", "llvm-cpu", 1)

    def emit_options(self, num_warps: int = 4) -> "EmitOptions":
        """Several programs per workgroup (see `EmitOptions.max_workgroups`), per-op vector tile
        sizes for the target CPU, and a full-tile version of each program; `num_warps` is
        Triton's GPU notion, unused here."""
        from ..lowering.options import EmitOptions
        vec = target_vector_bytes(self.cpu)
        return EmitOptions(max_workgroups=max(128, 8 * (os.cpu_count() or 1)),
                           cpu_tiling=CpuTiling(vector_bytes=vec, elementwise_bytes=min(32, vec),
                                                matmul_rows=matmul_rows(vec, self.cpu)),
                           no_libm=NO_LIBM_F64)

    def prepare(self, kernel: t.Kernel) -> None:
        sums_carried_as_scalars(kernel)
        products_summed_through_fma(kernel)


def sums_carried_as_scalars(kernel: t.Kernel) -> None:
    """A loop that adds a 1-D f32 / f64 tile into an accumulator that starts at zero, where the
    accumulator is only summed to a scalar after the loop (``acc += x`` in the loop, then
    ``tl.sum(acc)``: a layer norm's mean and variance), carries that sum as a scalar instead:
    each iteration adds ``tl.sum(x)``. The tile accumulator crosses the loop as one vector of the
    whole tile, which LLVM keeps on the stack and copies in and out on every iteration (the
    layer norm ran at 0.35 of torch's speed on 2 quiet cores). The elements are then added per
    iteration, and the iterations' sums in order: another order of the same sum, as tl.sum leaves
    it unspecified (the CPU target already lets IREE reassociate reductions)."""
    uses = t.uses(kernel)
    for block in kernel.blocks():
        for loop in [op for op in block.ops if isinstance(op, t.For)]:
            for j in range(len(loop.inits)):
                sums = _summed_accumulator(loop, j, uses)
                if sums is not None:
                    _carry_the_sum(kernel, block, loop, j, sums)
                    uses = t.uses(kernel)


def _is_sum(combiner: t.Block) -> bool:
    if len(combiner.ops) != 1 or len(combiner.args) != 2:
        return False
    op = combiner.ops[0]
    return (isinstance(op, t.Elementwise) and op.opname == "arith.addf" and
            {id(a) for a in op.args} == {id(a) for a in combiner.args} and combiner.yields == [op.result])


def _summed_accumulator(loop: t.For, j: int, uses: dict) -> "list[t.Reduce] | None":
    """The reductions that sum iter_arg `j` of `loop` after it, where `sums_carried_as_scalars`
    applies to it; else None."""
    init, arg, new, result = loop.inits[j], loop.iter_args[j], loop.body.yields[j], loop.results[j]
    if len(result.shape) != 1 or result.dtype not in ("f32", "f64"):
        return None
    if not (isinstance(init.owner, t.Constant) and init.owner.value == 0):
        return None
    add = new.owner
    if not (isinstance(add, t.Elementwise) and add.opname == "arith.addf" and add in loop.body.ops
            and len(add.args) == 2 and sum(a is arg for a in add.args) == 1):
        return None
    if uses.get(arg.id, []) != [add] or uses.get(new.id, []) != [loop]:
        return None
    after = uses.get(result.id, [])
    if not after or not all(isinstance(r, t.Reduce) and r.srcs == [result] and r.to_scalar and _is_sum(r.combiner)
                            for r in after):
        return None
    return after


def _sum_of(x: t.Value, loc: str) -> t.Reduce:
    scalar = t.ScalarType(x.dtype)
    combiner = t.Block(args=[t.Value(scalar), t.Value(scalar)])
    add = combiner.add(t.Elementwise("arith.addf", combiner.args, scalar, loc=loc))
    combiner.yields = [add.result]
    return t.Reduce([x], 0, combiner, [scalar], loc)


def _carry_the_sum(kernel: t.Kernel, block: t.Block, loop: t.For, j: int, sums: "list[t.Reduce]") -> None:
    scalar = t.ScalarType(loop.results[j].dtype)
    add = loop.body.yields[j].owner
    x = next(a for a in add.args if a is not loop.iter_args[j])
    zero = t.Constant(0.0, scalar, loop.loc)
    block.ops.insert(block.ops.index(loop), zero)
    loop.inits[j] = zero.result
    carried = t.Value(scalar, loop.body)
    loop.body.args[1 + j] = carried
    part = _sum_of(x, add.loc)
    total = t.Elementwise("arith.addf", [carried, part.result], scalar, loc=add.loc)
    i = loop.body.ops.index(add)
    loop.body.ops[i:i + 1] = [part, total]
    loop.body.yields[j] = total.result
    result = t.Value(scalar, loop)
    loop.results[j] = result
    gone = {id(r) for r in sums}
    for b in kernel.blocks():
        b.ops = [op for op in b.ops if id(op) not in gone]
    t.replace_uses(kernel, {r.results[0].id: result for r in sums})


def products_summed_through_fma(kernel: t.Kernel) -> None:
    """A sum of f32 / f64 products (``tl.sum(x * x)``: a variance; ``tl.sum(a * b)``), where the
    reduced tile is the product or a ``tl.where`` of it, computes each product as
    ``fma(a, b, 0.0)``. IREE's CPU code turns a reduction of a multiply into a vector contraction,
    which it lowers to scalar FMAs, one lane at a time (a fifth of a torch.compile'd var_mean
    kernel); through fma it keeps vector FMAs and vector partial sums. The value is the same
    product, rounded once, but for the sign of an exact zero (-0.0 * x + 0.0 is +0.0), so it is
    done only where the product is used by the sum alone, or is a square (never -0.0)."""
    uses = t.uses(kernel)
    for block in kernel.blocks():
        for red in [op for op in block.ops if isinstance(op, t.Reduce)]:
            if len(red.srcs) != 1 or red.srcs[0].dtype not in ("f32", "f64") or not _is_sum(red.combiner):
                continue
            for mul in _summed_products(red.srcs[0], red, uses):
                zero = t.Constant(0.0, mul.result.type, mul.loc)
                at = next(b for b in kernel.blocks() if mul in b.ops)
                at.ops.insert(at.ops.index(mul), zero)
                mul.opname, mul.args = "math.fma", [*mul.args, zero.result]


def _summed_products(src: t.Value, red: t.Reduce, uses: dict) -> "list[t.Elementwise]":
    """The multiplies whose products `red` sums: `src` itself, or the branches of the
    ``arith.select`` that makes `src`, each used by nothing else unless it is a square."""
    def product(v: t.Value, user: t.Op) -> bool:
        op = v.owner
        return (isinstance(op, t.Elementwise) and op.opname == "arith.mulf" and len(op.args) == 2
                and (op.args[0] is op.args[1] or uses.get(v.id, []) == [user]))
    if product(src, red):
        return [src.owner]
    sel = src.owner
    if not (isinstance(sel, t.Elementwise) and sel.opname == "arith.select" and uses.get(src.id, []) == [red]):
        return []
    found = {id(a.owner): a.owner for a in sel.args[1:] if product(a, sel)}
    return list(found.values())
