"""The replay: a discrete-event loop on a fake clock around the daemon's own `policy.decide`.

Events are job arrivals (the trace's submit times) and job ends. At every distinct event
time the loop applies what happened (ends first, then arrivals), builds a `Snapshot` as the
daemon's engine would (pending and running jobs made by the daemon's own builder,
policy/inputs.py; the cluster's nodes and projects; decayed usage) and calls `decide`; it
starts what the decision starts. Preemptions (quota reclaim, the preemptive baselines) take
effect at once: the victim goes back to the queue, and `decide` is called again at the same
time so that the freed GPUs are used. The daemon waits for the victim to exit (its grace
period); a replay has no processes, so it charges the cost of a preemption to the victim
instead (below).

What a job needs to finish, per attempt: its remaining work, plus `restart_overhead_s` on
every attempt after a preemption. Without `checkpointing` the progress of a preempted attempt
is lost (the next one starts the work over); with it, only the restart overhead is lost. Both
are counted in `JobRecord.lost_gpu_s`.

Runtime estimates (what backfill reads as the job's time limit for the attempt): `oracle` is
exactly what the attempt needs; `noisy` that times a factor from 1 to 5, drawn per job from
`random.Random(seed)`; `none` the trace's own limit if it has one, else the profile's default
limit. A replay never kills a job at its estimate (the daemon would at a real --time); the
policy treats a job past its estimate as ending now, as the daemon's does.

Jobs that could never run on the cluster (e.g. wider than it) are refused before the replay,
as `gpupool submit` refuses them, and counted in `SimResult.refused`.
"""

from __future__ import annotations

import heapq
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from gpupool.core.job import JobSpec, Resources, gpu_count
from gpupool.core.project import Project
from gpupool.policy.decide import decide
from gpupool.policy.dedicated import booked_project, dedicated_projects
from gpupool.policy.feasibility import check_satisfiable
from gpupool.policy.inputs import pending_job, placed, running_pieces
from gpupool.policy.node_facts import NodeFacts
from gpupool.policy.quota_feasibility import check_quota
from gpupool.policy.running_view import RunningView
from gpupool.policy.snapshot import (
    Decision,
    PendingJob,
    PolicyConfig,
    RunningJob,
    Snapshot,
    Start,
    Usage,
)
from gpupool.sim.domains import backend_passes, runs_there
from gpupool.sim.drain_windows import SimDrain, drain_edges
from gpupool.sim.idle_meter import IdleMeter
from gpupool.sim.load import replayed_load
from gpupool.sim.model import JobRecord, Sample, SimCluster, SimResult, Trace, TraceJob
from gpupool.sim.usage import UsageTracker

ESTIMATES = ("oracle", "noisy", "none")
_MAX_PASSES_PER_EVENT = 64  # re-decides after preemptions at one instant; a guard, never hit
_NO_USAGE = Usage()


@dataclass(frozen=True)
class SimOptions:
    estimates: str = "noisy"
    seed: int = 1
    restart_overhead_s: float = 60.0
    checkpointing: bool = False
    # Scheduling passes at most once per interval of simulated time: at the first grid point
    # after an event, and on the grid while jobs wait. 0: a pass right at every event time.
    interval_s: float = 0.0
    samples: int = 2000  # about this many time-series samples over the replay
    sample_every_s: float | None = None  # None: the span over `samples`, at least 60 s
    # Leave out passes that provably do nothing (Replay._nothing_can_start). Same results;
    # off only to check that claim (tests/unit/test_sim_engine.py).
    skip_idle_passes: bool = True
    # Compare the running view the replay keeps (policy/running_view.py) with a fresh count
    # before every pass: slow, for tests.
    check_running_view: bool = False
    drains: tuple[SimDrain, ...] = ()  # maintenance windows replayed (`gpupool sim --drain`)


class _Job:
    """One trace job's state during the replay."""

    __slots__ = (
        "trace", "record", "spec", "work_left", "saved", "attained", "attempt",
        "started", "overhead", "noise", "pieces", "waiting_since",
    )  # fmt: skip

    def __init__(self, trace: TraceJob, spec: JobSpec, noise: float) -> None:
        self.trace = trace
        self.record = JobRecord(
            trace.id, trace.submit_s, trace.duration_s, trace.gpus, trace.project, trace.user
        )
        self.spec = spec  # what the daemon would store for it (`trace_spec`)
        self.work_left = trace.duration_s  # seconds of work still to do
        self.saved = 0.0  # progress kept across preemptions (with checkpointing)
        self.attained = 0.0  # seconds run in attempts that ended by preemption
        self.attempt = 0
        self.started = 0.0
        self.overhead = 0.0  # restart overhead of the current or next attempt
        self.noise = noise
        self.pieces: tuple[RunningJob, ...] = ()
        self.waiting_since = trace.submit_s

    @property
    def need(self) -> float:
        """Seconds the next (or current) attempt runs: restart overhead plus work left."""
        return self.overhead + self.work_left


