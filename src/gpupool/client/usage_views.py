"""Accounting and GPU use as the API gives them (`/v1/usage`, `/v1/jobs/{id}/usage`),
typed: see client/views.py (imported by the Client's usage calls only)."""

from __future__ import annotations

from gpupool.client.wire_json import JsonObject, JsonValue, conform, json_of
from gpupool.core.values import record, unlisted
from gpupool.core.wire_shapes import (
    GroupUsageWire,
    JobUsageAnswerWire,
    JobUsageWire,
    UsageReportWire,
)


@record
class GroupUsageView:
    """One user's, project's, GPU type's or backend's figures over the report's window."""

    group: str
    jobs: int
    allocated_gpu_hours: float
    used_gpu_hours: float
    sampled_gpu_hours: float
    efficiency: float | None  # used over sampled, 0-1; None: nothing sampled
    mean_wait_s: float | None  # None: no job started in the window
    preempted_gpu_hours: float
    idle_reclaimed_gpu_hours: float
    energy_kwh: float
    cpu_hours: float | None  # None: not counted (no job's cgroup, or an older daemon)
    # Of allocated_gpu_hours, those on backends' GPUs, which the pool does not sample (0 from
    # an older daemon, which did not tell them apart).
    backend_gpu_hours: float = 0.0
    # False: all its allocated GPU-hours were on backends, so used_gpu_hours (0) measures
    # nothing and is shown as unknown; True from an older daemon.
    used_gpu_hours_measured: bool = True
    # Of backend_gpu_hours, those whose engine measured their use (0 from an older daemon).
    backend_measured_gpu_hours: float = 0.0

    @classmethod
    def read(cls, w: GroupUsageWire) -> GroupUsageView:
        return cls(
            w["group"],
            w["jobs"],
            w["allocated_gpu_hours"],
            w["used_gpu_hours"],
            w["sampled_gpu_hours"],
            w["efficiency"],
            w["mean_wait_s"],
            w["preempted_gpu_hours"],
            w["idle_reclaimed_gpu_hours"],
            w["energy_kwh"],
            w.get("cpu_hours"),
            w.get("backend_gpu_hours", 0.0),
            w.get("used_gpu_hours_measured", True),
            w.get("backend_measured_gpu_hours", 0.0),
        )


@record
class UsageReportView:
    by: str
    since: float
    until: float
    simulated: bool
    rows: tuple[GroupUsageView, ...]
    total: GroupUsageView
    # The pool's GPU-hours idle while a job that could use them waited, by cause; None: an
    # older daemon that does not count them.
    idle_waiting_gpu_hours: dict[str, float] | None
    wire: JsonObject = unlisted()


def read_usage_report(answer: JsonValue) -> UsageReportView:
    w = conform(UsageReportWire, answer)
    rows = tuple(GroupUsageView.read(r) for r in w["rows"])
    total = GroupUsageView.read(w["total"])
    idle = w.get("idle_waiting_gpu_hours")
    return UsageReportView(
        w["by"], w["since"], w["until"], w["simulated"], rows, total, idle, json_of(w)
    )


@record
class JobUsageView:
    """A job's GPU use so far (mean and p95 utilization, peak memory, energy)."""

    samples: int
    mean_util_pct: float | None
    p95_util_pct: float | None
    peak_memory_bytes: int | None
    energy_j: float
    used_gpu_hours: float
    sampled_gpu_hours: float
    efficiency: float | None
    simulated: bool

    @classmethod
    def read(cls, w: JobUsageWire) -> JobUsageView:
        return cls(
            w["samples"],
            w["mean_util_pct"],
            w["p95_util_pct"],
            w["peak_memory_bytes"],
            w["energy_j"],
            w["used_gpu_hours"],
            w["sampled_gpu_hours"],
            w["efficiency"],
            w["simulated"],
        )


def read_job_usage(answer: JsonValue) -> JobUsageView | None:
    usage = conform(JobUsageAnswerWire, answer)["usage"]
    return None if usage is None else JobUsageView.read(usage)
