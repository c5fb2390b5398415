"""The FastAPI application: HTTP in, PoolService calls, JSON out.

Handlers are plain `def`: FastAPI runs them in its thread pool, and the store is thread-safe.
"""

from __future__ import annotations

import asyncio
import json
import logging
from http import HTTPStatus
from typing import Any

from fastapi import APIRouter, Body, Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from fastapi.routing import iter_route_contexts
from starlette.exceptions import HTTPException
from starlette.routing import Match

from gpupool import __version__
from gpupool.api.backends import add_backend_routes
from gpupool.api.checks import (
    MAX_INT64,
    IdentifyAsGpupool,
    JobId,
    caused_by_nesting,
    field_errors,
    invalid_field,
    nested_too_deeply,
)
from gpupool.api.dashboard import add_dashboard
from gpupool.api.guards import SameOriginAnswers
from gpupool.api.identity import Access, CallerDep, Forbidden, Unauthenticated, caller_of
from gpupool.api.job_lines import JobLines, ListFormat, encode
from gpupool.api.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from gpupool.api.metrics import PoolMetrics
from gpupool.api.openapi import WireApp, WireRoute, answered_with, refusals
from gpupool.api.quick_submit import QuickSubmit
from gpupool.api.wire import gpus_to_wire, job_to_wire
from gpupool.core.access import Action, Caller, Target
from gpupool.core.audit import AuditAction
from gpupool.core.batch import job_ids_of
from gpupool.core.clock import Clock
from gpupool.core.job import Job, JobState
from gpupool.core.job_query import JobQuery, Order
from gpupool.core.space import StorageFull
from gpupool.core.units import format_size
from gpupool.core.wire_shapes import (
    JOB_LINES_MEDIA_TYPE,
    DaemonFacts,
    GpusWire,
    InfoWire,
    JobPageWire,
    JobWire,
    OkWire,
    WhoamiWire,
)
from gpupool.policy import Decision
from gpupool.service import PoolService, RequestRefused
from gpupool.service.backend_health import RecentHealth, submit_warnings
from gpupool.service.log_tail import MAX_TAIL_LINES
from gpupool.spec.rules import MAX_GPUS

logger = logging.getLogger("gpupool.api")  # not `log`: a route of that name


def _error(status: int, code: str, message: str, **extra: object) -> JSONResponse:
    return JSONResponse({"error": code, "message": message, **extra}, status_code=status)


def disk_full_message(full: StorageFull) -> str:
    if full.path is None:
        where = "the database server has no space left"
    else:
        free = "?" if full.available_bytes is None else format_size(full.available_bytes)
        where = f"{free} free in {full.path}, {format_size(full.needed_bytes)} needed"
    return f"the state disk is full: {where}; nothing was changed (free some space, retry)"


# Free text a client sends besides the spec (whose fields spec/rules.py limits).
MAX_USER = 256
MAX_TOKEN = 128

# A job id the store can hold (a 64-bit integer column): larger ones are refused by name.
MAX_RANK = MAX_GPUS - 1  # a distributed job has one rank per GPU


