"""The daemon's GPU monitor: a thread that takes a sample of every GPU every interval and
keeps the latest per GPU for the API (`/v1/gpus`, `gpupool gpus`); `sampler_for` picks the
sampler (NVML on a machine whose GPUs NVML found, else the simulated one).

With a `SampleSink` (the store) each round is also kept: the samples, and what each job
holding GPUs used in it (core.gpu_usage.attribute, for the time since the previous round,
at most two intervals: a round the daemon missed while it was down is not charged); about
once a minute the sink rolls full-rate samples up into minutes and hours.

A sampler that raises is logged (once a minute at most) and asked again at the next
interval: monitoring never stops the pool.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from gpupool.core.gpu_health import HealthEvent
from gpupool.core.gpu_usage import Holder, JobUsageDelta, attribute
from gpupool.core.hardware import Inventory
from gpupool.core.job import Job, JobState
from gpupool.core.monitoring import (
    DEFAULT_SIMULATED_UTIL,
    GpuSample,
    Sampler,
    simulated_memory,
    simulated_util,
)

log = logging.getLogger("gpupool.monitor")
DEFAULT_INTERVAL_S = 5.0
_SAID_EVERY_S = 60.0
ROLL_UP_EVERY_S = 60.0


class SampleSink(Protocol):
    """Where sample rounds are kept (store.Store)."""

    def record_samples(
        self, samples: Sequence[GpuSample], deltas: Sequence[JobUsageDelta]
    ) -> None: ...

    def roll_up_samples(self, now: float) -> int: ...


class HealthReader(Protocol):
    """A node's GPU health, read once per round (monitor/nvml_health.py)."""

    def read(self, now: float) -> list[HealthEvent]: ...

    def close(self) -> None: ...


