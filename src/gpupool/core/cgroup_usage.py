"""A job's CPU time and memory, as the cgroups of its runs counted them (docs/monitoring.md,
"CPU and memory").

Decision: what is kept with a job (the store's jobs row, migration 0012) is its latest
ended run's figures (CPU-seconds, peak and mean memory, the limit it ran under) and the
CPU-seconds of all its runs summed (a preempted or retried job ran more than once, and
every run's CPU time was spent): `show` reads the first, accounting charges the second
(service/accounting.py). A running job's figures are read from its cgroup when asked
(`live`): `show`, the dashboard's job page, `/metrics`. A figure nothing counted is None
(a backend's job, a daemon run with `--cgroups off`, a kernel without the file) and is
left out wherever it is shown, never shown as 0.

Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpupool.core.execution import ExitRecord, RunUsage


@dataclass(frozen=True)
class CgroupUsage:
    cpu_seconds: float | None  # its run's CPU time (user + system), a running one's so far
    memory_peak_bytes: int | None
    memory_mean_bytes: int | None  # None while it runs: its supervisor averages to the end
    memory_limit_bytes: int | None  # the limit it ran under (--mem), when one was enforced
    # Every run's CPU time summed, this one's included: what accounting charges.
    cpu_seconds_all_runs: float | None = None
    memory_current_bytes: int | None = None  # a running run's use now
    # True: the figures of the run under way, read now; False: its last ended run's.
    live: bool = False


def ended_run_usage(record: ExitRecord) -> CgroupUsage | None:
    """What a run that ended as `record` says used, with only itself in
    `cpu_seconds_all_runs` (the store adds its earlier runs'); None when nothing counted it."""
    run = record.usage
    if run is None:
        return None
    return CgroupUsage(
        cpu_seconds=run.cpu_seconds,
        memory_peak_bytes=run.memory_peak_bytes,
        memory_mean_bytes=run.memory_mean_bytes,
        memory_limit_bytes=record.memory_limit_bytes,
        cpu_seconds_all_runs=run.cpu_seconds,
    )


def live_usage(run: RunUsage, stored: CgroupUsage | None, limit_bytes: int | None) -> CgroupUsage:
    """A running run's figures now (`run`, read from its cgroup), with the CPU time of the
    job's earlier runs (`stored`, what the store keeps) added to its all-runs figure."""
    earlier = None if stored is None else stored.cpu_seconds_all_runs
    return CgroupUsage(
        cpu_seconds=run.cpu_seconds,
        memory_peak_bytes=run.memory_peak_bytes,
        memory_mean_bytes=run.memory_mean_bytes,
        memory_limit_bytes=limit_bytes,
        cpu_seconds_all_runs=summed(earlier, run.cpu_seconds),
        memory_current_bytes=run.memory_current_bytes,
        live=True,
    )


def summed(earlier: float | None, more: float | None) -> float | None:
    """Two CPU figures added, where either may be unknown (None when both are)."""
    if earlier is None:
        return more
    return earlier if more is None else earlier + more