def create_app(
    service: PoolService,
    info: DaemonFacts,
    access: Access,
    metrics: PoolMetrics | None = None,
) -> FastAPI:
    """The app. Every /v1 route (and /metrics) is on a router that resolves the caller
    first (api/identity.py: 401 over TCP without a valid token or a loopback client's socket
    owner); each checks what the caller may do (core/access.py: 403 naming who may) before
    it acts. Outside it: /healthz and the dashboard's files (api/dashboard.py: no data).
    `metrics`: what `/metrics` serves (the daemon's observes its engine; default: the pool's
    gauges alone)."""
    clock: Clock = access.clock
    health = RecentHealth(service)  # the backends' health as last asked (api/backends.py)
    exported = metrics if metrics is not None else PoolMetrics(service)
    app: FastAPI = WireApp(title="gpupool", version=__version__, docs_url="/docs", redoc_url=None)
    app.state.access = access
    # Each route's answer is documented from the wire shape its handler returns (api/openapi.py).
    app.router.route_class = WireRoute
    api = APIRouter(dependencies=[Depends(caller_of)], route_class=WireRoute)

    from gpupool.api.batch import add_batch_routes
    from gpupool.api.benchmarks import add_benchmark_routes
    from gpupool.api.bulk_cancel import add_bulk_cancel_route
    from gpupool.api.drains import add_drain_routes
    from gpupool.api.health import add_health_routes
    from gpupool.api.projects import add_routes
    from gpupool.api.steering import add_steering_routes
    from gpupool.api.tokens import add_token_routes
    from gpupool.api.usage import add_usage_routes
    from gpupool.core.project import InvalidProject
    from gpupool.core.store_errors import (
        ProjectExists,
        ProjectInUse,
        UnknownJob,
        UnknownProject,
        UnknownToken,
    )
    from gpupool.spec import SpecError, spec_from_wire

    @app.exception_handler(Unauthenticated)
    def _unauthenticated(_: Request, exc: Unauthenticated) -> JSONResponse:
        answer = _error(401, "unauthenticated", exc.message)
        answer.headers["WWW-Authenticate"] = 'Bearer realm="gpupool"'
        return answer

    @app.exception_handler(Forbidden)
    def _forbidden(_: Request, exc: Forbidden) -> JSONResponse:
        return _error(403, "forbidden", exc.message)

    @app.exception_handler(RequestValidationError)
    def _invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = field_errors(exc.errors())
        message = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        return _error(422, "invalid_request", message or "invalid request", errors=errors)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> Response:
        # FastAPI's "error parsing the body" raised from the JSON decoder's RecursionError:
        # the nesting, named (issue 30, item 7). Any other (a body that is not JSON, a path
        # no route has, a method none of its routes answers): in the error shape too.
        if caused_by_nesting(exc):
            return nested_too_deeply()
        return http_refusal(request, exc)

    @app.exception_handler(RecursionError)
    def _nested(_: Request, exc: RecursionError) -> JSONResponse:
        # A route that followed a body's nesting too far (the decoder, a repr): never a 500.
        return nested_too_deeply()

    @app.exception_handler(UnknownJob)
    @app.exception_handler(UnknownProject)
    @app.exception_handler(UnknownToken)
    def _unknown(_: Request, exc: KeyError) -> JSONResponse:
        return _error(404, "not_found", str(exc))

    @app.exception_handler(InvalidProject)
    def _bad_project(_: Request, exc: InvalidProject) -> JSONResponse:
        errors = [{"field": f, "message": m} for f, m in exc.problems]
        return _error(400, "invalid_project", str(exc), errors=errors)

    @app.exception_handler(ProjectExists)
    def _exists(_: Request, exc: ProjectExists) -> JSONResponse:
        return _error(409, "project_exists", str(exc))

    @app.exception_handler(ProjectInUse)
    def _in_use(_: Request, exc: ProjectInUse) -> JSONResponse:
        return _error(409, "project_in_use", str(exc))

    @app.exception_handler(SpecError)
    def _bad_spec(_: Request, exc: SpecError) -> JSONResponse:
        errors = [{"field": e.field, "message": e.message} for e in exc.errors]
        return _error(400, "invalid_spec", str(exc), errors=errors)

    @app.exception_handler(RequestRefused)
    def _refused(_: Request, exc: RequestRefused) -> JSONResponse:
        return _error(422, exc.code, exc.message)

    from sqlalchemy.exc import DBAPIError

    @app.exception_handler(DBAPIError)
    @app.exception_handler(OSError)
    def _disk_full(_: Request, exc: Exception) -> JSONResponse:
        # A write refused for lack of space changed nothing: 507, with the figures.
        full = service.storage_full(exc, in_store=isinstance(exc, DBAPIError))
        if full is None:
            raise exc  # any other storage error stays a 500
        message = disk_full_message(full)
        logger.warning("refused a request: %s", message)
        return _error(
            507,
            "disk_full",
            message,
            path=full.path,
            available_bytes=full.available_bytes,
            needed_bytes=full.needed_bytes,
        )

    def wire(job: Job, caller: Caller, decision: Decision | None = None) -> JobWire:
        explain = service.explain(job.id, decision) if job.state is JobState.PENDING else None
        log_path = service.log_location(job)
        private = access.sees_private(caller, job)
        return job_to_wire(job, explain, log_path, service.gpu_count(job), private)

    job_lines = JobLines(service.explain, service.log_location, service.gpu_count)

    def job_target(job: Job) -> Target:
        return Target(owner=job.user, project=job.spec.project, job_id=job.id)

    @app.get("/healthz")
    def healthz() -> OkWire:
        return {"ok": True}

    @api.get("/v1/info")
    def get_info() -> InfoWire:
        passes, polls = service.pass_counts()
        authority = access.authority
        return {
            **info,
            "version": __version__,
            "passes": passes,
            "polls": polls,
            "mode": authority.mode.value,
            "daemon_user": authority.daemon_user,
        }

    @api.get("/v1/whoami")
    def whoami(caller: CallerDep) -> WhoamiWire:
        """Who the server takes the caller to be, and how it knows."""
        return {
            "user": caller.name,
            "via": caller.how(),
            "pool_admin": access.authority.is_pool_admin(caller.name),
            "mode": access.authority.mode.value,
        }

    async def submit_answer(caller: Caller, spec: dict[str, Any], token: str | None) -> JobWire:
        """Queue a job as the caller (a `user` in the body is ignored: the server names
        the submitter, api/identity.py). In the event loop: it awaits the group commit
        rather than holding a worker thread (service/group_commit.py)."""
        access.require(caller, Action.SUBMIT)
        # A project absent or null means "not given": the user's default project applies.
        given = spec.get("project") not in (None, "")
        job = await service.submit_async(
            spec_from_wire(spec), caller.name, clock.now(), token, project_given=given
        )
        answer = wire(job, caller)
        if job.spec.backend is not None:  # told when its backend cannot be reached now
            found = await asyncio.to_thread(submit_warnings, health, job.id, job.spec.backend)
            answer["warnings"] = found
        if job.array_id is not None:  # an array (--array): every task's id, in index order
            answer["array_tasks"] = await asyncio.to_thread(service.array_task_ids, job.array_id)
        return answer

    @api.post("/v1/jobs", status_code=201, responses=refusals(403, 404, 429))
    async def submit(
        caller: CallerDep,
        spec: dict[str, Any] = Body(...),
        token: str | None = Body(None, max_length=MAX_TOKEN),
    ) -> JobWire:
        """Queue a job as the caller. A well-formed submission is answered before it gets
        here, by the same code (api/quick_submit.py); this route answers the rest."""
        return await submit_answer(caller, spec, token)

    add_batch_routes(api, service, access, MAX_TOKEN)
    add_bulk_cancel_route(api, service, access)

    @api.get("/v1/jobs", responses=JOB_PAGE)
    def list_jobs(
        caller: CallerDep,
        all: bool = False,
        user: str | None = None,
        project: str | None = None,
        state: str | None = Query(None, description="states, comma-separated: PENDING,RUNNING"),
        limit: int | None = Query(None, ge=0, le=MAX_INT64),
        offset: int = Query(0, ge=0, le=MAX_INT64),
        order: Order = Order.ID,
        since: float | None = Query(None, ge=0, le=1e12, description="submitted since (epoch s)"),
        id: str | None = Query(None, description="only these jobs, comma-separated: 12,15"),
        array: int | None = Query(None, ge=1, le=MAX_INT64, description="only its tasks"),
        format: ListFormat = ListFormat.JSON,
    ) -> Response:
        """Jobs, active ones by default (`all`: finished ones too; `state`: those states),
        a page of them with `limit` and `offset`; `order` queue: running, then pending as
        the last pass ranked them; `id`: only the jobs named (at most 1,000; squeue -j),
        ids of no job left out; `array`: only the tasks of that array (`wait`, `show`).
        `total` and `counts` (by state) count every match. `format` lines: the same as
        application/x-ndjson, the figures on the first line and a job on each after it
        (`gpupool queue --json` writes them through)."""
        states = _states(state)
        if isinstance(states, JSONResponse):
            return states
        ids = _ids(id)
        if isinstance(ids, JSONResponse):
            return ids
        query = JobQuery(states, all, user, project, limit, offset, order, since, ids, array)
        found = service.list_jobs(query)
        decision = service.last_decision()
        rest = {
            "total": found.total,
            "counts": dict(found.counts),
            "offset": offset,
            "limit": limit,
        }
        # Each job's line is kept between requests (api/job_lines.py): FastAPI's encoder walks
        # every value in Python (seconds for a queue of 10,000 jobs), and encoding each job
        # again per request was ~60 us a job (docs/benchmarks.md, issue 35).
        sees = access.private_reader(caller)
        lines = [job_lines.line(j, sees(j), decision) for j in found.jobs]
        if format is ListFormat.LINES:
            body = "\n".join([encode(rest), *lines, ""])
            return Response(body, media_type=JOB_LINES_MEDIA_TYPE)
        body = f'{{"jobs":[{",".join(lines)}],{_dumps(rest)[1:]}'
        return Response(body, media_type="application/json")

    @api.get("/v1/jobs/{job_id:job}", responses=refusals(404))
    def show(job_id: JobId, caller: CallerDep) -> JobWire:
        """One job; a running one with what it has used so far (its cgroup, read now)."""
        return wire(service.with_live_usage(service.get(job_id)), caller)

    @api.post("/v1/jobs/{job_id:job}/cancel", responses=refusals(403, 404))
    def cancel(job_id: JobId, caller: CallerDep) -> JobWire:
        job = service.get(job_id)
        access.require(caller, Action.CANCEL_JOB, job_target(job))
        cancelled = service.cancel(job_id, caller.name, clock.now())
        if caller.name != job.user and not job.state.terminal:
            detail = f"owner {job.user}, was {job.state.value}, project {job.spec.project}"
            access.audit(caller, AuditAction.CANCEL_JOB, f"job {job_id}", detail)
        return wire(cancelled, caller)

    @api.get("/v1/jobs/{job_id:job}/log", responses={**LOG_BYTES, **refusals(403, 404)})
    def log(
        job_id: JobId,
        caller: CallerDep,
        offset: int = Query(0, ge=0, le=MAX_INT64),
        rank: int | None = Query(None, ge=0, le=MAX_RANK),  # one rank of a distributed job
        # From where its last `tail` lines start, not `offset` (logs --tail N).
        tail: int | None = Query(None, ge=0, le=MAX_TAIL_LINES),
        # Its stderr, kept apart when it was submitted with --separate-stderr.
        stderr: bool = False,
    ) -> Response:
        access.require(caller, Action.READ_JOB_PRIVATE, job_target(service.get(job_id)))
        chunk = service.read_log(job_id, offset, rank=rank, tail=tail, stderr=stderr)
        # Raw bytes with the cursor in headers: logs need not be valid UTF-8. X-Size, the
        # log's length, lets a reader start a tail near the end (the dashboard).
        headers = {"X-Offset": str(chunk.offset), "X-State": chunk.state.value}
        if chunk.size is not None:
            headers["X-Size"] = str(chunk.size)
        return Response(content=chunk.data, media_type="application/octet-stream", headers=headers)

    @api.get("/v1/gpus")
    def gpus() -> GpusWire:
        return gpus_to_wire(
            service.inventory,
            service.gpu_holders(),
            service.gpu_samples(),
            service.backend_nodes(),
            service.drained_by_key(),
        )

    @api.get("/metrics", response_class=PlainTextResponse, responses=METRICS_TEXT)
    def prometheus_metrics() -> Response:
        """The pool in Prometheus's text format (api/metrics.py). Like every route here:
        anyone on the Unix socket, an API token over TCP (Prometheus's `authorization`
        scrape setting). Queue-level figures only: what everyone may see."""
        return Response(exported.render(), media_type=METRICS_CONTENT_TYPE)

    add_routes(api, service, access)
    add_token_routes(api, access)
    add_usage_routes(api, service, clock)
    add_benchmark_routes(api, service.benchmarks, access)
    add_backend_routes(api, service, health)
    add_steering_routes(api, service, access, wire)
    add_drain_routes(api, service, access)
    add_health_routes(api, service, clock)

    @api.post("/v1/internal/wake")
    def wake() -> OkWire:
        service.wake()
        return {"ok": True}

    app.include_router(api)
    add_dashboard(app)  # `/`: the web dashboard's files, no token (api/dashboard.py)
    # The last added is the outermost: a plain submission is answered inside both headers.
    handlers = app.exception_handlers
    app.add_middleware(QuickSubmit, submit_answer, caller_of, handlers, MAX_TOKEN)
    app.add_middleware(IdentifyAsGpupool, version=__version__)
    app.add_middleware(SameOriginAnswers)
    return app


