"""Shared test setup: the kernel corpus on sys.path, and a private Triton cache per session."""
import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

# A fresh cache directory: every test session compiles what it tests.
_cache = os.environ.get("TRITON_IREE_TEST_CACHE") or tempfile.mkdtemp(prefix="triton-iree-test-cache-")
os.environ["TRITON_CACHE_DIR"] = _cache
os.environ.pop("TRITON_INTERPRET", None)


@pytest.fixture
def seeded():
    import torch
    torch.manual_seed(1234)
    return torch
