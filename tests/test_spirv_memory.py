"""`targets.spirv_memory`: which workgroup variables of a SPIR-V function share memory, on
small SPIR-V modules written out here (the kernels' own are tested through the lowering and run
on lavapipe: test_lowering_gpu.py, test_vulkan.py)."""
import pytest
from iree.compiler import ir

from triton_iree.targets.spirv_memory import share_workgroup_memory

ARRAY = "!spirv.ptr<!spirv.struct<(!spirv.array<64 x f32>)>, Workgroup>"
SMALL = "!spirv.ptr<!spirv.struct<(!spirv.array<32 x f32>)>, Workgroup>"
BARRIER = "spirv.ControlBarrier <Workgroup>, <Workgroup>, <AcquireRelease|WorkgroupMemory>"


def store(var: str, kind: str = ARRAY) -> str:
    """A store of 1.0 into element 0 of `var`."""
    return (f"%p_{var}_{{n}} = spirv.mlir.addressof @{var} : {kind}\n"
            f"%e_{var}_{{n}} = spirv.AccessChain %p_{var}_{{n}}[%c0, %c0] : {kind}, i32, i32 "
            f"-> !spirv.ptr<f32, Workgroup>\n"
            f'spirv.Store "Workgroup" %e_{var}_{{n}}, %one : f32\n')


def module(body: list[str], kinds: dict[str, str] | None = None) -> str:
    kinds = kinds or {"a": ARRAY, "b": ARRAY}
    lines = "".join(step.replace("{n}", str(i)) for i, step in enumerate(body))
    variables = "".join(f"spirv.GlobalVariable @{v} : {k}\n" for v, k in kinds.items())
    return (f"module {{\nspirv.module Logical GLSL450 requires #spirv.vce<v1.0, [Shader], []> {{\n{variables}"
            f'spirv.func @f() "None" {{\n%c0 = spirv.Constant 0 : i32\n%one = spirv.Constant 1.0 : f32\n'
            f"%cond = spirv.Constant true\n{lines}spirv.Return\n}}\n"
            f'spirv.EntryPoint "GLCompute" @f, {", ".join("@" + v for v in kinds)}\n}}\n}}\n')


def branch(inner: str, end: str = "spirv.Branch ^bb2\n") -> str:
    """`inner` in a selection on a constant condition, then `end`."""
    return ("spirv.mlir.selection {\nspirv.BranchConditional %cond, ^bb1, ^bb2\n^bb1:\n" + inner + end +
            "^bb2:\nspirv.mlir.merge\n}\n")


def share(text: str) -> tuple[dict, str]:
    with ir.Context():
        m = ir.Module.parse(text)
        sizes = share_workgroup_memory(m)
        m.operation.verify()
        return sizes, str(m)


def test_tiles_a_barrier_separates_share_memory():
    sizes, text = share(module([store("a"), BARRIER + "\n", store("b")]))
    assert sizes == {"f": (512, 256)}
    assert text.count("spirv.GlobalVariable") == 1 and "@b" not in text
    assert text.count("spirv.mlir.addressof @a") == 2


@pytest.mark.parametrize("body", [
    [store("a"), store("b")],                                   # no barrier between them
    [store("a"), branch(BARRIER + "\n"), store("b")],           # a barrier only some invocations may reach
    [store("a"), BARRIER + "\n", store("b"), store("a")],       # a used again after b
    [store("a"), branch("", "spirv.Return\n"), BARRIER + "\n", store("b")],   # some invocations return early
], ids=["no-barrier", "barrier-in-a-branch", "overlapping", "early-return"])
def test_tiles_keep_their_memory_unless_every_invocation_is_done_with_the_other(body):
    sizes, text = share(module(body))
    assert sizes == {"f": (512, 512)}
    assert text.count("spirv.GlobalVariable") == 2


def test_a_use_inside_a_branch_counts_as_the_whole_branch():
    """The barrier inside the branch does not separate a from b: the branch is one step."""
    sizes, _ = share(module([branch(store("a") + BARRIER + "\n" + store("b"))]))
    assert sizes == {"f": (512, 512)}
    sizes, _ = share(module([branch(store("a")), BARRIER + "\n", branch(store("b"))]))
    assert sizes == {"f": (512, 256)}


def test_only_variables_of_one_type_share():
    sizes, text = share(module([store("a"), BARRIER + "\n", store("b", SMALL)], {"a": ARRAY, "b": SMALL}))
    assert sizes == {"f": (384, 384)}
    assert text.count("spirv.GlobalVariable") == 2


@pytest.mark.parametrize("kind,size", [
    ("f32", 4), ("vector<4xf16>", 8), ("!spirv.array<1024 x f32>", 4096),
    ("!spirv.array<8 x vector<4xf32>, stride=32>", 256), ("!spirv.struct<(!spirv.array<64 x i64>)>", 512),
    ("!spirv.struct<(!spirv.array<3 x !spirv.array<5 x f16>>)>", 30), ("!spirv.struct<(f32, f32)>", None),
    ("!spirv.rtarray<f32>", None),
])
def test_a_variables_size_is_read_from_its_type_or_not_at_all(kind, size):
    """The sizes the limit is checked with (`Vulkan.rewrite_executables`, after a second try):
    a type it cannot size exactly gives None, and the module is refused rather than guessed."""
    from triton_iree.targets.spirv_memory import _bytes
    assert _bytes(kind) == size
