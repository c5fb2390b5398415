"""One replay's outcome boiled down to the numbers that compare policies.

Everything here is a pure function of a `SimResult`, so two policies replayed on one trace are
compared on identical definitions, and `metrics.json` can be recomputed from records alone.
The output is plain JSON data (floats, ints, strings, None, nested dicts): the report writes it
as is and tables and docs read it back without knowing any class.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from gpupool.sim.model import JobRecord, SimResult

# Runtimes shorter than this count as this long in slowdowns: a 2-second job that waited a
# minute would otherwise score a slowdown of 31 and drown out every real job in the average.
# 10 s is the bound the HPC literature uses (Feitelson's "bounded slowdown").
SLOWDOWN_FLOOR_S = 10.0

# Job-size buckets by GPUs asked: single-GPU, one node's worth, multi-node. Fractional jobs
# (less than a whole GPU) fall in "1".
SIZE_BUCKETS: tuple[tuple[str, int, float], ...] = (
    ("1", 0, 1),
    ("2-8", 2, 8),
    (">8", 9, math.inf),
)


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile: the smallest value with at least p% of `values` at or below it.

    Nearest-rank always returns an observed value (no interpolation), so a p99 over 100 jobs
    is the 99th slowest JCT, which a reader can find in the records. None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    # The epsilon keeps float noise (0.07 * 100 = 7.000000000000001) from skipping a rank.
    rank = math.ceil(p * len(ordered) / 100 - 1e-9)
    return float(ordered[min(max(rank, 1), len(ordered)) - 1])


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _jct(r: JobRecord) -> float:
    assert r.end_s is not None
    return r.end_s - r.submit_s


def slowdown(r: JobRecord) -> float:
    """JCT over runtime, runtime floored at SLOWDOWN_FLOOR_S (finished jobs only)."""
    return _jct(r) / max(r.duration_s, SLOWDOWN_FLOOR_S)


def bounded_slowdown(r: JobRecord) -> float:
    """max(1, slowdown): a job can not do better than running at once."""
    return max(1.0, slowdown(r))


def jain_index(values: Sequence[float]) -> float | None:
    """Jain's fairness index (sum x)^2 / (n * sum x^2): 1.0 when all equal, 1/n at worst."""
    if not values:
        return None
    squares = sum(x * x for x in values)
    if squares == 0:
        return 1.0  # everyone equally (perfectly) served
    return sum(values) ** 2 / (len(values) * squares)


def isolated_jct(r: JobRecord, capacity_gpus: int, n_projects: int) -> float:
    """Optimistic JCT on an equal 1/N slice of the cluster (see `compute_metrics`)."""
    fair_share = capacity_gpus / n_projects
    return max(r.duration_s, SLOWDOWN_FLOOR_S) * max(1.0, r.gpus / fair_share)


def _group_stats(finished: Sequence[JobRecord], jobs: int) -> dict[str, float | int | None]:
    jcts = [_jct(r) for r in finished]
    queues = [r.queue_s for r in finished]
    return {
        "jobs": jobs,
        "avg_jct_s": _mean(jcts),
        "p50_jct_s": percentile(jcts, 50),
        "p95_jct_s": percentile(jcts, 95),
        "p99_jct_s": percentile(jcts, 99),
        "avg_queue_s": _mean(queues),
        "p99_queue_s": percentile(queues, 99),
        "avg_bounded_slowdown": _mean([bounded_slowdown(r) for r in finished]),
        "preemptions": sum(r.preemptions for r in finished),
        "lost_gpu_hours": sum(r.lost_gpu_s for r in finished) / 3600.0,
    }


def size_bucket(gpus: float) -> str:
    for name, low, high in SIZE_BUCKETS:
        if low <= gpus <= high:
            return name
    return SIZE_BUCKETS[-1][0]


def _by_size(records: Iterable[JobRecord]) -> dict[str, dict[str, float | int | None]]:
    everyone: dict[str, list[JobRecord]] = {name: [] for name, _, _ in SIZE_BUCKETS}
    for r in records:
        everyone[size_bucket(r.gpus)].append(r)
    return {
        name: _group_stats([r for r in group if r.end_s is not None], len(group))
        for name, group in everyone.items()
    }


def _by_project(result: SimResult, total_gpu_s: float) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[JobRecord]] = defaultdict(list)
    for r in result.records:
        groups[r.project].append(r)
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(groups):
        group = groups[name]
        finished = [r for r in group if r.end_s is not None]
        gpu_s = sum(r.run_gpu_s for r in group)
        quota_share = None
        if result.quotas and result.capacity_gpus:
            quota_share = result.quotas.get(name, 0.0) / result.capacity_gpus
        out[name] = {
            "jobs": len(group),
            "avg_jct_s": _mean([_jct(r) for r in finished]),
            "avg_slowdown": _mean([slowdown(r) for r in finished]),
            "gpu_hours": gpu_s / 3600,
            "share": gpu_s / total_gpu_s if total_gpu_s > 0 else 0.0,
            "quota_share": quota_share,
        }
    return out


def _ftf(result: SimResult, finished: Sequence[JobRecord]) -> list[float]:
    n_projects = len({r.project for r in result.records})
    if not n_projects or result.capacity_gpus <= 0:
        return []
    rhos = []
    for r in finished:
        rhos.append(_jct(r) / isolated_jct(r, result.capacity_gpus, n_projects))
    return rhos


