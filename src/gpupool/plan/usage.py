"""The utilization a running pool measured: allocated GPU-hours over capacity GPU-hours.

    utilization = sum over jobs of gpus x |[start, end] intersected with the window|
                  / (capacity GPUs x window length)

This is the "u" that `plan cost --from-usage` puts into the on-prem vs cloud comparison in place
of a guess: the fraction of the pool's GPU-hours that jobs held (allocated, not necessarily busy:
a job holding a GPU is one the cloud would also bill for).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# (start, end, gpus): epoch seconds; end None while the job still runs (it counts up to the
# window's end, "now"); gpus may be fractional (a job on half a GPU counts 0.5).
Interval = tuple[float, float | None, float]


@dataclass(frozen=True)
class MeasuredUsage:
    window_start: float
    window_end: float
    capacity_gpus: float
    allocated_gpu_hours: float
    capacity_gpu_hours: float
    utilization: float
    jobs_counted: int  # intervals that overlap the window


def allocated_gpu_seconds(
    intervals: Iterable[Interval], window_start: float, window_end: float
) -> tuple[float, int]:
    """GPU-seconds held inside [window_start, window_end], and how many intervals overlap it."""
    total = 0.0
    counted = 0
    for start, end, gpus in intervals:
        stop = window_end if end is None else end
        overlap = min(stop, window_end) - max(start, window_start)
        if overlap > 0 and gpus > 0:
            total += gpus * overlap
            counted += 1
    return total, counted


def measure_usage(
    intervals: Iterable[Interval], capacity_gpus: float, window_start: float, window_end: float
) -> MeasuredUsage:
    """Allocated over capacity GPU-hours in the window (module docstring), with the parts."""
    if window_end <= window_start:
        raise ValueError(f"empty window: {window_start} .. {window_end}")
    if capacity_gpus <= 0:
        raise ValueError(f"capacity must be positive, got {capacity_gpus}")
    held, counted = allocated_gpu_seconds(intervals, window_start, window_end)
    capacity = capacity_gpus * (window_end - window_start)
    return MeasuredUsage(
        window_start=window_start,
        window_end=window_end,
        capacity_gpus=capacity_gpus,
        allocated_gpu_hours=held / 3600.0,
        capacity_gpu_hours=capacity / 3600.0,
        utilization=held / capacity,
        jobs_counted=counted,
    )


def measured_utilization(
    intervals: Iterable[Interval], capacity_gpus: float, window_start: float, window_end: float
) -> float:
    """Allocated GPU-hours over capacity (GPUs x window): intervals clipped to the window, running
    jobs (end None) counted up to window_end."""
    return measure_usage(intervals, capacity_gpus, window_start, window_end).utilization
