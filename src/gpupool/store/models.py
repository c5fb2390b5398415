"""The tables, as SQLAlchemy 2 declarative classes, and the writes that keep their rules.

The schema itself is created and changed only by the Alembic migrations next door; these
classes must describe the same tables (a test compares them with the migrated database).
The functions at the end are the Store's building blocks; `transition` is the one place a
job's state is ever written.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ColumnElement,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    delete,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection, CursorResult, Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column
from sqlalchemy.orm.exc import StaleDataError
from sqlalchemy.types import TypeDecorator

from gpupool.core.cgroup_usage import CgroupUsage, summed
from gpupool.core.job import Job, JobState, Transition, check_transition
from gpupool.store.codec import job_from_row

# Fixed constraint names, identical on every database, so later migrations (including SQLite
# batch mode, which recreates tables) can refer to constraints by name.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

META_ROW_ID = 1  # the meta table holds exactly one row


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class StateType(TypeDecorator[JobState]):
    """A JobState stored as its name; a plain string column, so adding a state needs no DDL."""

    impl = String(16)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else JobState(value).value

    def process_result_value(self, value: Any, dialect: Dialect) -> JobState | None:
        return None if value is None else JobState(value)


class JobRow(Base):
    __tablename__ = "jobs"
    # AUTOINCREMENT on SQLite: a job id is never handed out twice, even if rows were deleted.
    __table_args__ = ({"sqlite_autoincrement": True},)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    token: Mapped[str | None] = mapped_column(String, unique=True)
    # "user" is reserved in PostgreSQL; a different column name keeps hand-written SQL simple.
    user: Mapped[str] = mapped_column("username", String, index=True)
    name: Mapped[str] = mapped_column(String)
    project: Mapped[str] = mapped_column(String, index=True)
    priority: Mapped[int] = mapped_column(Integer)
    state: Mapped[JobState] = mapped_column(StateType, index=True)
    submit_time: Mapped[float] = mapped_column(Double)
    start_time: Mapped[float | None] = mapped_column(Double)
    end_time: Mapped[float | None] = mapped_column(Double)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(Text, default="")
    node: Mapped[str | None] = mapped_column(String)
    # Kept after the job ends (history); the allocations table is what actually holds GPUs.
    gpus: Mapped[list[int]] = mapped_column(JSON, default=list)
    # Fractional jobs: the memory granted on their one GPU (kept after the end too).
    gpu_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    restart_count: Mapped[int] = mapped_column(Integer, default=0)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    cancel_requested_at: Mapped[float | None] = mapped_column(Double)
    cancel_cause: Mapped[str | None] = mapped_column(Text)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    launch_info: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True))
    version: Mapped[int] = mapped_column(Integer)
    # The array it is a task of (its first task's id; None: not an array task), migration 0008.
    array_id: Mapped[int | None] = mapped_column(Integer, index=True)
    # Its runs that failed and were retried (--retry's count; preemptions are not), 0009.
    failed_attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # A backend's own name for the job's current run (`slurm://cluster/1234`; its spec's
    # `backend` names the backend), once the backend reported one; NULL for a local job
    # (migration 0010).
    backend_ref: Mapped[str | None] = mapped_column(Text)
    # CPU time and memory as its runs' cgroups counted them (core/cgroup_usage.py, migration
    # 0012): its last ended run's figures, and the CPU time of all its runs (accounting's);
    # NULL where nothing counted them (a backend's job, a daemon without cgroups).
    cpu_seconds: Mapped[float | None] = mapped_column(Double)
    memory_peak_bytes: Mapped[int | None] = mapped_column(BigInteger)
    memory_mean_bytes: Mapped[int | None] = mapped_column(BigInteger)
    memory_limit_bytes: Mapped[int | None] = mapped_column(BigInteger)
    cpu_seconds_all_runs: Mapped[float | None] = mapped_column(Double)

    # The ORM adds "AND version = <what we read>" to every UPDATE and bumps it; a concurrent
    # change (possible on PostgreSQL, whose writers are not serialized) then fails the flush.
    __mapper_args__ = MappingProxyType({"version_id_col": version})


# The jobs table for Core statements (executemany updates); typed as the Table it is.
JOBS = cast(Table, JobRow.__table__)


class TransitionRow(Base):
    __tablename__ = "transitions"
    __table_args__ = ({"sqlite_autoincrement": True},)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id"), index=True)
    time: Mapped[float] = mapped_column(Double)
    from_state: Mapped[JobState | None] = mapped_column(StateType)
    to_state: Mapped[JobState] = mapped_column(StateType)
    cause: Mapped[str] = mapped_column(Text)


# The transitions table for Core statements (a batch of first transitions at submit).
TRANSITIONS = cast(Table, TransitionRow.__table__)

_WHOLE = text("memory_bytes IS NULL")


class AllocationRow(Base):
    """One GPU held by one running job: whole (memory_bytes NULL), or shared with other
    fractional jobs, each granted memory_bytes of it.

    The partial unique index on (node, gpu_index) of whole-GPU rows is the guarantee that
    no GPU is ever given whole twice: the database refuses the second row whatever the code
    above it believed. That a whole GPU is not also shared, and that shared memory fits, is
    checked by commit_starts under the allocation version's compare-and-swap.
    """

    __tablename__ = "allocations"
    __table_args__ = (
        Index(
            "ux_allocations_whole_gpu",
            "node",
            "gpu_index",
            unique=True,
            sqlite_where=_WHOLE,
            postgresql_where=_WHOLE,
        ),
    )

    node: Mapped[str] = mapped_column(String, primary_key=True)
    gpu_index: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id"), primary_key=True, index=True)
    memory_bytes: Mapped[int | None] = mapped_column(BigInteger)


class MetaRow(Base):
    __tablename__ = "meta"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    # Bumped by every change to allocations; the scheduler compares-and-swaps it so a plan
    # made from an old picture of the pool is refused as a whole.
    allocation_version: Mapped[int] = mapped_column(Integer)
    # The pool's id for backends (core.backends.BackendContext.pool_id): made of [a-z0-9],
    # chosen at random the first time it is asked for and kept (store/backend_runs.py).
    pool_id: Mapped[str | None] = mapped_column(String(16))


# -- reads and writes shared by the Store's methods (inside the caller's transaction)


def allocation_version(s: Session | Connection) -> int:
    return int(s.execute(ALLOCATION_VERSION).scalar_one())


def transition(s: Session, row: JobRow, to: JobState, now: float, cause: str) -> None:
    """The only place a job's state is written: checked against the transition table."""
    check_transition(row.state, to)
    if to is not JobState.RUNNING:
        free_gpus(s, row.id)
    s.add(TransitionRow(job_id=row.id, time=now, from_state=row.state, to_state=to, cause=cause))
    row.state = to


