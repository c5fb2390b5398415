"""The daemon's GPU monitor: a thread that takes a sample of every GPU every interval and
keeps the latest per GPU for the API (`/v1/gpus`, `gpupool gpus`); `sampler_for` picks the
sampler (NVML on a machine whose GPUs NVML found, else the simulated one). Samples are not
stored yet (issue 14).

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

from gpupool.core.hardware import Inventory
from gpupool.core.job import Job, JobState
from gpupool.core.monitoring import DEFAULT_SIMULATED_UTIL, GpuSample, Sampler, simulated_util

log = logging.getLogger("gpupool.monitor")
DEFAULT_INTERVAL_S = 5.0
_SAID_EVERY_S = 60.0


class GpuMonitor:
    def __init__(
        self,
        sampler: Sampler,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sampler = sampler
        self.interval_s = interval_s
        self._clock = clock
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


def sampler_for(inventory: Inventory, jobs: RunningJobs) -> Sampler:
    """NVML for GPUs discovered through it (this machine's), else the simulated sampler of
    the declared nodes, fed once per sample by the running jobs' declarations."""
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
            )
            for job in jobs.running()
            if job.node is not None
        ]

    return SimulatedSampler(inventory.nodes, running)


def _declared_util(job: Job) -> float:
    try:  # as the job sees its environment: what it asked for over what was exported
        return simulated_util({**dict(job.spec.base_env), **dict(job.spec.env)})
    except ValueError:  # refused at submit; a job stored before shows as busy
        return DEFAULT_SIMULATED_UTIL
