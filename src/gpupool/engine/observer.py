"""What the engine reports as it works, for whoever measures it (the API's `/metrics`,
api/metrics.py), through a small typed seam: the engine calls an `EngineObserver` and knows
nothing of Prometheus.

The engine's thread calls it, inside a round: an observer must be quick, must not block and
must not call back into the engine. What it raises is logged and dropped (engine/loop.py):
measuring never stops the pool.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpupool.core.engine_observer import JobStarted
from gpupool.core.job import Job


class NoObserver:
    """The engine's observer when nobody measures it."""

    def pass_ran(self, seconds: float) -> None:
        pass

    def job_started(self, start: JobStarted) -> None:
        pass

    def pass_deferred(self) -> None:
        pass


def first_starts(started: Iterable[Job]) -> list[JobStarted]:
    """The first starts among jobs just started, with their waits. A requeued job's later
    starts are left out: its submit time is its first submission's, so the time from it
    would count its earlier runs as waiting."""
    return [
        JobStarted(job.id, job.spec.project, max(0.0, job.start_time - job.submit_time))
        for job in started
        if job.restart_count == 0 and job.start_time is not None
    ]
