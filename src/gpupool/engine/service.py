"""What the API can ask of the pool: submit, list, show, cancel, read logs, list GPUs.

The API layer only translates HTTP to these calls and back.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from gpupool.core.hardware import Inventory
from gpupool.core.job import Job, JobSpec, JobState
from gpupool.engine.loop import Engine
from gpupool.policy import check_satisfiable

MAX_LOG_CHUNK = 1 << 20


class RequestRefused(ValueError):
    """A request that can never succeed (refused at submit, exit code 2 in the CLI)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class LogChunk:
    data: bytes
    offset: int  # where the next read starts
    state: JobState


class PoolService:
    def __init__(self, store: Any, executor: Any, engine: Engine, inventory: Inventory) -> None:
        self.store = store
        self.executor = executor
        self.engine = engine
        self.inventory = inventory

    def submit(self, spec: JobSpec, user: str, now: float, token: str | None = None) -> Job:
        impossible = check_satisfiable(spec.resources, self.inventory.nodes)
        if impossible is not None:
            raise RequestRefused("unsatisfiable", impossible.message)
        if spec.workdir and not os.path.isdir(spec.workdir):
            raise RequestRefused(
                "bad_workdir",
                f"working directory {spec.workdir} does not exist on the pool's machine",
            )
        job: Job = self.store.submit(spec, user, now, token)
        self.engine.wake()
        return job

    def get(self, job_id: int) -> Job:
        job: Job = self.store.get(job_id)
        return job

    def list(self, include_finished: bool = False, user: str | None = None) -> list[Job]:
        jobs: list[Job] = self.store.list_jobs(include_finished=include_finished, user=user)
        return jobs

    def why(self, job_id: int) -> str:
        """The last pass's explanation for a pending job, in words ('' if none)."""
        status = self.engine.last_reasons.get(job_id)
        return status.message if status else ""

    def cancel(self, job_id: int, user: str, now: float) -> Job:
        """Cancel a pending job at once; ask the engine to stop a running one (SIGTERM, grace,
        SIGKILL). Cancelling a finished job is a no-op that returns it."""
        cause = f"cancelled by {user}" if user else "cancelled"
        job = self.store.cancel_pending(job_id, now, cause)
        if job is not None:
            self.engine.wake()
            return job
        current: Job = self.store.get(job_id)
        if current.state is JobState.RUNNING and not current.cancel_requested:
            current = self.store.request_cancel(job_id, now, cause)
            self.engine.wake()
        return current

    def read_log(self, job_id: int, offset: int, limit: int = MAX_LOG_CHUNK) -> LogChunk:
        job = self.store.get(job_id)
        path = self.executor.log_path(job_id)
        try:
            with open(path, "rb") as f:
                f.seek(max(offset, 0))
                data = f.read(min(limit, MAX_LOG_CHUNK))
        except FileNotFoundError:
            data = b""
        return LogChunk(data, max(offset, 0) + len(data), job.state)

    def gpu_holders(self) -> dict[tuple[str, int], Job]:
        holders: dict[tuple[str, int], Job] = {}
        for job in self.store.active_jobs():
            if job.state is JobState.RUNNING and job.node:
                for g in job.gpus:
                    holders[(job.node, g)] = job
        return holders
