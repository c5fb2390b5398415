"""The durable record of every job and of which GPUs are held: one Engine, a session per call.

Safe to share between threads. All SQL here is dialect-neutral; the connection setup, which
knows about SQLite (file, pragmas, BEGIN IMMEDIATE), is in migrations/. On PostgreSQL writers
are not serialized: conflicting updates fail the jobs.version check and are retried, or
become StaleState.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Integer, Select, String, bindparam, func, select, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from gpupool.core.cgroup_usage import CgroupUsage
from gpupool.core.job import InvalidTransition, Job, JobState
from gpupool.core.store_errors import UnknownJob
from gpupool.core.units import format_size
from gpupool.store import models
from gpupool.store.accounting import AccountingMethods
from gpupool.store.backend_runs import BackendMethods
from gpupool.store.benchmarks import BenchmarkMethods
from gpupool.store.bulk_cancel import BulkCancelMethods
from gpupool.store.codec import job_from_row
from gpupool.store.drains import DrainMethods
from gpupool.store.gpu_health import GpuHealthMethods
from gpupool.store.idle_waiting import IdleWaitingMethods
from gpupool.store.lease import LeaseMethods
from gpupool.store.migrations import WRITE_OPTION, open_engine
from gpupool.store.models import JOBS, AllocationRow, JobRow
from gpupool.store.projects import ProjectMethods
from gpupool.store.run_ends import RunEnds, hand_over, note_run_end, run_gpus
from gpupool.store.samples import SampleMethods, add_engine_gpu_use
from gpupool.store.stale import StaleState
from gpupool.store.steering import SteerMethods
from gpupool.store.submissions import SubmitMethods
from gpupool.store.tokens import TokenMethods
from gpupool.store.writer_turns import WriterTurns

T = TypeVar("T")

# A start to commit: (job id, node, GPU indices) or, for a fractional job, with the GPU memory
# it is granted on its one GPU as a 4th element (None: the GPUs are held whole).
StartTuple = tuple[int, str, tuple[int, ...]] | tuple[int, str, tuple[int, ...], int | None]

_ACTIVE_STATES = tuple(s for s in JobState if not s.terminal)
# Optimistic-concurrency retries; only PostgreSQL ever needs them (SQLite writers are serial).
_RETRIES = 5
# Rows converted at a time when many jobs are read (`_jobs`).
_BATCH = 500


class Store(
    SubmitMethods,
    SteerMethods,
    BulkCancelMethods,
    ProjectMethods,
    LeaseMethods,
    TokenMethods,
    SampleMethods,
    AccountingMethods,
    BackendMethods,
    BenchmarkMethods,
    IdleWaitingMethods,
    DrainMethods,
    GpuHealthMethods,
):
    def __init__(self, engine: Engine) -> None:
        """Use `Store.open`; this assumes the schema is already at head."""
        self._engine = engine
        self._writer = engine.execution_options(**{WRITE_OPTION: True})
        self._writers = WriterTurns(engine.url.get_backend_name() == "sqlite")
        self._postgresql = engine.dialect.name == "postgresql"  # has arrays (set_reasons)
        self._run_ends: RunEnds | None = None  # kept from `keep_run_ends` on

    @classmethod
    def open(cls, url: str) -> Store:
        """Create the database (and its directory) if needed, migrate it to head, open it."""
        return cls(open_engine(url))

    def close(self) -> None:
        self._engine.dispose()

    @property
    def data_dir(self) -> Path | None:
        """The directory whose disk holds the data: the SQLite file's; None for a server."""
        url = self._engine.url
        if url.get_backend_name() != "sqlite" or not url.database:
            return None
        return Path(url.database).absolute().parent

    # -- sessions

    @contextmanager
    def _read(self) -> Iterator[Session]:
        with Session(self._engine, expire_on_commit=False) as s, s.begin():
            yield s

    @contextmanager
    def _write(self) -> Iterator[Session]:
        with self._writers, Session(self._writer, expire_on_commit=False) as s:
            with s.begin():
                yield s
            hand_over(s, self._run_ends)  # committed: the runs it ended (store/run_ends.py)

    def keep_run_ends(self, gpu_memory: Mapping[tuple[str, int], int]) -> RunEnds:
        """From now on, keep every run that a write of this store ends, for one reader
        (the engine's usage ledger): store/run_ends.py. `gpu_memory`: as usage_history's."""
        self._run_ends = RunEnds(gpu_memory)
        return self._run_ends

    @contextmanager
    def _write_core(self) -> Iterator[Connection]:
        with self._writers, self._writer.begin() as c:
            yield c

    def _write_retrying(self, op: Callable[[Session], T]) -> T:
        """Run `op` in a write transaction, again from the start if a row changed under it."""
        for _ in range(_RETRIES):
            try:
                with self._write() as s:
                    return op(s)
            except StaleDataError:
                continue
        raise StaleState(f"the jobs kept changing concurrently ({_RETRIES} attempts)")

    # -- reading

    def get(self, job_id: int) -> Job:
        with self._read() as s:
            jobs = models.load_jobs(s, JobRow.id == job_id)
        if not jobs:
            raise UnknownJob(job_id)
        return jobs[0]

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
    ) -> list[Job]:
        """Jobs in id order, without events: the active ones (with `include_finished`, all),
        or those in `states` when given; of `user` and of `project` when given, submitted
        at `since` or later when given, among `ids` when given, the tasks of the array
        `array_id` when given. `limit` keeps the newest `limit` of them."""
        stmt = select(JobRow)
        if states is not None:
            stmt = stmt.where(JobRow.state.in_(list(states)))
        elif not include_finished:
            stmt = stmt.where(JobRow.state.in_(_ACTIVE_STATES))
        if user is not None:
            stmt = stmt.where(JobRow.user == user)
        if project is not None:
            stmt = stmt.where(JobRow.project == project)
        if since is not None:
            stmt = stmt.where(JobRow.submit_time >= since)
        if ids is not None:
            stmt = stmt.where(JobRow.id.in_(sorted(ids)))
        if array_id is not None:
            stmt = stmt.where(JobRow.array_id == array_id)
        if limit is not None:
            if limit < 0:
                raise ValueError(f"limit must not be negative: {limit}")
            stmt = stmt.order_by(JobRow.id.desc()).limit(limit)
        else:
            stmt = stmt.order_by(JobRow.id)
        return self._jobs(stmt)

    def active_jobs(self, *, environment: bool = True) -> list[Job]:
        """Every PENDING, RUNNING or PREEMPTED job (all non-terminal states), in id order.
        `environment` False: without the submitters' environments (`JobSpec.base_env`),
        which a long queue would hold by the megabyte (the engine reads them at launch)."""
        stmt = select(JobRow).where(JobRow.state.in_(_ACTIVE_STATES)).order_by(JobRow.id)
        return self._jobs(stmt, environment)

    def _jobs(self, stmt: Select[JobRow], environment: bool = True) -> list[Job]:
        """The jobs `stmt` selects, in id order, converted a batch of rows at a time: the
        rows (and their decoded specs) of a long queue are never all in memory at once."""
        out: list[Job] = []
        with self._read() as s:
            for row in s.scalars(stmt.execution_options(yield_per=_BATCH)):
                out.append(job_from_row(row, environment=environment))
        out.sort(key=lambda j: j.id)
        return out

    def usage_history(
        self,
        since: float,
        gpu_memory: Mapping[tuple[str, int], int] | None = None,
        *,
        running_only: bool = False,
    ) -> list[tuple[str, str, float, float, float | None]]:
        """(project, user, GPUs, start, end or None) of every run after `since`, a requeued
        job's earlier runs included (`requeued_runs`): the raw material of fair-share usage. GPUs as every view counts them
        (`core.job.gpu_count`): a shared GPU counts its fraction, a GPU-memory request its
        memory over its GPU's (`gpu_memory`: (node, GPU index) -> bytes; unknown: 1 GPU).
        Reads columns only; the spec only of jobs that shared a GPU (few), for the fraction.
        `running_only`: the runs not ended yet, and nothing else (`since` unused), found by
        the state's index: what the engine's usage ledger reads at each refresh."""
        if running_only:  # a job that holds a run; an ended one always has its end_time
            ran: tuple[Any, ...] = (
                JobRow.state.in_((JobState.RUNNING, JobState.PREEMPTED)),
                JobRow.start_time.is_not(None),
                JobRow.end_time.is_(None),
            )
        else:
            ran = (
                JobRow.start_time.is_not(None),
                (JobRow.end_time.is_(None)) | (JobRow.end_time >= since),
            )
        stmt = select(
            JobRow.id,
            JobRow.project,
            JobRow.user,
            JobRow.gpus,
            JobRow.node,
            JobRow.gpu_memory_bytes,
            JobRow.start_time,
            JobRow.end_time,
        ).where(*ran)
        shared = select(JobRow.id, JobRow.spec).where(*ran, JobRow.gpu_memory_bytes.is_not(None))
        with self._read() as s:
            rows = s.execute(stmt).all()
            specs: dict[int, dict[str, Any]] = {i: sp for i, sp in s.execute(shared)}
        memory = gpu_memory or {}
        out: list[tuple[str, str, float, float, float | None]] = []
        for job_id, project, user, gpus, node, granted, start, end in rows:
            if start is None:  # never: `ran` asks for jobs that started (the column may be NULL)
                continue
            count = run_gpus(list(gpus or []), node, granted, specs.get(job_id), memory)
            out.append((project, user, count, start, end))
        if running_only:
            return out
        return out + self.requeued_runs(since)

    def allocation_version(self) -> int:
        with self._engine.connect() as c:
            return models.allocation_version(c)

    def launch_info(self, job_id: int) -> dict[str, Any]:
        with self._read() as s:
            found = s.execute(select(JobRow.launch_info).where(JobRow.id == job_id)).first()
        if found is None:
            raise UnknownJob(job_id)
        return dict(found[0] or {})

    def cancel_request(self, job_id: int) -> tuple[float, str] | None:
        """(when, cause) of the pending cancel request of a running job, or None."""
        with self._read() as s:
            row = _row(s, job_id)
        if not row.cancel_requested or row.cancel_requested_at is None:
            return None
        return (row.cancel_requested_at, row.cancel_cause or "")

    # -- writing

    def commit_starts(
        self,
        starts: Sequence[StartTuple],
        expected_version: int,
        now: float,
        cause: str = "scheduled",
    ) -> list[Job]:
        """Start all of `starts` or none of them: (job id, node, GPU indices), and optionally
        a 4th element, the GPU memory granted to a fractional job on its one GPU (None or
        absent: the GPUs are held whole).

        Raises StaleState, with nothing written, if the allocation version is no longer
        `expected_version`, the lease this store acquired is no longer held (LeaseLost:
        store/lease.py), a job is no longer startable, a GPU to hold whole is held at all,
        or a GPU to share is held whole. That shared memory fits is the policy's to check,
        on the allocations of the version it planned against.
        """
        if not starts:
            return []
        plan = [_unpack(start) for start in starts]
        ids = [job_id for job_id, _, _, _ in plan]
        try:
            with self._write() as s:
                self.check_fence(s)
                if not models.bump_allocation_version(s, expected_version):
                    raise StaleState(
                        f"allocation version is {models.allocation_version(s)}, "
                        f"not {expected_version}: the pool changed"
                    )
                rows = {r.id: r for r in s.scalars(models.JOB_ROWS_WITH_IDS, {"ids": ids})}
                nodes = sorted({node for _, node, _, _ in plan})
                # (node, GPU) -> (job, memory or None for whole) of every holder.
                held: dict[tuple[str, int], list[tuple[int, int | None]]] = {}
                for a in s.scalars(_ALLOCATIONS_ON, {"nodes": nodes}):
                    held.setdefault((a.node, a.gpu_index), []).append((a.job_id, a.memory_bytes))
                for job_id, node, gpu_list, memory in plan:
                    row = rows.get(job_id)
                    if row is None:
                        raise UnknownJob(job_id)
                    if row.state is not JobState.PENDING:
                        raise StaleState(f"job {job_id} is {row.state.value}, not PENDING")
                    if row.cancel_requested:
                        raise StaleState(f"job {job_id} has a cancel request")
                    for g in gpu_list:
                        _check_free(node, g, held.get((node, g), []), memory)
                        held.setdefault((node, g), []).append((job_id, memory))
                    what = (
                        f"GPUs {gpu_list}"
                        if memory is None
                        else f"{format_size(memory)} of GPU {','.join(map(str, gpu_list))}"
                    )
                    models.transition(s, row, JobState.RUNNING, now, f"{cause} on {node} {what}")
                    row.start_time, row.node, row.gpus, row.reason = now, node, gpu_list, ""
                    row.gpu_memory_bytes = memory
                    s.add_all(
                        AllocationRow(node=node, gpu_index=g, job_id=job_id, memory_bytes=memory)
                        for g in gpu_list
                    )
                # The unique index on whole-GPU allocations is the last word on giving a GPU
                # whole twice (the same GPU twice in this call, or taken by a writer we could
                # not see).
                s.flush()
                loaded = models.load_jobs(s, models.JOBS_WITH_IDS, {"ids": ids})
                by_id = {j.id: j for j in loaded}
                return [by_id[i] for i in ids]
        except IntegrityError as e:
            raise StaleState(f"GPU allocation refused by the database: {e.orig}") from e
        except StaleDataError as e:
            raise StaleState("a job changed while its start was being committed") from e

    def finish(
        self,
        job_id: int,
        to: JobState,
        exit_code: int | None,
        now: float,
        cause: str,
        reason: str = "",
        *,
        end_time: float | None = None,
        usage: CgroupUsage | None = None,
        gpu_utilization: float | None = None,
    ) -> Job:
        """Move a job to the terminal state `to` and free its GPUs; a repeat is a no-op.

        `end_time` is when the job really ended, if that is known and not `now` (its exit
        record, read after the daemon was down): the job's end, its history and the usage
        charged to its project take it. The GPUs are freed now either way. `usage`: what its
        last run used, as its cgroup counted it (`models.record_run_usage`);
        `gpu_utilization`: its GPUs', as its engine measured it (store/samples.py
        `add_engine_gpu_use`).
        """
        to = JobState(to)
        if not to.terminal:
            raise InvalidTransition(f"finish needs a terminal state, not {to.value}")
        ended = now if end_time is None else end_time

        def op(s: Session) -> Job:
            row = _row(s, job_id)
            if row.state is to:
                return models.load_jobs(s, JobRow.id == job_id)[0]
            full_cause = cause
            if to is JobState.CANCELLED and row.cancel_cause:
                # The request left no event of its own; keep who asked in the history.
                full_cause = f"{cause}; {row.cancel_cause}"
            # Never before it started: an engine's end time (Slurm's whole seconds) may
            # read earlier than the pool's first sight of a short run.
            end = ended if row.start_time is None else max(ended, row.start_time)
            note_run_end(s, row, end)
            models.transition(s, row, to, end, full_cause)
            row.end_time, row.exit_code, row.reason = end, exit_code, reason
            if row.start_time is not None:  # it ran: what its run used, or that none counted it
                models.record_run_usage(row, usage)
                if gpu_utilization is not None:
                    add_engine_gpu_use(s, row, end, gpu_utilization)
            return models.load_jobs(s, JobRow.id == job_id)[0]

        return self._write_retrying(op)

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
    ) -> Job:
        """Put a RUNNING (or PREEMPTED) job back to PENDING and free its GPUs; `hold_until`:
        it may not start before then (its spec's begin time, as `--begin` sets it);
        `retry`: its run failed and is retried (counted in `failed_attempts`); `usage`: what
        the run that ended used (`models.record_run_usage`), and its GPUs' as its engine
        measured it (`gpu_utilization`: as `finish`)."""

        def op(s: Session) -> Job:
            row = _row(s, job_id)
            if row.cancel_requested:
                raise StaleState(f"job {job_id} has a cancel request: finish it as CANCELLED")
            if hold_until is not None:
                row.spec = {**row.spec, "begin_time": hold_until}
            note_run_end(s, row, now, by_request=True)
            models.transition(s, row, JobState.PENDING, now, cause)
            row.restart_count += 1
            if retry:
                row.failed_attempts += 1
            if row.start_time is not None:  # it ran: what its run used, or that none counted it
                models.record_run_usage(row, usage)
                if gpu_utilization is not None:
                    add_engine_gpu_use(s, row, now, gpu_utilization)
            row.node, row.gpus, row.start_time, row.reason = None, [], None, ""
            row.gpu_memory_bytes = row.backend_ref = None
            return models.load_jobs(s, JobRow.id == job_id)[0]

        return self._write_retrying(op)

    def note(
        self,
        job_id: int,
        now: float,
        cause: str,
        reason: str | None = None,
        *,
        only_if: JobState | None = None,
    ) -> Job | None:
        """Add `cause` to a job's history without changing its state (an event from its state
        to the same state): something the pool found or did about it, e.g. that its
        supervisor died and its processes still run, or that a quota change means it can
        never start. `reason`, when given, becomes the job's reason code (the REASON column)
        until its next change of state. `only_if`: written only while the job is in that
        state (a note about a pending job is dropped once it started); None when dropped."""

        def op(s: Session) -> Job | None:
            row = _row(s, job_id)
            if only_if is not None and row.state is not only_if:
                return None
            models.note(s, row, now, cause)
            if reason is not None and row.reason != reason:
                row.reason = reason
            return models.load_jobs(s, JobRow.id == job_id)[0]

        return self._write_retrying(op)

    def cancel_pending(self, job_id: int, now: float, cause: str) -> Job | None:
        """Cancel a job that is not running; None if it is running (signal it), has ended,
        or is a backend's job still PENDING (it may have been handed over: the engine
        cancels it there, `request_cancel`)."""

        def op(s: Session) -> Job | None:
            row = _row(s, job_id)
            if row.state is JobState.RUNNING or row.state.terminal or _in_backend(row):
                return None
            note_run_end(s, row, now)  # a job that kept a run (PREEMPTED), if any
            models.transition(s, row, JobState.CANCELLED, now, cause)
            row.end_time, row.reason = now, ""
            return models.load_jobs(s, JobRow.id == job_id)[0]

        return self._write_retrying(op)

    def request_cancel(self, job_id: int, now: float, cause: str) -> Job:
        """Record that a running job must be cancelled (the caller signals it).

        The first request is kept; a job that is not running is cancelled at once (PENDING,
        PREEMPTED) or left as it is (already ended). The returned job's state tells which.
        A backend's PENDING job is asked too, not cancelled: the engine cancels its run in
        the backend if it was handed over (docs/backends.md).
        """

        def op(s: Session) -> Job:
            row = _row(s, job_id)
            if row.state is JobState.RUNNING or (
                row.state is JobState.PENDING and _in_backend(row)
            ):
                if not row.cancel_requested:
                    row.cancel_requested = True
                    row.cancel_requested_at, row.cancel_cause = now, cause
            elif not row.state.terminal:
                note_run_end(s, row, now)  # a job that kept a run (PREEMPTED), if any
                models.transition(s, row, JobState.CANCELLED, now, cause)
                row.end_time, row.reason = now, ""
            return models.load_jobs(s, JobRow.id == job_id)[0]

        return self._write_retrying(op)

    def set_reasons(self, reasons: Mapping[int, str]) -> None:
        """Set the reason of PENDING jobs; jobs in other states, unknown ids and reasons that
        are already stored are skipped. The engine passes only the reasons that changed
        (it knows what is stored), so an unchanged queue costs no write."""
        changed = sorted(reasons.items())
        if not changed:
            return
        with self._write_core() as c:  # each pass writes those of what was just submitted
            if self._postgresql:
                # One statement over two arrays: a statement per job cost the daemon ~20 us
                # of interpreter time per job, in a burst each second under a stream of
                # submissions (its p99, docs/benchmarks.md); this costs ~2 us.
                ids, words = [i for i, _ in changed], [r for _, r in changed]
                c.execute(_SET_REASONS_JOINED, {"ids": ids, "words": words})
            else:  # SQLite in-process: no arrays, and a statement per job is cheap
                rows = [{"b_id": i, "b_reason": r} for i, r in changed]
                c.execute(_SET_REASONS_EACH, rows)

    def set_launch_info(self, job_id: int, info: Mapping[str, object]) -> None:
        t = JOBS.c
        stmt = (
            update(JOBS).where(t.id == job_id).values(launch_info=dict(info), version=t.version + 1)
        )
        with self._write() as s:
            if s.connection().execute(stmt).rowcount != 1:
                raise UnknownJob(job_id)


