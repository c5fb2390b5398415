"""Storing new jobs: one at a time (`submit`), or several in one transaction
(`submit_many`), which syncs the disk once for all of them.

A mixin of Store (repository.py). A submission is durable when either returns: its row and
the first line of its history are committed (and, on SQLite, fsynced). A token makes a
submission idempotent: a token used before, by a committed job or earlier in the same
batch, gives that job instead of a new one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from gpupool.core.job import Job, JobSpec, JobState, Transition
from gpupool.store import models
from gpupool.store.codec import encode_spec
from gpupool.store.models import JOBS, TRANSITIONS, JobRow
from gpupool.store.sessions import SessionMethods


class NewJob(NamedTuple):
    """One submission: the job, who submits it, when, its idempotency token, and the first
    line of its history (None: "submitted by USER")."""

    spec: JobSpec
    user: str
    now: float
    token: str | None = None
    cause: str | None = None


class SubmitMethods(SessionMethods):
    """Store methods for new jobs; Store provides the sessions."""

    def submit(
        self,
        spec: JobSpec,
        user: str,
        now: float,
        token: str | None = None,
        cause: str | None = None,
    ) -> Job:
        """Store a new PENDING job; with a token already used, return that job instead.
        `cause`: the first line of its history (default: who submitted it)."""
        new = NewJob(spec, user, now, token, cause)
        try:
            with self._write() as s:
                return _insert_all(s, [new])[0]
        except IntegrityError:
            # Another submission with the same token committed between our check and insert.
            if token is None:
                raise
            with self._read() as s:
                existing = models.load_jobs(s, JobRow.token == token)
            if not existing:
                raise
            return existing[0]

    def submit_many(self, batch: Sequence[NewJob]) -> list[Job]:
        """`submit` for each of `batch`, in order, in one transaction: the disk is synced
        once for all of them (group commit: service/pool_service.py gathers the submissions that
        arrive while one is being written)."""
        if not batch:
            return []
        try:
            with self._write_core() as c:
                return _insert_all(c, batch)
        except IntegrityError:
            # A token another writer committed meanwhile: each on its own, as `submit` does.
            return [self.submit(*new) for new in batch]

    def submit_array(self, tasks: Sequence[NewJob]) -> list[Job]:
        """Store the tasks of one array in one transaction, each with the array's id (the
        first task's job id). The array's token is the first task's: a repeated submission
        with it returns the tasks stored the first time, and stores nothing."""
        if not tasks:
            return []
        token = tasks[0].token

        def op(s: Session) -> list[Job]:
            if token is not None:
                known = s.execute(select(JOBS.c.id, JOBS.c.array_id).where(JOBS.c.token == token))
                for job_id, array_id in known:
                    return models.load_jobs(s, JobRow.array_id == (array_id or job_id))
            jobs = _insert_all(s, [tasks[0], *(t._replace(token=None) for t in tasks[1:])])
            array_id = jobs[0].id
            ids = [job.id for job in jobs]
            s.execute(update(JOBS).where(JOBS.c.id.in_(ids)).values(array_id=array_id))
            return [replace(job, array_id=array_id) for job in jobs]

        return self._write_once_more_on_conflict(op)

    def array_task_ids(self, array_id: int) -> list[int]:
        """The job ids of the array `array_id`'s tasks, in index order (its tasks are
        inserted in index order, in one transaction, so their ids rise with their index);
        [] when no such array."""
        with self._read() as s:
            query = select(JOBS.c.id).where(JOBS.c.array_id == array_id).order_by(JOBS.c.id)
            return [int(job_id) for job_id in s.scalars(query)]


def _insert_all(s: Session | Connection, batch: Sequence[NewJob]) -> list[Job]:
    """The job each of `batch` stores, or the job its token names (a committed job, or one
    earlier in the batch), in order. A new job is built from what was inserted, not read
    back; only jobs stored before are read.

    Core statements, three for the whole batch (the tokens looked up, the jobs inserted with
    RETURNING, their first transitions): the ORM's unit of work took a flush per job, most
    of a batch's time under a burst of submissions (docs/benchmarks.md, "Many clients")."""
    tokens = {new.token for new in batch if new.token is not None}
    known: dict[str, int] = {}
    if tokens:
        found = s.execute(_IDS_OF_TOKENS, {"tokens": sorted(tokens)})
        known = {token: job_id for token, job_id in found if token is not None}
    fresh: list[NewJob] = []  # the submissions that make a job, in order
    for new in batch:
        if new.token is None or new.token not in known:
            fresh.append(new)
            if new.token is not None:
                known[new.token] = -1  # a later submission with this token is this one's
    ids: list[int] = []
    if fresh:
        inserted = s.execute(
            insert(JOBS).returning(JOBS.c.id, sort_by_parameter_order=True),
            [_job_values(new) for new in fresh],
        )
        ids = list(inserted.scalars())
        s.execute(
            insert(TRANSITIONS),
            [
                {
                    "job_id": job_id,
                    "time": new.now,
                    # Creation is not an edge of the transition table: no state before it.
                    "from_state": None,
                    "to_state": JobState.PENDING,
                    "cause": new.cause or f"submitted by {new.user}",
                }
                for job_id, new in zip(ids, fresh, strict=True)
            ],
        )
    made = iter(zip(ids, fresh, strict=True))
    result: list[Job | int] = []  # a job made here, or the id of one stored before
    mine: dict[str, Job] = {}
    for new in batch:
        if new.token is None or known[new.token] == -1:
            job = _new_job(*next(made))
            if new.token is not None:
                known[new.token], mine[new.token] = job.id, job
            result.append(job)
        else:
            result.append(mine.get(new.token) or known[new.token])
    before = _load(s, [r for r in result if isinstance(r, int)])
    return [r if isinstance(r, Job) else before[r] for r in result]


def _new_job(job_id: int, new: NewJob) -> Job:
    """The job as `_job_values` and its first transition stored it (job_from_row's Job)."""
    first = Transition(new.now, None, JobState.PENDING, new.cause or f"submitted by {new.user}")
    return Job(
        id=job_id,
        spec=new.spec,
        user=new.user,
        state=JobState.PENDING,
        submit_time=new.now,
        version=1,
        events=(first,),
    )


def _job_values(new: NewJob) -> dict[str, object]:
    spec, user, now, token, _ = new
    # Job.name's own rule, so a filter on the column matches what users see.
    name = Job(id=0, spec=spec, user=user, state=JobState.PENDING, submit_time=now).name
    return {
        "token": token,
        "username": user,
        "name": name,
        "project": spec.project,
        "priority": spec.priority,
        "state": JobState.PENDING,
        "submit_time": now,
        "spec": encode_spec(spec),
        "reason": "",
        "gpus": [],
        "restart_count": 0,
        "cancel_requested": False,
        "version": 1,  # the ORM's first version (JobRow's version_id_col)
    }


def _load(s: Session | Connection, ids: list[int]) -> dict[int, Job]:
    if not ids:
        return {}
    if isinstance(s, Connection):  # a session in the connection's transaction, to read
        with Session(bind=s) as session:
            return _load(session, ids)
    return {j.id: j for j in models.load_jobs(s, models.JOBS_WITH_IDS, {"ids": sorted(set(ids))})}


# The tokens' jobs, built once (models.py's JOBS_WITH_IDS says why).
_IDS_OF_TOKENS = select(JOBS.c.token, JOBS.c.id).where(
    JOBS.c.token.in_(bindparam("tokens", expanding=True))
)
