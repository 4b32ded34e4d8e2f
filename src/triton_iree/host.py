"""Facts about the machine this process runs on, read once where several stages need them."""
from __future__ import annotations

from pathlib import Path


def host_cpu_info() -> tuple[str, tuple[str, ...]]:
    """This CPU's model name and feature flags (x86 'flags', Arm 'Features') from /proc/cpuinfo,
    the one reader of it; ("", ()) where there is none."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return "", ()

    def field(*names: str) -> str:
        return next((ln for ln in lines if ln.startswith(names)), "").partition(":")[2].strip()
    return field("model name"), tuple(field("flags", "Features").split())
