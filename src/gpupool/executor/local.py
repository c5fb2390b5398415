"""Run jobs on this machine, each under its own supervisor process (see supervisor.py).

The executor holds no state that matters: everything about a job is in its directory
(state_dir/jobs/<id>), written by the supervisor, so a daemon restarted after SIGKILL
rebuilds the picture with ``adopt``. The only in-memory state is the Popen handles of
supervisors this process started, kept to reap them and to know a job is "starting".
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path

from gpupool.executor.files import (
    atomic_write_json,
    boot_id,
    create_json,
    proc_stat,
    process_alive,
    read_json,
)

SUPERVISOR = Path(__file__).resolve().with_name("supervisor.py")


@dataclass(frozen=True)
class ExitRecord:
    exit_code: int  # 128+N when killed by signal N, as shells report it
    signal: int | None
    reason: str  # "exited" | "timeout" | "cancelled" | "spawn_failed"
    start_time: float
    end_time: float
    message: str


class JobStatus(str, Enum):
    RUNNING = "running"  # a live supervisor owns it, or ours is still starting
    EXITED = "exited"  # exit.json recorded
    LOST = "lost"  # claimed, but the supervisor died without recording an exit
    UNLAUNCHED = "unlaunched"  # never claimed: safe to launch (again)


class LocalExecutor:
    def __init__(self, state_dir: Path, notify_socket: Path | None = None) -> None:
        # Absolute: supervisors run with cwd "/" and get these paths as text.
        self.state_dir = Path(state_dir).absolute()
        self.notify_socket = None if notify_socket is None else Path(notify_socket).absolute()
        self._procs: dict[int, list[subprocess.Popen[bytes]]] = {}
        self._standby: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()  # the daemon may launch and poll from several threads

    def job_dir(self, job_id: int) -> Path:
        return self.state_dir / "jobs" / str(int(job_id))

    def log_path(self, job_id: int) -> Path:
        return self.job_dir(job_id) / "output.log"

    def launch(
        self,
        job_id: int,
        command: Sequence[str],
        env: Mapping[str, str],
        workdir: str,
        time_limit_s: float | None,
        grace_s: float,
        uid: int | None = None,
        gid: int | None = None,
    ) -> None:
        """Start a supervisor for the job and return at once.

        Safe to call again for a job that may already run: the supervisors race for
        claim.json and every loser exits without starting anything.
        """
        d = self.job_dir(job_id)
        d.mkdir(parents=True, exist_ok=True)
        spec = {
            "job_id": int(job_id),
            "command": [str(a) for a in command],
            "env": {str(k): str(v) for k, v in env.items()},
            "workdir": str(workdir),
            "time_limit_s": None if time_limit_s is None else float(time_limit_s),
            "grace_s": float(grace_s),
            "notify_socket": None if self.notify_socket is None else str(self.notify_socket),
            "uid": uid,
            "gid": gid,
        }
        # Not fsynced: if the machine dies before the claim, nothing ran and a relaunch
        # rewrites it. Atomic so a supervisor never reads a torn spec.
        atomic_write_json(d / "launch.json", spec)
        proc = self._hand_to_standby(d) or self._spawn_supervisor(d)
        with self._lock:
            self._procs.setdefault(int(job_id), []).append(proc)
        self.warm()  # the next launch skips interpreter start-up

    def _spawn_supervisor(self, jobdir: Path | None) -> subprocess.Popen[bytes]:
        """A supervisor for `jobdir`, or (None) a standby that waits for one on stdin."""
        arg = "--standby" if jobdir is None else str(jobdir)
        return subprocess.Popen(
            [sys.executable, "-I", "-S", str(SUPERVISOR), arg],
            stdin=subprocess.PIPE if jobdir is None else subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,  # Ctrl-C / SIGHUP for the daemon's terminal miss it
            cwd="/",  # do not pin the daemon's cwd
        )

    def warm(self) -> None:
        """Keep one standby supervisor started (a zygote): Python's start-up, ~30 ms on a
        small machine, is most of submit-to-start latency. If the daemon dies, the standby
        reads EOF and exits."""
        with self._lock:
            if self._standby is not None and self._standby.poll() is None:
                return
            self._standby = self._spawn_supervisor(None)

    def _hand_to_standby(self, jobdir: Path) -> subprocess.Popen[bytes] | None:
        with self._lock:
            standby, self._standby = self._standby, None
        if standby is None or standby.poll() is not None or standby.stdin is None:
            return None
        try:
            standby.stdin.write(f"{jobdir}\n".encode())
            standby.stdin.close()
        except OSError:  # it died between poll() and write: start a fresh one instead
            return None
        return standby

    def close(self) -> None:
        """Let the standby go (EOF on its stdin); running supervisors are not touched."""
        with self._lock:
            standby, self._standby = self._standby, None
        if standby is not None and standby.stdin is not None:
            with contextlib.suppress(OSError):
                standby.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                standby.wait(5)

    def read_exit(self, job_id: int) -> ExitRecord | None:
        """The recorded exit, or None when there is none (or it is unreadable)."""
        obj = read_json(self.job_dir(job_id) / "exit.json")
        if obj is None:
            return None
        try:
            sig = obj.get("signal")
            return ExitRecord(
                exit_code=int(obj["exit_code"]),
                signal=None if sig is None else int(sig),
                reason=str(obj["reason"]),
                start_time=float(obj["start_time"]),
                end_time=float(obj["end_time"]),
                message=str(obj.get("message", "")),
            )
        except (KeyError, TypeError, ValueError):
            return None

    def _starting(self, job_id: int) -> list[subprocess.Popen[bytes]]:
        """Our supervisors for the job that have not exited (polls, so reaps the rest)."""
        with self._lock:
            procs = list(self._procs.get(int(job_id), []))
        return [p for p in procs if p.poll() is None]

    def _owner(self, job_id: int) -> tuple[bool, int | None]:
        """(claim.json exists, pid of the supervisor that claimed it if still alive)."""
        path = self.job_dir(job_id) / "claim.json"
        if not path.exists():
            return False, None
        claim = read_json(path)
        if claim is None:  # only after a crash: claims are linked with their content
            return True, None
        try:
            pid = int(claim["supervisor_pid"])
            ticks = int(claim["supervisor_start_ticks"])
            boot = str(claim.get("boot_id") or "")
        except (KeyError, TypeError, ValueError):
            return True, None
        return True, pid if process_alive(pid, ticks, boot or None) else None

    def status(self, job_id: int) -> JobStatus:
        # Poll our handles FIRST: a supervisor of ours that is gone has already linked
        # any claim it made, so the files read below cannot miss it.
        starting = bool(self._starting(job_id))
        if self.read_exit(job_id) is not None:
            return JobStatus.EXITED
        claimed, owner = self._owner(job_id)
        if claimed:
            if owner is not None:
                return JobStatus.RUNNING
            # It may have written exit.json and exited since we looked.
            if self.read_exit(job_id) is not None:
                return JobStatus.EXITED
            return JobStatus.LOST
        return JobStatus.RUNNING if starting else JobStatus.UNLAUNCHED

    def cancel(self, job_id: int) -> bool:
        """Stop the job: its supervisor sends SIGTERM, waits grace_s, then SIGKILL.

        Idempotent. Returns False when there is nothing to stop: no live supervisor, or
        the exit is already recorded.
        """
        starting = bool(self._starting(job_id))
        if self.read_exit(job_id) is not None:
            return False  # over; its supervisor may linger a moment to notify the daemon
        d = self.job_dir(job_id)
        if starting and create_json(d / "claim.json", self._own_claim()):
            # Launched by us but not claimed yet: we took the claim, so no supervisor will
            # ever start the command (they all step aside). Record the outcome for them.
            now = time.time()
            rec = ExitRecord(
                128 + signal.SIGTERM, None, "cancelled", now, now, "cancelled before start"
            )
            atomic_write_json(d / "exit.json", asdict(rec), durable=True)
            return True
        _, owner = self._owner(job_id)
        if owner is None:
            return False  # no claim, or its supervisor is gone (LOST)
        try:
            os.kill(owner, signal.SIGTERM)
        except ProcessLookupError:
            return False
        return True

    @staticmethod
    def _own_claim() -> dict[str, object]:
        st = proc_stat(os.getpid())
        return {
            "supervisor_pid": os.getpid(),  # the daemon itself, standing in for one
            "supervisor_start_ticks": st.start_ticks if st else 0,
            "boot_id": boot_id(),
            "time": time.time(),
        }

    def reap(self) -> None:
        """Forget supervisors of ours that have exited (poll() reaps the zombie)."""
        with self._lock:
            for job_id in list(self._procs):
                live = [p for p in self._procs[job_id] if p.poll() is None]
                if live:
                    self._procs[job_id] = live
                else:
                    del self._procs[job_id]

    def adopt(self, job_id: int) -> JobStatus:
        """For a restarted daemon: what became of a job the store says is running.

        UNLAUNCHED means no supervisor ever claimed it: launching again is safe, and
        even if an old supervisor claims in between, the new one steps aside.
        """
        return self.status(job_id)
