"""`GET /metrics`: the pool in Prometheus's text format (version 0.0.4), for a Prometheus
server to scrape.

What is exported (every name starts `gpupool_`; units in the name as Prometheus's
conventions say: `_bytes`, `_seconds`, `_watts`, `_celsius`, `_ratio` for 0-1):
- per GPU (labels node, gpu, model): allocation, whether it is drained, memory total, and from its latest sample
  utilization, memory used, power, temperature, whether the sample is simulated and when it
  was taken. A figure the sample lacks (a GPU that does not report power; no sample yet) is
  left out for that GPU, never exported as 0;
- per running job (labels job_id, user, project, name): GPUs allocated, their utilization;
  from its cgroup, read on the scrape (core/cgroup_usage.py): its CPU time, every run's
  (`gpupool_job_cpu_seconds_total`, a counter), its memory now, its peak and its limit.
  A job nothing counts (a backend's, a daemon without cgroups) has none of these;
- per project (label project): quota, limit, GPUs used and borrowed, running and pending
  jobs, pending GPUs;
- GPU-seconds idle while a job that could use them waited, by cause (a counter over the
  pool's life, kept in the store across restarts: engine/idle_waiting.py);
- the room to start a job (service/fragmentation.py): per node (label node) the largest job
  that could start there now, and for the pool its free GPUs and the largest job that could
  start now, fewer when the free GPUs are spread over nodes;
- the active jobs by state; histograms of the wait from submission to first start (label
  project) and of the scheduling passes' durations;
- per backend (label backend) whether its nodes are known (its engine's last report could be
  read), and per backend node (labels backend, node: `BACKEND/node`, as the pool names it)
  its GPUs (label state: up, drained, down), those its engine counts allocated by anyone,
  and those the pool's jobs hold or are admitted to there (api/backend_wire.py). A node the
  pool's jobs are on that the engine's last report does not list has only the last.

The daemon's own process (prometheus_client's standard `process_*` families: resident and
virtual memory, CPU seconds, open file descriptors, start time) and its interpreter's live
memory, `gpupool_daemon_python_allocated_blocks` (the memory blocks its objects hold, from
`sys.getallocatedblocks()`: what a leak grows, where RSS may stay put in freed arenas and
grow later in steps; issue 35, goal 8).

Only what everyone may see (docs/security.md): queue-level figures. No command, no
environment, no working directory; a job's `name` label is the name it was given, empty
without one (not the command's first word, as the queue shows it).

Gauges are read on each scrape from the service's figures (service/pool_stats.py: the engine's
in-memory view and the GPUs' latest samples, never the store) by a custom collector, so
nothing is kept up to date between scrapes. Histograms are fed by the engine as it works,
through `EngineObserver` (engine/observer.py): the engine never imports prometheus_client.
Everything is in this module's own CollectorRegistry, not the library's global one.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gpupool.api.backend_wire import backend_node_rows, problem_of
from gpupool.core.backends import BackendNodes
from gpupool.core.cgroup_usage import CgroupUsage
from gpupool.core.engine_observer import JobStarted
from gpupool.service.fragmentation import from_gpu_stats
from gpupool.service.pool_stats import PoolStats

# The exposition format every Prometheus reads (prometheus_client's newest default is 1.0.0).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Submission to first start: seconds on an idle pool, days behind a long queue.
WAIT_BUCKETS_S = (
    1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0,
    28800.0, 86400.0, 172800.0, 345600.0, 604800.0,
)  # fmt: skip
# A scheduling pass: under a millisecond on a short queue, up to seconds on a huge one.
PASS_BUCKETS_S = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)  # fmt: skip

GPU_LABELS = ("node", "gpu", "model")
JOB_LABELS = ("job_id", "user", "project", "name")
PROJECT_LABELS = ("project",)
BACKEND_NODE_LABELS = ("backend", "node")


class StatsSource(Protocol):
    """What the metrics read on each scrape (service.PoolService has it)."""

    def stats(self) -> PoolStats: ...

    def backend_nodes(self) -> tuple[BackendNodes, ...]: ...


class EngineHistograms:
    """The engine's histograms and counter, in a registry of their own: the engine's
    `EngineObserver`. Made before the engine (daemon/run.py passes it as `observer=`), so
    that nothing is wired after construction; `PoolMetrics` adds the pool's gauges to the
    same registry once the service exists."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self._wait = Histogram(
            "gpupool_job_wait_seconds",
            "Seconds from a job's submission to its first start (a requeued job's later "
            "starts are not counted), by project",
            PROJECT_LABELS,
            buckets=WAIT_BUCKETS_S,
            registry=self.registry,
        )
        self._pass = Histogram(
            "gpupool_scheduling_pass_duration_seconds",
            "Seconds a scheduling pass took: building its snapshot and deciding",
            buckets=PASS_BUCKETS_S,
            registry=self.registry,
        )
        self._deferred = Counter(
            "gpupool_scheduling_passes_deferred",
            "Scheduling passes that fell due while 8 or more submissions were in flight and "
            "waited for them (at most 0.5 s each)",
            registry=self.registry,
        )

    # -- EngineObserver (called by the engine's thread; prometheus_client's are thread-safe)

    def pass_ran(self, seconds: float) -> None:
        self._pass.observe(seconds)

    def job_started(self, start: JobStarted) -> None:
        self._wait.labels(start.project).observe(start.waited_s)

    def pass_deferred(self) -> None:
        self._deferred.inc()


