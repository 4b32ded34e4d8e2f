"""Fuzzing `triton-iree prepare` with seeded mutants of the files in tests/data/.

Every run must end in success, or in exactly one line `triton-iree: error: ...` with exit code
1: never a traceback, never a signal. The time spent is TRITON_IREE_FUZZ_SECONDS (default 60
under CI=true, else 10); TRITON_IREE_FUZZ_SEED picks another sequence of mutants. A mutant that
breaks the rule is written out with its seed; keep it in tests/data/fuzz/ as a regression.
"""
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from triton_iree import cli

DATA = Path(__file__).parent / "data"
CORPUS = sorted(p for p in DATA.rglob("*") if p.is_file())
REGRESSIONS = sorted((DATA / "fuzz").glob("*"))

EXTREME_INTS = ["-9223372036854775808", "9223372036854775807", "18446744073709551616", "0", "-1",
                "1", "2147483648", "-2147483648", "4294967296", "65536"]
TYPES = ["i1", "i8", "i32", "i64", "index", "f16", "bf16", "f32", "f64"]
NON_UTF8 = [b"\xff", b"\xc3", b"\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x00"]


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True) or [b""]


def _replace_match(data: bytes, rng: random.Random, pattern: bytes, choices) -> bytes:
    matches = list(re.finditer(pattern, data))
    if not matches:
        return data
    m = rng.choice(matches)
    return data[:m.start()] + rng.choice(choices) + data[m.end():]


def _swap_names(data: bytes, rng: random.Random) -> bytes:
    names = sorted(set(re.findall(rb"%[\w#]+", data)))
    return _replace_match(data, rng, rb"%[\w#]+", names) if names else data


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to three random edits of `data`."""
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(11)
        pos = rng.randrange(len(data) + 1)
        if kind == 0 and data:                      # flip one bit
            i = min(pos, len(data) - 1)
            data = data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:]
        elif kind == 1:                             # truncate
            data = data[:pos]
        elif kind in (2, 3, 4):                     # duplicate, delete or swap lines
            lines = _lines(data)
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            if kind == 2:
                lines.insert(j, lines[i])
            elif kind == 3:
                del lines[i]
            else:
                lines[i], lines[j] = lines[j], lines[i]
            data = b"".join(lines)
        elif kind == 5:                             # a number becomes an extreme integer
            data = _replace_match(data, rng, rb"-?\b\d+\b", [s.encode() for s in EXTREME_INTS])
        elif kind == 6:                             # insert bytes that are not UTF-8
            data = data[:pos] + rng.choice(NON_UTF8) + data[pos:]
        elif kind == 7:                             # an element type becomes another
            data = _replace_match(data, rng, rb"\b(?:i1|i8|i32|i64|index|f16|bf16|f32|f64)\b",
                                  [s.encode() for s in TYPES])
        elif kind == 8:                             # an SSA name becomes another
            data = _swap_names(data, rng)
        elif kind == 9:                             # delete a span of bytes
            data = data[:pos] + data[pos + rng.randrange(1, 40):]
        else:                                       # insert random bytes
            data = data[:pos] + rng.randbytes(rng.randrange(1, 16)) + data[pos:]
    return data


def run_in_process(path: Path, out: Path, capfd) -> tuple[int, str]:
    """`triton-iree prepare path -o out` in this process: (exit code, everything on stderr)."""
    capfd.readouterr()
    try:
        rc = cli.main(["prepare", str(path), "-o", str(out)])
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            rc = 1
        else:
            rc = e.code or 0
    return rc, capfd.readouterr().err


def check_outcome(rc: int, stderr: str, out: Path, what: str) -> None:
    if rc == 0:
        assert out.exists() and out.read_text().strip(), f"{what}: success without output"
        return
    lines = stderr.strip().splitlines()
    assert rc == 1, f"{what}: exit code {rc}\n{stderr}"
    assert "Traceback" not in stderr, f"{what}: traceback\n{stderr}"
    assert len(lines) == 1 and lines[0].startswith("triton-iree: error: "), \
        f"{what}: error output is not one line\n{stderr}"
    assert not out.exists(), f"{what}: output written despite the error"


def _fuzz_seconds() -> float:
    default = "60" if os.environ.get("CI", "").lower() == "true" else "10"
    return float(os.environ.get("TRITON_IREE_FUZZ_SECONDS", default))


def test_prepare_survives_mutants_of_the_test_data(tmp_path, capfd):
    seed = int(os.environ.get("TRITON_IREE_FUZZ_SEED", "0"))
    deadline = time.monotonic() + _fuzz_seconds()
    originals = [p.read_bytes() for p in CORPUS]
    mutant, out = tmp_path / "mutant.mlir", tmp_path / "out.mlir"
    runs = 0
    while time.monotonic() < deadline:
        rng = random.Random(f"{seed}:{runs}")
        i = rng.randrange(len(CORPUS))
        mutant.write_bytes(mutate(originals[i], rng))
        out.unlink(missing_ok=True)
        rc, err = run_in_process(mutant, out, capfd)
        try:
            check_outcome(rc, err, out, f"mutant {seed}:{runs} of {CORPUS[i].relative_to(DATA)}")
        except AssertionError:
            kept = tmp_path / f"failing-{seed}-{runs}.mlir"
            kept.write_bytes(mutant.read_bytes())
            raise AssertionError(f"kept in {kept}") from None
        runs += 1
    assert runs > 0


def run_subprocess(path: Path, out: Path) -> tuple[int, str]:
    r = subprocess.run([sys.executable, "-m", "triton_iree.cli", "prepare", str(path), "-o", str(out)],
                       capture_output=True, text=True)
    return r.returncode, r.stderr


@pytest.mark.parametrize("n", range(4))
def test_prepare_subprocess_exit_codes_and_one_line_errors(tmp_path, n):
    """A sample of mutants through the real command: exit codes and stderr as a user sees them."""
    rng = random.Random(f"subprocess:{n}")
    data = mutate(CORPUS[rng.randrange(len(CORPUS))].read_bytes(), rng)
    if n == 0:
        data = NON_UTF8[0] + data
    mutant, out = tmp_path / "mutant.mlir", tmp_path / "out.mlir"
    mutant.write_bytes(data)
    rc, err = run_subprocess(mutant, out)
    assert rc >= 0, f"killed by signal {-rc}"
    check_outcome(rc, err, out, f"subprocess mutant {n}")


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.name for p in REGRESSIONS])
def test_fuzz_regressions(tmp_path, path):
    """Inputs the fuzzer found that crashed the command; in a subprocess, since some crashed
    MLIR's parser with SIGSEGV."""
    out = tmp_path / "out.mlir"
    rc, err = run_subprocess(path, out)
    assert rc >= 0, f"killed by signal {-rc}"
    check_outcome(rc, err, out, path.name)


def test_index_list_guard_leaves_values_named_like_the_lists_alone(tmp_path, capfd):
    """The check that keeps malformed `dimensions = [...]` lists from MLIR's parser must not
    take an SSA value called %permutation or %dimensions for one."""
    text = (DATA / "ttshared" / "softmax_argmax_mixed.mlir").read_text()
    path, out = tmp_path / "renamed.mlir", tmp_path / "out.mlir"
    path.write_text(text.replace("%transposed", "%permutation").replace("%reduced", "%dimensions"))
    assert run_in_process(path, out, capfd) == (0, "")
