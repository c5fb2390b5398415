"""`GET /v1/backends` (`gpupool backends`): the local pool and each backend with its health
(service/backend_health.py gathers them; daemon/backends.py opens them)."""

from __future__ import annotations

from fastapi import APIRouter

from gpupool.core.wire_shapes import BackendsWire
from gpupool.service import PoolService
from gpupool.service.backend_health import RecentHealth, backends_to_wire


def add_backend_routes(api: APIRouter, service: PoolService, recent: RecentHealth) -> None:
    @api.get("/v1/backends")
    def backends() -> BackendsWire:
        """The pool's backends with their health (a sync route: run in a worker thread,
        never on the engine's; each health call has its own deadline). Everyone may list
        them: names, kinds and a summary, no job's command or environment."""
        return backends_to_wire(service, recent)
