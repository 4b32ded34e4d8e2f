"""`triton-iree bench --quick`: a smoke test of the benchmark suite. It checks that every
workload runs and computes the right result; timings are never asserted here (the goals live in
the benchmark's own report)."""
import json
import os
import subprocess
import sys

from triton_iree import bench


def test_quick_bench_runs_every_workload_correctly(tmp_path):
    out, tmp = tmp_path / "bench.json", tmp_path / "tmp"
    tmp.mkdir()
    # Without a Triton cache of the caller's, bench makes its own, and removes it afterwards.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_CACHE_DIR"} | {"TMPDIR": str(tmp)}
    r = subprocess.run([sys.executable, "-m", "triton_iree.cli", "bench", "--quick", "--json", str(out)],
                       capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert [p.name for p in tmp.iterdir() if p.name.startswith("triton-iree-bench-")] == []
    data = json.loads(out.read_text())
    got = {w["name"]: w for w in data["workloads"]}
    assert sorted(got) == sorted(bench.WORKLOADS)
    for name, w in got.items():
        assert w["correct"] is True, (name, w)
        assert w["ours_s"] > 0, (name, w)
        if name != "cold_compile":
            assert w["torch_s"] > 0 and w["ratio"] > 0, (name, w)
    assert data["quick"] is True and data["machine"]["cpus"] >= 1


def test_a_wrong_result_is_reported_and_fails_the_run(monkeypatch):
    # A check that fails must give correct=False, no timings, and a non-zero exit status.
    monkeypatch.setattr(bench, "_check", lambda *a, **k: (False, 1.0))
    res = bench.bench_launch(quick=True, rounds=1)
    assert res.correct is False and res.ours_s is None and res.met is None
    assert bench.main(["--quick", "--only", "launch"]) == 1


class _OtherDriver:
    """Stands for Triton's CUDA driver, the default on a machine with a GPU: any use fails."""

    def __getattr__(self, name):
        raise RuntimeError(f"Triton's own driver was used ({name})")


def test_bench_runs_on_the_cpu_where_another_driver_is_active(monkeypatch):
    from triton.runtime import driver
    monkeypatch.setattr(driver, "_active", _OtherDriver())
    assert bench.main(["--quick", "--only", "vector_add"]) == 0


def test_unknown_workload_is_a_one_line_error():
    r = subprocess.run([sys.executable, "-m", "triton_iree.cli", "bench", "--only", "nope"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "unknown workload nope" in r.stderr and "Traceback" not in r.stderr
