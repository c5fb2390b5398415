"""Many jobs cancelled in ONE transaction (`gpupool cancel` by filters, many ids or an
array: service/bulk_cancel.py selects them). Each job is changed as `cancel_pending` and
`request_cancel` change one, from its row as it is now: before this, 5,000 pending jobs
were 5,000 requests and commits (100-213 s)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from gpupool.core.job import Job, JobState
from gpupool.store import models
from gpupool.store.codec import job_from_row
from gpupool.store.models import JOBS
from gpupool.store.run_ends import note_run_end

T = TypeVar("T")


class BulkCancelMethods:
    def _write_retrying(self, op: Callable[[Session], T]) -> T:
        raise NotImplementedError  # the Store's (repository.py)

    def cancel_many(self, job_ids: Iterable[int], now: float, cause: str) -> list[Job]:
        """Cancel `job_ids` in one transaction: a PENDING or PREEMPTED job is CANCELLED at
        once; a RUNNING one, or a backend's PENDING one, is asked to stop (its first request
        kept; the engine signals it, or cancels its run in the backend). An ended job or an
        id of no job is left out. The jobs cancelled or being stopped, as stored now, in id
        order, without their histories and submitters' environments (what the engine's view
        keeps: a bulk cancel answers with ids and states); `cause` goes into each history."""
        wanted = sorted(set(job_ids))

        def op(s: Session) -> list[Job]:
            acted: list[int] = []
            for chunk in models.in_chunks(wanted):
                acted += _cancel_chunk(s, chunk, now, cause)
            jobs: list[Job] = []
            for chunk in models.in_chunks(sorted(acted)):
                rows = s.scalars(models.JOB_ROWS_WITH_IDS, {"ids": chunk})
                jobs += [job_from_row(row, environment=False) for row in rows]
            return jobs

        return self._write_retrying(op)


def _cancel_chunk(s: Session, ids: Sequence[int], now: float, cause: str) -> list[int]:
    """Cancel these jobs (module docstring), a few statements for them all: the ids of
    those not ended."""
    t = JOBS.c
    run = (t.start_time, t.project, t.username.label("user"), t.gpus, t.node, t.gpu_memory_bytes)
    read = select(t.id, t.state, t.spec, t.cancel_requested, *run).where(t.id.in_(ids))
    to_end: list[tuple[int, JobState]] = []
    to_stop: list[int] = []
    acted: list[int] = []
    for row in s.execute(read):
        job_id, state, spec = row.id, row.state, row.spec
        if state.terminal:
            continue
        acted.append(job_id)
        # A running job, or a backend's pending one (it may be in the backend's queue):
        # the engine stops it. Any other active job is cancelled here at once.
        if state is JobState.RUNNING or (state is JobState.PENDING and spec.get("backend")):
            if not row.cancel_requested:
                to_stop.append(job_id)
        else:
            to_end.append((job_id, state))
            note_run_end(s, row, now)  # a job that kept a run (PREEMPTED), if any
    values = {"end_time": now, "reason": ""}
    models.transition_all(s, to_end, JobState.CANCELLED, now, cause, values)
    if to_stop:
        asked = {"cancel_requested": True, "cancel_requested_at": now, "cancel_cause": cause}
        stmt = (
            update(JOBS)
            .where(t.id.in_(to_stop), t.cancel_requested.is_(False))
            .values(version=t.version + 1, **asked)
        )
        s.execute(stmt)
    return acted