def compute_metrics(result: SimResult) -> dict[str, Any]:
    """The comparison numbers of one replay, as JSON-ready data.

    Definitions (docs/simulator.md quotes these):

    - JCT (job completion time) = end - submit, over finished jobs only. Percentiles
      (p50/p95/p99) are nearest-rank: the ceil(p/100 * n)-th smallest value, no interpolation.
    - queue = a job's total waiting time (before its first start and after requeues), over
      finished jobs: an unfinished job's wait is still growing and would bias the average down.
    - makespan = last end - first submit.
    - utilization = allocated GPU-seconds (sum of run_gpu_s over all records, which includes
      work lost to preemption) / (capacity_gpus x makespan). When jobs are unfinished the
      window runs to the last sample instead (the replay's stop), since they held GPUs past
      the last finish.
    - slowdown = JCT / max(duration, 10 s); bounded slowdown = max(1, slowdown). The 10 s
      floor stops seconds-long jobs dominating averages with huge ratios.
    - jain_fairness = Jain's index (sum x)^2 / (n * sum x^2) over the projects' average
      slowdowns (projects with a finished job); 1.0 means every project was slowed alike,
      1/n that one project got all the slowdown. 1.0 with one project.
    - finish-time fairness (Themis, NSDI'20): rho = JCT_shared / JCT_isolated, where
      JCT_isolated is the job's JCT on an equal 1/N slice of the cluster running only its
      own project's jobs, N = projects in the trace. Approximated as
      max(duration, 10 s) x max(1, gpus / (capacity / N)): a job that fits its slice runs at
      once at full speed, a bigger one proportionally slower. This ignores queueing behind
      its own project's jobs, so it is the optimistic lower bound of JCT_isolated and rho is
      an upper estimate. The 10 s floor is the slowdown's: without it a 1-second job that
      waited a minute scores rho = 61 and max_ftf only ever reports the shortest jobs. max_ftf = max rho; ftf_over_1_share = share of finished jobs with rho > 1
      (they did worse than on their own slice).
    - preemptions = total count; lost_gpu_hours = sum of lost_gpu_s / 3600.
    - jobs = records; unfinished = records without end_s (left out of JCT statistics).
    - by_size: buckets "1" (up to one GPU, fractional included), "2-8", ">8" GPUs, each with
      its jobs, average/p50/p95/p99 JCT, average/p99 queueing, bounded slowdown, and the
      preemptions and lost GPU-hours of its finished jobs.
    - by_project: share = the project's allocated GPU-seconds / all allocated GPU-seconds;
      quota_share = its quota / capacity (None when the cluster has no quotas).
    - idle_waiting_gpu_hours = GPU-hours idle while a job that could use them waited
      (policy/idle_waiting.py: min(free GPUs, GPUs the waiting jobs that fit in the free
      count ask for), over time); idle_waiting_share = those GPU-seconds / (capacity_gpus x
      the utilization's window); idle_waiting_by_cause: the GPU-hours of each cause
      (fragmentation, reservation, quota, other).
    - refused = trace jobs the cluster (or, for static, its partitions) could never run.

    Statistics over no finished jobs are None (there is no average of nothing); totals and
    counts are 0.
    """
    records = result.records
    finished = [r for r in records if r.end_s is not None]
    total_gpu_s = sum(r.run_gpu_s for r in records)

    makespan = 0.0
    if finished:
        ends = [r.end_s for r in finished if r.end_s is not None]
        makespan = max(ends) - min(r.submit_s for r in records)
    window = makespan
    if len(finished) < len(records) and result.samples and records:
        window = max(window, result.samples[-1].time_s - min(r.submit_s for r in records))
    utilization = total_gpu_s / (result.capacity_gpus * window) if window > 0 else 0.0
    if result.capacity_gpus <= 0:
        utilization = 0.0

    by_project = _by_project(result, total_gpu_s)
    project_slowdowns = [
        p["avg_slowdown"] for p in by_project.values() if p["avg_slowdown"] is not None
    ]
    rhos = _ftf(result, finished)
    idle_s = sum(result.idle_waiting_gpu_s.values())
    capacity_s = result.capacity_gpus * window

    return {
        "policy": result.policy,
        # jobs, JCT and queueing percentiles, slowdown: as for each size (_group_stats);
        # preemptions and lost work below count unfinished jobs too.
        **_group_stats(finished, len(records)),
        "unfinished": len(records) - len(finished),
        "makespan_s": makespan,
        "utilization": utilization,
        "jain_fairness": jain_index(project_slowdowns),
        "max_ftf": max(rhos) if rhos else None,
        "ftf_over_1_share": sum(1 for x in rhos if x > 1) / len(rhos) if rhos else None,
        "preemptions": sum(r.preemptions for r in records),
        "lost_gpu_hours": sum(r.lost_gpu_s for r in records) / 3600,
        "load": float(result.load),
        "wall_s": float(result.wall_s),
        "decide_calls": result.decide_calls,
        "by_size": _by_size(records),
        "by_project": by_project,
        "idle_waiting_gpu_hours": idle_s / 3600,
        "idle_waiting_share": idle_s / capacity_s if capacity_s > 0 else 0.0,
        "idle_waiting_by_cause": {
            cause: gpu_s / 3600 for cause, gpu_s in result.idle_waiting_gpu_s.items()
        },
        "refused": result.refused,
    }
