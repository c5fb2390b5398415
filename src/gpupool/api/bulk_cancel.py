"""POST /v1/jobs/cancel: many jobs cancelled in one request and one transaction, as
`scancel` selects them (service/bulk_cancel.py has the rule; docs/jobs.md, "Cancel many jobs
at once").

Body: `{"ids": [...], "name": N, "states": ["PENDING", "RUNNING"], "user": U, "mine": true,
"project": P}`, every key optional but at least one given (an empty body would cancel every
job the caller may cancel: refused, 400). `ids` name jobs (an array's id, every task of it);
the other keys filter (AND); `mine` is the caller (`--user me`), named by the server. Who
may: as for a single cancel, per job (core/access.py: its owner, an admin of its project or
a pool admin); a job the caller may not cancel is skipped with the refusal's words.

Answer 200: `{"cancelled": [{"id", "user", "state", "stopping"}], "skipped": [{"id",
"why", "message"}]}`, `why` one of engine.bulk_cancel.Skip's values. Other users' jobs
cancelled are one audit entry (`job.cancel`, target `jobs 12-14,20`, the owners in its
detail), written after the transaction.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Body
from fastapi.responses import JSONResponse
from pydantic import Field

from gpupool.api.checks import MAX_INT64
from gpupool.api.identity import Access, CallerDep
from gpupool.core.access import Action, Caller, Target, permit
from gpupool.core.audit import AuditAction
from gpupool.core.job import Job, JobState
from gpupool.core.job_control import MAX_ARRAY_TASKS, format_indices
from gpupool.core.wire_shapes import BulkCancelWire
from gpupool.service import PoolService
from gpupool.service.bulk_cancel import (
    CANCELLABLE_STATES,
    BulkCancel,
    CancelSelection,
    cancel_selected,
)

MAX_CANCEL_IDS = MAX_ARRAY_TASKS  # ids in one request: an array's worth
_MAX_WORD = 256  # a name, user or project


def add_bulk_cancel_route(api: APIRouter, service: PoolService, access: Access) -> None:
    authority = access.authority

    def refusal_for(caller: Caller) -> Callable[[Job], str | None]:
        def refusal(job: Job) -> str | None:
            target = Target(owner=job.user, project=job.spec.project, job_id=job.id)
            refused = permit(authority, caller, Action.CANCEL_JOB, target)
            return None if refused is None else refused.message

        return refusal

    @api.post("/v1/jobs/cancel", response_model=None)
    def cancel_jobs(
        caller: CallerDep,
        ids: list[Annotated[int, Field(ge=1, le=MAX_INT64)]] = Body(
            default=[], max_length=MAX_CANCEL_IDS
        ),
        name: str | None = Body(None, max_length=_MAX_WORD),
        states: list[JobState] | None = Body(None, max_length=len(CANCELLABLE_STATES)),
        user: str | None = Body(None, max_length=_MAX_WORD),
        mine: bool = Body(False),
        project: str | None = Body(None, max_length=_MAX_WORD),
    ) -> BulkCancelWire | JSONResponse:
        wanted = None if states is None else frozenset(states)
        if wanted is not None and not wanted <= CANCELLABLE_STATES:
            return _invalid("states", "only PENDING and RUNNING jobs can be selected to cancel")
        if mine and user is not None and user != caller.name:
            return _invalid("user", "give user or mine, not both")
        owner = caller.name if mine else user
        selection = CancelSelection(tuple(ids), name, wanted, owner, project)
        if not ids and selection == CancelSelection():
            return _invalid("ids", "give job ids or a filter (name, states, user, mine, project)")
        done = cancel_selected(
            service, selection, refusal_for(caller), caller.name, access.clock.now()
        )
        _audit(access, caller, done)
        return {
            "cancelled": [
                {"id": j.id, "user": j.user, "state": j.state.value,
                 "stopping": j.cancel_requested and not j.state.terminal}
                for j in done.cancelled
            ],
            "skipped": [
                {"id": s.job_id, "why": s.why.value, "message": s.message} for s in done.skipped
            ],
        }  # fmt: skip


def _invalid(field: str, message: str) -> JSONResponse:
    return JSONResponse(
        {
            "error": "invalid_request",
            "message": f"{field}: {message}",
            "errors": [{"field": field, "message": message}],
        },
        status_code=400,
    )


def _audit(access: Access, caller: Caller, done: BulkCancel) -> None:
    """One entry for the other users' jobs this request cancelled (none for one's own)."""
    others = [j for j in done.cancelled if j.user != caller.name]
    if not others:
        return
    ids = [j.id for j in others]
    target = f"job {ids[0]}" if len(ids) == 1 else f"jobs {format_indices(ids)}"
    owners = Counter(j.user for j in others)
    detail = "; ".join(
        f"owner {user}, {n} job{'s' if n != 1 else ''}" for user, n in sorted(owners.items())
    )
    access.audit(caller, AuditAction.CANCEL_JOB, target, detail)
