"""Small helpers shared by the tests: TTIR of corpus kernels, the pipeline up to the module, the
ops of an emitted module, the block-size edge set, guarded memory and the fp16 tolerance."""
import ctypes
import mmap

import torch
from iree.compiler import ir

from triton_iree import analysis, lowering, reader
from triton_iree.backend import compiler

import kernels as K

ADD_SIG = dict(x_ptr="*fp32", y_ptr="*fp32", out_ptr="*fp32", n_elements="i32", BLOCK_SIZE="constexpr")
MATMUL_SIG = dict(a_ptr="*fp32", b_ptr="*fp32", c_ptr="*fp32", M="i32", N="i32", K="i32",
                  stride_am="i32", stride_ak="constexpr", stride_bk="i32", stride_bn="constexpr",
                  stride_cm="i32", stride_cn="constexpr", BLOCK_M="constexpr", BLOCK_N="constexpr",
                  BLOCK_K="constexpr")
MATMUL_CONSTS = dict(stride_ak=1, stride_bn=1, stride_cn=1, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
GATHER_SIG = dict(x_ptr="*fp32", idx_ptr="*i32", out_ptr="*fp32", n="i32", BLOCK="constexpr")


def tile_program(fn, sig, consts):
    return reader.read_ttir(compiler.kernel_ttir(fn, sig, consts))


def add_program(block=1024):
    return tile_program(K.add_kernel, ADD_SIG, dict(BLOCK_SIZE=block))


def facts_and_module(kernel):
    facts = analysis.analyze(kernel)
    return facts, lowering.emit_module(kernel, facts)


def nested_ops(op) -> list:
    """`op` and the ops nested in it, in pre-order (MLIR Python bindings' operations)."""
    found = []

    def visit(o):
        found.append(o)
        return ir.WalkResult.ADVANCE
    op.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def module_ops(text: str) -> list[tuple[str, dict[str, str]]]:
    """Each op of module `text` in walk order (nested ops first): its name and its attributes,
    printed."""
    found = []

    def visit(op):
        found.append((op.name, {name: str(op.attributes[name]) for name in op.attributes}))
        return ir.WalkResult.ADVANCE
    with ir.Context():
        ir.Module.parse(text).operation.walk(visit)
    return found


def program_versions(text: str) -> list[str]:
    """The versions of the program in module `text`'s one dispatch, printed: the full-tile and
    the masked version where the program has both (an `scf.if` at the top of the dispatch's
    body, without results), else the whole module."""
    with ir.Context():
        module = ir.Module.parse(text)
        found = []

        def visit(op):
            if op.name == "flow.dispatch.workgroups":
                for inner in op.regions[0].blocks[0].operations:
                    if inner.operation.name == "scf.if" and not inner.results and len(inner.regions[1].blocks):
                        found.append(["\n".join(str(o) for o in r.blocks[0].operations) for r in inner.regions])
            return ir.WalkResult.ADVANCE
        module.operation.walk(visit)
        return found[0] if len(found) == 1 else [text]


def reduction_bodies(text: str) -> list[list[tuple[str, tuple[str, ...]]]]:
    """The combining ops of each reduction linalg.generic of module `text`: (op name, operands),
    an operand named "in" or "acc" (the region's first and last argument) or by the op that
    computes it."""
    bodies = []

    def operand(v, block) -> str:
        if isinstance(v.owner, ir.Block):
            return "in" if ir.BlockArgument(v).arg_number == 0 else \
                "acc" if ir.BlockArgument(v).arg_number == len(block.arguments) - 1 else "arg"
        return v.owner.name

    def visit(op):
        if op.name == "linalg.generic" and "reduction" in str(op.attributes["iterator_types"]):
            block = op.regions[0].blocks[0]
            bodies.append([(o.name, tuple(operand(v, block) for v in o.operands)) for o in block.operations])
        return ir.WalkResult.ADVANCE
    with ir.Context():
        ir.Module.parse(text).operation.walk(visit)
    return bodies


def assert_fp16_rounding_of(c, ref32):
    """c is the fp32 result ref32 rounded to fp16: within one fp16 ulp (the sums run in
    different orders), 1e-3 near zero. The same matmul with an fp16 accumulator across the K
    loop is off by up to 0.06 in 14% of its elements."""
    torch.testing.assert_close(c.float(), ref32, rtol=torch.finfo(torch.float16).eps, atol=1e-3)


def item_builds(monkeypatch) -> list[int]:
    """One entry per launch from now on that builds its arguments (`arguments.argument_items`):
    a launch that reuses none an earlier one kept (`runtime.LoadedKernel.launch`)."""
    from triton_iree import runtime
    built, real = [], runtime.argument_items
    monkeypatch.setattr(runtime, "argument_items", lambda *a: built.append(1) or real(*a))
    return built


def edge_sizes(block: int, k: int = 3) -> list[int]:
    """The sizes where block-size bugs show: n in {1, BLOCK-1, BLOCK, BLOCK+1, k*BLOCK-1}."""
    return sorted({1, block - 1, block, block + 1, k * block - 1} - {0})


_GUARD_MAPS = []   # the mappings behind guarded() tensors live as long as the process


def guarded(n: int, dtype=None):
    """A 1-D tensor of `n` zeros whose storage ends where an inaccessible page begins: a kernel
    that reads or writes past its last element crashes. Use it in tests marked `isolated`."""
    dtype = dtype or torch.float32
    esize = torch.empty((), dtype=dtype).element_size()
    size = -(-n * esize // mmap.PAGESIZE) * mmap.PAGESIZE
    mm = mmap.mmap(-1, size + mmap.PAGESIZE)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mprotect(ctypes.c_void_p(addr + size), ctypes.c_size_t(mmap.PAGESIZE), 0) != 0:
        raise OSError(ctypes.get_errno(), "mprotect failed")
    _GUARD_MAPS.append(mm)
    return torch.frombuffer(mm, dtype=dtype, count=size // esize)[size // esize - n:]
