"""`gpupool project create|set`'s per-user caps (cli/project.py): the flags that set and clear
a project's `max_gpus_per_user` and `max_running_jobs_per_user`, and how `project list`,
`show` and the create/set line say them. None: the pool's default (`gpupool server
--max-gpus-per-user/--max-jobs-per-user`), else no cap; the daemon does not say which.
"""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING

from gpupool.client import JsonObject

if TYPE_CHECKING:
    from gpupool.client.project_views import ProjectView

# API field -> the flag that sets it (for the daemon's refusals, in the user's terms).
CAP_FLAGS = {
    "max_gpus_per_user": "--max-gpus-per-user",
    "max_running_jobs_per_user": "--max-jobs-per-user",
}
# `project list`'s columns for them (single words: the table splits on spaces).
CAP_COLUMNS = ("GPUS/USER", "JOBS/USER")
POOL_DEFAULT = "pool default"


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
    if not creating:
        for flag in CAP_FLAGS.values():
            p.add_argument(
                f"--no-{flag[2:]}", action="store_true", help="back to the pool's default"
            )


def cap_changes(args: argparse.Namespace) -> JsonObject:
    """The API fields the flags set (only those given; None: back to the pool's default).
    ValueError, naming the flag, for a value that is not a number of GPUs / of jobs or for a
    flag given with its --no-...; the daemon checks the rest (above 0, 1 or more)."""
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
            out[key] = _gpu_count(flag, text) if key == "max_gpus_per_user" else _jobs(flag, text)
    return out


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


def _gpus(value: float) -> str:
    return f"{value:g}"


def cap_cells(p: ProjectView) -> tuple[str, str]:
    """`project list`'s cells: '4', '2'; '-' for the pool's default."""
    gpus, jobs = p.max_gpus_per_user, p.max_running_jobs_per_user
    return ("-" if gpus is None else _gpus(gpus), "-" if jobs is None else str(jobs))


def cap_parts(p: ProjectView) -> list[str]:
    """The create/set line's words for the caps the project sets: 'max 4 GPUs per user',
    'max 2 running jobs per user'."""
    parts = []
    if p.max_gpus_per_user is not None:
        parts.append(f"max {_gpus(p.max_gpus_per_user)} GPUs per user")
    if p.max_running_jobs_per_user is not None:
        parts.append(f"max {p.max_running_jobs_per_user} running jobs per user")
    return parts


def cap_lines(p: ProjectView) -> list[tuple[str, str]]:
    """`project show`'s lines: 'Max GPUs per user: 4', 'Max jobs per user: 2 running'."""
    gpus, jobs = p.max_gpus_per_user, p.max_running_jobs_per_user
    return [
        ("Max GPUs per user", POOL_DEFAULT if gpus is None else _gpus(gpus)),
        ("Max jobs per user", POOL_DEFAULT if jobs is None else f"{jobs} running"),
    ]