_t = JOBS.c
# set_reasons: the reason of each PENDING job given, when it differs; the version bumped.
_SET_REASONS_EACH = (
    update(JOBS)
    .where(
        _t.id == bindparam("b_id"),
        _t.state == JobState.PENDING,
        _t.reason != bindparam("b_reason"),
    )
    .values(reason=bindparam("b_reason"), version=_t.version + 1)
)
_GIVEN = (
    func.unnest(
        bindparam("ids", type_=postgresql.ARRAY(Integer)),
        bindparam("words", type_=postgresql.ARRAY(String)),
    )
    .table_valued("id", "reason")
    .render_derived(with_types=False)
)
_SET_REASONS_JOINED = (
    update(JOBS)
    .where(_t.id == _GIVEN.c.id, _t.state == JobState.PENDING, _t.reason != _GIVEN.c.reason)
    .values(reason=_GIVEN.c.reason, version=_t.version + 1)
)


# -- helpers shared by the methods above (each runs inside the caller's transaction)


def _in_backend(row: JobRow) -> bool:
    """Whether the job is a backend's (its stored spec names one: docs/backends.md)."""
    return row.spec.get("backend") is not None


def _row(s: Session, job_id: int) -> JobRow:
    row = s.get(JobRow, job_id)
    if row is None:
        raise UnknownJob(job_id)
    return row


def _unpack(start: StartTuple) -> tuple[int, str, list[int], int | None]:
    job_id, node, gpus = start[0], start[1], [int(g) for g in start[2]]
    memory = start[3] if len(start) > 3 else None
    if memory is not None:
        if len(gpus) != 1:
            raise ValueError(f"job {job_id}: a shared GPU allocation is one GPU, got {gpus}")
        if memory <= 0:
            raise ValueError(f"job {job_id}: GPU memory must be more than 0, got {memory}")
    return job_id, node, gpus, memory


def _check_free(
    node: str, gpu: int, holders: list[tuple[int, int | None]], memory: int | None
) -> None:
    """StaleState if `gpu` cannot be taken whole (memory None) or shared, given its holders."""
    for other, other_memory in holders:
        if memory is None or other_memory is None:
            how = "whole" if other_memory is None else "shared"
            raise StaleState(f"GPU {gpu} on {node} is held {how} by job {other}")


# commit_starts' read of allocations, built once (models.py's JOBS_WITH_IDS says why).
_ALLOCATIONS_ON = select(AllocationRow).where(
    AllocationRow.node.in_(bindparam("nodes", expanding=True))
)
