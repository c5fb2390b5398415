"""Accounting: per user, project, GPU type or backend, what the pool allocated over a window
and what was used of it (`gpupool usage`, `/v1/usage`, the dashboard's usage page).

For the window [since, now], per group:
- jobs: those submitted in it or holding GPUs during it;
- allocated GPU-hours: each run's GPUs x its time inside the window (a requeued job's every
  run counts: the GPUs were held);
- used GPU-hours: the utilization-weighted GPU-hours the samples measured (store
  job_usage_hours; whole hours, so the window's first hour counts whole);
- sampled GPU-hours: the allocated GPU-hours that samples covered; efficiency is used over
  sampled (not over allocated: time the daemon did not sample is unknown, not idle);
- backend GPU-hours: the allocated GPU-hours of jobs a backend ran (Slurm, Ray, Kubernetes:
  their GPUs are the backend's, which the pool does not sample), and of those, the ones
  whose engine measured their use (Slurm's gres/gpuutil, stored as samples are when the run
  ends: store/samples.py `add_engine_gpu_use`), so a report can tell "not measured" from
  "measured idle": a group all of whose allocated GPU-hours are a backend's and unmeasured
  has no used figure (`used_measured` False), not 0;
- mean wait: submit to first start, over the jobs that first started in the window;
- lost to preemption: the GPU-hours of runs that ended by preemption or requeue (work
  redone unless the job checkpointed);
- idle reclaimed: GPU-hours of runs the idle-GPU policy ended (`idle_runs`), counted from the
  action to the end of the job's time limit, at most to the window's end: what an idle job
  would otherwise still have held;
- CPU-hours: the CPU time its ended runs' cgroups counted (core/cgroup_usage.py; every run's,
  the store's sum), spread evenly over those runs' running time, of which the part inside
  the window counts, as GPU-hours are clipped to it (a cgroup counts a run's CPU time in
  total, not when it was spent). A run under way is charged once it ends. None for a group
  none of whose jobs has the figure (backends' jobs, a daemon without cgroups): unknown,
  not 0.
Groups: by user; by project; by GPU type (the model of the GPUs a job held, from the
inventory, else what it asked for, else ANY_GPU; a backend's job: its backend's name in
brackets, `[hpc]`, since its GPUs are not in the inventory and their model is unknown to the
pool); by backend (the backend's name, `local` for the pool's own machine).
For the pool as a whole (not per group: the idle GPUs were no group's), the GPU-hours idle
while a job that could use them waited, by cause (policy/idle_waiting.py says the rule): what
the store kept per hour (store/idle_waiting.py; whole hours, as used GPU-hours) and what the
engine counted and has not stored yet (engine/idle_waiting.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from gpupool.core.backends import LOCAL_BACKEND
from gpupool.core.gpu_usage import JobUsageSummary, RolledSample
from gpupool.core.hardware import Inventory
from gpupool.policy.idle_waiting import IdleCause
from gpupool.service.store_contracts import UsageStore
from gpupool.store.accounting import JobRecord
from gpupool.store.samples import DAY_S, WindowUsage

HOUR_S = 3600.0
ANY_GPU = "any"  # the GPU type of a job that never held a GPU and asked for none
# GPU-seconds idle while jobs waited, by cause, counted and not stored yet, in a window.
UnstoredIdle = Callable[[float, float], Mapping[str, float]]


class GroupBy(StrEnum):
    USER = "user"
    PROJECT = "project"
    GPU_TYPE = "gpu-type"
    BACKEND = "backend"  # the backend that ran the job; LOCAL_BACKEND for the pool's own


@dataclass
class GroupUsage:
    """One group's figures (GPU-hours, seconds)."""

    group: str
    jobs: int = 0
    allocated_gpu_h: float = 0.0
    used_gpu_h: float = 0.0
    sampled_gpu_h: float = 0.0
    energy_kwh: float = 0.0
    preempted_gpu_h: float = 0.0
    idle_reclaimed_gpu_h: float = 0.0
    backend_gpu_h: float = 0.0  # of allocated_gpu_h, on backends' GPUs (the pool's samples miss)
    backend_measured_gpu_h: float = 0.0  # of backend_gpu_h, measured by their engine
    cpu_h: float | None = None  # None: none of its jobs' CPU time was counted
    waits_s: list[float] = field(default_factory=list)

    @property
    def efficiency(self) -> float | None:
        return self.used_gpu_h / self.sampled_gpu_h if self.sampled_gpu_h > 0 else None

    @property
    def used_measured(self) -> bool:
        """Whether used_gpu_h measures anything: False when all its allocated GPU-hours were
        on backends (the pool samples only its own GPUs) and no engine measured them, where
        0 would read as idle."""
        if self.allocated_gpu_h <= 0 or self.backend_measured_gpu_h > 0:
            return True
        return self.backend_gpu_h < self.allocated_gpu_h

    @property
    def mean_wait_s(self) -> float | None:
        return sum(self.waits_s) / len(self.waits_s) if self.waits_s else None


