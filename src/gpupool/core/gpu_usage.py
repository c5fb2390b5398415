"""What samples say about jobs and about time: pure arithmetic shared by the daemon's monitor
(which stores it), accounting and every view of it.

- `attribute`: one round of samples (every GPU at one time) and the jobs holding GPUs then
  -> what each job used in that round (`JobUsageDelta`). A job is charged for the GPUs it
  holds, by its share of each (1 for a whole GPU, its fraction for a shared one,
  `core.job.gpu_count`), for `dt_s`, the time the round stands for:
  used GPU-seconds = share x utilization/100 x dt, sampled GPU-seconds = share x dt (only
  GPUs that reported a utilization), energy = share x power x dt, where a job that got its
  GPUs during the round is charged from then on only. Allocation is what the
  pool granted, not which processes ran: a job holding a GPU it leaves idle is charged for it
  (that is the waste accounting exists to show).
- `JobUsage`: a job's running totals (mergeable: the store adds a delta per round), and the
  summary it gives: mean and p95 utilization, peak GPU memory, energy.
- `roll_up`: samples of one GPU -> one mean per period (the store's 1-minute and 1-hour
  series), so that a year of samples stays small.

The p95 comes from a histogram of 5-point bins (`UTIL_BINS`), interpolated inside its bin
and never above the highest utilization seen: exact to within 5 points, constant space per
job, and additive across rounds and restarts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from gpupool.core.job import Resources, gpu_count
from gpupool.core.monitoring import GpuSample

UTIL_BINS = 20  # 0-5, 5-10, ..., 95-100 %
BIN_WIDTH = 100.0 / UTIL_BINS
HOUR_S = 3600.0


@dataclass(frozen=True)
class Holder:
    """A job holding GPUs at the time of a sample round."""

    job_id: int
    node: str
    gpus: tuple[int, ...]
    resources: Resources
    granted_bytes: int | None = None  # GPU memory granted on its one GPU (a shared GPU)
    since: float | None = None  # when it got them (its run's start): not charged before

    def share(self, memory_total_bytes: int | None) -> float:
        """Its share of each GPU it holds: 1 held whole, else its part of the one it shares."""
        if not self.resources.fractional:
            return 1.0
        return gpu_count(self.resources, 1, self.granted_bytes, memory_total_bytes)


@dataclass(frozen=True)
class JobUsageDelta:
    """What one job used in one sample round."""

    job_id: int
    time: float
    util_pct: float | None  # the mean over its GPUs that reported one
    used_gpu_s: float
    sampled_gpu_s: float
    energy_j: float
    memory_bytes: int | None  # the most GPU memory it held on one of its GPUs
    simulated: bool

    @property
    def hour(self) -> float:
        return hour_of(self.time)


def hour_of(t: float) -> float:
    return (t // HOUR_S) * HOUR_S


def attribute(
    samples: Sequence[GpuSample], holders: Iterable[Holder], dt_s: float
) -> list[JobUsageDelta]:
    """What each holder used in the round `samples` (one per GPU, taken together) stands for."""
    by_gpu = {(s.node, s.index): s for s in samples}
    if not by_gpu:
        return []
    when = max(s.time for s in samples)
    out = []
    for holder in holders:
        held_s = dt_s if holder.since is None else max(0.0, min(dt_s, when - holder.since))
        utils: list[float] = []
        used = sampled = energy = 0.0
        memory: int | None = None
        simulated = False
        for index in holder.gpus:
            sample = by_gpu.get((holder.node, index))
            if sample is None:
                continue
            simulated = simulated or sample.simulated
            share = holder.share(sample.memory_total_bytes)
            if sample.utilization_pct is not None:
                utils.append(sample.utilization_pct)
                used += share * sample.utilization_pct / 100.0 * held_s
                sampled += share * held_s
            if sample.power_w is not None:
                energy += share * sample.power_w * held_s
            held = _memory_of(holder, sample)
            if held is not None:
                memory = held if memory is None else max(memory, held)
        if not utils and memory is None and energy == 0.0:
            continue  # none of its GPUs was sampled this round
        mean = sum(utils) / len(utils) if utils else None
        out.append(
            JobUsageDelta(holder.job_id, when, mean, used, sampled, energy, memory, simulated)
        )
    return out


def _memory_of(holder: Holder, sample: GpuSample) -> int | None:
    """The job's memory on this GPU: its processes' where the sampler attributed them, else
    the whole GPU's use for a job that holds it whole, else unknown."""
    mine = [p.used_memory_bytes for p in sample.processes if p.job_id == holder.job_id]
    known = [m for m in mine if m is not None]
    if known:
        return sum(known)
    if not holder.resources.fractional:
        return sample.memory_used_bytes
    return None


