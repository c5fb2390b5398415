"""`gpupool show`'s CPU / memory line: a job's CPU time and memory as its runs' cgroups
counted them (the API's `cgroup_usage`, core/cgroup_usage.py), in words made here, at the
edge. A figure nothing counted is left out; with none at all there is no line."""

from __future__ import annotations

from gpupool.client.views import CgroupUsageView

CPU_HOURS_FROM_S = 3600.0  # CPU time from an hour on reads as CPU-hours


def cpu_time_text(seconds: float) -> str:
    """'1.2 CPU-s', '2.50 CPU-h'."""
    if seconds >= CPU_HOURS_FROM_S:
        return f"{seconds / 3600:.2f} CPU-h"
    return f"{seconds:.1f} CPU-s"


def cpu_memory_text(usage: CgroupUsageView | None, ended: bool) -> str | None:
    """'1.2 CPU-s; memory peak 64MiB, mean 12MiB (limit 64MiB)' for a job that ended;
    '3.0 CPU-s so far; memory now 30MiB, peak 41MiB (limit 200MiB)' for one running (`live`);
    'last run: ...' for a job not ended whose figures are its last ended run's (requeued).
    None when nothing was counted. `ended`: the job is in a final state."""
    from gpupool.core.units import format_size

    if usage is None:
        return None
    parts = []
    if usage.cpu_seconds is not None:
        cpu = cpu_time_text(usage.cpu_seconds) + (" so far" if usage.live else "")
        every = usage.cpu_seconds_all_runs
        if every is not None and every > usage.cpu_seconds + 0.05:  # it ran more than once
            cpu += f" ({cpu_time_text(every)} over all its runs)"
        parts.append(cpu)
    memory = [
        f"{what} {format_size(value)}"
        for what, value in (
            ("now", usage.memory_current_bytes),
            ("peak", usage.memory_peak_bytes),
            ("mean", usage.memory_mean_bytes),
        )
        if value is not None
    ]
    if memory:
        limit = usage.memory_limit_bytes
        parts.append(
            "memory " + ", ".join(memory) + (f" (limit {format_size(limit)})" if limit else "")
        )
    if not parts:
        return None
    text = "; ".join(parts)
    return text if usage.live or ended else f"last run: {text}"
