"""Shared test setup: the kernel corpus on sys.path, a private Triton cache per session, torch's
seed set before every test, and tests marked `isolated` run in a process of their own."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
os.environ.pop("TRITON_INTERPRET", None)

_CHILD = "TRITON_IREE_ISOLATED"     # set in the process that runs one `isolated` test


def pytest_configure(config):
    config.addinivalue_line("markers", "isolated: runs in a separate process, so that a crash (an "
                                       "out-of-bounds access) fails this test only")


@pytest.fixture(scope="session", autouse=True)
def triton_cache(tmp_path_factory):
    """A fresh Triton cache for the session (every session compiles what it tests) under
    pytest's temporary directory, which pytest prunes; TRITON_IREE_TEST_CACHE names one to
    reuse instead. The caller's TRITON_CACHE_DIR is restored afterwards."""
    cache = os.environ.get("TRITON_IREE_TEST_CACHE") or str(tmp_path_factory.mktemp("triton-cache"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_CACHE_DIR", cache)
        yield os.environ["TRITON_CACHE_DIR"]


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Runs a test marked `isolated` in a fresh interpreter (sharing the session's cache)."""
    if pyfuncitem.get_closest_marker("isolated") is None or os.environ.get(_CHILD):
        return None
    env = dict(os.environ, TRITON_IREE_TEST_CACHE=os.environ["TRITON_CACHE_DIR"], **{_CHILD: "1"})
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", pyfuncitem.nodeid],
                       cwd=pyfuncitem.config.rootpath, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        how = f"killed by {signal.Signals(-r.returncode).name}" if r.returncode < 0 else f"exit code {r.returncode}"
        pytest.fail(f"the isolated run failed ({how}):\n{r.stdout[-6000:]}\n{r.stderr[-3000:]}", pytrace=False)
    return True


@pytest.fixture(autouse=True)
def seeded():
    """Every test starts from the same torch seed, so that its random inputs do not depend on the
    tests that ran before it in its process (which xdist's distribution decides), and a failure
    comes back when the test is run alone."""
    import torch
    torch.manual_seed(1234)
    return torch
