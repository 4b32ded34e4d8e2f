from triton_iree import analysis
from triton_iree import tile as t

import kernels as K
from helpers import GATHER_SIG, MATMUL_CONSTS, MATMUL_SIG, add_program, tile_program


def _accesses(k, facts):
    return [(op, facts.access(op)) for op in k.walk() if isinstance(op, (t.Load, t.Store))]


def test_vector_add_accesses_are_unit_stride_slices_bounded_by_n():
    k = add_program(1024)
    facts = analysis.analyze(k)
    for op, acc in _accesses(k, facts):
        assert isinstance(acc, analysis.StructuredAccess), op
        assert acc.form.strides[0].const_value == 1
        # mask offs < n  ->  index < n - pid*1024
        (hi,), = acc.box.hi
        assert not hi.is_const
        assert sorted(m for m, c in hi.terms.items() if c == -1024) != []
    # The offset and mask tiles are not needed: only their scalar ingredients are.
    loads = [op for op in k.walk() if isinstance(op, t.Load)]
    assert all(op.offsets.id not in facts.live and op.mask.id not in facts.live for op in loads)


def test_gather_through_loaded_indices():
    k = tile_program(K.gather_kernel, GATHER_SIG, dict(BLOCK=64))
    facts = analysis.analyze(k)
    kinds = {op.buffer.name: type(acc).__name__ for op, acc in _accesses(k, facts)}
    assert kinds == {"idx_ptr": "StructuredAccess", "x_ptr": "GatherAccess", "out_ptr": "StructuredAccess"}


def test_matmul_loop_carried_pointers_become_scalar_offsets():
    k = tile_program(K.matmul_kernel, MATMUL_SIG, MATMUL_CONSTS)
    facts = analysis.analyze(k)
    loop = next(op for op in k.walk() if isinstance(op, t.For))
    assert len(facts.loop_offsets) == 2 and len(facts.carried_used) == 2
    steps = sorted(str(lo.step) for lo in facts.loop_offsets.values())
    assert "32" in steps          # a_ptrs += BLOCK_K * stride_ak (stride_ak = 1)
    for op, acc in _accesses(k, facts):
        assert isinstance(acc, analysis.StructuredAccess), op
        assert len(acc.form.strides) == 2
    # The pointer tiles carried by the loop are dead: only their scalar offsets are carried.
    assert not any(a.id in facts.live for a in loop.iter_args[:2])


def test_poly_algebra():
    a = t.Value(t.ScalarType("i32"))
    b = t.Value(t.ScalarType("i32"))
    pa, pb = analysis.Poly.atom(a), analysis.Poly.atom(b)
    e = (pa + pb) * pa - pa * pa - pb * pa
    assert e.is_zero()
    assert (pa.scale(3) - pa - pa - pa).is_zero()
    assert (pa + analysis.Poly.const(2)).const_value is None
    assert (analysis.Poly.const(2) * analysis.Poly.const(5)).const_value == 10
