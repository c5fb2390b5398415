"""The API's answers about running the machines (docs/operations.md): drained GPUs
(`/v1/drains`) and GPU health (`/v1/health`), defined as core/wire_shapes.py defines every
other answer, with its rules (kept apart so each module stays one responsibility's size).
"""

# No `from __future__ import annotations`: a shape's annotations must be objects at run time.
from gpupool.core.wire_types import TypedDict


class DrainWire(TypedDict):
    """A drained GPU (core/drain.py): GET /v1/drains, and each GPU's `drained`."""

    node: str
    gpu: int
    reason: str
    by: str
    since: float


class DrainsWire(TypedDict):
    """GET /v1/drains."""

    drains: list[DrainWire]


class DrainedWire(TypedDict):
    """POST /v1/drains: the GPUs drained, the jobs requeued (`now`)."""

    drained: list[DrainWire]
    requeued: list[int]


class ResumedWire(TypedDict):
    """POST /v1/drains/resume: the drains that were there."""

    resumed: list[DrainWire]


class HealthEventWire(TypedDict):
    """One thing NVML reported on a GPU (core/gpu_health.py's HealthEvent)."""

    node: str
    gpu: int
    time: float
    kind: str  # HealthKind's value: "xid", "ecc_uncorrected", "lost", "throttle", ...
    code: int | None  # the XID; None for the other kinds
    detail: str  # "XID 79: GPU has fallen off the bus"
    fault: str  # "gpu", "job" or "none" (Fault's value)


class GpuHealthWire(TypedDict):
    """A GPU's health (service/gpu_health.py): "ok", "degraded", "drained" or "failed"."""

    node: str
    gpu: int
    state: str
    drained: DrainWire | None
    events: list[HealthEventWire]  # its last 10, newest first


class HealthWire(TypedDict):
    """GET /v1/health: every GPU of the inventory, in (node, GPU) order."""

    gpus: list[GpuHealthWire]
