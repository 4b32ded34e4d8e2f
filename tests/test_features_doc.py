"""docs/features.md is generated from the conformance suite: it must name exactly the
constructs the suite's tests are marked with (regenerate it as its header says)."""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_features_doc_lists_the_suites_constructs():
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                        "tests/conformance"], cwd=ROOT, capture_output=True, text=True,
                       env=dict(os.environ, TRITON_IREE_LIST_CONSTRUCTS="1"), timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    marked = set(re.findall(r"^construct: (.+)$", r.stdout, re.M))
    doc = (ROOT / "docs" / "features.md").read_text()
    listed = set(re.findall(r"^\| `([^`]+)` \|", doc, re.M))
    assert marked, "no construct markers found"
    assert listed == marked, (sorted(marked - listed), sorted(listed - marked))