def transition_all(
    s: Session,
    jobs: Sequence[tuple[int, JobState]],
    to: JobState,
    now: float,
    cause: str,
    values: Mapping[str, object],
) -> None:
    """`transition` of many jobs at once, in a few statements (a bulk cancel): `jobs` as
    (id, state read in this transaction); each edge checked; `values` set with the new
    state (end_time, ...). StaleDataError (the transaction is run again) when a row is no
    longer in the state it was read in."""
    for _, frm in jobs:
        check_transition(frm, to)
    if not jobs:
        return
    ids = [job_id for job_id, _ in jobs]
    if to is not JobState.RUNNING:
        held = s.execute(
            select(AllocationRow.job_id).where(AllocationRow.job_id.in_(ids)).limit(1)
        ).first()
        if held is not None:
            bump_allocation_version(s)
            s.execute(delete(AllocationRow).where(AllocationRow.job_id.in_(ids)))
    by_state: dict[JobState, list[int]] = {}
    for job_id, frm in jobs:
        by_state.setdefault(frm, []).append(job_id)
    t = JOBS.c
    for frm, group in by_state.items():
        stmt = (
            update(JOBS)
            .where(t.id.in_(group), t.state == frm)
            .values(state=to, version=t.version + 1, **values)
        )
        if cast(CursorResult[Any], s.execute(stmt)).rowcount != len(group):
            raise StaleDataError(f"jobs changed under a transition to {to.value}")
    rows = [
        {"job_id": i, "time": now, "from_state": frm, "to_state": to, "cause": cause}
        for i, frm in jobs
    ]
    s.execute(insert(TRANSITIONS), rows)


def record_run_usage(row: JobRow, usage: CgroupUsage | None) -> None:
    """Keep what the run that just ended used (core/cgroup_usage.py): its figures become the
    job's last run's, and its CPU time is added to all its runs'. `usage` None (nothing
    counted that run): the last run's figures are cleared, not left to pass for its own;
    the sum stays as it was."""
    run = usage or CgroupUsage(None, None, None, None)
    row.cpu_seconds, row.memory_peak_bytes = run.cpu_seconds, run.memory_peak_bytes
    row.memory_mean_bytes, row.memory_limit_bytes = run.memory_mean_bytes, run.memory_limit_bytes
    row.cpu_seconds_all_runs = summed(row.cpu_seconds_all_runs, run.cpu_seconds)


def note(s: Session, row: JobRow, now: float, cause: str) -> None:
    """A line in the job's history that is no change of state: an event from its state to
    itself (creation, from None, is the other event that is no edge of the table)."""
    s.add(
        TransitionRow(
            job_id=row.id, time=now, from_state=row.state, to_state=row.state, cause=cause
        )
    )


def free_gpus(s: Session, job_id: int) -> None:
    held = s.execute(
        select(AllocationRow.gpu_index).where(AllocationRow.job_id == job_id).limit(1)
    ).first()
    if held is None:
        return
    # The meta row first, as commit_starts does: on PostgreSQL, taking row locks in the same
    # order everywhere keeps concurrent writers from deadlocking.
    bump_allocation_version(s)
    s.execute(delete(AllocationRow).where(AllocationRow.job_id == job_id))


def bump_allocation_version(s: Session, expected: int | None = None) -> bool:
    """Add one to the allocation version (only if it is `expected`, when given)."""
    if expected is None:
        return cast("CursorResult[Any]", s.execute(_BUMP)).rowcount == 1
    done = s.execute(_BUMP_IF, {"expected": expected})
    return cast("CursorResult[Any]", done).rowcount == 1