def _dumps(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"))


# What the routes that make their own Response answer (api/openapi.py).
LOG_BYTES = answered_with(
    media_type="application/octet-stream", schema={"type": "string", "format": "binary"}
)
# A page of jobs: one JSON object, or (`format=lines`) its figures and each job on a line.
JOB_PAGE = answered_with(JobPageWire)
JOB_PAGE[200]["content"][JOB_LINES_MEDIA_TYPE] = {
    "schema": {"type": "string", "description": "the page's figures, then a job's JSON per line"}
}
METRICS_TEXT = answered_with(media_type="text/plain", schema={"type": "string"})


def http_refusal(request: Request, exc: HTTPException) -> Response:
    """Starlette's and FastAPI's own refusals in the API's error shape (api/openapi.py
    documents no other): 404 for a path no route has, 405 for a method none of the path's
    routes answers (`Allow`: every method they do; Starlette names the first route's only),
    400 for a body that is not JSON, any other with its status's words."""
    path = request.url.path[:200]
    if exc.status_code == 404:
        return _error(404, "not_found", f"no such path: {path}")
    if exc.status_code == 405:
        allowed: set[str] = set()
        for route in iter_route_contexts(request.app.router.routes):
            if route.matches(request.scope)[0] is not Match.NONE:
                allowed.update(route.methods or ())
        answer = _error(
            405, "method_not_allowed", f"{request.method[:20]} is not a method of {path}"
        )
        answer.headers["Allow"] = ", ".join(sorted(allowed))
        return answer
    if exc.status_code == 400:
        message = f"body: not JSON ({str(exc.detail)[:200]})"
        return _error(
            400, "invalid_request", message, errors=[{"field": "body", "message": message}]
        )
    if exc.status_code < 400:  # no refusal: nothing to say
        return Response(status_code=exc.status_code, headers=exc.headers)
    words = HTTPStatus(exc.status_code).phrase
    code = words.lower().replace(" ", "_").replace("-", "_")
    answer = _error(exc.status_code, code, str(exc.detail)[:500] or words)
    answer.headers.update(exc.headers or {})
    return answer


def _ids(text: str | None) -> frozenset[int] | None | JSONResponse:
    """The job ids an `id` query names, or the 422 answer that says what is wrong."""
    if text is None:
        return None
    try:
        return frozenset(job_ids_of(text))
    except ValueError as exc:
        return invalid_field("id", f"id: {exc}")


def _states(text: str | None) -> frozenset[JobState] | None | JSONResponse:
    """The states a `state` query names (any case), or the 422 answer that says which is not."""
    if text is None:
        return None
    states = set()
    for word in filter(None, (w.strip().upper() for w in text.split(","))):
        try:
            states.add(JobState(word))
        except ValueError:
            names = ", ".join(s.value for s in JobState)
            message = f"state: no state {word}; the states are {names}"
            return invalid_field("state", message)
    return frozenset(states)
