"""The job's processes, for supervisor.py: waiting for the main process without reaping
it, and killing what the job leaves behind in its session.

Standard library only: supervisor.py runs as a script (``python -I -S``) and imports this
module as its sibling, never gpupool.
"""

import contextlib
import os
import signal
import time


def main_exited(pid: int) -> bool:
    """True once ``pid`` has exited, WITHOUT reaping it; reaps any other (adopted) child.

    WNOWAIT keeps the main process a zombie so its pid stays reserved for the kill that
    follows. Orphans adopted as subreaper are reaped so they do not pile up as zombies.
    """
    while True:
        try:
            res = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True  # impossible while pid is unreaped; do not spin if it happens
        if res is None or res.si_pid == pid:
            return res is not None
        with contextlib.suppress(ChildProcessError):
            os.waitpid(res.si_pid, os.WNOHANG)


def killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def session_members(sid: int) -> list[tuple[int, str]]:
    """[(pid, state)] of the other processes in session ``sid``, from /proc.

    The job's session holds its group and any group a ``set -m`` shell made; only
    processes that called setsid() leave it (cgroups would be needed to catch those).
    """
    me = os.getpid()
    found: list[tuple[int, str]] = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (me, sid):
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                raw = f.read()
            fields = raw[raw.rfind(b")") + 2 :].split()
            if int(fields[3]) == sid:  # field 6: session id
                found.append((int(name), fields[0].decode()))
        except (OSError, IndexError, ValueError):
            pass
    return found


def signal_session(sid: int, sig: int) -> None:
    """Send `sig` to the job's main process and every other live process of its session
    (its ranks and their children included), once each: `cancel --signal`. Only while the
    main process has not been reaped, so its pid names the job."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(sid, sig)
    for pid, state in session_members(sid):
        if state not in ("Z", "X"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)


def signal_job(sid: int, members: list[int] | None, sig: int) -> None:
    """Send `sig` to every process of the job: `members`, its cgroup's (those that left its
    session included), when it has one; else its session's (signal_session)."""
    if members is None:
        signal_session(sid, sig)
        return
    for pid in members:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def kill_leftovers(sid: int) -> None:
    """SIGKILL what the job left running. Only while the main process is an unreaped
    zombie: its pid (== pgid == sid) is then reserved, so no stranger can be hit."""
    killpg(sid, signal.SIGKILL)
    for pid, state in session_members(sid):
        if state not in ("Z", "X"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def wait_leftovers_gone(sid: int, limit_s: float) -> None:
    """Without a cgroup: kill what the job left in its session and scan again, until a scan
    finds nothing (a process that forks as it dies leaves a new pid behind), or `limit_s`.
    Their GPUs are then free once exit.json says so.

    Zombies count as gone: an orphan re-parented to an init that never reaps (some
    containers) would otherwise hold us here for the whole limit.
    """
    end = time.monotonic() + limit_s
    while True:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:  # orphans we adopted as subreaper
                pass
        alive = [p for p, state in session_members(sid) if state not in ("Z", "X")]
        if not alive or time.monotonic() >= end:
            return
        for pid in alive:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def become_subreaper() -> None:
    # PR_SET_CHILD_SUBREAPER (36): the job's orphans are re-parented to us, not to an
    # init that may never reap them. After the spawn, as ctypes costs ~3 ms to import.
    with contextlib.suppress(ImportError, OSError, AttributeError):  # best effort
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)