def load_jobs(
    s: Session, where: ColumnElement[bool], params: Mapping[str, object] | None = None
) -> list[Job]:
    """Jobs matching `where` (its bound parameters' values in `params`: `JOBS_WITH_IDS`
    takes "ids"), with their events, in id order; one query, one snapshot.

    Events come in the order they were written, which is time order as long as the clock
    does not step back; if it does, the history still reads in the order things happened.
    """
    stmt = (
        select(JobRow, TransitionRow)
        .outerjoin(TransitionRow, TransitionRow.job_id == JobRow.id)
        .where(where)
        .order_by(JobRow.id, TransitionRow.id)
    )
    rows: dict[int, JobRow] = {}
    events: dict[int, list[Transition]] = {}
    for row, ev in s.execute(stmt, params or {}):
        rows[row.id] = row
        bucket = events.setdefault(row.id, [])
        if ev is not None:
            bucket.append(
                Transition(time=ev.time, frm=ev.from_state, to=ev.to_state, cause=ev.cause)
            )
    return [job_from_row(rows[i], events[i]) for i in rows]


# -- projects (teams) and departments: configuration, read by the submit path and the policy


class DepartmentRow(Base):
    __tablename__ = "departments"

    name: Mapped[str] = mapped_column(String, primary_key=True)
    quota: Mapped[float | None] = mapped_column(Double)


class ProjectRow(Base):
    __tablename__ = "projects"

    name: Mapped[str] = mapped_column(String, primary_key=True)
    quota: Mapped[float] = mapped_column(Double)
    # "limit" is reserved in SQL.
    gpu_limit: Mapped[float | None] = mapped_column(Double)
    weight: Mapped[float] = mapped_column(Double)
    department: Mapped[str | None] = mapped_column(ForeignKey("departments.name"))
    default_time_limit_s: Mapped[float | None] = mapped_column(Double)
    idle_timeout_s: Mapped[float | None] = mapped_column(Double)
    idle_threshold_pct: Mapped[float] = mapped_column(Double, server_default="5")
    idle_action: Mapped[str | None] = mapped_column(String(16))
    # Minimum run times before a priority preemption / a quota reclaim (None: the pool's).
    preempt_min_runtime_s: Mapped[float | None] = mapped_column(Double)
    reclaim_min_runtime_s: Mapped[float | None] = mapped_column(Double)
    # Per-user caps: one user's running jobs of the project (None: the pool's default).
    max_gpus_per_user: Mapped[float | None] = mapped_column(Double)
    max_running_jobs_per_user: Mapped[int | None] = mapped_column(Integer)
    # The most CPUs / bytes of host memory its running jobs may hold at once (None: no cap).
    cpu_limit: Mapped[int | None] = mapped_column(Integer)
    memory_limit_bytes: Mapped[int | None] = mapped_column(BigInteger)


class ProjectMemberRow(Base):
    """One user allowed to submit to one project (a project with none is open to all)."""

    __tablename__ = "project_members"

    project: Mapped[str] = mapped_column(ForeignKey("projects.name"), primary_key=True)
    user: Mapped[str] = mapped_column("username", String, primary_key=True, index=True)


class UserDefaultRow(Base):
    """The project a user's jobs go to when they name none."""

    __tablename__ = "user_defaults"

    user: Mapped[str] = mapped_column("username", String, primary_key=True)
    project: Mapped[str] = mapped_column(ForeignKey("projects.name"), index=True)


# Statements the life of every job runs, built once and given their values per call: an
# `in_()` of a Python list, or an update's `col + 1`, built per call, leaves ~8 objects in
# reference cycles each (SQLAlchemy's anonymous bind parameters), ~50 a job in all, which
# only the cyclic collector frees (docs/benchmarks.md, goal 8's soak).
JOBS_WITH_IDS = JobRow.id.in_(bindparam("ids", expanding=True))
# The rows of the jobs with these ids, in id order.
JOB_ROWS_WITH_IDS = select(JobRow).where(JOBS_WITH_IDS).order_by(JobRow.id)
# Ids per statement where many jobs are read or written at once: far below every SQLite
# build's limit on bound parameters.
IDS_PER_STATEMENT = 900


def in_chunks(ids: Sequence[int]) -> Iterator[Sequence[int]]:
    """`ids` in runs of at most IDS_PER_STATEMENT, in order."""
    for start in range(0, len(ids), IDS_PER_STATEMENT):
        yield ids[start : start + IDS_PER_STATEMENT]


_BUMP = (
    update(MetaRow)
    .where(MetaRow.id == META_ROW_ID)
    .values(allocation_version=MetaRow.allocation_version + 1)
)
# Core, not ORM: read before every scheduling pass, where an ORM session's set-up was most
# of its cost (docs/benchmarks.md, issue 35 goal 4).
ALLOCATION_VERSION = select(MetaRow.allocation_version).where(MetaRow.id == META_ROW_ID)
_BUMP_IF = _BUMP.where(MetaRow.allocation_version == bindparam("expected"))