@dataclass(frozen=True)
class UsageReport:
    by: GroupBy
    since: float
    until: float
    rows: tuple[GroupUsage, ...]  # by allocated GPU-hours, largest first
    total: GroupUsage
    simulated: bool  # some of the used figures come from simulated samples
    # GPU-hours idle while jobs that could use them waited, by cause (every IdleCause).
    idle_waiting_gpu_h: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class IdleStop:
    """A run the idle-GPU policy ended: when, and when the job's time limit would have."""

    job_id: int
    time: float
    limit_end: float


def usage_report(
    records: Iterable[JobRecord],
    used: Iterable[WindowUsage],
    by: GroupBy,
    since: float,
    until: float,
    gpu_type_of: Callable[[JobRecord], str],
    idle_stops: Iterable[IdleStop] = (),
    simulated: bool = False,
) -> UsageReport:
    groups: dict[str, GroupUsage] = {}
    total = GroupUsage("total")
    key_of: dict[int, str] = {}
    gpus_of: dict[int, float] = {}
    on_backends: set[int] = set()
    for rec in records:
        key = _key(rec, by, gpu_type_of)
        key_of[rec.job_id] = key
        gpus_of[rec.job_id] = rec.gpu_count
        if rec.backend is not None:
            on_backends.add(rec.job_id)
        row = groups.setdefault(key, GroupUsage(key))
        for target in (row, total):
            _add_record(target, rec, since, until)
    for h in used:
        hour_key = key_of.get(h.job_id)
        if hour_key is None:
            continue
        for target in (groups[hour_key], total):
            target.used_gpu_h += h.used_gpu_s / HOUR_S
            target.sampled_gpu_h += h.sampled_gpu_s / HOUR_S
            if h.job_id in on_backends:
                target.backend_measured_gpu_h += h.sampled_gpu_s / HOUR_S
            target.energy_kwh += h.energy_j / 3.6e6
    for stop in idle_stops:
        stop_key = key_of.get(stop.job_id)
        if stop_key is None:
            continue
        span = max(0.0, min(stop.limit_end, until) - max(stop.time, since)) / HOUR_S
        for target in (groups[stop_key], total):
            target.idle_reclaimed_gpu_h += span * gpus_of[stop.job_id]
    rows = sorted(groups.values(), key=lambda r: (-r.allocated_gpu_h, r.group))
    return UsageReport(by, since, until, tuple(rows), total, simulated)


def _add_record(row: GroupUsage, rec: JobRecord, since: float, until: float) -> None:
    row.jobs += 1
    first = rec.first_start
    if first is not None and since <= first <= until:
        row.waits_s.append(first - rec.submit_time)
    for run in rec.runs:
        end = until if run.end is None else min(run.end, until)
        held = max(0.0, end - max(run.start, since)) / HOUR_S * rec.gpu_count
        row.allocated_gpu_h += held
        if rec.backend is not None:
            row.backend_gpu_h += held
        if run.preempted:
            row.preempted_gpu_h += held
    cpu_h = cpu_hours_in_window(rec, since, until)
    if cpu_h is not None:
        row.cpu_h = (row.cpu_h or 0.0) + cpu_h


def cpu_hours_in_window(rec: JobRecord, since: float, until: float) -> float | None:
    """The CPU-hours of `rec`'s ended runs inside [since, until] (module docstring: their
    CPU time spread over their running time); None when nothing counted its CPU time."""
    if rec.cpu_seconds is None:
        return None
    ended = [(run.start, run.end) for run in rec.runs if run.end is not None]
    ran_s = sum(end - start for start, end in ended)
    if ran_s <= 0:  # runs too short to spread over (or none known): charged when they ended
        inside = any(since <= end <= until for _, end in ended)
        return rec.cpu_seconds / HOUR_S if inside else 0.0
    inside_s = sum(max(0.0, min(end, until) - max(start, since)) for start, end in ended)
    return rec.cpu_seconds * inside_s / ran_s / HOUR_S


