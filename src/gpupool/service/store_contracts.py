"""What the pool's use cases need of the store, beyond the engine's own (engine/contracts.py:
`EngineStore`): the calls they make, as Protocols. `store.Store` (SQLite or PostgreSQL) is
the implementation; tests may pass anything with these methods."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol, TypeVar, Unpack

from gpupool.core.benchmarks import SavedBenchmark
from gpupool.core.drain import DrainedGpu
from gpupool.core.gpu_health import HealthEvent
from gpupool.core.gpu_usage import JobUsageSummary, RolledSample
from gpupool.core.job import Job, JobSpec
from gpupool.core.project import Department, Project, ProjectChanges
from gpupool.engine.contracts import EngineStore
from gpupool.store.accounting import IdleActionRecord, JobRecord
from gpupool.store.samples import WindowUsage
from gpupool.store.steering import SpecEdits
from gpupool.store.submissions import NewJob

E = TypeVar("E", bound=Exception)


class ConfigStore(Protocol):
    """What applying gpupool.toml writes (service/pool_config.py)."""

    def projects(self) -> list[Project]: ...

    def departments(self) -> list[Department]: ...

    def upsert_department(self, department: Department) -> Department: ...

    def upsert_project(self, project: Project) -> Project: ...

    def set_default_project(self, user: str, project: str | None) -> None: ...


class UsageStore(Protocol):
    """What accounting and GPU history read (store.Store has it)."""

    def accounting_records(
        self, since: float, gpu_memory: Mapping[tuple[str, int], int] | None = None
    ) -> list[JobRecord]: ...

    def usage_in_window(self, since: float, until: float | None = None) -> list[WindowUsage]: ...

    def gpu_history(self, since: float, until: float, period_s: int) -> list[RolledSample]: ...

    def job_usage(self, job_ids: Iterable[int]) -> dict[int, JobUsageSummary]: ...

    def record_idle_action(
        self, job_id: int, time: float, action: str, limit_end: float
    ) -> None: ...

    def idle_actions(self, since: float) -> list[IdleActionRecord]: ...

    def idle_waiting_in_window(
        self, since: float, until: float | None = None
    ) -> dict[str, float]: ...


class BenchmarkStore(Protocol):
    """Saved benchmark results (store/benchmarks.py; docs/hwbench.md)."""

    def save_benchmark(self, saved: SavedBenchmark) -> SavedBenchmark: ...

    def benchmark_result(self, result_id: int) -> SavedBenchmark | None: ...

    def benchmark_results(
        self, benchmark: str | None = None, gpu_model: str | None = None, limit: int = 50
    ) -> list[SavedBenchmark]: ...


class PoolStore(EngineStore, UsageStore, BenchmarkStore, Protocol):
    """What the pool service (the API's calls) reads and writes, besides the engine's."""

    def submit(
        self,
        spec: JobSpec,
        user: str,
        now: float,
        token: str | None = None,
        cause: str | None = None,
    ) -> Job: ...

    def submit_many(self, batch: Sequence[NewJob]) -> list[Job]: ...

    def drain_gpus(
        self, gpus: Iterable[tuple[str, int]], reason: str, by: str, at: float
    ) -> list[DrainedGpu]: ...

    def resume_gpus(self, gpus: Iterable[tuple[str, int]]) -> list[DrainedGpu]: ...

    def record_health(self, events: Sequence[HealthEvent]) -> None: ...

    def health_events(
        self,
        since: float | None = None,
        limit: int = 1000,
        *,
        gpu: tuple[str, int] | None = None,
    ) -> list[HealthEvent]: ...

    def submit_array(self, tasks: Sequence[NewJob]) -> list[Job]: ...

    def array_task_ids(self, array_id: int) -> list[int]: ...

    def edit_spec(
        self,
        job_id: int,
        edit: Callable[[Job], JobSpec | None],
        now: float,
        cause: Callable[[Job, JobSpec], str],
        reason: str | None = None,
    ) -> Job | None: ...

    def edit_specs(
        self,
        job_ids: Iterable[int],
        edit: Callable[[Job], JobSpec | None],
        now: float,
        cause: Callable[[Job, JobSpec], str],
        reason: str | None,
        refusal: type[E],
    ) -> SpecEdits[E]: ...

    def cancel_pending(self, job_id: int, now: float, cause: str) -> Job | None: ...

    def request_cancel(self, job_id: int, now: float, cause: str) -> Job: ...

    def cancel_many(self, job_ids: Iterable[int], now: float, cause: str) -> list[Job]: ...

    def project(self, name: str) -> Project: ...

    def departments(self) -> list[Department]: ...

    def default_project(self, user: str) -> str | None: ...

    def create_project(self, project: Project) -> Project: ...

    def set_project(
        self,
        name: str,
        *,
        add_members: Iterable[str] = (),
        remove_members: Iterable[str] = (),
        **changes: Unpack[ProjectChanges],
    ) -> Project: ...

    def delete_project(self, name: str) -> None: ...

    def set_default_project(self, user: str, project: str | None) -> None: ...
