"""Per-attempt job directories: a requeued job runs again in the same JOBDIR.

Once a run is over, ``archive`` moves its control files into ``JOBDIR/attempt-<n>/``
(n = 0, 1, ...), so the next launch finds no claim.json and its supervisor can claim
afresh. output.log stays in JOBDIR and grows across attempts.

Crash safety: the files are gathered in ``attempt-<n>.partial`` and the directory is
renamed to ``attempt-<n>`` at the end. A daemon that died half-way leaves the partial
directory behind; the next ``archive`` or ``launch`` (``finish_partial``) completes it,
which is safe because archiving only starts once no supervisor of the attempt is alive.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from gpupool.core.paths import DIR_MODE
from gpupool.executor.files import fsync_dir

# One run's files, claim.json last: while any of the others is still in JOBDIR, so is the
# claim, and no supervisor can start in a half-archived directory.
CONTROL_FILES = (
    "launch.json",
    "child.json",
    "exit.json",
    "supervisor.log",
    "control.json",
    "claim.json",
)
_NAME = re.compile(r"attempt-(\d+)(\.partial)?")


def attempt_dir(jobdir: Path, n: int) -> Path:
    return jobdir / f"attempt-{int(n)}"


def _scan(jobdir: Path) -> tuple[list[int], list[int]]:
    """(indices of complete attempts, indices of partial ones), each sorted."""
    done: list[int] = []
    partial: list[int] = []
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(jobdir):
            m = _NAME.fullmatch(entry.name)
            if m is not None and entry.is_dir(follow_symlinks=False):
                (partial if m.group(2) else done).append(int(m.group(1)))
    return sorted(done), sorted(partial)


def count(jobdir: Path) -> int:
    """How many attempts are archived (the next attempt's number, counting from 0)."""
    done, partial = _scan(jobdir)
    return max(done + partial, default=-1) + 1


def _move(jobdir: Path, target: Path) -> None:
    for name in CONTROL_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.rename(jobdir / name, target / name)
    fsync_dir(target)


def finish_partial(jobdir: Path) -> int | None:
    """Complete an archive a crash interrupted; its attempt number, or None if none was."""
    _, partial = _scan(jobdir)
    for n in partial:
        target = jobdir / f"attempt-{n}.partial"
        _move(jobdir, target)
        os.rename(target, attempt_dir(jobdir, n))
        fsync_dir(jobdir)
    return partial[-1] if partial else None


def archive(jobdir: Path) -> int:
    """Move the current run's control files into the next free ``attempt-<n>``; returns n.

    The caller makes sure no supervisor of the run is alive. With nothing to move (never
    launched, or archived already) nothing changes and the result is -1.
    """
    finished = finish_partial(jobdir)
    if not any((jobdir / name).exists() for name in CONTROL_FILES):
        return -1 if finished is None else finished
    n = count(jobdir)
    while True:  # mkdir is the allocation: two archivers never share a number
        target = jobdir / f"attempt-{n}.partial"
        try:
            target.mkdir(mode=DIR_MODE)
            break
        except FileExistsError:
            n += 1
    _move(jobdir, target)
    os.rename(target, attempt_dir(jobdir, n))
    fsync_dir(jobdir)
    return n
