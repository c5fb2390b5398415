"""Storing new jobs: one at a time (`submit`), or several in one transaction
(`submit_many`), which syncs the disk once for all of them.

A mixin of Store (repository.py). A submission is durable when either returns: its row and
the first line of its story are committed (and, on SQLite, fsynced). A token makes a
submission idempotent: a token used before, by a committed job or earlier in the same
batch, gives that job instead of a new one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from gpupool.core.job import Job, JobSpec, JobState
from gpupool.store import models
from gpupool.store.codec import encode_spec
from gpupool.store.models import JobRow, TransitionRow
from gpupool.store.sessions import SessionMethods


class NewJob(NamedTuple):
    """One submission: the job, who submits it, when, its idempotency token, and the first
    line of its story (None: "submitted by USER")."""

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
        `cause`: the first line of its story (default: who submitted it)."""
        new = NewJob(spec, user, now, token, cause)
        try:
            with self._write() as s:
                return _load(s, [_insert(s, new, {})])[0]
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
        once for all of them (group commit: engine/service.py gathers the submissions that
        arrive while one is being written)."""
        if not batch:
            return []
        try:
            with self._write() as s:
                seen: dict[str, int] = {}
                return _load(s, [_insert(s, new, seen) for new in batch])
        except IntegrityError:
            # A token another writer committed meanwhile: each on its own, as `submit` does.
            return [self.submit(*new) for new in batch]


def _insert(s: Session, new: NewJob, seen: dict[str, int]) -> int:
    """The id of the job `new` stores, or of the job its token names (`seen`: tokens of
    this transaction so far)."""
    spec, user, now, token, cause = new
    if token is not None:
        found = seen.get(token)
        if found is None:
            found = s.execute(select(JobRow.id).where(JobRow.token == token)).scalar()
        if found is not None:
            seen[token] = found
            return found
    # Job.name's own rule, so a filter on the column matches what users see.
    name = Job(id=0, spec=spec, user=user, state=JobState.PENDING, submit_time=now).name
    row = JobRow(
        token=token,
        user=user,
        name=name,
        project=spec.project,
        priority=spec.priority,
        state=JobState.PENDING,
        submit_time=now,
        spec=encode_spec(spec),
    )
    s.add(row)
    s.flush()  # assigns row.id
    # Creation is not an edge of the transition table: there is no state before it.
    s.add(
        TransitionRow(
            job_id=row.id,
            time=now,
            from_state=None,
            to_state=JobState.PENDING,
            cause=cause or f"submitted by {user}",
        )
    )
    if token is not None:
        seen[token] = row.id
    return row.id


def _load(s: Session, ids: list[int]) -> list[Job]:
    by_id = {j.id: j for j in models.load_jobs(s, JobRow.id.in_(set(ids)))}
    return [by_id[i] for i in ids]
