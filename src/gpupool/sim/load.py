"""Offered load of a trace on a cluster, and rescaling a trace to a target load.

Scheduling policies only differ when jobs have to wait: at Philly's real VC sizes the load
is about 0.17, and every policy looks the same. So a replay either shrinks the cluster or
compresses the trace's inter-arrival times to a chosen load, and reports the load it used.

Definition (kept simple so a reader can check it by hand):
    load = GPU-seconds asked / (capacity GPUs x span)
GPU-seconds asked is the sum of duration_s x gpus over all jobs (a fractional job counts as
one whole GPU: an upper bound, as the GPU's memory size is not known here); span is the last
submit time minus the first. Jobs that run past the last submission still count in full,
so a short trace of long jobs can read above 1 while the cluster catches up afterwards.
"""

from __future__ import annotations

import math

from gpupool.sim.model import Trace, TraceJob


def gpu_seconds(trace: Trace) -> float:
    """Total work asked: sum of duration x GPUs."""
    return math.fsum(j.duration_s * j.gpus for j in trace.jobs)


def submit_span(trace: Trace) -> float:
    """Seconds from the first submission to the last."""
    if not trace.jobs:
        return 0.0
    return trace.jobs[-1].submit_s - trace.jobs[0].submit_s


def offered_load(trace: Trace, capacity_gpus: float) -> float:
    """GPU-seconds asked per second of the submission span, as a fraction of capacity.

    0.0 for a trace with no work; math.inf when all work arrives at one instant (span 0):
    no arrival rate can be spread over it.
    """
    if capacity_gpus <= 0:
        raise ValueError(f"capacity must be above 0 GPUs, got {capacity_gpus}")
    work = gpu_seconds(trace)
    if work == 0:
        return 0.0
    span = submit_span(trace)
    if span <= 0:
        return math.inf
    return work / (capacity_gpus * span)


def replayed_load(trace: Trace, capacity_gpus: float) -> float:
    """`offered_load` as a replay reports it: 0.0 where it is not defined (no capacity, or
    every job submitted at one instant), so that metrics.json stays plain JSON."""
    if capacity_gpus <= 0:
        return 0.0
    load = offered_load(trace, capacity_gpus)
    return 0.0 if math.isinf(load) else load


def scale_to_load(trace: Trace, capacity_gpus: float, target: float) -> Trace:
    """A copy of `trace` whose submit times are multiplied by current load / target.

    Durations, sizes and job order stay as they are; only inter-arrival gaps (and the gap
    from the origin to the first job) stretch or shrink, so the load becomes `target`.
    """
    if not (target > 0 and math.isfinite(target)):
        raise ValueError(f"target load must be a number above 0, got {target}")
    current = offered_load(trace, capacity_gpus)
    if current == 0:
        raise ValueError("cannot scale a trace with no work (no jobs, or all of zero size)")
    if math.isinf(current):
        raise ValueError("cannot scale a trace whose jobs are all submitted at the same time")
    factor = current / target
    jobs = tuple(
        TraceJob(
            j.id,
            j.submit_s * factor,
            j.duration_s,
            j.gpus,
            j.user,
            j.project,
            j.time_limit_s,
            j.gpu_memory_bytes,
        )  # fmt: skip
        for j in trace.jobs
    )
    return Trace(jobs=jobs, name=trace.name, skipped=dict(trace.skipped))
