"""Rendezvous ports for distributed runs (MASTER_PORT), chosen by the executor at launch.

A port is free when the kernel hands it out for bind(port 0), as torchrun's own choice is
made. Between that and rank 0 listening on it there is a window: another job launched in
it could be handed the same port by the kernel. So every port chosen stays reserved for
its job until the run is over, and a port reserved by another job is never handed out
again; processes outside the pool can still take a port in that window (as with torchrun).
"""

from __future__ import annotations

import socket
import threading

MAX_TRIES = 64  # bind(0) repeating a reserved port this often means something is wrong


def ephemeral_port(host: str = "127.0.0.1") -> int:
    """A port nothing on `host` is bound to right now, as the kernel picks it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


class PortReservations:
    """The MASTER_PORT of each live distributed run of this executor: two never share one."""

    def __init__(self) -> None:
        self._by_job: dict[int, int] = {}
        self._lock = threading.Lock()

    def choose(self, job_id: int, host: str = "127.0.0.1") -> int:
        """A free port for the job's run, reserved until `release`; a new choice for a job
        (its next attempt) replaces the one it had."""
        with self._lock:
            self._by_job.pop(job_id, None)
            taken = set(self._by_job.values())
            for _ in range(MAX_TRIES):
                port = ephemeral_port(host)
                if port not in taken:
                    self._by_job[job_id] = port
                    return port
        raise OSError(f"no free port for job {job_id}'s rendezvous after {MAX_TRIES} tries")

    def release(self, job_id: int) -> None:
        with self._lock:
            self._by_job.pop(job_id, None)

    def reserved(self) -> dict[int, int]:
        with self._lock:
            return dict(self._by_job)
