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
    par, red = emit.CpuTiling().tile_sizes("matmul", (64, 64, 64), ("parallel", "parallel", "reduction"), 4)
    assert f"vector_common_parallel = {par}, vector_reduction = {red}" in root
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
    # Full version: the K loop is split at the peel point into its full iterations, which load
    # in place without masking (no transfers, no row loops, no tiles filled with `other`), and
    # the tail; the masked version follows. (What the loops compute is checked by running them.)
    text = _matmul_module(emit.EmitOptions(cpu_tiling=emit.CpuTiling()))
    full, masked = text.split("} else {", 1)
    loops = [ln for ln in full.splitlines() if "scf.for %iv" in ln]
    assert len(loops) == 2
    first = full.split(loops[1], 1)[0]
    assert "arith.floordivsi" in first          # the peel point
    body = first.split(loops[0], 1)[1]
    assert not any(op in body for op in ("vector.transfer", "tensor.insert_slice", "scf.for %row", "scf.if"))
    assert "scf.for %iv" in masked
