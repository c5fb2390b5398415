"""One `gpupool sim` run: a trace on a cluster (shared, or one per VC) under several named
profiles, each replay on its own process when there is more than one (replays are
independent and CPU-bound; a 2-core machine runs two at once).

With isolated clusters (`--isolated-vcs`, the Helios authors' setup) every VC's jobs replay
on that VC's own cluster and the per-VC results are merged into one result per profile:
records are concatenated, samples (taken on one grid anchored at the trace's time 0) are
added up, capacity is the sum of the VCs' GPUs. A job of a VC without a cluster of its own
(Philly has four small VCs with no size) cannot be replayed: `replayable` takes such jobs out
of the trace and counts them in `Trace.skipped` under `NO_CLUSTER`, and a plan refuses a
trace that still has any, so that no job is ever dropped without a count.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Protocol

from gpupool.policy.profiles import profile
from gpupool.policy.snapshot import PolicyConfig
from gpupool.sim.engine import SimOptions, replay
from gpupool.sim.load import replayed_load
from gpupool.sim.model import Sample, SimCluster, SimResult, Trace

# Every profile of a replay gets these: jobs wider than a node are spread over nodes (a
# cluster runs them; the trace has them).
SIM_BASE = PolicyConfig(spread_wide_jobs=True)

Progress = Callable[[str, int, int], None]  # (policy, jobs finished, jobs in all)

# The reason, in Trace.skipped, for the jobs of a VC without a cluster (isolated clusters).
NO_CLUSTER = "no cluster for its VC"


@dataclass(frozen=True)
class SimPlan:
    trace: Trace
    clusters: Mapping[str, SimCluster]  # one entry ("" for a shared cluster), or one per VC
    policies: tuple[str, ...]
    options: SimOptions = SimOptions()
    base: PolicyConfig = SIM_BASE

    def __post_init__(self) -> None:
        if "" in self.clusters:
            return
        lost = [j.project for j in self.trace.jobs if j.project not in self.clusters]
        if lost:
            jobs = "job" if len(lost) == 1 else "jobs"
            raise ValueError(
                f"{len(lost)} {jobs} of projects without a cluster: "
                f"{', '.join(sorted(set(lost)))} (sim.run.replayable takes them out, counted)"
            )


def replayable(trace: Trace, clusters: Mapping[str, SimCluster]) -> Trace:
    """`trace` without the jobs that no cluster replays (with one cluster per VC: the jobs of
    VCs that have none), counted in `skipped` under NO_CLUSTER; `trace` itself when all are."""
    if "" in clusters:
        return trace
    kept = tuple(j for j in trace.jobs if j.project in clusters)
    if len(kept) == len(trace.jobs):
        return trace
    skipped = dict(trace.skipped)
    skipped[NO_CLUSTER] = skipped.get(NO_CLUSTER, 0) + len(trace.jobs) - len(kept)
    return Trace(kept, trace.name, skipped)


def _trace_for(trace: Trace, vc: str) -> Trace:
    return Trace(tuple(j for j in trace.jobs if j.project == vc), f"{trace.name}:{vc}")


def replay_policy(plan: SimPlan, policy: str, progress: Progress | None = None) -> SimResult:
    """One profile over the plan's trace (all VCs of an isolated plan, one after another)."""
    config = profile(policy, plan.base)
    # One sample grid for every part, so that the parts add up.
    jobs = plan.trace.jobs
    span = (jobs[-1].submit_s - jobs[0].submit_s) if jobs else 0.0
    options = plan.options
    if options.sample_every_s is None:
        options = replace(options, sample_every_s=max(60.0, span / max(1, options.samples)))
    total = len(jobs)
    done_before = 0

    def report(done: int, _of: int) -> None:
        if progress is not None:
            progress(policy, done_before + done, total)

    parts: list[SimResult] = []
    for vc, cluster in plan.clusters.items():
        trace = plan.trace if vc == "" else _trace_for(plan.trace, vc)
        if not trace.jobs:
            continue
        parts.append(replay(trace, cluster, config, policy, options, report))
        done_before += len(trace.jobs)
    return merge(policy, parts, plan.trace, sum(c.gpus for c in plan.clusters.values()))


def merge(policy: str, parts: list[SimResult], trace: Trace, capacity: int) -> SimResult:
    if len(parts) == 1:
        return parts[0]
    records = [r for p in parts for r in p.records]
    by_time: dict[float, list[Sample]] = {}
    for p in parts:
        for s in p.samples:
            by_time.setdefault(s.time_s, []).append(s)
    samples = []
    for t in sorted(by_time):
        group = by_time[t]
        projects: dict[str, float] = {}
        for s in group:
            for name, gpus in s.gpus_by_project.items():
                projects[name] = projects.get(name, 0.0) + gpus
        queued = sum(s.queued_jobs for s in group)
        samples.append(Sample(t, queued, sum(s.busy_gpus for s in group), projects))
    quotas: dict[str, float] = {}
    idle: dict[str, float] = {}
    for p in parts:
        quotas.update(p.quotas)
        for cause, gpu_s in p.idle_waiting_gpu_s.items():
            idle[cause] = idle.get(cause, 0.0) + gpu_s
    return SimResult(
        policy=policy,
        records=records,
        samples=samples,
        capacity_gpus=capacity,
        load=replayed_load(trace, capacity),
        quotas=quotas,
        wall_s=sum(p.wall_s for p in parts),
        decide_calls=sum(p.decide_calls for p in parts),
        refused=sum(p.refused for p in parts),
        idle_waiting_gpu_s=idle,
    )


class _ProgressQueue(Protocol):
    """Where a worker process reports its progress (a manager's queue)."""

    def put(self, item: tuple[str, int, int], /) -> None: ...


def _worker(plan: SimPlan, policy: str, queue: _ProgressQueue) -> SimResult:
    def report(name: str, done: int, total: int) -> None:
        queue.put((name, done, total))

    return replay_policy(plan, policy, report)


def run_plan(
    plan: SimPlan, progress: Progress | None = None, workers: int | None = None
) -> dict[str, SimResult]:
    """Every profile of the plan; results in the plan's order."""
    for name in plan.policies:
        profile(name, plan.base)  # an unknown name fails here, before any work
    workers = workers or min(len(plan.policies), os.cpu_count() or 1)
    if workers <= 1 or len(plan.policies) == 1:
        return {name: replay_policy(plan, name, progress) for name in plan.policies}
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        queue = manager.Queue()
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures = {name: pool.submit(_worker, plan, name, queue) for name in plan.policies}
            while not all(f.done() for f in futures.values()):
                try:
                    name, done, total = queue.get(timeout=0.2)
                except Exception:  # queue.Empty from the manager's proxy
                    continue
                if progress is not None:
                    progress(name, done, total)
            while not queue.empty():
                name, done, total = queue.get()
                if progress is not None:
                    progress(name, done, total)
            return {name: futures[name].result() for name in plan.policies}
