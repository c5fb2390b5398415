"""/v1/drains: the drained GPUs; drain and resume (pool admins only: core/access.py
`MANAGE_GPUS`; docs/operations.md).

- GET /v1/drains: every drained GPU, with the admin's reason, who and since when.
- POST /v1/drains `{"node": N|null, "gpu": G|null, "reason": "...", "now": false}`: drain
  node N's GPUs (or its GPU G; no node: the pool's one node); `now`: requeue the jobs running
  there (SIGTERM, their grace period) instead of letting them end. Answers the drains as kept
  and the jobs requeued.
- POST /v1/drains/resume `{"node": N|null, "gpu": G|null}`: resume them; the drains that were
  there.

A request naming no GPU of the pool is 422 (`invalid_drain`, naming what there is). Every
drain and resume is in the audit log.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body

from gpupool.api.identity import Access, CallerDep
from gpupool.api.openapi import refusals
from gpupool.api.wire import drain_to_wire
from gpupool.core.access import Action
from gpupool.core.audit import AuditAction
from gpupool.core.drain import DrainedGpu
from gpupool.core.ops_shapes import DrainedWire, DrainsWire, DrainWire, ResumedWire
from gpupool.service import PoolService
from gpupool.service.drains import InvalidDrain, where

_FIELDS = {"node", "gpu", "reason", "now", "user"}  # `user`: what older clients send


def _wire(drains: list[DrainedGpu] | tuple[DrainedGpu, ...]) -> list[DrainWire]:
    out = []
    for d in drains:
        w = drain_to_wire(d)
        assert w is not None
        out.append(w)
    return out


def _target(body: dict[str, Any]) -> tuple[str | None, int | None]:
    """The node and GPU a request names, each checked for its type (InvalidDrain)."""
    unknown = sorted(set(body) - _FIELDS)
    if unknown:
        raise InvalidDrain(f"unknown field {unknown[0]!r} (known: node, gpu, reason, now)")
    node, gpu = body.get("node"), body.get("gpu")
    if node is not None and (not isinstance(node, str) or not node):
        raise InvalidDrain(f"node must be a node's name, got {node!r}")
    if gpu is not None and (not isinstance(gpu, int) or isinstance(gpu, bool) or gpu < 0):
        raise InvalidDrain(f"gpu must be a GPU's index (0, 1, ...), got {gpu!r}")
    return node, gpu


def add_drain_routes(api: APIRouter, service: PoolService, access: Access) -> None:
    @api.get("/v1/drains")
    def list_drains() -> DrainsWire:
        return {"drains": _wire(service.drains())}

    @api.post("/v1/drains", responses=refusals(403))
    def drain(caller: CallerDep, body: dict[str, Any] = Body(...)) -> DrainedWire:
        access.require(caller, Action.MANAGE_GPUS)
        node, gpu = _target(body)
        reason, now = body.get("reason", ""), body.get("now", False)
        if not isinstance(reason, str):
            raise InvalidDrain(f"reason must be text, got {reason!r}")
        if not isinstance(now, bool):
            raise InvalidDrain(f"now must be true or false, got {now!r}")
        done = service.drain(caller.name, node, gpu, access.clock.now(), reason, now)
        detail = reason + (
            f"; requeued jobs {', '.join(map(str, done.requeued))}" if done.requeued else ""
        )
        access.audit(caller, AuditAction.DRAIN_GPUS, where([d.key for d in done.gpus]), detail)
        return {"drained": _wire(done.gpus), "requeued": list(done.requeued)}

    @api.post("/v1/drains/resume", responses=refusals(403))
    def resume(caller: CallerDep, body: dict[str, Any] = Body(...)) -> ResumedWire:
        access.require(caller, Action.MANAGE_GPUS)
        node, gpu = _target({k: v for k, v in body.items() if k not in ("reason", "now")})
        gone = service.resume(node, gpu)
        if gone:
            access.audit(caller, AuditAction.RESUME_GPUS, where([d.key for d in gone]))
        return {"resumed": _wire(gone)}
