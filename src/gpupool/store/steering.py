"""Changes to a job's request after it was queued: a hold, a release, a new time limit,
priority or GPU count (`gpupool hold`, `release`, `update`; service/steering.py decides
them). One write per change, in the job's own transaction (an array's tasks all in one:
`edit_specs`): the change is computed from the row as it is now, so two changes at once
never undo each other."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.core.job import Job, JobSpec
from gpupool.store import models
from gpupool.store.codec import encode_spec, job_from_row
from gpupool.store.models import JobRow

T = TypeVar("T")
E = TypeVar("E", bound=Exception)

# Ids per statement: far below every SQLite build's limit on bound parameters.
_CHUNK = 900
_ROWS_WITH_IDS = select(JobRow).where(models.JOBS_WITH_IDS).order_by(JobRow.id)


@dataclass(frozen=True)
class SpecEdits(Generic[E]):
    """What `edit_specs` did: the jobs changed (as stored now, with their histories), the
    ids `edit` left as they were, and those it refused, each with its refusal."""

    changed: tuple[Job, ...]
    unchanged: tuple[int, ...]
    refused: tuple[tuple[int, E], ...]


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

    def edit_specs(
        self,
        job_ids: Iterable[int],
        edit: Callable[[Job], JobSpec | None],
        now: float,
        cause: Callable[[Job, JobSpec], str],
        reason: str | None,
        refusal: type[E],
    ) -> SpecEdits[E]:
        """`edit_spec` of each of `job_ids` in ONE transaction (an array's tasks, held or
        released by the array's id), in id order: a job `edit` refuses with `refusal` is
        left as it is and said so; any other exception writes nothing. Ids the store does
        not have are left out."""
        wanted = sorted(set(job_ids))

        def op(s: Session) -> SpecEdits[E]:
            changed: list[int] = []
            unchanged: list[int] = []
            refused: list[tuple[int, E]] = []
            for chunk in _chunks(wanted):
                for row in s.scalars(_ROWS_WITH_IDS, {"ids": chunk}):
                    job = job_from_row(row)
                    try:
                        spec = edit(job)
                    except refusal as exc:
                        refused.append((row.id, exc))
                        continue
                    if spec is None:
                        unchanged.append(row.id)
                        continue
                    row.spec = encode_spec(spec)
                    row.priority = spec.priority
                    models.note(s, row, now, cause(job, spec))
                    if reason is not None:
                        row.reason = reason
                    changed.append(row.id)
            s.flush()
            jobs: list[Job] = []
            for chunk in _chunks(changed):
                jobs += models.load_jobs(s, models.JOBS_WITH_IDS, {"ids": chunk})
            return SpecEdits(tuple(jobs), tuple(unchanged), tuple(refused))

        return self._write_retrying(op)


def _chunks(ids: list[int]) -> Iterator[list[int]]:
    for start in range(0, len(ids), _CHUNK):
        yield ids[start : start + _CHUNK]
