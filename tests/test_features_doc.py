"""docs/features.md is generated from the conformance suite: it must name exactly the
constructs the suite's tests are marked with (regenerate it as its header says)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_features_doc_lists_the_suites_constructs():
    marked = set()
    for f in (ROOT / "tests" / "conformance").glob("test_*.py"):
        marked |= set(re.findall(r'mark\.construct\("([^"]+)"\)', f.read_text()))
    doc = (ROOT / "docs" / "features.md").read_text()
    listed = set(re.findall(r"^\| `([^`]+)` \|", doc, re.M))
    assert marked, "no construct markers found"
    assert listed == marked, (sorted(marked - listed), sorted(listed - marked))
