import re

from triton_iree import emit

from helpers import add_program, facts_and_module


def test_module_abi_and_dispatch_form():
    k = add_program(1024)
    _, text = facts_and_module(k)
    emit.verify(text, k.name)
    sig = re.search(r"func\.func @add_kernel\((.*)\) -> \((.*)\) \{", text)
    args, results = sig.group(1), sig.group(2)
    assert args.count("tensor<?xf32>") == 3
    assert "{iree.abi.output = 0 : index}" in args.split(",")[2]
    assert "%grid_x: i32, %grid_y: i32, %grid_z: i32" in args
    assert results == "tensor<?xf32>"
    assert text.count("flow.dispatch.workgroups") == 1
    assert "flow.dispatch.workgroup.id[0]" in text
    # a full-tile version with static slices beside the masked one
    assert "sizes = [1024]" in text and "scf.if" in text


def test_emitted_modules_are_deterministic():
    _, a = facts_and_module(add_program(256))
    _, b = facts_and_module(add_program(256))
    assert a == b


def _matmul_module(options, **consts):
    from helpers import MATMUL_CONSTS, MATMUL_SIG, tile_program
    import kernels as K
    k = tile_program(K.matmul_kernel, MATMUL_SIG, {**MATMUL_CONSTS, **consts})
    text = emit.lower(k, options)
    return text


def test_cpu_lowering_configs_one_root_on_a_matmul():
    text = _matmul_module(emit.EmitOptions(max_workgroups=128, cpu_tiling=emit.CpuTiling()),
                          BLOCK_M=64, BLOCK_N=64, BLOCK_K=64)
    assert text.count("#iree_codegen.compilation_info") == 1
    root = next(ln for ln in text.splitlines() if "compilation_info" in ln)
    assert "linalg.matmul" in root and "DoubleTilingExpert" in root
    assert "vector_common_parallel = [8, 32, 0], vector_reduction = [0, 0, 1]" in root
    for ln in text.splitlines():
        if "linalg." in ln and " = linalg." in ln and "linalg.index" not in ln:
            assert "lowering_config" in ln or "compilation_info" in ln, ln
    # The root is in the masked version (always reachable), not in the full one.
    full, masked = text.split("} else {", 1)
    assert "compilation_info" in masked.split("flow.return")[0]


def test_no_lowering_configs_without_a_matmul_or_cpu_tiling():
    _, text = facts_and_module(add_program(1024))
    assert "lowering_config" not in text
    k = add_program(1024)
    assert "lowering_config" not in emit.lower(k, emit.cpu_options())
    assert "lowering_config" not in _matmul_module(emit.EmitOptions())


def test_matmul_full_version_form():
    # Full version: the K loop runs its full iterations with slab loads and a tensor
    # accumulator, then the tail with masked slab loads (the version checked that the slabs
    # fit); the masked version follows, choosing slabs or row loops at run time.
    text = _matmul_module(emit.EmitOptions(cpu_tiling=emit.CpuTiling()))
    full, masked = text.split("} else {", 1)
    loops = [ln for ln in full.splitlines() if "scf.for %iv" in ln]
    assert len(loops) == 2
    assert all("-> (tensor<32x32xf32>, index, index)" in ln for ln in loops)
    first, tail = full.split(loops[1], 1)
    tail = tail.split("scf.yield")[0]
    assert first.count("into tensor<32x?xf32>") == 2 and "vector.transfer" not in first
    assert "tensor.insert_slice" not in first and "scf.for %row" not in first
    assert "arith.floordivsi" in first          # the peel point
    assert tail.count("into tensor<?x?xf32>") == 2 and "scf.for %row" not in tail and "scf.if" not in tail
    assert masked.count("scf.for %row") >= 2 and "into tensor<?x?xf32>" in masked
