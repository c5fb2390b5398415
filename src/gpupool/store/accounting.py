"""What accounting reads: every job submitted or running in a window, with the intervals it
held GPUs (from its transitions: a job preempted and requeued ran more than once).

The arithmetic over these records is service/accounting.py; this only reads, in two
statements whatever the number of jobs: the jobs' columns, then their transitions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Double, ForeignKey, Integer, String, insert, or_, select
from sqlalchemy.orm import Mapped, mapped_column

from gpupool.core.job import JobState, Resources, gpu_count
from gpupool.store.codec import decode_spec
from gpupool.store.models import Base, JobRow, TransitionRow
from gpupool.store.sessions import SessionMethods

_PREEMPTED_TO = (JobState.PREEMPTED, JobState.PENDING)


class IdleActionRow(Base):
    """A stop or requeue the idle-GPU policy made (service/usage_acts.py)."""

    __tablename__ = "idle_actions"
    __table_args__ = ({"sqlite_autoincrement": True},)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id"))
    time: Mapped[float] = mapped_column(Double, index=True)
    action: Mapped[str] = mapped_column(String(16))
    limit_end: Mapped[float] = mapped_column(Double)  # when its time limit would have ended


@dataclass(frozen=True)
class IdleActionRecord:
    job_id: int
    time: float
    action: str  # engine.idle.ActKind's value
    limit_end: float


@dataclass(frozen=True)
class Run:
    """One interval a job held its GPUs: [start, end), end None while it still runs;
    `preempted`: it ended by preemption or requeue (its work since start is redone)."""

    start: float
    end: float | None
    preempted: bool


@dataclass(frozen=True)
class JobRecord:
    job_id: int
    user: str
    project: str
    node: str | None
    gpus: tuple[int, ...]
    gpu_count: float  # as every view counts it (core.job.gpu_count)
    gpu_type: str | None  # what it asked for (the inventory says what it got)
    submit_time: float
    state: JobState
    runs: tuple[Run, ...]
    # The CPU time of its ended runs, as their cgroups counted it (None: nothing counted).
    cpu_seconds: float | None = None
    # The backend that runs it (its spec's `backend`; None: the pool's own machine). Its
    # `node` and `gpus` are then the backend's, as the pool names them (store/backend_runs.py):
    # no GPU of the inventory, none the pool samples.
    backend: str | None = None

    @property
    def first_start(self) -> float | None:
        return self.runs[0].start if self.runs else None


class AccountingMethods(SessionMethods):
    def record_idle_action(self, job_id: int, time: float, action: str, limit_end: float) -> None:
        with self._write() as s:
            s.execute(
                insert(IdleActionRow),
                [{"job_id": job_id, "time": time, "action": action, "limit_end": limit_end}],
            )

    def idle_actions(self, since: float) -> list[IdleActionRecord]:
        """The idle policy's stops and requeues whose reclaimed time reaches past `since`."""
        with self._read() as s:
            rows = s.execute(
                select(
                    IdleActionRow.job_id,
                    IdleActionRow.time,
                    IdleActionRow.action,
                    IdleActionRow.limit_end,
                ).where(IdleActionRow.limit_end >= since)
            ).all()
        return [IdleActionRecord(*r) for r in rows]

    def accounting_records(
        self, since: float, gpu_memory: Mapping[tuple[str, int], int] | None = None
    ) -> list[JobRecord]:
        """Every job submitted at or after `since` or holding GPUs after it, by id.
        `gpu_memory`: each GPU's memory by (node, index), for the share of a shared GPU."""
        in_window = or_(
            JobRow.submit_time >= since,
            (JobRow.start_time.is_not(None))
            & ((JobRow.end_time.is_(None)) | (JobRow.end_time >= since)),
        )
        columns = select(
            JobRow.id,
            JobRow.user,
            JobRow.project,
            JobRow.node,
            JobRow.gpus,
            JobRow.gpu_memory_bytes,
            JobRow.submit_time,
            JobRow.state,
            JobRow.cpu_seconds_all_runs,
            # One key of the spec, read by the database (no spec to decode for every job).
            JobRow.spec["backend"].as_string(),
        ).where(in_window)
        # The spec (JSON, slow to decode) only of jobs whose count or type needs it: those
        # that shared a GPU (the fraction) or never held one (what they asked for).
        need_spec = or_(JobRow.gpu_memory_bytes.is_not(None), JobRow.node.is_(None))
        specs_of = select(JobRow.id, JobRow.spec).where(in_window, need_spec)
        moves = (
            select(
                TransitionRow.job_id,
                TransitionRow.time,
                TransitionRow.from_state,
                TransitionRow.to_state,
            )
            .join(JobRow, JobRow.id == TransitionRow.job_id)
            .where(in_window, TransitionRow.from_state.is_distinct_from(TransitionRow.to_state))
            .where(
                (TransitionRow.to_state == JobState.RUNNING)
                | (TransitionRow.from_state == JobState.RUNNING)
            )
            .order_by(TransitionRow.job_id, TransitionRow.id)
        )
        with self._read() as s:
            # Core results (the connection's), not the ORM's: a year is tens of thousands of
            # rows, and the ORM's per-row processing doubled the time of a report.
            conn = s.connection()
            rows = conn.execute(columns.order_by(JobRow.id)).all()
            runs = _runs(conn.execute(moves).all())
            specs = {i: decode_spec(sp).resources for i, sp in conn.execute(specs_of)}
        memory = gpu_memory or {}
        return [_record(row, runs.get(row[0], ()), specs.get(row[0]), memory) for row in rows]

    def requeued_runs(self, since: float) -> list[tuple[str, str, float, float, float]]:
        """(project, user, GPUs, start, end) of every run that ended in a requeue (preempted,
        reclaimed, retried) at or after `since`. A job's row keeps only its last run, so
        fair share (`usage_history`) adds these, as accounting and the simulator's replay
        charge every run. GPUs by the job's request (`core.job.gpu_count`; a shared GPU's
        share of memory is not known once it left it: its fraction, or 1 GPU)."""
        ended_by_requeue = (
            select(TransitionRow.job_id)
            .where(TransitionRow.time >= since, TransitionRow.from_state == JobState.RUNNING)
            .where(TransitionRow.to_state.in_(_PREEMPTED_TO))
        )
        jobs = select(JobRow.id, JobRow.project, JobRow.user, JobRow.spec).where(
            JobRow.restart_count > 0, JobRow.id.in_(ended_by_requeue)
        )
        moves = (
            select(
                TransitionRow.job_id,
                TransitionRow.time,
                TransitionRow.from_state,
                TransitionRow.to_state,
            )
            .where(TransitionRow.job_id.in_(ended_by_requeue))
            .where(TransitionRow.from_state.is_distinct_from(TransitionRow.to_state))
            .where(
                (TransitionRow.to_state == JobState.RUNNING)
                | (TransitionRow.from_state == JobState.RUNNING)
            )
            .order_by(TransitionRow.job_id, TransitionRow.id)
        )
        with self._read() as s:
            conn = s.connection()
            who = {i: (project, user, sp) for i, project, user, sp in conn.execute(jobs)}
            runs = _runs(conn.execute(moves).all()) if who else {}
        out: list[tuple[str, str, float, float, float]] = []
        for job_id, (project, user, spec) in who.items():
            count = gpu_count(decode_spec(spec).resources)
            out += [
                (project, user, count, run.start, run.end)
                for run in runs.get(job_id, ())
                if run.preempted and run.end is not None and run.end >= since
            ]
        return out


