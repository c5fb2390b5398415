"""A real full disk for tests: a command run with one directory on a small tmpfs of its own.

Why this way: ENOSPC must come from a real file system, as it does in production (a write
that fails part-way, an fsync that fails, SQLite's "database or disk is full"), not from a
mock. Mounting needs privileges, and a mount left behind by a crashed test would outlive
it, so the tmpfs is mounted in a private mount namespace (``unshare --mount``) that holds
only the command and what it starts: it vanishes with them, and nothing else on the
machine ever sees it. As root (CI) that is all it takes; an unprivileged user gets the
same through a user namespace (``unshare --user --map-root-user --mount``) where the
kernel allows those. Where neither works the test is skipped, which GPUPOOL_REQUIRE_ALL=1
(CI) turns into a failure.

The test itself stays outside the namespace and reaches the files through
``/proc/<pid>/root``, the view of the file system from inside it.
"""

from __future__ import annotations

import errno
import os
import subprocess
import tempfile
from functools import cache
from pathlib import Path

import pytest

_MOUNT_THEN_EXEC = 'mount -t tmpfs -o size="$1" gpupool-test "$2" && shift 2 && exec "$@"'


@cache
def _unshare_prefix() -> tuple[str, ...] | str:
    """The unshare command line that lets us mount here, or why there is none."""
    candidates = [("unshare", "--user", "--map-root-user", "--mount")]
    if os.geteuid() == 0:
        candidates.insert(0, ("unshare", "--mount"))
    why = "unshare is not installed"
    with tempfile.TemporaryDirectory() as probe:
        for prefix in candidates:
            cmd = [*prefix, "sh", "-c", _MOUNT_THEN_EXEC, "sh", "64k", probe, "true"]
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            except FileNotFoundError:
                continue
            if done.returncode == 0:
                return prefix
            why = f"{' '.join(prefix)} cannot mount a tmpfs: {done.stderr.strip()}"
    return why


def on_tmpfs(mountpoint: Path, size: int, command: list[str]) -> list[str]:
    """``command`` run with ``mountpoint`` (an existing, empty directory) on a fresh tmpfs of
    ``size`` bytes, in a mount namespace of its own. The command is exec'ed: the process
    started from this list is the command, so ``view(proc.pid, ...)`` sees its files.
    Skips the test where no namespace can be had (see the module docstring)."""
    prefix = _unshare_prefix()
    if isinstance(prefix, str):
        pytest.skip(f"no private tmpfs for a full-disk test: {prefix}")
    return [*prefix, "sh", "-c", _MOUNT_THEN_EXEC, "sh", str(size), str(mountpoint), *command]


def view(pid: int, path: Path) -> Path:
    """``path`` as the process ``pid`` sees it, from outside its mount namespace."""
    return Path(f"/proc/{pid}/root") / Path(path).absolute().relative_to("/")


def fill(directory: Path, leave: int = 0) -> Path:
    """Write a file in ``directory`` until its file system is full, then give ``leave``
    bytes of it back; returns the file (delete it to give the space back)."""
    filler = directory / "filler"
    chunk = b"\0" * (1 << 16)
    with open(filler, "wb", buffering=0) as f:
        while chunk:
            try:
                f.write(chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                chunk = chunk[: len(chunk) // 2]  # the last pages, down to the last byte
        if leave:
            f.truncate(max(f.tell() - leave, 0))
    return filler


def write_syscalls(pid: int) -> int:
    """How many write() calls ``pid`` has made, failed ones included (/proc/PID/io): how a
    test sees that a process tried to write and did not give up."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("syscw:"):
            return int(line.split()[1])
    raise AssertionError(f"no syscw in /proc/{pid}/io")
