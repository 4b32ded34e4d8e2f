"""Source locations of TTIR ops in the user's terms: the user's file:line behind calls into
Triton's language library, and which library function (tl.cumsum, tl.sort) a location lies in."""
from __future__ import annotations

import functools
import inspect
import os
import re
from typing import Optional

from iree.compiler import ir

_LOC_FILE_LINE = re.compile(r'"([^"]+)":(\d+):(\d+)')
_LOC_NAME = re.compile(r'^loc\("([^"]+)"\(')


@functools.cache
def _in_triton(file: str) -> bool:
    """`file` is part of Triton itself (its language library: triton/language/standard.py)."""
    import triton
    return os.path.realpath(file).startswith(os.path.dirname(os.path.realpath(triton.__file__)) + os.sep)


def source_loc(location: "ir.Location | str") -> str:
    """'file:line:col' of an MLIR location: of the innermost call site outside Triton's own
    library (the user's `tl.cumsum(x)`, not the line of standard.py that builds the scan), or
    '' when it carries none."""
    frames = _LOC_FILE_LINE.findall(str(location))   # the innermost call first
    user = next((f for f in frames if not _in_triton(f[0])), frames[0] if frames else None)
    return ":".join(user) if user else ""


def _spans(names) -> list[tuple[str, str, int, int]]:
    """(name, file, first line, end line) of those @triton.jit functions of Triton's language
    library (triton.language.standard) that exist."""
    from triton.language import standard
    found = []
    for name in names:
        fn = getattr(getattr(standard, name, None), "fn", None)
        if fn is not None and inspect.isfunction(fn):
            lines, first = inspect.getsourcelines(fn)
            found.append((f"tl.{name}", os.path.realpath(inspect.getsourcefile(fn)), first, first + len(lines)))
    return found


@functools.cache
def _library_functions() -> list[tuple[str, str, int, int]]:
    """The spans of the public functions of Triton's language library (tl.sum, tl.cumsum, ...)."""
    from triton.language import standard
    return _spans(name for name in dir(standard) if not name.startswith("_"))


def library_call(location: ir.Location) -> Optional[str]:
    """The Triton library function ('tl.cumsum') that the user's code called and whose body
    holds `location`, or None."""
    frames = _LOC_FILE_LINE.findall(str(location))
    called = None
    for file, line, _ in frames:     # the innermost call first: keep the last library frame
        if not _in_triton(file):
            break
        called = next((name for name, path, first, end in _library_functions()
                       if first <= int(line) < end and os.path.realpath(file) == path), called)
    return called


@functools.cache
def _sort_spans() -> tuple[list, list]:
    """The spans of Triton's sort_impl (which tl.sort and tl.topk call) and of sort and topk."""
    return _spans(("sort_impl",)), _spans(("sort", "topk"))


def sort_call(location: ir.Location) -> Optional[tuple[str, str, tuple]]:
    """('tl.sort' or 'tl.topk', the user's 'file:line:col', a key of the call) when `location`
    lies inside a call of Triton's sort_impl, else None. The ops of one call share the key."""
    frames = _LOC_FILE_LINE.findall(str(location))   # the innermost call first
    impl, public = _sort_spans()
    for i, (file, line, _) in enumerate(frames):
        if any(first <= int(line) < end and os.path.realpath(file) == path for _, path, first, end in impl):
            rest = frames[i + 1:]
            name = next((n for f, ln, _ in rest for n, path, first, end in public
                         if first <= int(ln) < end and os.path.realpath(f) == path), "tl.sort")
            user = next((f for f in rest if not _in_triton(f[0])), frames[-1])
            return name, ":".join(user), tuple(rest)
    return None


def loc_name(location: ir.Location) -> str:
    m = _LOC_NAME.match(str(location))
    return m.group(1) if m else ""
