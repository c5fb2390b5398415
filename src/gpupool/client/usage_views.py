"""Accounting and GPU use as the API gives them (`/v1/usage`, `/v1/jobs/{id}/usage`),
typed: see client/views.py (imported by the Client's usage calls only)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpupool.client.wire_json import Fields, JsonObject, JsonValue


@dataclass(frozen=True, slots=True)
class GroupUsageView:
    """One user's, project's or GPU type's figures over the report's window."""

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

    @classmethod
    def read(cls, f: Fields) -> GroupUsageView:
        return cls(
            f.text("group"),
            f.whole("jobs"),
            f.number("allocated_gpu_hours"),
            f.number("used_gpu_hours"),
            f.number("sampled_gpu_hours"),
            f.opt_number("efficiency"),
            f.opt_number("mean_wait_s"),
            f.number("preempted_gpu_hours"),
            f.number("idle_reclaimed_gpu_hours"),
            f.number("energy_kwh"),
        )


@dataclass(frozen=True, slots=True)
class UsageReportView:
    by: str
    since: float
    until: float
    simulated: bool
    rows: tuple[GroupUsageView, ...]
    total: GroupUsageView
    wire: JsonObject = field(compare=False, repr=False)


def read_usage_report(answer: JsonValue) -> UsageReportView:
    f = Fields(answer)
    rows = tuple(GroupUsageView.read(Fields(v, w)) for w, v in f.items("rows"))
    return UsageReportView(
        f.text("by"),
        f.number("since"),
        f.number("until"),
        f.flag("simulated"),
        rows,
        GroupUsageView.read(f.obj("total")),
        f.data,
    )


@dataclass(frozen=True, slots=True)
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
    def read(cls, f: Fields) -> JobUsageView:
        return cls(
            f.whole("samples"),
            f.opt_number("mean_util_pct"),
            f.opt_number("p95_util_pct"),
            f.opt_whole("peak_memory_bytes"),
            f.number("energy_j"),
            f.number("used_gpu_hours"),
            f.number("sampled_gpu_hours"),
            f.opt_number("efficiency"),
            f.flag("simulated"),
        )


def read_job_usage(answer: JsonValue) -> JobUsageView | None:
    usage = Fields(answer).opt_obj("usage")
    return None if usage is None else JobUsageView.read(usage)
