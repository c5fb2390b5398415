"""/v1/health: each GPU's health (service/gpu_health.py, core/gpu_health.py; docs/operations.md).

- GET /v1/health: every GPU of the inventory, in (node, GPU) order, with its state ("ok",
  "degraded", "drained" or "failed": drained by gpupool-health for a GPU fault), its drain
  if any, and its last 10 events, newest first.

Everyone may read it, as everyone sees the GPU grid and the drains: it carries what NVML
said about the GPUs, never a job's command or output.
"""

from __future__ import annotations

from fastapi import APIRouter

from gpupool.api.wire import drain_to_wire
from gpupool.core.clock import Clock
from gpupool.core.gpu_health import HealthEvent
from gpupool.core.ops_shapes import GpuHealthWire, HealthEventWire, HealthWire
from gpupool.service import PoolService
from gpupool.service.gpu_health import GpuHealth


def health_event_to_wire(e: HealthEvent) -> HealthEventWire:
    return {
        "node": e.node,
        "gpu": e.gpu,
        "time": e.time,
        "kind": str(e.kind),
        "code": e.code,
        "detail": e.detail,
        "fault": str(e.fault),
    }


def gpu_health_to_wire(g: GpuHealth) -> GpuHealthWire:
    return {
        "node": g.node,
        "gpu": g.gpu,
        "state": str(g.state),
        "drained": drain_to_wire(g.drained),
        "events": [health_event_to_wire(e) for e in g.events],
    }


def health_to_wire(gpus: list[GpuHealth]) -> HealthWire:
    return {"gpus": [gpu_health_to_wire(g) for g in gpus]}


def add_health_routes(api: APIRouter, service: PoolService, clock: Clock) -> None:
    @api.get("/v1/health")
    def health() -> HealthWire:
        """Each GPU's health: its state, its drain, its last events (newest first)."""
        return health_to_wire(service.health(clock.now()))
