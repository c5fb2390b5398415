"""Killing what a job left running when its supervisor died (kill -9, the OOM killer).

A live supervisor kills its job's leftovers itself (supervisor.py, ``_kill_leftovers``).
A dead one leaves the job's processes running on GPUs the pool would otherwise give to
the next job: the daemon must kill them first, and keep the GPUs held until they are gone.

Which processes are the job's: its main process, named in child.json by pid AND start
ticks (a reused pid names a stranger, who is never hit), and every process of its session
(the session id is the main process's pid; a job's processes stay in it unless they call
setsid()). Why a session id can be trusted: Linux does not hand out a number again while
any process still uses it as its pid, process group or session id. So while a process of
session N lives, N is the job's session; it can only become a stranger's after every
process of the job's has gone and N was handed out again, and then the process with pid N
is not the job's main process and nothing is touched. What this cannot tell apart is a
stranger's session whose leader has also exited (after the pids wrapped around).

A run in a cgroup of its own (launch.json's `cgroup`, job_cgroup.py) needs none of that:
everything in its cgroup is the job's, whatever session it made, and nothing else is; it is
killed as a whole (`kill_cgroup`) and the cgroup removed once empty.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

from gpupool.core.execution import Leftovers
from gpupool.executor import job_cgroup
from gpupool.executor.files import boot_id, proc_stat, read_json, session_members
from gpupool.executor.run_cgroups import run_cgroup

if TYPE_CHECKING:
    from gpupool.executor.job_cgroup import CgroupFile


class Sent(Enum):
    SENT = "sent"
    GONE = "gone"  # no such process any more (or its pid now names another one)
    DENIED = "denied"  # EPERM


def signal_exactly(pid: int, start_ticks: int, sig: int) -> Sent:
    """Send ``sig`` to the process ``pid`` only if it is the one that started at
    ``start_ticks``. A pidfd pins the process between that check and the signal, so even a
    pid freed and handed out again in between is never hit."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return Sent.GONE
    except (OSError, AttributeError):  # no pidfds (kernel < 5.3): check, then kill
        fd = -1
    try:
        st = proc_stat(pid)
        if st is None or st.start_ticks != start_ticks or not st.running:
            return Sent.GONE
        if fd >= 0:
            signal.pidfd_send_signal(fd, sig)
        else:
            os.kill(pid, sig)
        return Sent.SENT
    except ProcessLookupError:
        return Sent.GONE
    except PermissionError:
        return Sent.DENIED
    finally:
        if fd >= 0:
            os.close(fd)


def job_processes(main_pid: int, main_ticks: int) -> list[tuple[int, int]]:
    """(pid, start ticks) of the job's running processes: its main process while it runs,
    and the members of its session (see the module docstring for why those are the job's)."""
    main = proc_stat(main_pid)
    if main is not None and main.start_ticks != main_ticks:
        return []  # the number names a stranger now, and so does any session of that id
    found = [(main_pid, main_ticks)] if main is not None and main.running else []
    for pid, st in session_members(main_pid):
        if pid != main_pid and st.running:
            found.append((pid, st.start_ticks))
    return found


def kill_leftovers(jobdir: Path, wait_s: float) -> Leftovers:
    """SIGKILL every process of the job in ``jobdir``, whose supervisor must be dead, and
    wait up to ``wait_s`` for them to go. Safe to repeat."""
    child = read_json(jobdir / "child.json") or {}
    pid, ticks = child.get("pid"), child.get("start_ticks")
    cg = run_cgroup(jobdir)
    if cg is not None:
        return kill_cgroup(cg, pid if isinstance(pid, int) else None, wait_s)
    if not isinstance(pid, int) or not isinstance(ticks, int):
        # The supervisor died before it recorded its command (or could not read its start
        # time): there is nothing to look for. See docs/ARCHITECTURE.md, crash safety.
        return Leftovers(main_pid=pid if isinstance(pid, int) else None)
    boot = str((read_json(jobdir / "claim.json") or {}).get("boot_id") or "")
    if boot and boot != boot_id():
        return Leftovers(main_pid=pid, other_boot=True)
    killed: set[int] = set()
    denied: set[int] = set()
    end = time.monotonic() + wait_s
    while True:
        for p, t in job_processes(pid, ticks):
            sent = signal_exactly(p, t, signal.SIGKILL)
            if sent is Sent.SENT:
                killed.add(p)
            elif sent is Sent.DENIED:
                denied.add(p)
        # Killed processes linger a moment (their parent, or init, reaps them); zombies
        # hold nothing and count as gone.
        alive = [p for p, _ in job_processes(pid, ticks)]
        if not alive or time.monotonic() >= end:
            break
        with contextlib.suppress(InterruptedError):
            time.sleep(0.01)
    return Leftovers(
        main_pid=pid,
        killed=tuple(sorted(killed)),
        alive=tuple(sorted(alive)),
        denied=tuple(sorted(denied & set(alive))),
    )


def kill_cgroup(cg: CgroupFile, main_pid: int | None, wait_s: float) -> Leftovers:
    """SIGKILL everything in the run's cgroup, wait up to `wait_s` for it to empty, and
    remove it once it has."""
    before = job_cgroup.members(cg)
    alive = job_cgroup.kill(cg, reap=False, wait_s=wait_s)
    if not alive:
        job_cgroup.remove(cg)
    return Leftovers(
        main_pid=main_pid,
        killed=tuple(sorted(set(before) - set(alive))),
        alive=tuple(alive),
        in_cgroup=True,
    )
