"""Tables and times for people; JSON for scripts."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from gpupool.core.units import format_duration


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


def print_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str = "") -> None:
    """Aligned columns, like squeue and docker ps: greppable, never wrapped, and with no
    import cost (rich would add ~40 ms to every listing)."""
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    bold = sys.stdout.isatty()
    if title:
        print(title)
    header = "  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()
    print(f"\033[1m{header}\033[0m" if bold else header)
    for r in cells:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


def clock_time(ts: float | None, now: float | None = None) -> str:
    """'14:05:09' today, 'Nov 21 14:05' otherwise, '-' for never."""
    if not ts:
        return "-"
    now = now or time.time()
    local, today = time.localtime(ts), time.localtime(now)
    if local[:3] == today[:3]:
        return time.strftime("%H:%M:%S", local)
    return time.strftime("%b %d %H:%M", local)


def elapsed(job: dict[str, Any], now: float | None = None) -> str:
    start = job.get("start_time")
    if not start:
        return "-"
    end = job.get("end_time") or now or time.time()
    return format_duration(end - start)


def gpus_cell(job: dict[str, Any]) -> str:
    res = job["resources"]
    want: Any = res["gpus"]
    if res.get("gpu_fraction"):
        want = f"{res['gpu_fraction']:g}"
    elif res.get("gpu_memory_bytes"):
        from gpupool.core.units import format_size

        want = format_size(res["gpu_memory_bytes"])
    held = job.get("gpus") or []
    if held:
        return f"{want} ({','.join(str(g) for g in held)})"
    return str(want)