class GpuMonitor:
    def __init__(
        self,
        sampler: Sampler,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.time,
        sink: SampleSink | None = None,
        holders: Callable[[], Sequence[Holder]] = list,
        on_foreign: Callable[[Mapping[tuple[str, int], int]], None] | None = None,
        on_round: Callable[[Sequence[JobUsageDelta], float], None] | None = None,
        health: HealthReader | None = None,
        on_health: Callable[[Sequence[HealthEvent]], None] | None = None,
    ) -> None:
        """`holders`: the jobs holding GPUs now, asked once per round (with a sink);
        `on_foreign`: told the memory foreign processes hold per GPU whenever it changes
        (the engine: it counts as occupied for fractional placement); `on_round`: told what
        each holder used in each round, and when (the idle-GPU and memory rules); `health`:
        read each round, what it finds told to `on_health` (service/health_acts.py)."""
        self.sampler = sampler
        self.interval_s = interval_s
        self._clock = clock
        self._sink = sink
        self._holders = holders
        self._last_round: float | None = None
        self._rolled_at = -ROLL_UP_EVERY_S
        self._sink_failed_said = -_SAID_EVERY_S
        self._on_foreign = on_foreign
        self._on_round = on_round
        self._health, self._on_health = health, on_health
        self._health_failed_said = -_SAID_EVERY_S
        self._foreign: dict[tuple[str, int], int] = {}
        self._latest: dict[tuple[str, int], GpuSample] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failed_said = -_SAID_EVERY_S

    @property
    def simulated(self) -> bool:
        return self.sampler.simulated

    def start(self) -> None:
        self.sample_now()
        self._thread = threading.Thread(target=self._run, name="gpupool-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._health is not None:
            self._health.close()
        self.sampler.close()

    def latest(self) -> Mapping[tuple[str, int], GpuSample]:
        """The latest sample of each GPU, by (node, index)."""
        with self._lock:
            return dict(self._latest)

    def sample_now(self) -> None:
        try:
            samples = self.sampler.sample(self._clock())
        except Exception as exc:  # noqa: BLE001  (monitoring never stops the pool)
            now = time.monotonic()
            if now - self._failed_said >= _SAID_EVERY_S:
                self._failed_said = now
                log.warning(
                    "GPU sampling failed (asked again every %g s): %s", self.interval_s, exc
                )
            return
        with self._lock:
            self._latest.update(((s.node, s.index), s) for s in samples)
            latest = list(self._latest.values())
        if self._on_foreign is not None:
            foreign = {(s.node, s.index): s.foreign_memory_bytes for s in latest}
            foreign = {k: v for k, v in foreign.items() if v}
            if foreign != self._foreign:
                self._foreign = foreign
                self._on_foreign(foreign)
        if (self._sink is not None or self._on_round is not None) and samples:
            self._charge(samples)
        if self._health is not None:
            self._read_health()

    def _read_health(self) -> None:
        """Health events to `on_health`; a failure is logged (once a minute at most)."""
        assert self._health is not None
        try:
            events = self._health.read(self._clock())
            if events and self._on_health is not None:
                self._on_health(events)
        except Exception as exc:  # noqa: BLE001  (monitoring never stops the pool)
            now = time.monotonic()
            if now - self._health_failed_said >= _SAID_EVERY_S:
                self._health_failed_said = now
                log.warning("reading or acting on GPU health failed (tried every round): %s", exc)

    def _charge(self, samples: Sequence[GpuSample]) -> None:
        """What each holder used in the round, to the sink (with a roll-up when one is due)
        and to `on_round`; a failure is logged (once a minute at most) and the next round
        tried as usual."""
        when = max(s.time for s in samples)
        last = self._last_round
        if last is not None and when <= last:
            return  # the clock went back: a round at a time already kept
        dt = self.interval_s if last is None else min(when - last, 2 * self.interval_s)
        self._last_round = when
        try:
            deltas = attribute(samples, self._holders(), dt)
            if self._sink is not None:
                self._sink.record_samples(samples, deltas)
                if when - self._rolled_at >= ROLL_UP_EVERY_S:
                    self._rolled_at = when
                    self._sink.roll_up_samples(when)
            if self._on_round is not None:
                self._on_round(deltas, when)
        except Exception as exc:  # noqa: BLE001  (monitoring never stops the pool)
            now = time.monotonic()
            if now - self._sink_failed_said >= _SAID_EVERY_S:
                self._sink_failed_said = now
                log.warning("keeping or acting on GPU samples failed (tried every round): %s", exc)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample_now()


class RunningJobs(Protocol):
    """What the samplers need of the pool: the running jobs, and each one's main process."""

    def running(self) -> Sequence[Job]: ...

    def main_pid(self, job_id: int) -> int | None: ...


@dataclass(frozen=True)
class PoolJobs:
    """RunningJobs from the engine's view of the jobs and the executor's child records."""

    jobs: Callable[[], Iterable[Job]]
    pid_of: Callable[[int], int | None]

    def running(self) -> Sequence[Job]:
        return [j for j in self.jobs() if j.state is JobState.RUNNING]

    def main_pid(self, job_id: int) -> int | None:
        return self.pid_of(job_id)

    def holders(self) -> list[Holder]:
        """The running jobs as holders of their GPUs (what accounting charges them for)."""
        return [holder_of(j) for j in self.running() if j.node is not None and j.gpus]


def holder_of(job: Job) -> Holder:
    assert job.node is not None
    resources = job.spec.resources
    return Holder(
        job.id, job.node, tuple(job.gpus), resources, job.gpu_memory_bytes, job.start_time
    )


def sampler_for(
    inventory: Inventory, jobs: RunningJobs, board_power_w: Mapping[str, float] | None = None
) -> Sampler:
    """NVML for GPUs discovered through it (this machine's), else the simulated sampler of
    the declared nodes, fed once per sample by the running jobs' declarations, drawing
    `board_power_w` (by GPU model) where the model is in it."""
    if inventory.source == "nvml":
        from gpupool.monitor.nvml_sampler import NvmlSampler

        (node,) = inventory.nodes  # NVML discovery describes this machine only

        def sessions() -> dict[int, int]:
            found = {}
            for job in jobs.running():
                pid = jobs.main_pid(job.id)
                if pid is not None:
                    found[pid] = job.id  # its session id: it leads its session
            return found

        return NvmlSampler.open(node.name, sessions)
    from gpupool.monitor.simulated import JobOnGpus, SimulatedSampler

    def running() -> list[JobOnGpus]:
        return [
            JobOnGpus(
                job.id,
                job.node,
                tuple(job.gpus),
                _declared_util(job),
                job.gpu_memory_bytes,
                jobs.main_pid(job.id),
                _declared_memory(job),
            )
            for job in jobs.running()
            if job.node is not None
        ]

    power = board_power_w or {}
    by_gpu = {
        (n.name, g.index): power[g.model]
        for n in inventory.nodes
        for g in n.gpus
        if g.model in power
    }
    return SimulatedSampler(inventory.nodes, running, by_gpu)


def _declared_memory(job: Job) -> int | None:
    try:
        return simulated_memory({**dict(job.spec.base_env), **dict(job.spec.env)})
    except ValueError:  # refused at submit
        return None


def _declared_util(job: Job) -> float:
    try:  # as the job sees its environment: what it asked for over what was exported
        return simulated_util({**dict(job.spec.base_env), **dict(job.spec.env)})
    except ValueError:  # refused at submit; a job stored before shows as busy
        return DEFAULT_SIMULATED_UTIL
