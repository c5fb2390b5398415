"""Small file and /proc helpers shared by the executor.

The supervisor script keeps its own copies of the few it needs, because it must start
without importing gpupool (see supervisor.py); the two are covered by the same tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from gpupool.core.paths import FILE_MODE

if TYPE_CHECKING:
    from gpupool.executor.launch_files import ClaimFile


def _tmp_name(path: Path) -> Path:
    # Unique per process and thread: two writers of one file (two launches of a job, from
    # two daemon threads or a restarted daemon) must never share a temporary.
    return path.with_name(f"{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")


def fsync_dir(path: Path) -> None:
    """Make a rename or link inside ``path`` survive a power loss."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data``: on a nearly full disk write() may write only part of it and
    report no error; the rest then fails with ENOSPC (raised), or goes through."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def append_private(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path``, created FILE_MODE (0600) if it is missing."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, FILE_MODE)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)


def _write_temporary(tmp: Path, data: bytes, durable: bool) -> None:
    """Create ``tmp`` with ``data``; on any failure (a full disk) remove it and raise.
    FILE_MODE: launch.json holds the submitter's environment."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        try:
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def atomic_write_json(path: Path, obj: Mapping[str, object], *, durable: bool = False) -> None:
    """Replace ``path`` so that readers see the old content or the new, never a torn file.

    ``durable`` also fsyncs the data and the directory entry; only records whose loss
    would be wrong after a crash (the exit record) pay for that. A write that fails (a
    full disk) raises and leaves ``path`` as it was, with no temporary behind.
    """
    tmp = _tmp_name(path)
    _write_temporary(tmp, json.dumps(obj, sort_keys=True).encode(), durable)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if durable:
        fsync_dir(path.parent)


def create_json(path: Path, obj: Mapping[str, object]) -> bool:
    """Create ``path`` with content in one step; False if it already exists.

    link() fails on an existing name, so of several racing creators exactly one wins
    and nobody ever sees the file empty or torn (the claim protocol, see supervisor.py).
    A write that fails (a full disk) raises and leaves nothing behind.
    """
    tmp = _tmp_name(path)
    _write_temporary(tmp, json.dumps(obj, sort_keys=True).encode(), durable=False)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink()


def read_json(path: Path) -> dict[str, Any] | None:
    """The object in ``path``; None when the file is missing, unreadable or not an object."""
    try:
        with open(path, "rb") as f:
            obj = json.loads(f.read())
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


class ProcStat(NamedTuple):
    state: str  # one letter: R, S, D, Z, ...
    start_ticks: int  # field 22: clock ticks after boot; with the pid it names one process
    session: int = 0  # field 6: the session id

    @property
    def running(self) -> bool:
        """Not a zombie: it may still hold what it held (a GPU)."""
        return self.state not in ("Z", "X")


def proc_stat(pid: int | str) -> ProcStat | None:
    """State, start time and session of ``pid`` from /proc, or None when there is no such
    process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return None
    # comm (field 2) may hold spaces and parentheses: split after the LAST ')'.
    rest = raw[raw.rfind(")") + 2 :].split()
    try:
        # rest[0] is field 3, rest[3] field 6, rest[19] field 22
        return ProcStat(rest[0], int(rest[19]), int(rest[3]))
    except (IndexError, ValueError):
        return None


def session_members(sid: int) -> list[tuple[int, ProcStat]]:
    """Every process whose session id is ``sid`` (the leader too, if it lives), from /proc."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = proc_stat(name)
            if st is not None and st.session == sid:
                found.append((int(name), st))
    return found


def boot_id() -> str:
    """Changes at every boot: start ticks only name a process within one boot."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def process_alive(pid: int, start_ticks: int, boot: str | None = None) -> bool:
    """True when ``pid`` is still the process that started at ``start_ticks`` and is no zombie.

    Comparing start ticks guards against the pid having been reused by another process.
    """
    if boot and boot != boot_id():
        return False
    st = proc_stat(pid)
    return st is not None and st.start_ticks == start_ticks and st.running


def own_claim() -> ClaimFile:
    """A claim.json body naming this process: the daemon standing in for a supervisor
    when it stops a job that no supervisor has claimed yet."""
    st = proc_stat(os.getpid())
    return {
        "supervisor_pid": os.getpid(),
        "supervisor_start_ticks": st.start_ticks if st else 0,
        "boot_id": boot_id(),
        "time": time.time(),
    }
