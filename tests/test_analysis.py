import pytest
import triton
import triton.language as tl

from triton_iree import analysis, forms
from triton_iree import tile as t

import kernels as K
from helpers import GATHER_SIG, MATMUL_CONSTS, MATMUL_SIG, add_program, tile_program


def _accesses(k, facts):
    return [(op, facts.access(op)) for op in k.walk() if isinstance(op, (t.Load, t.Store))]


def _atom(v):
    return forms.Poly.atom(v)


def test_vector_add_accesses_are_unit_stride_slices_bounded_by_n():
    k = add_program(1024)
    facts = analysis.analyze(k)
    pid = _atom(next(op for op in k.walk() if isinstance(op, t.ProgramId)).result)
    n = _atom(k.scalars[0].value)
    accesses = _accesses(k, facts)
    assert len(accesses) == 3
    for (op, acc), base in zip(accesses, k.base_offsets):
        assert isinstance(acc, forms.StructuredAccess), op
        # x_ptr + pid*1024 + i for i < n - pid*1024 (mask offs < n)
        assert acc.form.offset == _atom(base.value) + pid.scale(1024)
        assert acc.form.strides == (forms.Poly.const(1),)
        assert acc.box.lo == ((),) and acc.box.hi == ((n - pid.scale(1024),),) and not acc.box.conds
    # The offset and mask tiles are not needed: only their scalar ingredients are.
    loads = [op for op in k.walk() if isinstance(op, t.Load)]
    assert all(op.offsets.id not in facts.live and op.mask.id not in facts.live for op in loads)


MASK_FORMS_SIG = dict(x_ptr="*fp32", out_ptr="*fp32", lo="i32", hi="i32", BLOCK="constexpr", FORM="constexpr")


@pytest.mark.parametrize("form", range(4))
def test_masks_in_every_comparison_form_are_the_same_box(form):
    # lo <= i < hi written with <, <=, > or >=, the index on either side.
    k = tile_program(K.mask_forms_kernel, MASK_FORMS_SIG, dict(BLOCK=64, FORM=form))
    facts = analysis.analyze(k)
    pid = _atom(next(op for op in k.walk() if isinstance(op, t.ProgramId)).result)
    lo, hi = (_atom(p.value) for p in k.scalars)
    accesses = _accesses(k, facts)
    assert len(accesses) == 2
    for op, acc in accesses:
        assert isinstance(acc, forms.StructuredAccess), op
        assert acc.box.lo == ((lo - pid.scale(64),),) and acc.box.hi == ((hi - pid.scale(64),),)
        assert not acc.box.conds


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
        assert isinstance(acc, forms.StructuredAccess), op
        assert len(acc.form.strides) == 2
    # The pointer tiles carried by the loop are dead: only their scalar offsets are carried.
    assert not any(a.id in facts.live for a in loop.iter_args[:2])


def test_poly_algebra():
    a = t.Value(t.ScalarType("i32"))
    b = t.Value(t.ScalarType("i32"))
    pa, pb = forms.Poly.atom(a), forms.Poly.atom(b)
    e = (pa + pb) * pa - pa * pa - pb * pa
    assert e.is_zero()
    assert (pa.scale(3) - pa - pa - pa).is_zero()
    assert (pa + forms.Poly.const(2)).const_value is None
    assert (forms.Poly.const(2) * forms.Poly.const(5)).const_value == 10


def test_version_plan_peels_the_k_loop_of_matmul():
    # The K masks move with the induction variable: the loop is split into its full
    # iterations and a tail. The M and N bounds and the store are decided at program entry.
    k = tile_program(K.matmul_kernel, MATMUL_SIG, MATMUL_CONSTS)
    facts = analysis.analyze(k)
    plan = facts.plan
    loop = next(op for op in k.walk() if isinstance(op, t.For))
    loads = [op for op in k.walk() if isinstance(op, t.Load)]
    store = next(op for op in k.walk() if isinstance(op, t.Store))
    assert set(plan.peels) == {id(loop)}
    peel = plan.peels[id(loop)]
    assert peel.accesses == {id(op) for op in loads}
    assert plan.full == {id(store)}
    # Iteration k is full when BLOCK_K - K + BLOCK_K * k <= 0, for the a and the b load.
    Kp = _atom(next(p for p in k.scalars if p.name == "K").value)
    assert peel.conds == [(forms.Poly.const(32) - Kp, 32)] * 2
    # M and N bounds of the a, b (decided at entry) and c tiles.
    assert plan.top and all(b.poly is not None and facts.at_entry(b.poly) for b in plan.top)


def test_version_plan_skips_masks_it_cannot_decide():
    # A mask that is not a bounds check stays masked; a bound that can never hold for a whole
    # tile (a constant tile bound below the tile size) is not versioned.
    k = tile_program(K.even_mask_kernel, dict(x_ptr="*fp32", out_ptr="*fp32", n="i32", BLOCK="constexpr"),
                     dict(BLOCK=64))
    assert not analysis.analyze(k).plan
    k = tile_program(K.row_sum_kernel, dict(x_ptr="*fp32", out_ptr="*fp32", M="i32", N="constexpr",
                                            stride_m="i32", BLOCK_M="constexpr", BLOCK_N="constexpr"),
                     dict(N=1, BLOCK_M=16, BLOCK_N=32))
    plan = analysis.analyze(k).plan
    load = next(op for op in k.walk() if isinstance(op, t.Load))
    assert id(load) not in plan.full and not plan.peels


@triton.jit
def _reshaped_offsets_kernel(x_ptr, out_ptr, stride_x, OUT_STRIDE: tl.constexpr, R: tl.constexpr, C: tl.constexpr):
    r, c = tl.arange(0, R)[:, None], tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + tl.reshape(r * stride_x + c, [R * C]))
    tl.store(out_ptr + tl.reshape(r * OUT_STRIDE + c, [R * C // 4, 4]), tl.reshape(x, [R * C // 4, 4]))


@pytest.mark.parametrize("out_stride", [8, 11])
def test_reshaped_offsets_of_contiguous_rows_are_affine(out_stride):
    # Offsets linear in the row-major position (rows 8 apart, 8 wide) keep a form through a
    # reshape; rows 11 apart, or a runtime row stride, do not.
    k = tile_program(_reshaped_offsets_kernel, dict(x_ptr="*fp32", out_ptr="*fp32", stride_x="i32"),
                     dict(OUT_STRIDE=out_stride, R=4, C=8))
    facts = analysis.analyze(k)
    (load, la), (store, sa) = _accesses(k, facts)
    assert isinstance(la, forms.GatherAccess)
    if out_stride == 8:
        assert isinstance(sa, forms.StructuredAccess)
        assert sa.form.strides == (forms.Poly.const(4), forms.Poly.const(1))
    else:
        assert isinstance(sa, forms.GatherAccess)
