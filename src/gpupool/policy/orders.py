"""Queue orders other than the daemon's multifactor priority: the baselines a trace replay
compares it with (`PolicyConfig.order`, named by `policy/profiles.py`).

Each order runs through the same `decide()` as the default one, so a comparison between
profiles measures the order and nothing else. Every order keeps the priority class as a hard
tier (a higher `priority` first), as the default does; inside a class:

- **fifo**: submit time, then id.
- **sjf**: `runtime_hint_s`, shortest first (an oracle: the simulator knows each job's run
  time; jobs without a hint last), then submit time, id.
- **srtf**: what is left of the hint, `runtime_hint_s - attained_s`, then submit time, id.
- **las**: Tiresias' discretized two-dimensional LAS (Gu et al., NSDI'19): a job's attained
  GPU-service (seconds run, all attempts, times its GPUs) puts it in a level, the number of
  `las_thresholds_gpu_s` it has reached; lower level first, FIFO inside a level. Levels, not
  raw service, so a job is not preempted every time a fresher one overtakes it by a second.
- **drf**: max-min fairness across projects by progressive filling: repeatedly the next job
  (FIFO inside its project) of the project with the smallest share, a share being the GPUs
  its running jobs hold per `Project.weight`, grown by each job taken. With GPUs the only
  resource counted, this is Dominant Resource Fairness (Ghodsi et al., NSDI'11) with the GPU
  as every project's dominant resource.

`sort_key` also ranks running jobs against pending ones (for `priority_preemption`): a running
job's service includes its current run, and at an equal order value it comes before any
pending job, ordered by its start time. That tie-break is what keeps preemption from
swapping two equal jobs back and forth: only a job that ranks strictly ahead may take GPUs.
Weights for drf come from `Snapshot.projects` even with `use_quotas` off: they say how the
order shares, not what a project is guaranteed.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Callable

from gpupool.core.job import Resources
from gpupool.policy.reasons import Standing
from gpupool.policy.snapshot import PendingJob, PolicyConfig, RunningJob, Snapshot

ORDERS = ("priority", "fifo", "sjf", "srtf", "las", "drf")  # what PolicyConfig.order may be
KEYED = ("fifo", "sjf", "srtf", "las")  # the orders `sort_key` serves (preemption's)

Key = tuple[float, ...]
Job = PendingJob | RunningJob


def check_order(order: str) -> None:
    if order not in ORDERS:
        raise ValueError(f"unknown queue order {order!r}: known orders are {', '.join(ORDERS)}")


def gpu_amount(res: Resources) -> float:
    """GPUs a job counts for in budgets and shares: its fraction, else its GPU count."""
    return res.gpu_fraction if res.gpu_fraction is not None else float(res.gpus)


def attained(job: Job, now: float) -> float:
    """Seconds run over all attempts, the current one included for a running job."""
    if isinstance(job, RunningJob):
        return job.attained_s + max(0.0, now - job.start_time)
    return job.attained_s


def level(job: Job, now: float, thresholds: tuple[float, ...]) -> int:
    """las: how many thresholds (sorted) the job's attained GPU-seconds have reached."""
    return bisect_right(thresholds, attained(job, now) * gpu_amount(job.resources))


def key_function(order: str, now: float, config: PolicyConfig) -> Callable[[Job], Key]:
    """The sort key of `order` (one of KEYED) at `now`: smaller is earlier (module docstring).
    Built once per pass, so sorting calls one small closure per job."""
    check_order(order)
    if order not in KEYED:
        raise ValueError(f"order {order!r} has no per-job key: only {', '.join(KEYED)} do")
    thresholds = tuple(sorted(config.las_thresholds_gpu_s))

    def tail(job: Job) -> Key:
        # Running before pending at an equal order value, then start or submit time, id.
        if isinstance(job, RunningJob):
            return (0, job.start_time, job.id)
        return (1, job.submit_time, job.id)

    if order == "fifo":
        return lambda job: (-job.priority, *tail(job))
    if order == "sjf":

        def sjf(job: Job) -> Key:
            hint = job.runtime_hint_s
            return (-job.priority, hint is None, hint or 0.0, *tail(job))

        return sjf
    if order == "srtf":

        def srtf(job: Job) -> Key:
            hint = job.runtime_hint_s
            if hint is None:
                return (-job.priority, 1, 0.0, *tail(job))
            return (-job.priority, 0, max(0.0, hint - attained(job, now)), *tail(job))

        return srtf
    return lambda job: (-job.priority, level(job, now, thresholds), *tail(job))


def sort_key(job: Job, now: float, config: PolicyConfig) -> Key:
    """One job's key under `config.order` (fifo, sjf, srtf or las); use `key_function` to
    key many jobs."""
    return key_function(config.order, now, config)(job)


def standing(job: Job, now: float, config: PolicyConfig) -> Standing:
    """What puts the job where it is under `config.order`, as data (preemption causes)."""
    order = config.order
    running = isinstance(job, RunningJob)
    if order in ("sjf", "srtf"):
        hint = job.runtime_hint_s
        if hint is None:
            return Standing(order, job.priority, None, running=running)
        figure = hint if order == "sjf" else max(0.0, hint - attained(job, now))
        return Standing(order, job.priority, figure, running=running)
    if order == "las":
        lvl = level(job, now, tuple(sorted(config.las_thresholds_gpu_s)))
        served = attained(job, now) * gpu_amount(job.resources)
        return Standing(order, job.priority, served, level=lvl, running=running)
    at = job.start_time if isinstance(job, RunningJob) else job.submit_time
    return Standing(order, job.priority, at, running=running)


def ordered(snapshot: Snapshot, now: float) -> list[PendingJob]:
    """The pending jobs in `snapshot.config.order` (not "priority": that is ordering.rank's)."""
    config = snapshot.config
    check_order(config.order)
    if config.order == "priority":
        raise ValueError("the priority order is ordering.rank's own")
    if config.order == "drf":
        return _drf(snapshot)
    return sorted(snapshot.pending, key=key_function(config.order, now, config))


def _drf(snapshot: Snapshot) -> list[PendingJob]:
    """Progressive filling, class by class; shares carry over from one class to the next, as
    if the jobs of the higher class had their GPUs already. O(n log n + n log projects)."""
    weight = {name: p.weight for name, p in snapshot.projects.items()}
    share: dict[str, float] = {}
    for r in snapshot.running:  # a job spread over nodes: one row per node, its GPUs there
        w = weight.get(r.project, 1.0)
        share[r.project] = share.get(r.project, 0.0) + gpu_amount(r.resources) / w
    jobs = sorted(snapshot.pending, key=lambda j: (-j.priority, j.submit_time, j.id))
    out: list[PendingJob] = []
    i = 0
    while i < len(jobs):
        klass = jobs[i].priority
        queues: dict[str, list[PendingJob]] = {}
        while i < len(jobs) and jobs[i].priority == klass:
            queues.setdefault(jobs[i].project, []).append(jobs[i])
            i += 1
        heap = [(share.get(name, 0.0), name) for name in queues]
        heapq.heapify(heap)
        taken = dict.fromkeys(queues, 0)
        while heap:
            _, name = heapq.heappop(heap)
            q, k = queues[name], taken[name]
            job = q[k]
            out.append(job)
            share[name] = share.get(name, 0.0) + gpu_amount(job.resources) / weight.get(name, 1.0)
            taken[name] = k + 1
            if k + 1 < len(q):
                heapq.heappush(heap, (share[name], name))
    return out
