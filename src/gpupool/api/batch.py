"""POST /v1/jobs/batch: many jobs in one submission (service/batch_submit.py has the contract).

Body: `{"specs": [spec, ...], "token": T, "base_env": {...}, "common": {...}}` (each spec
as `POST /v1/jobs` takes one; T, as there, makes it safe to send again; `base_env`, the
environment submitted from, for each spec that has none: a sweep's jobs share it, ~2 KB
that then travels once; `common`, the fields and `env` variables every spec shares, sent
once by the SDK (sdk/batch_shared.py): a spec's own fields and variables win).
Answer 201: `{"ids": [...]}`, in the specs' order. A bad spec is a 400 naming it
(`specs[2].gpus: ...`), a job that could never run a 422 (`specs[2]: ...`): nothing is
queued then. The submit rate limit counts a batch's jobs
(api/ratelimit.py). The answer holds ids only: a view of each job would cost more than
storing it (GET /v1/jobs?... for their states).
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from fastapi import APIRouter, Body, Request
from fastapi.responses import JSONResponse

from gpupool.api.checks import invalid_field
from gpupool.api.identity import Access, CallerDep
from gpupool.api.openapi import refusals
from gpupool.api.ratelimit import SubmitCharge, batch_message, rate_message
from gpupool.core.access import Action
from gpupool.core.batch import MAX_BATCH
from gpupool.core.wire_shapes import BatchIdsWire
from gpupool.service import PoolService
from gpupool.service.batch_submit import BatchItem, submit_batch
from gpupool.spec import FieldError, SpecError, spec_from_wire


def with_common(spec: dict[str, Any], common: dict[str, Any]) -> dict[str, Any]:
    """`spec` with what the batch's specs share put back: its own fields win, and its own
    `env` variables go over the shared ones."""
    merged = {**common, **spec}
    shared_env, own_env = common.get("env"), spec.get("env")
    if isinstance(shared_env, dict) and (own_env is None or isinstance(own_env, dict)):
        merged["env"] = {**shared_env, **(own_env or {})}
    return merged


def batch_items(
    specs: list[Any],
    base_env: dict[str, str] | None = None,
    common: dict[str, Any] | None = None,
) -> list[BatchItem]:
    """Each wire spec read, with the batch's `common` fields and `base_env` where it has
    none of its own; or SpecError naming every bad field as `specs[i].field`."""
    items: list[BatchItem] = []
    errors: list[FieldError] = []
    if common is not None and "env" in common and not isinstance(common["env"], dict):
        raise SpecError([FieldError("common.env", "an object of NAME: value variables")])
    for index, spec in enumerate(specs):
        if not isinstance(spec, dict):
            errors.append(FieldError(f"specs[{index}]", "a job spec is an object"))
            continue
        if common:
            spec = with_common(spec, common)
        if base_env is not None and spec.get("base_env") is None:
            spec = {**spec, "base_env": base_env}
        try:
            items.append(BatchItem(spec_from_wire(spec), spec.get("project") not in (None, "")))
        except SpecError as exc:
            errors.extend(
                FieldError(f"specs[{index}].{e.field}" if e.field else f"specs[{index}]",
                           e.message)
                for e in exc.errors
            )  # fmt: skip
    if errors:
        raise SpecError(errors)
    return items


# Besides every route's: may not submit (403); a project or job named that is not there
# (404); over the submit rate (429).
REFUSED = refusals(403, 404, 429)


def add_batch_routes(api: APIRouter, service: PoolService, access: Access, max_token: int) -> None:
    @api.post("/v1/jobs/batch", status_code=201, response_model=None, responses=REFUSED)
    async def submit_jobs(
        request: Request,
        caller: CallerDep,
        specs: list[Any] = Body(..., max_length=MAX_BATCH),
        token: str | None = Body(None, max_length=max_token),
        base_env: dict[str, str] | None = Body(None),
        common: dict[str, Any] | None = Body(None),
    ) -> BatchIdsWire | JSONResponse:
        """Queue every job of `specs` as the caller, or none. `base_env`: the environment
        submitted from, for each spec without one (the SDK sends the one its jobs share
        once, not once per job); `common`: the fields and `env` variables every spec
        shares, sent once (a spec's own win)."""
        access.require(caller, Action.SUBMIT)
        if not specs:
            return invalid_field("specs", "specs: at least one job spec")
        items = batch_items(specs, base_env, common)
        charge = getattr(request.state, "submit_charge", None)
        if isinstance(charge, SubmitCharge):
            wait = charge.rest(len(items))  # the middleware took the first token
            if wait > 0:  # never (inf): no Retry-After, as no retry of this batch can pass
                limit, never = charge.buckets.limit, math.isinf(wait)
                return JSONResponse(
                    {
                        "error": "rate_limited",
                        "message": batch_message(limit, charge.who, len(items))
                        if never
                        else rate_message(limit, charge.who, wait),
                    },
                    status_code=429,
                    headers={} if never else {"Retry-After": str(max(1, math.ceil(wait)))},
                )
        now = access.clock.now()
        jobs = await asyncio.to_thread(submit_batch, service, items, caller.name, now, token)
        return {"ids": [job.id for job in jobs]}