class PoolMetrics:
    """The daemon's metrics: the pool's gauges, read from `pool` on each scrape, and the
    engine's histograms in the same registry (`histograms`: those the engine was made with;
    new ones if None). It is an `EngineObserver` too, passing on to its histograms."""

    def __init__(self, pool: StatsSource, histograms: EngineHistograms | None = None) -> None:
        self.histograms = histograms if histograms is not None else EngineHistograms()
        self.registry = self.histograms.registry
        self.registry.register(PoolCollector(pool))
        ProcessCollector(registry=self.registry)
        self.registry.register(InterpreterCollector())

    def pass_ran(self, seconds: float) -> None:
        self.histograms.pass_ran(seconds)

    def job_started(self, start: JobStarted) -> None:
        self.histograms.job_started(start)

    def pass_deferred(self) -> None:
        self.histograms.pass_deferred()

    # -- the scrape --------------------------------------------------------------------------

    def render(self) -> bytes:
        """The whole exposition, in CONTENT_TYPE's format."""
        return generate_latest(self.registry)


class PoolCollector:
    """A custom collector: each scrape reads the figures once and exports them."""

    def __init__(self, pool: StatsSource) -> None:
        self.pool = pool

    def describe(self) -> Iterator[Metric]:
        """The families without samples: their names for the registry's check against
        duplicates, known without reading the pool."""
        return iter(_families().values())

    def collect(self) -> Iterator[Metric]:
        stats = self.pool.stats()
        families = _families()
        _fill_gpus(families, stats)
        _fill_jobs(families, stats)
        _fill_projects(families, stats)
        _fill_backends(families, self.pool.backend_nodes())
        for cause, gpu_s in stats.idle_waiting_gpu_s.items():
            families["gpupool_idle_while_waiting_gpu_seconds"].add_metric((cause,), gpu_s)
        return iter(families.values())


class InterpreterCollector:
    """The daemon's live memory, as its interpreter counts it, read on each scrape."""

    def describe(self) -> Iterator[Metric]:
        return iter([self._blocks()])

    def collect(self) -> Iterator[Metric]:
        family = self._blocks()
        family.add_metric((), sys.getallocatedblocks())
        return iter([family])

    @staticmethod
    def _blocks() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "gpupool_daemon_python_allocated_blocks",
            "Memory blocks the daemon's Python objects hold now (its live memory)",
        )


