"""What the daemon does about GPU health events (core/gpu_health.py; read by
monitor/nvml_health.py each monitor round):

- every event is kept (`PoolService.record_health`: `gpupool health`, the dashboard);
- a **GPU's fault** (XID 48/63/64/74/79/94/95, uncorrectable ECC, a row remap pending or
  failed, retired pages pending, fallen off the bus) drains the GPU by `gpupool-health` with
  the event's words as the reason (the drain of service/drains.py: kept, shown, resumed by an
  admin once the GPU is fixed), once; each job running there is stopped: requeued as a
  preemption is when it is preemptible or has a `--retry` left (it starts again on a GPU
  that is not drained), else cancelled with the GPU's fault as its cause (Slurm ends such a
  job NODE_FAIL);
- a **job's own XID** (13/31/43) goes into the history of the job running on that GPU; the
  GPU stays in service;
- throttling and unknown XIDs are kept and shown only.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpupool.core.gpu_health import HEALTH_DRAINER, Fault, HealthEvent
from gpupool.core.job import Job, JobState

if TYPE_CHECKING:
    from gpupool.service.pool_service import PoolService

log = logging.getLogger("gpupool.health")


class HealthActions:
    def __init__(self, service: PoolService) -> None:
        self.service = service

    def events(self, events: Sequence[HealthEvent]) -> None:
        """Keep `events`, then act on each (module docstring)."""
        service = self.service
        service.record_health(events)
        if all(e.fault is Fault.NONE for e in events):
            return
        on = self._running_on_gpus()  # one read of the view for the batch
        for event in events:
            if event.fault is Fault.GPU:
                self._gpu_failed(event, on.get(event.key, ()))
            elif event.fault is Fault.JOB:
                for job in on.get(event.key, ()):
                    service.engine.stored(*_noted(service, job, event))

    def _running_on_gpus(self) -> dict[tuple[str, int], list[Job]]:
        """The pool's running jobs (not a backend's) by each (node, GPU) they hold."""
        on: dict[tuple[str, int], list[Job]] = {}
        for j in self.service.engine.view().jobs.values():
            if j.state is JobState.RUNNING and j.spec.backend is None and j.node is not None:
                for g in j.gpus:
                    on.setdefault((j.node, g), []).append(j)
        return on

    def _gpu_failed(self, event: HealthEvent, jobs: Sequence[Job]) -> None:
        service = self.service
        drained = service.drained_by_key().get(event.key)
        if drained is not None and drained.by == HEALTH_DRAINER:
            return  # drained for an earlier fault: once
        service.drain(HEALTH_DRAINER, event.node, event.gpu, event.time, event.detail[:200])
        for job in jobs:
            why = f"its GPU {event.node}:{event.gpu} failed ({event.detail})"
            spec = job.spec
            if spec.is_preemptible or job.failed_attempts < spec.retries:
                log.warning("job %d: requeued, %s", job.id, why)
                service.engine.preempt(job.id, why)
            else:
                log.warning("job %d: stopped, %s", job.id, why)
                stopped = service.store.request_cancel(
                    job.id, event.time, f"stopped: {why}; not preemptible and no --retry left"
                )
                service.engine.stored(stopped)


def _noted(service: PoolService, job: Job, event: HealthEvent) -> tuple[Job, ...]:
    """The job's history gets the XID it caused (its own fault: the GPU stays)."""
    noted = service.store.note(job.id, event.time, f"{event.detail} on its GPU {event.gpu} "
                               "(the job's own fault: the GPU stays in service)")  # fmt: skip
    return () if noted is None else (noted,)