def _key(rec: JobRecord, by: GroupBy, gpu_type_of: Callable[[JobRecord], str]) -> str:
    if by is GroupBy.USER:
        return rec.user
    if by is GroupBy.PROJECT:
        return rec.project
    if by is GroupBy.BACKEND:
        return rec.backend or LOCAL_BACKEND
    return gpu_type_of(rec)


def backend_gpu_type(backend: str) -> str:
    """The GPU type a backend's job is reported under: `[NAME]`. The pool does not know the
    model of a backend's GPUs (none is in its inventory, and what the job asked for is a
    request the backend's scheduler read, not a model the pool saw); brackets, which no
    model name or backend name has, keep it apart from the inventory's types."""
    return f"[{backend}]"


def gpu_type_by_inventory(
    models: Mapping[tuple[str, int], str],
) -> Callable[[JobRecord], str]:
    """The GPU type of a job: a backend's job, its backend's (`backend_gpu_type`, whatever
    its node is called: a backend's node may share a name with one of the inventory's); else
    the model of the GPUs it held (the inventory's), else what it asked for, else ANY_GPU."""

    def gpu_type_of(rec: JobRecord) -> str:
        if rec.backend is not None:
            return backend_gpu_type(rec.backend)
        if rec.node is not None and rec.gpus:
            model = models.get((rec.node, rec.gpus[0]))
            if model is not None:
                return model
        return rec.gpu_type or ANY_GPU

    return gpu_type_of


MAX_POINTS = 1500  # per GPU in one history answer: a chart's width, not a sample dump


@dataclass(frozen=True)
class History:
    since: float
    until: float
    period_s: int  # 0: full-rate samples
    points: tuple[RolledSample, ...]


class Accounting:
    """Usage reports, GPU history and job summaries, from the store and the inventory."""

    def __init__(
        self,
        store: UsageStore,
        inventory: Inventory,
        sample_interval_s: float,
        simulated: bool,
        unstored_idle: UnstoredIdle | None = None,
    ) -> None:
        self.store = store
        self.unstored_idle = unstored_idle  # the engine's idle-while-waiting not stored yet
        self.inventory = inventory
        self.sample_interval_s = sample_interval_s
        self.simulated = simulated  # the pool's samples are made up (a declared inventory)
        self._memory = {(n.name, g.index): g.memory_bytes for n in inventory.nodes for g in n.gpus}
        self._models = {(n.name, g.index): g.model for n in inventory.nodes for g in n.gpus}

    def report(self, by: GroupBy, since: float, until: float) -> UsageReport:
        records = self.store.accounting_records(since, self._memory)
        hours = self.store.usage_in_window(since, until)
        stops = [IdleStop(a.job_id, a.time, a.limit_end) for a in self.store.idle_actions(since)]
        gpu_type = gpu_type_by_inventory(self._models)
        report = usage_report(records, hours, by, since, until, gpu_type, stops, self.simulated)
        return replace(report, idle_waiting_gpu_h=self.idle_waiting_gpu_h(since, until))

    def idle_waiting_gpu_h(self, since: float, until: float) -> dict[str, float]:
        """GPU-hours idle while jobs waited in the hours overlapping [since, until), by cause
        (every cause, 0 where none): stored, and counted but not stored yet."""
        stored = self.store.idle_waiting_in_window(since, until)
        fresh = self.unstored_idle(since, until) if self.unstored_idle is not None else {}
        return {
            c.value: (stored.get(c.value, 0.0) + fresh.get(c.value, 0.0)) / HOUR_S
            for c in IdleCause
        }

    def history(self, since: float, until: float) -> History:
        period = history_period(until - since, self.sample_interval_s)
        return History(since, until, period, tuple(self.store.gpu_history(since, until, period)))

    def job_usage(self, job_id: int) -> JobUsageSummary | None:
        return self.store.job_usage([job_id]).get(job_id)


def history_period(span_s: float, sample_interval_s: float) -> int:
    """The finest series that answers a span in at most MAX_POINTS points per GPU and still
    holds it: full rate (0), minutes (60) or hours (3600)."""
    if sample_interval_s > 0 and span_s <= min(MAX_POINTS * sample_interval_s, DAY_S):
        return 0
    if span_s <= MAX_POINTS * 60:  # up to 25 hours of minutes
        return 60
    return 3600