# name, HELP, labels: in the order they are exported.
FAMILIES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "gpupool_gpu_allocated_ratio",
        "Share of the GPU held by running jobs: 1 for a whole-GPU job, the sum of the "
        "fractions of the jobs sharing it, 0 when free",
        GPU_LABELS,
    ),
    (
        "gpupool_gpu_drained",
        "1 when an admin drained the GPU (gpupool drain): no job starts on it; 0 otherwise",
        GPU_LABELS,
    ),
    ("gpupool_gpu_memory_total_bytes", "GPU memory, as the inventory has it", GPU_LABELS),
    (
        "gpupool_gpu_utilization_ratio",
        "GPU utilization in its latest sample, 0-1 (absent: not sampled or not reported)",
        GPU_LABELS,
    ),
    (
        "gpupool_gpu_memory_used_bytes",
        "GPU memory used in its latest sample (absent: not sampled or not reported)",
        GPU_LABELS,
    ),
    (
        "gpupool_gpu_power_watts",
        "GPU power draw in its latest sample (absent: not sampled or not reported)",
        GPU_LABELS,
    ),
    (
        "gpupool_gpu_temperature_celsius",
        "GPU temperature in its latest sample (absent: not sampled or not reported)",
        GPU_LABELS,
    ),
    (
        "gpupool_gpu_sample_simulated",
        "1 when the GPU's latest sample is simulated (made up from what its jobs declare, "
        "on a declared inventory), 0 when it was read from the GPU",
        GPU_LABELS,
    ),
    (
        "gpupool_gpu_sample_timestamp_seconds",
        "Unix time of the GPU's latest sample",
        GPU_LABELS,
    ),
    (
        "gpupool_job_allocated_gpus",
        "GPUs a running job holds (a fraction for a shared GPU)",
        JOB_LABELS,
    ),
    (
        "gpupool_job_gpu_utilization_ratio",
        "Mean utilization of a running job's GPUs in their latest samples, 0-1 (a shared "
        "GPU's whole use; absent: none of its GPUs sampled)",
        JOB_LABELS,
    ),
    ("gpupool_project_quota_gpus", "GPUs guaranteed to the project", PROJECT_LABELS),
    (
        "gpupool_project_limit_gpus",
        "The most GPUs the project's jobs may hold at once (absent: no limit)",
        PROJECT_LABELS,
    ),
    ("gpupool_project_used_gpus", "GPUs held by the project's running jobs", PROJECT_LABELS),
    (
        "gpupool_project_borrowed_gpus",
        "GPUs the project holds above its quota (0 while no project has a quota)",
        PROJECT_LABELS,
    ),
    ("gpupool_project_running_jobs", "The project's running jobs", PROJECT_LABELS),
    ("gpupool_project_pending_jobs", "The project's pending jobs", PROJECT_LABELS),
    ("gpupool_project_pending_gpus", "GPUs the project's pending jobs ask for", PROJECT_LABELS),
    ("gpupool_jobs", "Active jobs by state (pending, running)", ("state",)),
    (
        "gpupool_largest_startable_gpus",
        "The largest job (by GPU count) that could start on the node now: its whole GPUs no "
        "job holds (service/fragmentation.py)",
        ("node",),
    ),
    ("gpupool_pool_free_gpus", "Whole GPUs no job holds, across the pool", ()),
    (
        "gpupool_pool_largest_startable_gpus",
        "The largest job (by GPU count) that could start now anywhere: the most free on one "
        "node; below gpupool_pool_free_gpus, the free GPUs are fragmented over nodes",
        (),
    ),
    (
        "gpupool_job_memory_bytes",
        "Memory a running job's processes use now, as its cgroup counts it (page cache "
        "included; absent: nothing counts it)",
        JOB_LABELS,
    ),
    (
        "gpupool_job_memory_peak_bytes",
        "The most memory a running job's current run has used, as its cgroup counts it "
        "(absent: nothing counts it)",
        JOB_LABELS,
    ),
    (
        "gpupool_job_memory_limit_bytes",
        "A running job's memory limit (--mem), enforced by its cgroup (absent: none)",
        JOB_LABELS,
    ),
    (
        "gpupool_backend_capacity_known",
        "1 when the backend's nodes are known (its engine's last report was read), 0 when "
        "they are not (not read yet, or the read failed)",
        ("backend",),
    ),
    (
        "gpupool_backend_node_gpus",
        "GPUs of a backend's node (node: BACKEND/node) as its engine last reported them, by "
        "its state (up, drained, down)",
        (*BACKEND_NODE_LABELS, "state"),
    ),
    (
        "gpupool_backend_node_gpus_used",
        "GPUs of a backend's node allocated by anyone, the pool's jobs and others', as its "
        "engine counts them",
        BACKEND_NODE_LABELS,
    ),
    (
        "gpupool_backend_node_gpus_pool",
        "GPUs of a backend's node held by or admitted to the pool's jobs",
        BACKEND_NODE_LABELS,
    ),
)
# Counters (name without `_total`, which the exposition adds), as FAMILIES.
COUNTERS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "gpupool_job_cpu_seconds",
        "CPU-seconds (user and system) a running job has used, in all its runs, as their "
        "cgroups counted them (absent: nothing counts them)",
        JOB_LABELS,
    ),
    (
        "gpupool_idle_while_waiting_gpu_seconds",
        "GPU-seconds idle while a job that could use them waited (kept across restarts), "
        "by cause: fragmentation (free in the pool, on no one node), reservation (held for a "
        "job ahead), quota (its project's quota or limit), other (policy/idle_waiting.py)",
        ("cause",),
    ),
)


# Every family of a scrape, by name.
Families = dict[str, GaugeMetricFamily | CounterMetricFamily]


def _families() -> Families:
    """Each family of FAMILIES, then of COUNTERS, empty, by name (in their order)."""
    families: Families = {
        name: GaugeMetricFamily(name, help_text, labels=labels)
        for name, help_text, labels in FAMILIES
    }
    for name, help_text, labels in COUNTERS:
        families[name] = CounterMetricFamily(name, help_text, labels=labels)
    return families