class Replay:
    """One policy over one trace on one cluster (`run` returns the result)."""

    def __init__(
        self,
        trace: Trace,
        cluster: SimCluster,
        config: PolicyConfig,
        policy_name: str,
        options: SimOptions = SimOptions(),
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        if options.estimates not in ESTIMATES:
            raise ValueError(
                f"estimates must be one of {', '.join(ESTIMATES)}: {options.estimates!r}"
            )
        self.trace, self.cluster, self.config, self.name = trace, cluster, config, policy_name
        self.options, self.progress = options, progress
        self.drained: frozenset[tuple[str, int]] = frozenset()  # now (`SimOptions.drains`)
        self.projects: Mapping[str, Project] = cluster.projects if config.use_quotas else {}
        if (
            not config.lend_idle
        ):  # static: jobs booked to dedicated partitions (policy/dedicated.py)
            self.projects = dedicated_projects(self.projects, cluster.gpus)
        self.usage = (
            UsageTracker(config.fairshare_half_life_s) if config.order == "priority" else None
        )
        rng = random.Random(options.seed)
        self.jobs: dict[int, _Job] = {}
        self.refused: list[TraceJob] = []
        verdicts: dict[tuple[int, int | None], bool] = {}
        # Jobs asking the same share one spec (frozen): a few hundred, not one per job.
        specs: dict[tuple[int, int | None, str, float | None], JobSpec] = {}
        for tj in trace.jobs:
            noise = rng.uniform(1.0, 5.0)  # drawn for every job, so seeds mean the same jobs
            asked = (tj.gpus, tj.gpu_memory_bytes, tj.project, tj.time_limit_s)
            spec = specs.get(asked)
            if spec is None:
                booked = (
                    tj.project if config.lend_idle else booked_project(tj.project, self.projects)
                )
                spec = specs[asked] = trace_spec(tj, booked)
            if tj.backend is not None:  # decided by its backend's pass (sim/domains.py)
                if runs_there(tj, cluster):
                    self.jobs[tj.id] = _Job(tj, spec, noise)
                else:
                    self.refused.append(tj)
                continue
            key = (tj.gpus, tj.gpu_memory_bytes)
            if key not in verdicts:
                res = spec.resources
                verdicts[key] = (
                    check_satisfiable(res, cluster.nodes, spread=config.spread_wide_jobs) is None
                )
            if verdicts[key] and (config.lend_idle or self._quota_allows(spec)):
                self.jobs[tj.id] = _Job(tj, spec, noise)
            else:
                self.refused.append(tj)
        self.pending: dict[int, PendingJob] = {}
        self.running: dict[int, _Job] = {}
        # The running pieces and what they leave free, kept as jobs start and stop, so a
        # pass need not count them (policy/running_view.py).
        self.view = RunningView(cluster.nodes, config.default_time_limit_s)
        self.ends: list[tuple[float, int, int]] = []  # (time, job id, attempt)
        # What the skip test (_nothing_can_start) reads, kept up to date as jobs come and go.
        self.free_on = {n.name: len(n.gpus) for n in cluster.nodes}
        self.widest = NodeFacts.of(cluster.nodes).most_gpus
        self.pending_sizes: Counter[int] = Counter()  # GPU count -> pending jobs asking it
        self.pending_projects: Counter[str] = Counter()
        self.pending_fractional = 0
        self.quota_in_force = any(
            p.quota > 0 or p.limit is not None for p in self.projects.values()
        )
        self.skipped_passes = 0
        # The pool's own preemptions may act where nothing fits on a node
        # (policy/class_preemption.py): classes only if the trace has several, where it pays
        # only over jobs that checkpoint.
        config = self.config
        classes = {job.spec.priority for job in self.jobs.values()}
        self.may_preempt_anyway = (config.preempt_lower_classes and len(classes) > 1) or (
            config.preempt_where_it_pays and options.checkpointing
        )
        self.busy = 0.0  # on the pool's own machine
        self.busy_backends = 0.0
        self.with_backends = bool(cluster.backends)
        # Each job's backend (None: the pool's own machine), read by every backend pass.
        self.backend_of = (
            {i: job.trace.backend for i, job in self.jobs.items()} if self.with_backends else {}
        )
        self.by_project: dict[str, float] = {}
        self.samples: list[Sample] = []
        self.decide_calls = 0
        self.finished = 0
        self.idle = IdleMeter()  # GPUs idle while jobs that could use them waited
        self.largest_gpu_memory = NodeFacts.of(cluster.nodes).largest_gpu_memory

    def _quota_allows(self, spec: JobSpec) -> bool:
        """Whether the projects' quotas and limits let this job start some day: what
        `gpupool submit` refuses with QuotaNeverFits is refused here (the static profile's
        jobs of a project without a quota, when the quotas name every GPU)."""
        res = spec.resources
        refusal = check_quota(
            res, spec.is_preemptible, spec.priority, spec.project, self.projects, self.cluster.nodes
        )
        return refusal is None

    # --- the loop ---------------------------------------------------------------------

    def run(self) -> SimResult:
        began = time.perf_counter()
        arrivals = [self.jobs[tj.id] for tj in self.trace.jobs if tj.id in self.jobs]
        total = len(arrivals)
        opts = self.options
        interval = opts.interval_s
        every = opts.sample_every_s
        if every is None:
            span = (arrivals[-1].trace.submit_s - arrivals[0].trace.submit_s) if arrivals else 0.0
            every = max(60.0, span / max(1, opts.samples))
        # Samples on a grid anchored at the trace's time 0, so replays of parts of one trace
        # (--isolated-vcs) sample at the same instants and add up.
        next_sample = math.ceil(arrivals[0].trace.submit_s / every) * every if arrivals else 0.0
        report_every = max(1, total // 200)
        inf = math.inf
        i, ends, next_pass = 0, self.ends, inf
        t0 = arrivals[0].trace.submit_s if arrivals else 0.0
        edges = drain_edges(self.cluster, opts.drains, t0)
        while True:
            now = min(
                arrivals[i].trace.submit_s if i < total else inf,
                ends[0][0] if ends else inf,
                next_pass,
                edges[0][0] if edges and (i < total or ends or self.pending) else inf,
            )
            if now == inf:
                break
            self.idle.account(now)
            while next_sample <= now:
                self._sample(next_sample)
                next_sample += every
            before, happened = self.finished, False
            while ends and ends[0][0] <= now:
                _, job_id, attempt = heapq.heappop(ends)
                job = self.jobs[job_id]
                if job.attempt == attempt and job_id in self.running:
                    self._finish(job, now)
                    happened = True
            while i < total and arrivals[i].trace.submit_s <= now:
                self._queue(arrivals[i], now)
                i += 1
                happened = True
            while edges and edges[0][0] <= now:
                _, sign, keys = heapq.heappop(edges)
                self.drained = (self.drained | keys) if sign > 0 else (self.drained - keys)
                happened = True
            if happened and next_pass == inf:
                next_pass = now if interval <= 0 else math.ceil(now / interval) * interval
            if now >= next_pass:
                self._schedule(now)
                # The daemon also runs a pass every little while when jobs wait; a replay with
                # an interval does the same on its grid (age and fair share move with time).
                next_pass = now + interval if interval > 0 and self.pending else inf
            self.idle.refresh(self.cluster.gpus - self.busy, self.free_on)
            if (
                self.progress is not None
                and self.finished // report_every != before // report_every
            ):
                self.progress(self.finished, total)
        if self.progress is not None:
            self.progress(self.finished, total)
        return SimResult(
            policy=self.name,
            records=[j.record for j in self.jobs.values()],
            samples=self.samples,
            capacity_gpus=self.cluster.all_gpus,
            load=replayed_load(Trace(tuple(j.trace for j in arrivals)), self.cluster.all_gpus),
            quotas={name: p.quota for name, p in self.projects.items()},
            wall_s=time.perf_counter() - began,
            decide_calls=self.decide_calls,
            refused=len(self.refused),
            idle_waiting_gpu_s=self.idle.by_cause(),
        )

    def _nothing_can_start(self) -> bool:
        """Whether a pass now would provably start and preempt nothing, so it can be left
        out with the same outcome: no waiting job fits in what is free by GPU count alone
        (a necessary condition for a start), no profile preemption, no defragmentation or
        class preemption that could act, and no waiting job's project under its quota. A replay spends most
        of its time in passes; on a full cluster most of them would do nothing."""
        if self.config.preempt_for_order or self.pending_fractional or self.may_preempt_anyway:
            return False
        most_free = max(self.free_on.values(), default=0)
        total_free = self.cluster.gpus - self.busy
        if self.config.defragment and min(self.pending_sizes, default=total_free + 1) <= total_free:
            return False  # a defragmentation may clear a node (policy/defrag.py)
        for gpus in self.pending_sizes:
            if gpus <= most_free or (gpus > self.widest and gpus <= total_free):
                return False
        if self.quota_in_force:
            smallest = min(self.pending_sizes, default=0)
            for name in self.pending_projects:
                p = self.projects.get(name)
                if p is not None and self.by_project.get(name, 0.0) + smallest <= p.quota:
                    return False
        return True

    def _schedule(self, now: float) -> None:
        for _ in range(_MAX_PASSES_PER_EVENT):
            if not self.pending:
                return
            if (
                self.options.skip_idle_passes
                and not self.with_backends
                and self._nothing_can_start()
            ):
                self.skipped_passes += 1
                return
            usage = _NO_USAGE if self.usage is None else self.usage.usage(now)
            pending = tuple(self.pending.values())
            if self.with_backends:
                pending = tuple(p for p in pending if self.jobs[p.id].trace.backend is None)
            snapshot = Snapshot(
                self.cluster.nodes,
                pending,
                self.view.running(),
                config=self.config,
                usage=usage,
                projects=self.projects,
                running_view=self.view,
                drained=self.drained,
            )
            decisions = [decide(snapshot, now)]
            if self.options.check_running_view:
                self._check_view(snapshot, decisions[0], now)
            self.decide_calls += 1
            self.idle.passed(decisions[0].pending)
            if self.with_backends:
                decisions += self._backend_passes(usage, now)
            for decision in decisions:
                for p in decision.preemptions:
                    victim = self.jobs.get(p.job_id)
                    if victim is not None and p.job_id in self.running:
                        self._preempt(victim, now)
                for start in decision.starts:
                    self._start(self.jobs[start.job_id], start, now)
            if not any(d.preemptions for d in decisions):
                return

    def _backend_passes(self, usage: Usage, now: float) -> list[Decision]:
        running = sorted(
            (piece for job in self.running.values() if job.trace.backend for piece in job.pieces),
            key=lambda r: r.id,
        )
        made = backend_passes(
            self.cluster, self.projects, self.config, self.pending.values(), running,
            self.backend_of, usage, now,
        )  # fmt: skip
        self.decide_calls += len(made)
        return made

    def _check_view(self, snapshot: Snapshot, decision: Decision, now: float) -> None:
        """The running view agrees with a fresh count, the pass left it as it was, and a
        pass that counts afresh decides the same (SimOptions.check_running_view)."""
        wrong = self.view.check(snapshot)
        counted = decide(replace(snapshot, running_view=None), now)
        if (counted.starts, counted.preemptions, dict(counted.pending)) != (
            decision.starts,
            decision.preemptions,
            dict(decision.pending),
        ):
            wrong.append("a pass that counts afresh decides otherwise")
        if wrong:
            raise RuntimeError(f"running view at t={now}: {'; '.join(wrong)}")

    # --- what happens to a job ----------------------------------------------------------

    def _estimate(self, job: _Job) -> float | None:
        mode = self.options.estimates
        if mode == "oracle":
            return job.need
        if mode == "noisy":
            return job.need * job.noise
        return job.trace.time_limit_s

    def _queue(self, job: _Job, now: float) -> None:
        tj = job.trace
        # As the daemon builds it (policy/inputs.py), with the estimate as its time limit and
        # the oracle's facts (the sjf, srtf and las baselines read them).
        self.pending[tj.id] = pending_job(
            tj.id,
            job.spec,
            tj.user,
            tj.submit_s,
            self._estimate(job),
            runtime_hint_s=job.attained + job.need,
            attained_s=job.attained,
            restarts=job.record.preemptions,
            checkpointing=self.options.checkpointing,
        )
        job.waiting_since = now
        self._count_pending(job, +1)
        res = job.spec.resources
        whole = not res.fractional
        ask = float(res.gpus) if whole else gpu_count(res, gpu_memory_bytes=self.largest_gpu_memory)
        if tj.backend is None:  # the pool's own GPUs are what the meter counts idle
            self.idle.waiting(tj.id, ask, whole)

    def _count_pending(self, job: _Job, sign: int) -> None:
        if job.spec.resources.fractional:
            self.pending_fractional += sign
        else:
            self.pending_sizes[job.trace.gpus] += sign
            if not self.pending_sizes[job.trace.gpus]:
                del self.pending_sizes[job.trace.gpus]
        self.pending_projects[job.trace.project] += sign
        if not self.pending_projects[job.trace.project]:
            del self.pending_projects[job.trace.project]

    def _start(self, job: _Job, start: Start, now: float) -> None:
        tj = job.trace
        # Its running pieces are its waiting facts plus where and since when (policy/inputs.py):
        # what it waited as is what it runs as.
        waiting = self.pending.pop(tj.id)
        self._count_pending(job, -1)
        if tj.backend is None:
            self.idle.left(tj.id)
        pieces = running_pieces(waiting, now, placed(start), start.gpu_memory_bytes)
        job.pieces = pieces
        for piece in pieces if tj.backend is None else ():  # the pool's own machine's
            self.free_on[piece.node] -= len(piece.gpus)
            self.view.add(piece)
        job.started = now
        rec = job.record
        if rec.first_start_s is None:
            rec.first_start_s = now
        rec.queue_s += now - job.waiting_since
        self.running[tj.id] = job
        heapq.heappush(self.ends, (now + job.need, tj.id, job.attempt))
        self._hold(job, now, +1)

    def _hold(self, job: _Job, now: float, sign: int) -> None:
        tj = job.trace
        gpus = _gpu_count(job)
        if tj.backend is None:
            self.busy += sign * gpus
        else:
            self.busy_backends += sign * gpus
        self.by_project[tj.project] = self.by_project.get(tj.project, 0.0) + sign * gpus
        if self.usage is not None:
            if sign > 0:
                self.usage.start(tj.project, tj.user, gpus, now)
            else:
                self.usage.stop(tj.project, tj.user, gpus, job.started, now)

    def _release(self, job: _Job, now: float) -> float:
        """Take a running job off its GPUs; the seconds this attempt ran."""
        del self.running[job.trace.id]
        self._hold(job, now, -1)
        for piece in job.pieces if job.trace.backend is None else ():
            self.free_on[piece.node] += len(piece.gpus)
            self.view.remove(piece)
        job.pieces = ()
        elapsed = now - job.started
        job.record.run_gpu_s += elapsed * _gpu_count(job)
        return elapsed

    def _finish(self, job: _Job, now: float) -> None:
        self._release(job, now)
        # A restarted attempt's overhead did no work: lost, like the progress a preemption took.
        job.record.lost_gpu_s += job.overhead * _gpu_count(job)
        job.work_left = 0.0
        job.record.end_s = now
        self.finished += 1

    def _preempt(self, job: _Job, now: float) -> None:
        elapsed = self._release(job, now)
        progress = max(0.0, elapsed - job.overhead)
        if self.options.checkpointing:
            lost = elapsed - progress
            job.work_left = max(0.0, job.work_left - progress)
        else:
            lost = elapsed
            job.work_left = job.trace.duration_s
        job.attained += elapsed
        job.attempt += 1
        job.overhead = self.options.restart_overhead_s
        rec = job.record
        rec.preemptions += 1
        rec.lost_gpu_s += lost * _gpu_count(job)
        self._queue(job, now)

    def _sample(self, at: float) -> None:
        busy = self.busy + self.busy_backends
        self.samples.append(Sample(at, len(self.pending), busy, dict(self.by_project)))


def trace_spec(tj: TraceJob, project: str | None = None) -> JobSpec:
    """A trace job as the request the daemon would store: its GPUs (or one GPU's memory), its
    project (`project`: the one it is booked to, the static profile's) and its own --time, in
    the default class; it runs no command here."""
    if tj.gpu_memory_bytes is not None:
        res = Resources(gpus=1, gpu_memory_bytes=tj.gpu_memory_bytes)
    else:
        res = Resources(gpus=tj.gpus)
    return JobSpec(
        command=(),
        resources=res,
        project=tj.project if project is None else project,
        time_limit_s=tj.time_limit_s,
    )


def _gpu_count(job: _Job) -> float:
    return float(job.trace.gpus)


def replay(
    trace: Trace,
    cluster: SimCluster,
    config: PolicyConfig,
    policy_name: str,
    options: SimOptions = SimOptions(),
    progress: Callable[[int, int], None] | None = None,
) -> SimResult:
    """Replay `trace` on `cluster` under `config` (a named profile); see the module docstring."""
    return Replay(trace, cluster, config, policy_name, options, progress).run()
