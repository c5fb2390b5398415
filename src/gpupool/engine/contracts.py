"""What the engine and the pool service need of the store: the calls they make, as
Protocols, so that the engine names its dependency instead of taking `Any` (the executor's
contract is core/execution.py).

`store.Store` (SQLite or PostgreSQL) is the implementation; the simulator needs none (it
drives `policy.decide` directly), and tests may pass anything with these methods.
Compare-and-swap is part of the contract: `commit_starts` raises `store.StaleState`, with
nothing written, when the allocation version is not the one the pass read or a job to
start is no longer startable; `requeue` raises it for a job with a cancel request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from gpupool.core.cgroup_usage import CgroupUsage
from gpupool.core.drain import DrainedGpu
from gpupool.core.job import Job, JobState
from gpupool.core.project import Project

# A start to commit: (job id, node, GPU indices, GPU memory granted on its one GPU or None).
Start = tuple[int, str, tuple[int, ...], int | None]
# Fair-share raw material: (project, user, GPUs, start, end or None) of a job that ran.
UsageRow = tuple[str, str, float, float, float | None]
# A run that ended: (project, user, GPUs, start, end), as usage_history counts it.
EndedRun = tuple[str, str, float, float, float]


class RunEndsKept(Protocol):
    """The runs the store's writes ended, each handed over once (store/run_ends.py)."""

    def take(self) -> Sequence[EndedRun]:
        """The runs ended since the last take (or since the store began to keep them)."""
        ...


class EngineStore(Protocol):
    """What the engine's loop reads and writes."""

    def active_jobs(self, *, environment: bool = True) -> list[Job]: ...

    def get(self, job_id: int) -> Job: ...

    def list_jobs(
        self,
        *,
        include_finished: bool = False,
        user: str | None = None,
        limit: int | None = None,
        states: Iterable[JobState] | None = None,
        project: str | None = None,
        since: float | None = None,
        ids: Iterable[int] | None = None,
        array_id: int | None = None,
    ) -> list[Job]: ...

    def projects(self) -> list[Project]: ...

    def drained_gpus(self) -> list[DrainedGpu]: ...

    def allocation_version(self) -> int: ...

    def usage_history(
        self,
        since: float,
        gpu_memory: Mapping[tuple[str, int], int] | None = None,
        *,
        running_only: bool = False,
    ) -> list[UsageRow]: ...

    def keep_run_ends(self, gpu_memory: Mapping[tuple[str, int], int]) -> RunEndsKept: ...

    def commit_starts(
        self, starts: Sequence[Start], expected_version: int, now: float, cause: str = ...
    ) -> list[Job]: ...

    def finish(
        self,
        job_id: int,
        to: JobState,
        exit_code: int | None,
        now: float,
        cause: str,
        reason: str = ...,
        *,
        end_time: float | None = None,
        usage: CgroupUsage | None = None,
        gpu_utilization: float | None = None,
    ) -> Job: ...

    def requeue(
        self,
        job_id: int,
        now: float,
        cause: str,
        hold_until: float | None = None,
        *,
        retry: bool = False,
        usage: CgroupUsage | None = None,
        gpu_utilization: float | None = None,
    ) -> Job: ...

    def note(
        self,
        job_id: int,
        now: float,
        cause: str,
        reason: str | None = None,
        *,
        only_if: JobState | None = None,
    ) -> Job | None: ...

    def set_reasons(self, reasons: Mapping[int, str]) -> None: ...

    # A backend's jobs (store/backend_runs.py).
    def start_in_backend(
        self,
        job_id: int,
        start_time: float,
        backend: str,
        ref: str | None,
        node: str | None = None,
        gpus: Sequence[int] = (),
    ) -> Job | None: ...

    def route_to_backend(self, job_id: int, backend: str, now: float, cause: str) -> Job | None: ...

    def set_backend_ref(self, job_id: int, ref: str) -> Job | None: ...

    # GPU-seconds idle while jobs waited, by (hour, cause) (store/idle_waiting.py).
    def add_idle_waiting(self, amounts: Mapping[tuple[float, str], float]) -> None: ...

    def idle_waiting_totals(self) -> dict[str, float]: ...

    def pool_id(self) -> str: ...

    @property
    def data_dir(self) -> Path | None:
        """The directory whose disk holds the data (a full disk is told apart by it); None
        for a database server."""
        ...