def _fill_gpus(f: Families, stats: PoolStats) -> None:
    for gpu in stats.gpus:
        labels = (gpu.node, str(gpu.index), gpu.model)
        f["gpupool_gpu_allocated_ratio"].add_metric(labels, gpu.allocated)
        f["gpupool_gpu_drained"].add_metric(labels, 1.0 if gpu.drained else 0.0)
        f["gpupool_gpu_memory_total_bytes"].add_metric(labels, gpu.memory_total_bytes)
        sample = gpu.sample
        if sample is None:
            continue
        if sample.utilization_pct is not None:
            f["gpupool_gpu_utilization_ratio"].add_metric(labels, sample.utilization_pct / 100)
        if sample.memory_used_bytes is not None:
            f["gpupool_gpu_memory_used_bytes"].add_metric(labels, sample.memory_used_bytes)
        if sample.power_w is not None:
            f["gpupool_gpu_power_watts"].add_metric(labels, sample.power_w)
        if sample.temperature_c is not None:
            f["gpupool_gpu_temperature_celsius"].add_metric(labels, sample.temperature_c)
        f["gpupool_gpu_sample_simulated"].add_metric(labels, 1.0 if sample.simulated else 0.0)
        f["gpupool_gpu_sample_timestamp_seconds"].add_metric(labels, sample.time)
    _fill_room(f, stats)


def _fill_room(f: Families, stats: PoolStats) -> None:
    """The largest job that could start now, per node and for the pool, and the free GPUs."""
    room = from_gpu_stats(stats.gpus)
    for node in room.nodes:
        f["gpupool_largest_startable_gpus"].add_metric((node.node,), node.largest_startable_gpus)
    f["gpupool_pool_free_gpus"].add_metric((), room.free_gpus)
    f["gpupool_pool_largest_startable_gpus"].add_metric((), room.largest_startable_gpus)


def _fill_jobs(f: Families, stats: PoolStats) -> None:
    for job in stats.running:
        labels = (str(job.job_id), job.user, job.project, job.name)
        f["gpupool_job_allocated_gpus"].add_metric(labels, job.gpus)
        if job.utilization_pct is not None:
            f["gpupool_job_gpu_utilization_ratio"].add_metric(labels, job.utilization_pct / 100)
        _fill_cgroup_usage(f, labels, job.cgroup_usage)
    f["gpupool_jobs"].add_metric(("pending",), stats.pending_jobs)
    f["gpupool_jobs"].add_metric(("running",), stats.running_jobs)


def _fill_cgroup_usage(f: Families, labels: tuple[str, ...], usage: CgroupUsage | None) -> None:
    """A running job's CPU time and memory; a figure nothing counted is left out."""
    if usage is None:
        return
    figures = (
        ("gpupool_job_cpu_seconds", usage.cpu_seconds_all_runs),
        ("gpupool_job_memory_bytes", usage.memory_current_bytes),
        ("gpupool_job_memory_peak_bytes", usage.memory_peak_bytes),
        ("gpupool_job_memory_limit_bytes", usage.memory_limit_bytes),
    )
    for name, value in figures:
        if value is not None:
            f[name].add_metric(labels, value)


def _fill_backends(f: Families, backends: tuple[BackendNodes, ...]) -> None:
    """Each backend's nodes as `gpupool gpus` shows them; a node its engine's last report
    does not list (the pool's jobs are there) has only its pool's GPUs, never made-up 0s."""
    for b in backends:
        f["gpupool_backend_capacity_known"].add_metric((b.name,), 0.0 if problem_of(b) else 1.0)
        for row in backend_node_rows(b):
            labels = (b.name, row.name)
            if row.node is not None:
                f["gpupool_backend_node_gpus"].add_metric((*labels, row.state), row.node.gpus)
                f["gpupool_backend_node_gpus_used"].add_metric(labels, row.node.gpus_used)
            f["gpupool_backend_node_gpus_pool"].add_metric(labels, row.gpus_pool)


def _fill_projects(f: Families, stats: PoolStats) -> None:
    for p in stats.projects:
        labels = (p.name,)
        f["gpupool_project_quota_gpus"].add_metric(labels, p.quota)
        if p.limit is not None:
            f["gpupool_project_limit_gpus"].add_metric(labels, p.limit)
        f["gpupool_project_used_gpus"].add_metric(labels, p.in_use_gpus)
        f["gpupool_project_borrowed_gpus"].add_metric(labels, p.borrowed_gpus)
        f["gpupool_project_running_jobs"].add_metric(labels, p.running_jobs)
        f["gpupool_project_pending_jobs"].add_metric(labels, p.pending_jobs)
        f["gpupool_project_pending_gpus"].add_metric(labels, p.pending_gpus)
