"""Whose a process on a GPU is: the job whose session it runs in, else nobody's (foreign).

Every job runs in a session of its own, led by its main process (executor/supervisor.py:
start_new_session), so the job's session id is its main process's pid (child.json), and
every process the job starts stays in it unless it calls setsid() itself (then it shows as
foreign: docs/security.md, "Known gaps"). The session of a pid is field 6 of /proc/PID/stat.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

PROC = Path("/proc")


def session_of(pid: int, proc: Path = PROC) -> int | None:
    """The session id of process `pid`; None when it is gone or cannot be read."""
    try:
        raw = (proc / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    try:  # the command name, field 2, is in parentheses and may hold any byte
        return int(raw[raw.rfind(b")") + 2 :].split()[3])
    except (IndexError, ValueError):
        return None


def job_of(pid: int, job_by_session: Mapping[int, int], proc: Path = PROC) -> int | None:
    """The job process `pid` belongs to, given each running job's session id."""
    sid = session_of(pid, proc)
    return None if sid is None else job_by_session.get(sid)