def _runs(moves: Sequence[Any]) -> dict[int, tuple[Run, ...]]:
    out: dict[int, list[Run]] = {}
    started: dict[int, float] = {}
    for job_id, time, frm, to in moves:
        if to is JobState.RUNNING:
            started[job_id] = time
        elif frm is JobState.RUNNING and job_id in started:
            begin = started.pop(job_id)
            out.setdefault(job_id, []).append(Run(begin, time, to in _PREEMPTED_TO))
    for job_id, begin in started.items():
        out.setdefault(job_id, []).append(Run(begin, None, False))
    return {k: tuple(v) for k, v in out.items()}


def _record(
    row: Any,
    runs: tuple[Run, ...],
    asked: Resources | None,
    memory: Mapping[tuple[str, int], int],
) -> JobRecord:
    """A job from its columns, in the order `accounting_records` selects them."""
    job_id, user, project, node, gpus, granted, submit_time, state, cpu_seconds, backend = row
    held = list(gpus or [])
    if asked is None:  # held whole GPUs: they are its count
        count = float(len(held))
    else:
        total = memory.get((node, held[0])) if node is not None and held else None
        count = gpu_count(asked, len(held) if held else None, granted, total)
    gpu_type = asked.gpu_type if asked is not None else None
    return JobRecord(
        job_id,
        user,
        project,
        node,
        tuple(held),
        count,
        gpu_type,
        submit_time,
        state,
        runs,
        cpu_seconds,
        backend,
    )
