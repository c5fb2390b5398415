"""/v1/jobs/{id}/hold, /release, /signal and PATCH /v1/jobs/{id}: steering a job.

Who may: the job's owner, an admin of its project or a pool admin (core/access.py, as for
cancel); what only an admin may do (release an admin's hold, lengthen a running job's time
limit) is refused to the owner with 403 naming who may. A hold by someone other than the
owner is an admin's hold (`JobHeldAdmin`). What is asked is checked by service/steering.py:
a job in the wrong state is 409, a value that can never work 422 (naming the field), as at
submit. Every change by someone other than the owner, and every action only an admin may
take, is written to the audit log after it succeeded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Body
from fastapi.responses import JSONResponse

from gpupool.api.checks import JobId
from gpupool.api.identity import Access, CallerDep
from gpupool.api.openapi import refusals
from gpupool.core.access import Action, Caller, Target
from gpupool.core.audit import AuditAction
from gpupool.core.job import Hold, Job, JobState
from gpupool.core.wire_shapes import JobWire, SteeredWire
from gpupool.service import PoolService, RequestRefused, steering
from gpupool.spec import SpecError
from gpupool.spec.changes import changes_from_wire

Wire = Callable[[Job, Caller], JobWire]


# What steering a job can be refused with besides every route's: not the job's owner or an
# admin, or only an admin may (403); no such job (404); not in its state (409).
REFUSED = refusals(403, 404, 409)


def _error(status: int, exc: RequestRefused) -> JSONResponse:
    return JSONResponse({"error": exc.code, "message": exc.message}, status_code=status)


def _refusal(exc: RequestRefused) -> JSONResponse:
    if isinstance(exc, steering.AdminOnly):
        return _error(403, exc)
    if isinstance(exc, steering.NotNow):
        return _error(409, exc)
    return _error(422, exc)


def add_steering_routes(api: APIRouter, service: PoolService, access: Access, wire: Wire) -> None:
    clock = access.clock
    authority = access.authority

    def target(job: Job) -> Target:
        return Target(owner=job.user, project=job.spec.project, job_id=job.id)

    def is_admin(caller: Caller, job: Job) -> bool:
        return authority.is_job_admin(caller.name, job.spec.project)

    def steered(done: steering.Steered, caller: Caller) -> JSONResponse:
        """The jobs changed and those left, encoded at once: a hold of a 1,000-task array
        answers 1,000 jobs, and FastAPI's `jsonable_encoder` walking them took ~300 ms of
        the hold's ~650 (docs/benchmarks.md, issue 35 goal 3). The wire is JSON's types
        already (core/wire_shapes.py), so the bytes are what FastAPI would send."""
        answer: SteeredWire = {
            "jobs": [wire(j, caller) for j in done.changed],
            "left": [{"id": i, "why": why} for i, why in done.left],
        }
        return JSONResponse(answer)

    @api.post("/v1/jobs/{job_id:job}/hold", response_model=None, responses=REFUSED)
    def hold(job_id: JobId, caller: CallerDep) -> SteeredWire | JSONResponse:
        job = service.get(job_id)
        access.require(caller, Action.HOLD_JOB, target(job))
        kind = Hold.USER if caller.name == job.user else Hold.ADMIN
        try:
            done = steering.hold(service, job, kind, caller.name, clock.now())
        except RequestRefused as exc:
            return _refusal(exc)
        if kind is Hold.ADMIN and done.changed:
            ids = ",".join(str(j.id) for j in done.changed)
            access.audit(
                caller, AuditAction.HOLD_JOB, f"job {job_id}", f"owner {job.user}, held {ids}"
            )
        return steered(done, caller)

    @api.post("/v1/jobs/{job_id:job}/release", response_model=None, responses=REFUSED)
    def release(job_id: JobId, caller: CallerDep) -> SteeredWire | JSONResponse:
        job = service.get(job_id)
        access.require(caller, Action.RELEASE_JOB, target(job))
        before = {j.id: j.spec.hold for j in steering.targets(service, job)}
        try:
            done = steering.release(service, job, is_admin(caller, job), caller.name, clock.now())
        except RequestRefused as exc:
            return _refusal(exc)
        admin_held = [j.id for j in done.changed if before.get(j.id) is Hold.ADMIN]
        if done.changed and (caller.name != job.user or admin_held):
            detail = f"owner {job.user}, released {','.join(str(j.id) for j in done.changed)}"
            if admin_held:
                detail += " (an admin's hold)"
            access.audit(caller, AuditAction.RELEASE_JOB, f"job {job_id}", detail)
        return steered(done, caller)

    @api.patch("/v1/jobs/{job_id:job}", response_model=None, responses=REFUSED)
    def update(
        job_id: JobId, caller: CallerDep, body: dict[str, Any] = Body(...)
    ) -> JobWire | JSONResponse:
        job = service.get(job_id)
        access.require(caller, Action.UPDATE_JOB, target(job))
        try:
            changes = changes_from_wire(body)
        except SpecError as exc:
            errors = [{"field": e.field, "message": e.message} for e in exc.errors]
            message = "; ".join(str(exc).splitlines())
            return JSONResponse(
                {"error": "invalid_change", "message": message, "errors": errors},
                status_code=422,
            )
        admin = is_admin(caller, job)
        try:
            done = steering.update(service, job, changes, admin, caller.name, clock.now())
        except RequestRefused as exc:
            return _refusal(exc)
        longer = (
            job.state is JobState.RUNNING
            and done.spec.time_limit_s is not None
            and (job.spec.time_limit_s is None or done.spec.time_limit_s > job.spec.time_limit_s)
        )
        if done.version != job.version and (caller.name != job.user or longer):
            change = done.events[-1].cause if done.events else "changed"
            access.audit(
                caller, AuditAction.UPDATE_JOB, f"job {job_id}", f"owner {job.user}; {change}"
            )
        return wire(done, caller)

    @api.post("/v1/jobs/{job_id:job}/signal", response_model=None, responses=REFUSED)
    def send_signal(
        job_id: JobId, caller: CallerDep, signal: str = Body(..., embed=True, max_length=32)
    ) -> JobWire | JSONResponse:
        job = service.get(job_id)
        access.require(caller, Action.SIGNAL_JOB, target(job))
        try:
            signum = steering.parse_signal(signal)
        except ValueError as exc:
            return JSONResponse(
                {
                    "error": "invalid_request",
                    "message": str(exc),
                    "errors": [{"field": "signal", "message": str(exc).split(": ", 1)[1]}],
                },
                status_code=422,
            )
        try:
            done = steering.send_signal(service, job, signum, caller.name, clock.now())
        except RequestRefused as exc:
            return _refusal(exc)
        if caller.name != job.user:
            name = steering.signal_name(signum)
            access.audit(
                caller, AuditAction.SIGNAL_JOB, f"job {job_id}", f"owner {job.user}, {name}"
            )
        return wire(done, caller)
