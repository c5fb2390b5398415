"""Cancelling many jobs at once, as `scancel` does: by ids (an array's id names every task
of it), name, state, user and project, the filters combined with AND (docs/jobs.md, "Cancel
many jobs at once"; `POST /v1/jobs/cancel`, api/bulk_cancel.py).

The jobs are selected from the engine's view of the active jobs (ids it does not have are
looked up in the store in one query: ended, or none such), each is checked by the caller's
rule (`refusal`, the API's: the one rule of a single cancel), and every job allowed is
cancelled in ONE store transaction (store/bulk_cancel.py), then handed to the engine at
once: a pending job is CANCELLED, a running one is stopped by the engine (SIGTERM, grace,
SIGKILL). What was not cancelled is said, per job, as data (`Skipped`): not allowed, already
ended, no such job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from gpupool.core.job import Job, JobState

if TYPE_CHECKING:
    from gpupool.service.pool_service import PoolService

log = logging.getLogger(__name__)

# What the states filter may name: a job in any other state is not cancelled by a filter.
CANCELLABLE_STATES = frozenset({JobState.PENDING, JobState.RUNNING})


@dataclass(frozen=True)
class CancelSelection:
    """Which jobs to cancel: those of `ids` (every task of an array named by its id) or,
    without ids, every active job; of them, those every filter given keeps (AND)."""

    ids: tuple[int, ...] = ()
    name: str | None = None
    states: frozenset[JobState] | None = None
    user: str | None = None
    project: str | None = None

    def keeps(self, job: Job) -> bool:
        return (
            (self.name is None or job.spec.name == self.name)
            and (self.states is None or job.state in self.states)
            and (self.user is None or job.user == self.user)
            and (self.project is None or job.spec.project == self.project)
        )


class Skip(StrEnum):
    """Why a job selected (or named) was not cancelled."""

    NOT_ALLOWED = "not_allowed"  # the caller may not cancel it (its message says who may)
    ENDED = "ended"  # it had already ended
    NOT_FOUND = "not_found"  # no job has that id


@dataclass(frozen=True, order=True)
class Skipped:
    job_id: int
    why: Skip
    message: str


@dataclass(frozen=True)
class BulkCancel:
    """What one bulk cancel did: the jobs cancelled (or being stopped), as stored now, in
    id order; the jobs it left, each with why."""

    cancelled: tuple[Job, ...]
    skipped: tuple[Skipped, ...]


def cancel_selected(
    service: PoolService,
    selection: CancelSelection,
    refusal: Callable[[Job], str | None],
    by: str,
    now: float,
) -> BulkCancel:
    """Cancel what `selection` selects and `refusal` (None: allowed) lets `by` cancel."""
    selected, skipped = _selected(service, selection)
    allowed: list[int] = []
    for job in selected:
        said = refusal(job)
        if said is None:
            allowed.append(job.id)
        else:
            skipped.append(Skipped(job.id, Skip.NOT_ALLOWED, said))
    cause = f"cancelled by {by}" if by else "cancelled"
    done = service.store.cancel_many(allowed, now, cause) if allowed else []
    if done:
        service.engine.stored(*done)
        log.info("%d jobs cancelled by %s in one request", len(done), by or "?")
    kept = {j.id for j in done}
    for job_id in allowed:  # ended between the view's copy and the transaction
        if job_id not in kept:
            skipped.append(Skipped(job_id, Skip.ENDED, "it had already ended"))
    return BulkCancel(tuple(done), tuple(sorted(skipped)))


def _selected(service: PoolService, selection: CancelSelection) -> tuple[list[Job], list[Skipped]]:
    """The active jobs `selection` selects, by id, and the ids it named that are not active
    (each Skipped: ended, or no such job)."""
    active = service.engine.view().jobs
    if not selection.ids:
        return sorted((j for j in active.values() if selection.keeps(j)), key=_by_id), []
    named = frozenset(selection.ids)
    found = {i: active[i] for i in named if i in active}
    arrays: set[int] = set()
    for job in active.values():  # an array's id: every task of it still active
        if job.array_id is not None and job.array_id in named:
            found[job.id] = job
            arrays.add(job.array_id)
    missing = named - found.keys() - arrays
    skipped = _not_active(service, missing) if missing else []
    return sorted((j for j in found.values() if selection.keeps(j)), key=_by_id), skipped


def _not_active(service: PoolService, ids: Iterable[int]) -> list[Skipped]:
    """Ids named that the view does not have: ended ones (a job or a whole array), and
    ids of no job; read from the store in one query."""
    wanted = set(ids)
    ended = {j.id: j.state for j in service.store.list_jobs(include_finished=True, ids=wanted)}
    skipped: list[Skipped] = []
    for job_id in sorted(wanted):
        state = ended.get(job_id)
        if state is None:
            skipped.append(Skipped(job_id, Skip.NOT_FOUND, f"no job with id {job_id}"))
        elif state.terminal:
            skipped.append(Skipped(job_id, Skip.ENDED, f"already ended ({state.value})"))
        # else: it became active since the view was copied; left to the next cancel
    return skipped


def _by_id(job: Job) -> int:
    return job.id
