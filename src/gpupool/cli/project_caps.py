"""`gpupool project create|set`'s per-user caps and CPU and memory limits (cli/project.py):
the flags that set and clear a project's `max_gpus_per_user` and `max_running_jobs_per_user`
(None: the pool's default, `gpupool server --max-gpus-per-user/--max-jobs-per-user`, else no
cap; the daemon does not say which) and its `cpu_limit` and `memory_limit_bytes` (None: no
limit), and how `project list`, `show` and the create/set line say them.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from gpupool.client import JsonObject, JsonValue

if TYPE_CHECKING:
    from gpupool.client.project_views import ProjectView

# API field -> the flag that sets it (for the daemon's refusals, in the user's terms).
CAP_FLAGS = {
    "max_gpus_per_user": "--max-gpus-per-user",
    "max_running_jobs_per_user": "--max-jobs-per-user",
    "cpu_limit": "--cpu-limit",
    "memory_limit_bytes": "--mem-limit",
}
# `project list`'s columns for them (single words: the table splits on spaces).
CAP_COLUMNS = ("GPUS/USER", "JOBS/USER", "CPUS", "MEM")
POOL_DEFAULT = "pool default"
NO_LIMIT = "none"


def add_cap_flags(p: argparse.ArgumentParser, creating: bool) -> None:
    """--max-gpus-per-user and --max-jobs-per-user; on `set`, their --no-... too."""
    unset = " (default: the pool's, else none)" if creating else ""
    p.add_argument(
        "--max-gpus-per-user",
        metavar="GPUS",
        help="most GPUs one user's running jobs of the project may hold at once" + unset,
    )
    p.add_argument(
        "--max-jobs-per-user",
        metavar="N",
        help="most running jobs one user may have in the project" + unset,
    )
    p.add_argument(
        "--cpu-limit",
        metavar="N",
        help="most CPUs (--cpus) the project's running jobs may hold at once"
        + (" (default: none)" if creating else ""),
    )
    p.add_argument(
        "--mem-limit",
        metavar="SIZE",
        help="most host memory (--mem) the project's running jobs may hold at once, e.g. "
        "256GiB" + (" (default: none)" if creating else ""),
    )
    if not creating:
        for key, flag in CAP_FLAGS.items():
            back = "no limit" if key in LIMITS else "back to the pool's default"
            p.add_argument(f"--no-{flag[2:]}", action="store_true", help=back)


def cap_changes(args: argparse.Namespace) -> JsonObject:
    """The API fields the flags set (only those given; None: back to the pool's default, or
    no limit). ValueError, naming the flag, for a value that is not a number of GPUs / of
    jobs / of CPUs or a size, or for a flag given with its --no-...; the daemon checks the
    rest (above 0, 1 or more)."""
    out: JsonObject = {}
    for key, flag in CAP_FLAGS.items():
        dest = flag[2:].replace("-", "_")
        text = getattr(args, dest)
        cleared = getattr(args, f"no_{dest}", False)  # none on `create`
        if text is not None and cleared:
            raise ValueError(f"{flag} and --no-{flag[2:]} contradict each other")
        if cleared:
            out[key] = None
        elif text is not None:
            out[key] = PARSERS[key](flag, text)
    return out


def _cpus(flag: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{flag}: must be a whole number of CPUs, got {text!r}") from None


def _size(flag: str, text: str) -> int:
    """SIZE as `submit --mem` reads it (spec/rules.py's check_mem: '256GiB', '512MB'; a bare
    number is refused, for the unit it would leave to a guess)."""
    from gpupool.spec.rules import check_mem

    try:
        size = check_mem(text)
    except ValueError as exc:
        raise ValueError(f"{flag}: {exc}") from None
    assert size is not None  # check_mem reads None alone as None
    return size


def _gpu_count(flag: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ValueError(f"{flag}: must be a number of GPUs, got {text!r}")
    return value


def _jobs(flag: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{flag}: must be a whole number of jobs, got {text!r}") from None


# API field -> how its flag's text is read (ValueError naming the flag).
PARSERS: dict[str, Callable[[str, str], JsonValue]] = {
    "max_gpus_per_user": _gpu_count,
    "max_running_jobs_per_user": _jobs,
    "cpu_limit": _cpus,
    "memory_limit_bytes": _size,
}
# The limits (None: no limit), not the per-user caps (None: the pool's default).
LIMITS = ("cpu_limit", "memory_limit_bytes")


def _gpus(value: float) -> str:
    return f"{value:g}"


def _cpu_limit(p: ProjectView) -> str | None:
    return None if p.cpu_limit is None else str(p.cpu_limit)


def _mem_limit(p: ProjectView) -> str | None:
    from gpupool.core.units import format_size

    return None if p.memory_limit_bytes is None else format_size(p.memory_limit_bytes)


def cap_cells(p: ProjectView) -> tuple[str, str, str, str]:
    """`project list`'s cells: '4', '2', '32', '256GiB'; '-' for the pool's default or none."""
    gpus, jobs = p.max_gpus_per_user, p.max_running_jobs_per_user
    return (
        "-" if gpus is None else _gpus(gpus),
        "-" if jobs is None else str(jobs),
        _cpu_limit(p) or "-",
        _mem_limit(p) or "-",
    )


def cap_parts(p: ProjectView) -> list[str]:
    """The create/set line's words for the caps and limits the project sets: 'max 4 GPUs per
    user', 'max 2 running jobs per user', 'CPU limit 32', 'memory limit 256GiB'."""
    parts = []
    if p.max_gpus_per_user is not None:
        parts.append(f"max {_gpus(p.max_gpus_per_user)} GPUs per user")
    if p.max_running_jobs_per_user is not None:
        parts.append(f"max {p.max_running_jobs_per_user} running jobs per user")
    if (cpus := _cpu_limit(p)) is not None:
        parts.append(f"CPU limit {cpus}")
    if (memory := _mem_limit(p)) is not None:
        parts.append(f"memory limit {memory}")
    return parts


def cap_lines(p: ProjectView) -> list[tuple[str, str]]:
    """`project show`'s lines: 'Max GPUs per user: 4', 'Max jobs per user: 2 running', 'CPU
    limit: 32', 'Memory limit: 256GiB' (or 'none')."""
    gpus, jobs = p.max_gpus_per_user, p.max_running_jobs_per_user
    return [
        ("Max GPUs per user", POOL_DEFAULT if gpus is None else _gpus(gpus)),
        ("Max jobs per user", POOL_DEFAULT if jobs is None else f"{jobs} running"),
        ("CPU limit", _cpu_limit(p) or NO_LIMIT),
        ("Memory limit", _mem_limit(p) or NO_LIMIT),
    ]
