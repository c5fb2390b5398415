"""/v1/usage (accounting), /v1/gpus/history (each GPU's series) and /v1/jobs/{id}/usage (a
job's GPU use): read from the samples the daemon keeps (service/accounting.py).

Everyone may read them, as everyone sees the queue and the GPU grid (and Slurm's `sreport`
shows every account's usage unless PrivateData says otherwise): they carry figures, never a
command, an environment or a log.
"""

from __future__ import annotations

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from gpupool.api.checks import JobId, invalid_field
from gpupool.api.openapi import refusals
from gpupool.core.clock import Clock
from gpupool.core.gpu_usage import JobUsageSummary, RolledSample
from gpupool.core.units import parse_duration
from gpupool.core.wire_shapes import (
    GpuSeriesWire,
    GroupUsageWire,
    HistoryWire,
    JobUsageAnswerWire,
    JobUsageWire,
    UsageReportWire,
)
from gpupool.service import PoolService
from gpupool.service.accounting import GroupBy, GroupUsage, History, UsageReport

MAX_SPAN_S = 366 * 86400.0  # the hourly series is kept a year


def add_usage_routes(api: APIRouter, service: PoolService, clock: Clock) -> None:
    accounting = service.accounting

    @api.get("/v1/usage", response_model=None)
    def usage(
        by: GroupBy = GroupBy.USER,
        since: str = Query("30d", max_length=32, description="a duration back from now: 30d"),
    ) -> UsageReportWire | JSONResponse:
        """Per user, project, GPU type or backend (`local`: the pool's own machine) over the
        window: jobs, GPU-hours allocated, used (utilization-weighted, measured on the pool's
        own GPUs, and on a backend's where its engine measures them: `backend_gpu_hours` of
        the allocated were on backends, `backend_measured_gpu_hours` of those measured by
        their engine, and `used_gpu_hours_measured` is false where nothing was), efficiency,
        mean wait, lost to
        preemption, idle reclaimed, and the CPU-hours the jobs' cgroups counted; for the
        pool, the GPU-hours idle while a job that could use them waited, by cause."""
        span = _span(since)
        if isinstance(span, JSONResponse):
            return span
        now = clock.now()
        return report_to_wire(accounting().report(by, now - span, now))

    @api.get("/v1/gpus/history", response_model=None)
    def history(
        since: str = Query("24h", max_length=32, description="a duration back from now: 24h"),
    ) -> HistoryWire | JSONResponse:
        """Each GPU's utilization and memory over the window, at the finest resolution that
        gives at most 1,500 points per GPU (`period_s`: 0 full rate, 60, 3600)."""
        span = _span(since)
        if isinstance(span, JSONResponse):
            return span
        now, books = clock.now(), accounting()
        return history_to_wire(books.history(now - span, now), books.simulated)

    @api.get("/v1/jobs/{job_id:job}/usage", response_model=None, responses=refusals(404))
    def job_usage(job_id: JobId) -> JobUsageAnswerWire:
        service.get(job_id)  # 404 for a job that does not exist
        return {"job": job_id, "usage": summary_to_wire(accounting().job_usage(job_id))}


def _span(text: str) -> float | JSONResponse:
    try:
        span = parse_duration(text)
    except ValueError as exc:
        return invalid_field("since", f"since: {exc}")
    if not 0 < span <= MAX_SPAN_S:
        return invalid_field("since", f"since: {text!r} must be more than 0 and at most 366 days")
    return span


def row_to_wire(row: GroupUsage) -> GroupUsageWire:
    return {
        "group": row.group,
        "jobs": row.jobs,
        "allocated_gpu_hours": row.allocated_gpu_h,
        "used_gpu_hours": row.used_gpu_h,
        "sampled_gpu_hours": row.sampled_gpu_h,
        "efficiency": row.efficiency,
        "mean_wait_s": row.mean_wait_s,
        "preempted_gpu_hours": row.preempted_gpu_h,
        "idle_reclaimed_gpu_hours": row.idle_reclaimed_gpu_h,
        "energy_kwh": row.energy_kwh,
        "cpu_hours": row.cpu_h,
        "backend_gpu_hours": row.backend_gpu_h,
        "backend_measured_gpu_hours": row.backend_measured_gpu_h,
        "used_gpu_hours_measured": row.used_measured,
    }


def report_to_wire(report: UsageReport) -> UsageReportWire:
    return {
        "by": report.by.value,
        "since": report.since,
        "until": report.until,
        "simulated": report.simulated,
        "rows": [row_to_wire(r) for r in report.rows],
        "total": row_to_wire(report.total),
        "idle_waiting_gpu_hours": dict(report.idle_waiting_gpu_h),
    }


def history_to_wire(history: History, simulated: bool) -> HistoryWire:
    """{"since", "until", "period_s", "simulated", "gpus": [{"node", "index",
    "memory_total_bytes", "points": [[time, util %, memory used bytes], ...]}]}; a value a
    GPU did not report is null."""
    series: dict[tuple[str, int], list[RolledSample]] = {}
    for point in history.points:
        series.setdefault((point.node, point.index), []).append(point)
    gpus: list[GpuSeriesWire] = [
        {
            "node": node,
            "index": index,
            "memory_total_bytes": max(p.memory_total_bytes for p in points),
            "points": [[p.time, p.util_pct, p.memory_used_bytes] for p in points],
        }
        for (node, index), points in sorted(series.items())
    ]
    simulated = simulated or any(p.simulated for p in history.points)
    return {
        "since": history.since,
        "until": history.until,
        "period_s": history.period_s,
        "simulated": simulated,
        "gpus": gpus,
    }


def summary_to_wire(summary: JobUsageSummary | None) -> JobUsageWire | None:
    if summary is None:
        return None
    return {
        "samples": summary.samples,
        "mean_util_pct": summary.mean_util_pct,
        "p95_util_pct": summary.p95_util_pct,
        "peak_memory_bytes": summary.peak_memory_bytes,
        "energy_j": summary.energy_j,
        "used_gpu_hours": summary.used_gpu_s / 3600.0,
        "sampled_gpu_hours": summary.sampled_gpu_s / 3600.0,
        "efficiency": summary.efficiency,
        "simulated": summary.simulated,
    }
