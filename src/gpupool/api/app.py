"""The FastAPI application: HTTP in, PoolService calls, JSON out.

Handlers are plain `def`: FastAPI runs them in its thread pool, and the store is thread-safe.
"""

from __future__ import annotations

from typing import Any

from fastapi import Body, FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response

from gpupool import __version__
from gpupool.api.wire import gpus_to_wire, job_to_wire
from gpupool.core.clock import Clock, SystemClock
from gpupool.core.job import Job
from gpupool.engine import PoolService, RequestRefused


def _error(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": code, "message": message, **extra}, status_code=status)


def create_app(service: PoolService, info: dict[str, Any], clock: Clock | None = None) -> FastAPI:
    clock = clock or SystemClock()
    app = FastAPI(title="gpupool", version=__version__, docs_url="/docs", redoc_url=None)

    from gpupool.spec import SpecError, spec_from_wire
    from gpupool.store import UnknownJob

    @app.exception_handler(UnknownJob)
    def _unknown(_: Request, exc: UnknownJob) -> JSONResponse:
        return _error(404, "not_found", str(exc))

    @app.exception_handler(SpecError)
    def _bad_spec(_: Request, exc: SpecError) -> JSONResponse:
        errors = [{"field": e.field, "message": e.message} for e in exc.errors]
        return _error(400, "invalid_spec", str(exc), errors=errors)

    @app.exception_handler(RequestRefused)
    def _refused(_: Request, exc: RequestRefused) -> JSONResponse:
        return _error(422, exc.code, exc.message)

    def wire(job: Job) -> dict[str, Any]:
        return job_to_wire(job, service.why(job.id), str(service.executor.log_path(job.id)))

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        return {"ok": True}

    @app.get("/v1/info")
    def get_info() -> dict[str, Any]:
        return {**info, "version": __version__, "passes": service.engine.passes}

    @app.post("/v1/jobs", status_code=201)
    def submit(
        spec: dict[str, Any] = Body(...),
        user: str = Body(...),
        token: str | None = Body(None),
    ) -> dict[str, Any]:
        job = service.submit(spec_from_wire(spec), user, clock.now(), token)
        return wire(job)

    @app.get("/v1/jobs")
    def list_jobs(all: bool = False, user: str | None = None) -> dict[str, Any]:
        return {"jobs": [wire(j) for j in service.list(include_finished=all, user=user)]}

    @app.get("/v1/jobs/{job_id}")
    def show(job_id: int) -> dict[str, Any]:
        return wire(service.get(job_id))

    @app.post("/v1/jobs/{job_id}/cancel")
    def cancel(job_id: int, user: str = Body("", embed=True)) -> dict[str, Any]:
        return wire(service.cancel(job_id, user, clock.now()))

    @app.get("/v1/jobs/{job_id}/log")
    def log(job_id: int, offset: int = Query(0, ge=0)) -> Response:
        chunk = service.read_log(job_id, offset)
        # Raw bytes with the cursor in headers: logs need not be valid UTF-8.
        return Response(
            content=chunk.data,
            media_type="application/octet-stream",
            headers={"X-Offset": str(chunk.offset), "X-State": chunk.state.value},
        )

    @app.get("/v1/gpus")
    def gpus() -> dict[str, Any]:
        return gpus_to_wire(service.inventory, service.gpu_holders())

    @app.post("/v1/internal/wake")
    def wake() -> dict[str, Any]:
        service.engine.wake()
        return {"ok": True}

    return app
