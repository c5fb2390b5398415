"""Changes to a job's request after it was queued: a hold, a release, a new time limit,
priority or GPU count (`gpupool hold`, `release`, `update`; service/steering.py decides
them). One write per change, in the job's own transaction: the change is computed from the
row as it is now, so two changes at once never undo each other."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.orm import Session

from gpupool.core.job import Job, JobSpec
from gpupool.store import models
from gpupool.store.codec import encode_spec, job_from_row
from gpupool.store.models import JobRow

T = TypeVar("T")


class SteerMethods:
    def _write_retrying(self, op: Callable[[Session], T]) -> T:
        raise NotImplementedError  # the Store's (repository.py)

    def edit_spec(
        self,
        job_id: int,
        edit: Callable[[Job], JobSpec | None],
        now: float,
        cause: Callable[[Job, JobSpec], str],
        reason: str | None = None,
    ) -> Job | None:
        """Replace a job's spec with `edit(job)`, the job as stored now (it may raise to
        refuse: nothing is written). None from `edit`: nothing to change, None returned.
        The history gets `cause(job, new spec)`; `reason`, when given, becomes its reason
        code. UnknownJob for an id the store does not have."""

        def op(s: Session) -> Job | None:
            row = s.get(JobRow, job_id)
            if row is None:
                from gpupool.core.store_errors import UnknownJob

                raise UnknownJob(job_id)
            job = job_from_row(row)
            spec = edit(job)
            if spec is None:
                return None
            row.spec = encode_spec(spec)
            row.priority = spec.priority
            models.note(s, row, now, cause(job, spec))
            if reason is not None:
                row.reason = reason
            return models.load_jobs(s, JobRow.id == job_id)[0]

        return self._write_retrying(op)
