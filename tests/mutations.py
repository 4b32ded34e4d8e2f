"""Fault injection: applies named mutations to a copy of the package and runs the tests that
must catch each one (a tiny mutation testing).

usage: python tests/mutations.py [NAME ...]      (every mutation when none is named)

Each mutation is a text substitution in one file of src/triton_iree (its text must occur there
exactly once, so a mutation that no longer applies is reported, not skipped) and the tests that
must fail with it. The tests run against the copy: it comes first on PYTHONPATH (checked through
`triton_iree.__file__`), with a fresh Triton cache, so no binary compiled from the real sources
is reused. First the unmutated copy must pass those tests; then each mutation is caught when at
least one of its tests fails. Exit status 1 when a mutation is missed or does not apply.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "triton_iree"


@dataclass(frozen=True)
class Mutation:
    name: str
    file: str            # relative to src/triton_iree
    old: str
    new: str
    tests: tuple[str, ...]


MUTATIONS = [
    # A mask `offs <= n - 1` normalised one element short: the last element is dropped.
    Mutation("mask-le-one-short", "analysis.py", 'if pred in ("sle", "sge"):', 'if pred == "sge":',
             ("tests/test_analysis.py::test_masks_in_every_comparison_form_are_the_same_box",
              "tests/test_kernels.py::test_masks_in_every_comparison_form")),
    # The full-tile path taken when the block has one element too many.
    Mutation("full-tile-one-too-many", "versions.py",
             "out += [Bound(poly=Poly.const(n) - p) for p in box.hi[d]]",
             "out += [Bound(poly=Poly.const(n - 1) - p) for p in box.hi[d]]",
             ("tests/test_lowering.py::test_every_slice_of_vector_add_is_inside_its_buffer",
              "tests/test_kernels.py::test_vector_add",
              "tests/test_kernels.py::test_vector_add_reads_and_writes_nothing_past_n")),
    # Every argument cloned on the torch side and copied back after the launch.
    Mutation("clone-arguments", "runtime.py",
             '    def launch(self, abi: Abi, values: Sequence[Any], grid: Sequence[int],\n',
             '    def launch(self, abi, values, grid, *args, **kwargs):\n'
             '        copies = [v.clone() if p.is_buffer else v for p, v in zip(abi.params, values)]\n'
             '        self._launch(abi, copies, grid, *args, **kwargs)\n'
             '        for p, v, c in zip(abi.params, values, copies):\n'
             '            if p.is_buffer:\n'
             '                v.copy_(c)\n\n'
             '    def _launch(self, abi: Abi, values: Sequence[Any], grid: Sequence[int],\n',
             ("tests/test_runtime.py::test_launch_imports_the_tensors_own_memory_and_allocates_nothing",)),
    # The backend's cache key a constant: Triton's cache keeps serving binaries of old sources.
    Mutation("constant-backend-hash", "backend/compiler.py",
             "return f\"iree-{iree_compile.iree_version()}-{source_key()}-{'-'.join(iree_compile.flags(t))}-{cpu}\"",
             'return "iree"',
             ("tests/test_backend.py::test_on_disk_cache_is_reused_and_invalidated_by_kernel_and_backend_changes",
              "tests/test_backend.py::test_backend_hash_covers_sources_version_and_cpu")),
    # The slab length check (rows * stride <= len) deleted: a read past the buffer's last row.
    Mutation("no-slab-length-check", "lowering/slabs.py",
             '        conds.append(self._cmp("sle", span, self.buf_len[id(op.buffer)]))\n', "",
             ("tests/test_lowering.py::test_every_slice_of_a_2d_load_is_inside_its_buffer",
              "tests/test_kernels.py::test_2d_load_rows_overlapping_or_ending_the_buffer")),
    # A mask `n > offs` (sgt) not negated.
    Mutation("mask-gt-not-negated", "analysis.py", 'if pred in ("sgt", "sge"):', 'if pred == "sge":',
             ("tests/test_analysis.py::test_masks_in_every_comparison_form_are_the_same_box",
              "tests/test_kernels.py::test_masks_in_every_comparison_form")),
    # The element offset of each tensor inside its imported buffer dropped.
    Mutation("element-offset-dropped", "arguments.py", "            items.append((_PUSH_INT, spans[slot.number][2]))\n",
             "            items.append((_PUSH_INT, 0))\n",
             ("tests/test_kernels.py::test_vector_add_strided_views",
              "tests/test_runtime.py::test_launch_imports_the_tensors_own_memory_and_allocates_nothing")),
    # The branches of a runtime `if` swapped.
    Mutation("if-branches-swapped", "lowering/control.py", "for bi, blk in enumerate((op.then, op.otherwise)):",
             "for bi, blk in enumerate((op.otherwise, op.then)):",
             ("tests/test_kernels.py::test_runtime_if",)),
    # A peeled K loop running one iteration too many unmasked.
    Mutation("peel-one-iteration-late", "lowering/control.py", 's = self._binop("arith.addi", s, self.idx(1))',
             's = self._binop("arith.addi", s, self.idx(2))',
             ("tests/test_kernels.py::test_matmul_stepped_k_loop", "tests/test_kernels.py::test_matmul_block_edges")),
    # tl.trans read as the identity permutation.
    Mutation("trans-order-ignored", "reader_shapes.py", "t.Trans(v, order, ty, loc)", "t.Trans(v, tuple(sorted(order)), ty, loc)",
             ("tests/test_kernels.py::test_loads_and_stores_through_transposed_pointer_tiles",)),
    # Checked mode's bounds of scalar accesses compared signed: an offset before the storage passes.
    Mutation("scalar-bounds-signed", "checks.py",
             '            ok = self.ew("arith.cmpi", [rel, size], "i1", predicate="ult")\n'
             '            failed = self.ew("arith.cmpi", [rel, size], "i1", predicate="uge")\n',
             '            ok = self.ew("arith.cmpi", [rel, size], "i1", predicate="slt")\n'
             '            failed = self.ew("arith.cmpi", [rel, size], "i1", predicate="sge")\n',
             ("tests/test_checked.py::test_scalar_access",
              "tests/test_checked.py::test_before_storage_that_starts_inside_an_aligned_line")),
    # A grid axis of 2^31 programs let through.
    Mutation("grid-limit-one-late", "arguments.py", "if g < 0 or g >= 2 ** 31:", "if g < 0 or g > 2 ** 31:",
             ("tests/test_checked.py::test_a_grid_axis_of_2_31_programs_is_refused_before_anything_runs",)),
    # A launch's key without its storage's length: a launch on a larger storage at the same address
    # reuses buffer views of the smaller one.
    Mutation("launch-key-without-storage-length", "arguments.py", "            push(storage.nbytes())\n", "",
             ("tests/test_runtime.py::test_the_same_address_with_a_larger_storage_gets_a_new_argument_list",
              "tests/test_runtime.py::test_a_gpu_launch_key_names_the_memory_of_tensors_on_gpu_0")),
    # tl.min of unsigned integers starting from 0 instead of all ones.
    Mutation("unsigned-min-identity-zero", "lowering/reductions.py", '"arith.maxui": 0, "arith.minui": -1,',
             '"arith.maxui": 0, "arith.minui": 0,',
             ("tests/conformance/test_reductions.py::test_unsigned_reductions_match_interpreter",)),
    # The conditions of a tile's size-1 dims (a one-element row's mask) ignored.
    Mutation("point-cond-ignored", "lowering/memory.py",
             "return self._and([self._cond_value(c) for c in box.conds])", "return None",
             ("tests/test_kernels.py::test_masks_on_a_one_element_row",)),
]


def _apply(copy: Path, m: Mutation) -> None:
    path = copy / m.file
    text = path.read_text()
    if text.count(m.old) != 1:
        raise LookupError(f"the text to mutate occurs {text.count(m.old)} times in {m.file}")
    path.write_text(text.replace(m.old, m.new))


def _run_tests(copy: Path, tests: tuple[str, ...], work: Path) -> tuple[bool, list[str]]:
    """Runs `tests` against the package at `copy`; (passed, the ids of the failed tests)."""
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=work))
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_IREE_TEST_CACHE", "TRITON_ALWAYS_COMPILE")}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, [str(copy.parent), env.get("PYTHONPATH")])),
               TRITON_CACHE_DIR=str(cache), TRITON_IREE_TEST_CACHE=str(cache))
    where = subprocess.run([sys.executable, "-c", "import triton_iree; print(triton_iree.__file__)"],
                           env=env, cwd=ROOT, capture_output=True, text=True)
    if Path(where.stdout.strip()).parent != copy:
        raise RuntimeError(f"the tests would not import the copy: {where.stdout or where.stderr}")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", *tests],
                       env=env, cwd=ROOT, capture_output=True, text=True)
    failed = list(dict.fromkeys(re.findall(r"^FAILED (\S+)", r.stdout, re.M)))
    if r.returncode not in (0, 1):
        failed.append(f"pytest exit code {r.returncode}: {r.stdout[-500:]}{r.stderr[-500:]}")
    return r.returncode == 0, failed


def main(names: list[str]) -> int:
    chosen = [m for m in MUTATIONS if not names or m.name in names]
    unknown = set(names) - {m.name for m in MUTATIONS}
    if unknown:
        print(f"unknown mutations: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="triton-iree-mutations-") as tmp:
        work = Path(tmp)
        copy = work / "pkg" / "triton_iree"

        def fresh_copy() -> None:
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))

        fresh_copy()
        tests = tuple(dict.fromkeys(t for m in chosen for t in m.tests))
        passed, failed = _run_tests(copy, tests, work)
        if not passed:
            print("the unmutated package fails the tests:\n  " + "\n  ".join(failed))
            return 1
        missed = 0
        for m in chosen:
            fresh_copy()
            try:
                _apply(copy, m)
            except LookupError as e:
                print(f"{m.name:26} DOES NOT APPLY: {e}")
                missed += 1
                continue
            passed, failed = _run_tests(copy, m.tests, work)
            missed += passed
            print(f"{m.name:26} {'MISSED' if passed else 'caught by ' + ', '.join(failed)}", flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
