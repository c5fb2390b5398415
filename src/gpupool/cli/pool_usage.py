"""The utilization a running pool measured, for `gpupool plan cost --from-usage`: allocated
GPU-hours over capacity x window, from the pool's own job history (the arithmetic is
plan/usage.py; this asks the daemon)."""

from __future__ import annotations

import argparse
import math


def window_seconds(text: str | None) -> float:
    from gpupool.plan.quantity import PlanError

    units = {"m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
    raw = (text or "30d").strip().lower()
    scale = units.get(raw[-1:], None)
    number = raw[:-1] if scale else raw
    try:
        value = float(number) * (scale or 86400.0)  # a bare number is days
    except ValueError:
        raise PlanError(f"--window: not a duration: {text!r} (examples: 30d, 12h, 2w)") from None
    if not (value > 0 and math.isfinite(value)):
        raise PlanError(f"--window must be positive, got {text!r}")
    return value


def measured_utilization(
    args: argparse.Namespace, window_s: float
) -> tuple[float, dict[str, float | int | str]]:
    """The pool's own utilization over --window (plan.usage), and how it was measured."""
    import time

    from gpupool.client import Client
    from gpupool.plan.quantity import PlanError
    from gpupool.plan.usage import measure_usage

    client = Client(args.state_dir, url=args.url)
    jobs = client.jobs(include_finished=True)
    capacity = client.gpus().gpu_total
    if capacity == 0:
        raise PlanError("--from-usage: the pool reports no GPUs")
    if not jobs:
        raise PlanError("--from-usage: the pool has no job history yet; give --utilization")
    now = time.time()
    first_submit = min(j.submit_time for j in jobs)
    start = max(now - window_s, first_submit)
    # The GPUs each job held, as the pool counts them everywhere (a shared GPU: its fraction).
    intervals = [
        (j.start_time, j.end_time, float(j.gpu_count)) for j in jobs if j.start_time is not None
    ]
    usage = measure_usage(intervals, capacity, start, now)
    info: dict[str, float | int | str] = {
        "utilization_source": "measured (--from-usage)",
        "window": args.window or "30d",
        "window_start": start,
        "window_end": now,
        "window_days": (now - start) / 86400.0,
        "capacity_gpus": capacity,
        "allocated_gpu_hours": usage.allocated_gpu_hours,
        "capacity_gpu_hours": usage.capacity_gpu_hours,
        "jobs_counted": usage.jobs_counted,
        "measured_utilization": usage.utilization,
    }
    return min(usage.utilization, 1.0), info
