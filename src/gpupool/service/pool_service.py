"""What the API can ask of the pool: submit, list, show, cancel, read logs, list GPUs,
manage projects.

The API layer only translates HTTP to these calls and back. Every write goes to the store
first (an acknowledged submission is durable), then to the engine as the job the store now
holds (`Engine.stored`), so the engine's view, from which `queue` is served, follows it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from gpupool.core.backends import Backend, BackendNodes
from gpupool.core.containers import EngineRefused, choose_engine
from gpupool.core.drain import DrainedGpu
from gpupool.core.execution import Executor
from gpupool.core.hardware import Inventory
from gpupool.core.job import Job, JobSpec, JobState
from gpupool.core.job_query import JobPage, JobQuery
from gpupool.core.monitoring import GpuSample
from gpupool.core.project import DEFAULT_PROJECT, Project
from gpupool.core.space import StorageFull, storage_full
from gpupool.engine.gating import never_met
from gpupool.engine.gpu_counts import GpuCounter
from gpupool.engine.idle_waiting import IdleWaitingMeter
from gpupool.engine.limits import LimitSource, effective_time_limit
from gpupool.engine.log_lines import gpu_amount_text
from gpupool.engine.view import JobsView, page
from gpupool.monitor.gpu_monitor import GpuMonitor
from gpupool.policy import Decision, Status, check_quota, check_satisfiable
from gpupool.policy.per_gpu_defaults import Defaulted, PerGpuDefaults, apply_per_gpu_defaults
from gpupool.policy.render import defaulted_text, status_text
from gpupool.policy.snapshot import PolicyConfig, PriorityFactors, Reservation
from gpupool.service.accounting import Accounting
from gpupool.service.arrays import array_tasks
from gpupool.service.backend_choice import Refusal, settle_backend
from gpupool.service.drains import DrainMethods
from gpupool.service.gpu_health import HealthMethods
from gpupool.service.group_commit import GroupCommit
from gpupool.service.live_usage import live_cgroup_usage, with_live_usage
from gpupool.service.log_reading import MAX_LOG_CHUNK, LogChunk, read_job_log
from gpupool.service.pool_stats import (
    PoolStats,
    gpu_holders,
    gpu_stats,
    project_stats,
    running_job_stats,
)
from gpupool.service.projects import ProjectMethods
from gpupool.service.refusal import RequestRefused
from gpupool.service.store_contracts import BenchmarkStore, PoolStore
from gpupool.spec.command_path import unstartable_on_pool
from gpupool.store import UnknownJob
from gpupool.store.submissions import NewJob

log = logging.getLogger("gpupool.projects")
_TERMINAL = frozenset(s for s in JobState if s.terminal)


@dataclass(frozen=True)
class Explanation:
    """What a scheduling pass said about one pending job, as the policy's data (the API
    renders it: api/wire.py). None: the pass said nothing of that kind about the job."""

    status: Status | None  # why it waits
    estimated_start: float | None  # when it is expected to start (None: unknown)
    reservation: Reservation | None  # the GPUs held back for it
    priority_factors: PriorityFactors | None  # how its place in the queue was computed


class EngineLink(Protocol):
    """What the service needs of the engine (engine/loop.py's Engine)."""

    config: PolicyConfig
    passes: int
    polls: int
    idle_waiting: IdleWaitingMeter  # GPU-seconds idle while jobs waited (accounting reads it)

    def stored(self, *jobs: Job) -> None: ...

    def wake(self) -> None: ...

    def projects_changed(self, projects: list[Project]) -> None: ...

    def drains_changed(self, drains: list[DrainedGpu]) -> None: ...

    def view(self, fresh: bool = True) -> JobsView: ...

    def preempt(self, job_id: int, why: str, hold_s: float | None = None) -> None: ...

    def time_limit_of(self, job: Job) -> float: ...

    def foreign_memory(self, by_gpu: Mapping[tuple[str, int], int]) -> None: ...

    def idle_waiting_gpu_s(self) -> dict[str, float]: ...

    def backend_nodes(self) -> tuple[BackendNodes, ...]: ...


class PoolService(ProjectMethods, DrainMethods, HealthMethods):
    def __init__(
        self,
        store: PoolStore,
        executor: Executor,
        engine: EngineLink,
        inventory: Inventory,
        *,
        backends: Mapping[str, Backend] | None = None,
        project_backends: Mapping[str, str] | None = None,
        submissions: GroupCommit[NewJob, Job] | None = None,
        per_gpu_defaults: PerGpuDefaults | None = None,
    ) -> None:
        self.store = store
        self.executor = executor
        self.engine = engine
        self.inventory = inventory
        self.gpus = GpuCounter(inventory)
        self.monitor: GpuMonitor | None = None  # set by the daemon when it samples GPUs
        # Backends by name and projects' default backends (gpupool.toml; docs/backends.md),
        # set by the daemon: where a job naming one runs, and where its logs are read.
        self.backends: Mapping[str, Backend] = backends or {}
        self.project_backends: Mapping[str, str] = project_backends or {}
        self.benchmarks: BenchmarkStore = store  # saved hardware benchmark results
        # Submissions arriving together are stored together: one sync of the disk per batch.
        # (`submissions`: the daemon's, which the engine also watches for bursts.)
        self._submits = submissions if submissions is not None else GroupCommit(store.submit_many)
        # Memory and CPUs per GPU for jobs that do not say (server --default-mem-per-gpu,
        # --default-cpus-per-gpu; policy/per_gpu_defaults.py): off unless the daemon sets them.
        self.per_gpu_defaults = per_gpu_defaults or PerGpuDefaults()
        ProjectMethods.__init__(self)

    # -- jobs ------------------------------------------------------------------------------

    def submit(
        self,
        spec: JobSpec,
        user: str,
        now: float,
        token: str | None = None,
        *,
        project_given: bool | None = None,
    ) -> Job:
        """Queue a job. Its project is `spec.project` when one was given (`project_given`;
        by default, when it is not ""), else the user's (see `choose_project`). A job
        without a time limit gets its project's default, else the pool's (engine/limits.py).
        RequestRefused when it could never run. A job with GPUs and without --mem or --cpus
        gets the pool's per-GPU defaults, if it has any (policy/per_gpu_defaults.py)."""
        new = self.submission(spec, user, now, token, project_given=project_given)
        if new.spec.array is not None:
            return self.submit_array(new, user)
        return self.submitted(self._submits.write(new), user)

    async def submit_async(
        self,
        spec: JobSpec,
        user: str,
        now: float,
        token: str | None = None,
        *,
        project_given: bool | None = None,
    ) -> Job:
        """`submit` for the API's event loop: the checks run in it, and it awaits the group
        commit instead of blocking a thread on it."""
        new = self.submission(spec, user, now, token, project_given=project_given)
        if new.spec.array is not None:  # rare and larger: a thread, not the group commit
            return await asyncio.to_thread(self.submit_array, new, user)
        return self.submitted(await self._submits.submit_in_loop(new), user)

    def submissions_in_flight(self) -> int:
        """Submissions waiting for their group commit or in it (the engine's pass waits
        while many are: engine/pacing.py)."""
        return self._submits.in_flight

    def submit_array(self, new: NewJob, user: str) -> Job:
        """Store the array `new` submits, one job per index (service/arrays.py), and tell
        the engine; its first task, whose id is the array's."""
        tasks = self.store.submit_array(array_tasks(new))
        first = tasks[0]
        self.submitted(first, user)
        self.engine.stored(*tasks[1:])
        log.info("job %d is array %s of %d tasks", first.id, new.spec.array, len(tasks))
        return first

    def array_task_ids(self, array_id: int) -> list[int]:
        """The job ids of an array's tasks, in index order (the submit answer lists them)."""
        return self.store.array_task_ids(array_id)

    def submission(
        self,
        spec: JobSpec,
        user: str,
        now: float,
        token: str | None = None,
        *,
        project_given: bool | None = None,
    ) -> NewJob:
        """The job to store for a submission, its project, time limit and the pool's per-GPU
        defaults settled (see `submit`); RequestRefused when it could never run. Every submit
        path comes through here (single, batch, array, the SDK's). Reads the filesystem (the
        working directory) and the projects and the user's default project, which come
        from the store once and are cached after (so the event loop rarely waits on it)."""
        self._check_dependencies(spec)
        given = bool(spec.project) if project_given is None else project_given
        projects = self.projects_by_name()
        project = self.choose_project(user, spec.project if given else None, projects)
        if project != spec.project:
            spec = dataclasses.replace(spec, project=project)
        refused = settle_backend(spec, self.project_backends.get(project), self.backends)
        if isinstance(refused, Refusal):
            raise RequestRefused(refused.code, refused.message)
        spec = refused
        if spec.backend is not None:  # its backend's scheduler decides what can run there
            return self._new_job(spec, user, now, token, projects, project)
        spec = self._settle_container_engine(spec)
        # Before the checks, so that they count what the job will be given. Not for a
        # backend's job (above): its scheduler has its own defaults, and other nodes.
        defaulted = apply_per_gpu_defaults(
            spec.resources, self.per_gpu_defaults, self.inventory.nodes
        )
        if defaulted.given:
            spec = dataclasses.replace(spec, resources=defaulted.resources)
        impossible = check_satisfiable(spec.resources, self.inventory.nodes)
        if impossible is not None:
            raise RequestRefused("unsatisfiable", status_text(impossible))
        if self.engine.config.use_quotas:
            # Its project's quota or limit could never let it start (policy/quota_feasibility).
            never = check_quota(
                spec.resources,
                spec.is_preemptible,
                spec.priority,
                project,
                projects,
                self.inventory.nodes,
                self.engine.config,
            )
            if never is not None:
                raise RequestRefused("quota_never_fits", status_text(never))
        if spec.workdir and not os.path.isdir(spec.workdir):
            raise RequestRefused(
                "bad_workdir",
                f"working directory {spec.workdir} does not exist on the pool's machine",
            )
        if (cannot := unstartable_on_pool(spec)) is not None:  # a directory, a missing path
            raise RequestRefused("bad_command", cannot)
        return self._new_job(spec, user, now, token, projects, project, defaulted.given)

    def _new_job(
        self,
        spec: JobSpec,
        user: str,
        now: float,
        token: str | None,
        projects: Mapping[str, Project],
        project: str,
        defaulted: tuple[Defaulted, ...] = (),
    ) -> NewJob:
        """The job to store, with the time limit it runs under settled. Its history's first
        line says what the pool gave it that it did not ask for: a time limit, and the
        figures in `defaulted` (the per-GPU defaults already in `spec`)."""
        given = [defaulted_text(d) for d in defaulted]
        limit = effective_time_limit(spec, projects, self.engine.config.default_time_limit_s)
        if limit.source is not LimitSource.JOB:
            spec = dataclasses.replace(spec, time_limit_s=limit.seconds)
            given.insert(0, limit.text(project))
        cause = "; ".join([f"submitted by {user}", *given]) if given else None
        return NewJob(spec, user, now, token, cause)

    def _settle_container_engine(self, spec: JobSpec) -> JobSpec:
        """A job with an image gets the engine it runs with now, stored with it (`show`
        says which): the one it names, else the first installed (core/containers.py);
        refused, naming the field, when there is none to use (docs/containers.md)."""
        if spec.image is None:
            return spec
        chosen = choose_engine(spec.container_engine, self.executor.container_engines())
        if isinstance(chosen, EngineRefused):
            raise RequestRefused("no_container_engine", f"{chosen.field}: {chosen.message}")
        return dataclasses.replace(spec, container_engine=chosen)

    def _check_dependencies(self, spec: JobSpec) -> None:
        """Refuse an --after naming a job the pool does not have, or an `:ok` one that has
        already ended otherwise (it could never start)."""
        active = self.engine.view(fresh=False).jobs
        for dep in spec.after:
            if dep.job_id in active:
                continue
            try:
                found = self.store.get(dep.job_id)
            except UnknownJob:
                raise RequestRefused(
                    "unknown_dependency", f"after: no job {dep.job_id} in this pool"
                ) from None
            never = never_met(dep, found, self._tasks_of)
            if never is not None:
                raise RequestRefused(
                    "dependency_never_satisfied",
                    f"after: {never}, so --after {dep} can never be met (--after "
                    f"{dep.job_id}:any runs after any end)",
                )

    def _tasks_of(self, array_id: int) -> list[Job]:
        return self.store.list_jobs(include_finished=True, array_id=array_id)

    def submitted(self, job: Job, user: str) -> Job:
        """After `user`'s submission was stored as `job`: tell the engine, say it in the log.
        RequestRefused if its token named another user's stored submission."""
        if job.user != user:  # the token names another user's submission: theirs, not ours
            raise RequestRefused(
                "token_in_use",
                "this submission token was already used by another user's submission: "
                "nothing was queued; send a new token",
            )
        self.engine.stored(job)
        log.info(
            "job %d submitted by %s to project %s: %s",
            job.id,
            user or "?",
            job.spec.project,
            gpu_amount_text(self.gpus.asked(job)),
        )
        return job

    def choose_project(
        self, user: str, requested: str | None, projects: Mapping[str, Project] | None = None
    ) -> str:
        """The project a job of `user` goes to: `requested`, else the user's default project,
        else the first project (by name) that lists the user as a member, else `default`.
        RequestRefused if it does not exist or does not admit the user."""
        by_name = self.projects_by_name() if projects is None else projects
        name, hint = requested, ""
        if name is None:
            name = self.default_project(user)
            hint = (
                "; it is your default project: use --project, or change it with "
                "`gpupool project default`"
            )
            if name is None:
                hint = ""
                member_of = sorted(p.name for p in by_name.values() if user in p.members)
                name = member_of[0] if member_of else DEFAULT_PROJECT
        project = by_name.get(name)
        if project is None:
            raise RequestRefused(
                "unknown_project", f"no project named {name}; see gpupool project list"
            )
        if not project.admits(user):
            raise RequestRefused(
                "not_a_member",
                f"{user} is not a member of project {name} "
                f"(members: {', '.join(project.members)}){hint}",
            )
        return name

    def get(self, job_id: int) -> Job:
        """The job as the store has it, with the reason the last pass gave it (the engine
        stores reasons in batches: engine/loop.py, `_write_reasons`)."""
        job = self.store.get(job_id)
        seen = self.engine.view(fresh=False).jobs.get(job_id)
        if seen is not None and seen.version >= job.version and seen.reason != job.reason:
            job = dataclasses.replace(job, reason=seen.reason)
        return job

    def with_live_usage(self, job: Job) -> Job:
        """`job` with what its run under way has used so far, read from its cgroup now (a
        running job of this pool's executor; else as it is): `show`, the dashboard's job
        page (service/live_usage.py)."""
        return with_live_usage(self.executor, job)

    def list_jobs(self, query: JobQuery) -> JobPage:
        """The jobs `query` asks for: the active ones from the engine's view (with what
        this caller posted before), the finished ones from the store."""
        active = self.engine.view().select(query)
        finished: list[Job] = []
        wanted_finished = query.wanted() & _TERMINAL
        if wanted_finished:
            finished = self.store.list_jobs(
                states=wanted_finished,
                user=query.user,
                project=query.project,
                since=query.since,
                ids=query.ids,
                array_id=query.array_id,
            )
        return page(query, active, finished)

    def explain(self, job_id: int, decision: Decision | None = None) -> Explanation:
        """What the last scheduling pass said about a pending job (`Explanation`).
        `decision`: the pass to read (default: the last one)."""
        decision = decision if decision is not None else self.engine.view(fresh=False).decision
        return Explanation(
            status=decision.pending.get(job_id),
            estimated_start=decision.estimated_start.get(job_id),
            reservation=next((r for r in decision.reservations if r.job_id == job_id), None),
            priority_factors=decision.priorities.get(job_id),
        )

    def cancel(self, job_id: int, user: str, now: float) -> Job:
        """Cancel a pending job at once; ask the engine to stop a running one (SIGTERM, grace,
        SIGKILL). Cancelling a finished job is a no-op that returns it. An array's id (its
        first task's) cancels every task of it still active in one transaction, as a bulk
        cancel of that id does (service/bulk_cancel.py; the caller was allowed on the array),
        and returns the first."""
        if self.store.get(job_id).array_id == job_id:
            from gpupool.service.bulk_cancel import CancelSelection, cancel_selected

            cancel_selected(self, CancelSelection(ids=(job_id,)), _allowed, user, now)
            return self.store.get(job_id)
        return self._cancel_one(job_id, user, now)

    def _cancel_one(self, job_id: int, user: str, now: float) -> Job:
        cause = f"cancelled by {user}" if user else "cancelled"
        job = self.store.cancel_pending(job_id, now, cause)
        if job is not None:
            log.info("job %d CANCELLED before it started, by %s", job_id, user or "?")
            self.engine.stored(job)
            return job
        current = self.store.get(job_id)
        # A running job is stopped by the engine; so is a backend's PENDING one, whose run
        # may be in the backend's queue (docs/backends.md).
        stoppable = current.state is JobState.RUNNING or (
            current.state is JobState.PENDING and current.spec.backend is not None
        )
        if stoppable and not current.cancel_requested:
            current = self.store.request_cancel(job_id, now, cause)
            log.info("job %d: cancel requested by %s", job_id, user or "?")
            self.engine.stored(current)
        return current

    def read_log(
        self,
        job_id: int,
        offset: int,
        limit: int = MAX_LOG_CHUNK,
        rank: int | None = None,
        tail: int | None = None,
        stderr: bool = False,
    ) -> LogChunk:
        """The job's log (service/log_reading.py)."""
        job = self.store.get(job_id)
        return read_job_log(job, self.executor_of(job), offset, limit, rank, tail, stderr)

    def executor_of(self, job: Job) -> Executor | None:
        """Where `job` runs: its backend (None: not configured here), else this machine."""
        name = job.spec.backend
        return self.executor if name is None else self.backends.get(name)

    def log_location(self, job: Job) -> str:
        """Where `job`'s log is ("" when its backend is not configured here)."""
        where = self.executor_of(job)
        return "" if where is None else where.log_location(job.id)

    def gpu_holders(self, view: JobsView | None = None) -> dict[tuple[str, int], list[Job]]:
        """The running jobs on each (node, GPU): one whole-GPU job, or fractional sharers.
        `view`: the engine's view to read (default: a fresh one)."""
        view = self.engine.view() if view is None else view
        return gpu_holders([j for j in view.jobs.values() if j.state is JobState.RUNNING])

    def backend_nodes(self) -> tuple[BackendNodes, ...]:
        """Each backend's nodes as its engine last reported them, with the pool's jobs on
        each (engine/admission.py): `gpupool gpus`, the dashboard, /metrics."""
        return self.engine.backend_nodes()

    def gpu_samples(self) -> Mapping[tuple[str, int], GpuSample]:
        """The latest sample of each GPU by (node, index); empty without a monitor."""
        return {} if self.monitor is None else self.monitor.latest()

    def gpu_count(self, job: Job) -> float:
        """The GPUs `job` holds, or asks for before it runs (`GpuCounter.of`: the one rule)."""
        return self.gpus.of(job)

    def project_usage(self, view: JobsView | None = None) -> dict[str, dict[str, float]]:
        """Per project: GPUs held by its running jobs and asked for by its pending ones (a
        shared GPU counts its fraction: `GpuCounter`), and its running and pending jobs.
        `view`: the engine's view to read (default: a fresh one)."""
        view = self.engine.view() if view is None else view
        # One walk of every active job (10,000 for a long queue: `/metrics` asks at each
        # scrape), summing in lists: [in use, running, pending, pending GPUs].
        sums: dict[str, list[float]] = {}
        held, asked = self.gpus.of, self.gpus.asked
        for job in view.jobs.values():
            project = job.spec.project
            s = sums.get(project)
            if s is None:
                s = sums[project] = [0, 0, 0, 0]
            if job.state is JobState.RUNNING:
                s[0] += held(job)
                s[1] += 1
            elif job.state is JobState.PENDING:
                s[2] += 1
                s[3] += asked(job)
        return {
            project: {
                "in_use_gpus": s[0],
                "running_jobs": s[1],
                "pending_jobs": s[2],
                "pending_gpus": s[3],
            }
            for project, s in sums.items()
        }

    def stats(self) -> PoolStats:
        """The pool's figures now (service/pool_stats.py), all from one published view of the
        engine, as it is (no wait for what was just posted: a scrape must not block), the
        GPUs' latest samples and the projects this service keeps: nothing is read from the
        store, but the projects the first time; each running job's CPU time and memory from
        its cgroup (service/live_usage.py). Two walks of the active jobs: the running ones,
        and `project_usage`."""
        view = self.engine.view(fresh=False)
        samples = self.gpu_samples()
        running = [j for j in view.jobs.values() if j.state is JobState.RUNNING]
        projects = project_stats(self.projects_by_name(), self.project_usage(view))
        return PoolStats(
            gpus=gpu_stats(
                self.inventory, gpu_holders(running), samples, self.gpus, self.drained_by_key()
            ),
            running=running_job_stats(
                running, samples, self.gpus, lambda job: live_cgroup_usage(self.executor, job)
            ),
            projects=projects,
            running_jobs=sum(p.running_jobs for p in projects),
            pending_jobs=sum(p.pending_jobs for p in projects),
            idle_waiting_gpu_s=self.engine.idle_waiting_gpu_s(),
        )

    # -- the pool, for the API: so that it never reaches through to the engine or store ------

    def wake(self) -> None:
        """Run a pass soon (`POST /v1/internal/wake`)."""
        self.engine.wake()

    def last_decision(self) -> Decision | None:
        """The last pass's decision, as published (no wait for what was just posted)."""
        return self.engine.view(fresh=False).decision

    def pass_counts(self) -> tuple[int, int]:
        """(scheduling passes, executor polls) the engine has run since the daemon started."""
        return self.engine.passes, self.engine.polls

    def active_jobs_by_backend(self) -> dict[str | None, int]:
        """How many active jobs each backend has (None: the local pool)."""
        active: dict[str | None, int] = {}
        for job in self.engine.view(fresh=False).jobs.values():
            if not job.state.terminal:
                active[job.spec.backend] = active.get(job.spec.backend, 0) + 1
        return active

    def storage_full(self, exc: BaseException, in_store: bool) -> StorageFull | None:
        """What `exc` says of a full disk: the store's (`in_store`) or the executor's."""
        return storage_full(exc, self.store.data_dir if in_store else self.executor.data_dir)

    def accounting(self) -> Accounting:
        """Accounting over the samples the daemon keeps (service/accounting.py)."""
        monitor = self.monitor
        interval = monitor.interval_s if monitor is not None else 0.0
        simulated = monitor.simulated if monitor is not None else False
        unstored = self.engine.idle_waiting.unstored_in
        return Accounting(self.store, self.inventory, interval, simulated, unstored)


def _allowed(_job: Job) -> None:
    """The refusal rule of a cancel already allowed (None: no refusal)."""
    return None
