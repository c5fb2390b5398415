"""Changes to a job's request after it was queued: a hold, a release, a new time limit,
priority or GPU count (`gpupool hold`, `release`, `update`; service/steering.py decides
them). One write per change, in the job's own transaction (an array's tasks all in one:
`edit_specs`): the change is computed from the row as it is now, so two changes at once
never undo each other."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar, cast

from sqlalchemy import bindparam, insert, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from gpupool.core.job import Job, JobSpec
from gpupool.store import models
from gpupool.store.codec import encode_spec, job_from_row
from gpupool.store.models import JOBS, TRANSITIONS, JobRow

T = TypeVar("T")
E = TypeVar("E", bound=Exception)

# One job's new spec, checked against the version it was read at (a job changed since by
# another writer fails the count: the transaction is run again).
_EDIT = (
    update(JOBS)
    .where(JOBS.c.id == bindparam("b_id"), JOBS.c.version == bindparam("b_version"))
    .values(
        spec=bindparam("b_spec"),
        priority=bindparam("b_priority"),
        reason=bindparam("b_reason"),
        version=JOBS.c.version + 1,
    )
)


@dataclass(frozen=True)
class SpecEdits(Generic[E]):
    """What `edit_specs` did: the jobs changed (as stored now, without their histories and
    submitters' environments), the ids `edit` left as they were, and those it refused,
    each with its refusal."""

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
        not have are left out. The jobs changed come back without their histories and
        submitters' environments (what the engine's view keeps), as a bulk cancel's do.

        Core statements, a few for them all (the rows read, one UPDATE and one INSERT of
        history lines executed for many): the ORM's flush of one row at a time, and reading
        back every history, took ~1 s for 1,000 tasks (docs/benchmarks.md, goal 3)."""
        wanted = sorted(set(job_ids))

        def op(s: Session) -> SpecEdits[E]:
            changed: list[Job] = []
            unchanged: list[int] = []
            refused: list[tuple[int, E]] = []
            updates: list[dict[str, object]] = []
            lines: list[dict[str, object]] = []
            for chunk in models.in_chunks(wanted):
                for row in s.scalars(models.JOB_ROWS_WITH_IDS, {"ids": chunk}):
                    job = job_from_row(row)
                    try:
                        spec = edit(job)
                    except refusal as exc:
                        refused.append((row.id, exc))
                        continue
                    if spec is None:
                        unchanged.append(row.id)
                        continue
                    reason_now = row.reason if reason is None else reason
                    updates.append(
                        {
                            "b_id": row.id,
                            "b_version": row.version,
                            "b_spec": encode_spec(spec),
                            "b_priority": spec.priority,
                            "b_reason": reason_now,
                        }
                    )
                    lines.append(
                        {
                            "job_id": row.id,
                            "time": now,
                            "from_state": row.state,
                            "to_state": row.state,
                            "cause": cause(job, spec),
                        }
                    )
                    slim = replace(spec, base_env=())
                    changed.append(
                        replace(job, spec=slim, version=row.version + 1, reason=reason_now)
                    )
            if updates:
                done = cast("CursorResult[Any]", s.execute(_EDIT, updates)).rowcount
                if done != len(updates):
                    raise StaleDataError("jobs changed under an edit of their specs")
                s.execute(insert(TRANSITIONS), lines)
            return SpecEdits(tuple(changed), tuple(unchanged), tuple(refused))

        return self._write_retrying(op)