@dataclass(frozen=True)
class JobUsageSummary:
    """A job's GPU use: what `show`, the API and accounting say about it."""

    samples: int
    mean_util_pct: float | None
    p95_util_pct: float | None
    peak_memory_bytes: int | None
    energy_j: float
    used_gpu_s: float
    sampled_gpu_s: float
    simulated: bool

    @property
    def efficiency(self) -> float | None:
        """Used over sampled GPU-time, 0-1; None before any sample."""
        return self.used_gpu_s / self.sampled_gpu_s if self.sampled_gpu_s > 0 else None


@dataclass
class JobUsage:
    """A job's running totals, updated a round at a time (`add`)."""

    samples: int = 0
    util_sum: float = 0.0
    util_bins: list[int] = field(default_factory=lambda: [0] * UTIL_BINS)
    peak_memory_bytes: int | None = None
    energy_j: float = 0.0
    used_gpu_s: float = 0.0
    sampled_gpu_s: float = 0.0
    simulated: bool = False
    util_max: float | None = None

    def add(self, delta: JobUsageDelta) -> None:
        if delta.util_pct is not None:
            self.samples += 1
            self.util_sum += delta.util_pct
            self.util_bins[bin_of(delta.util_pct)] += 1
            top = self.util_max
            self.util_max = delta.util_pct if top is None else max(top, delta.util_pct)
        if delta.memory_bytes is not None:
            peak = self.peak_memory_bytes
            self.peak_memory_bytes = (
                delta.memory_bytes if peak is None else max(peak, delta.memory_bytes)
            )
        self.energy_j += delta.energy_j
        self.used_gpu_s += delta.used_gpu_s
        self.sampled_gpu_s += delta.sampled_gpu_s
        self.simulated = self.simulated or delta.simulated

    def summary(self) -> JobUsageSummary:
        mean = self.util_sum / self.samples if self.samples else None
        p95 = percentile_of_bins(self.util_bins, 0.95)
        if p95 is not None and self.util_max is not None:
            p95 = min(p95, self.util_max)  # inside its bin, never above what was seen
        return JobUsageSummary(
            self.samples,
            mean,
            p95,
            self.peak_memory_bytes,
            self.energy_j,
            self.used_gpu_s,
            self.sampled_gpu_s,
            self.simulated,
        )


def bin_of(util_pct: float) -> int:
    return min(UTIL_BINS - 1, max(0, int(util_pct // BIN_WIDTH)))


def percentile_of_bins(bins: Sequence[int], q: float) -> float | None:
    """The q-quantile (0-1) of the values counted in `bins` (BIN_WIDTH wide from 0), linear
    inside the bin it falls in; None when nothing was counted."""
    total = sum(bins)
    if total == 0:
        return None
    target = q * total
    below = 0
    for index, count in enumerate(bins):
        if count and below + count >= target:
            return index * BIN_WIDTH + BIN_WIDTH * (target - below) / count
        below += count
    return 100.0  # not reached: the bins sum to total


@dataclass(frozen=True)
class RolledSample:
    """The samples of one GPU in one period [time, time + period_s)."""

    period_s: int
    time: float
    node: str
    index: int
    samples: int
    util_pct: float | None  # mean
    util_max_pct: float | None
    memory_used_bytes: int | None  # the most seen
    memory_total_bytes: int
    power_w: float | None  # mean
    temperature_c: float | None  # the highest seen
    simulated: bool


def roll_up(samples: Iterable[GpuSample], period_s: int) -> list[RolledSample]:
    """One RolledSample per GPU and period the samples fall in, ordered by time, node, GPU."""
    groups: dict[tuple[float, str, int], list[GpuSample]] = {}
    for s in samples:
        start = (s.time // period_s) * period_s
        groups.setdefault((start, s.node, s.index), []).append(s)
    out = []
    for (start, node, index), group in sorted(groups.items()):
        utils = [s.utilization_pct for s in group if s.utilization_pct is not None]
        powers = [s.power_w for s in group if s.power_w is not None]
        memories = [s.memory_used_bytes for s in group if s.memory_used_bytes is not None]
        temperatures = [s.temperature_c for s in group if s.temperature_c is not None]
        out.append(
            RolledSample(
                period_s,
                start,
                node,
                index,
                len(group),
                sum(utils) / len(utils) if utils else None,
                max(utils) if utils else None,
                max(memories) if memories else None,
                max(s.memory_total_bytes for s in group),
                sum(powers) / len(powers) if powers else None,
                max(temperatures) if temperatures else None,
                any(s.simulated for s in group),
            )
        )
    return out
