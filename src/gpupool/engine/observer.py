"""What the engine reports as it works, for whoever measures it (the API's `/metrics`,
api/metrics.py), through a small typed seam: the engine calls an `EngineObserver` and knows
nothing of Prometheus.

The engine's thread calls it, inside a round: an observer must be quick, must not block and
must not call back into the engine. What it raises is logged and dropped (engine/loop.py):
measuring never stops the pool.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from gpupool.core.job import Job


@dataclass(frozen=True)
class JobStarted:
    """A job's first start: how long it waited, from its submission to its start."""

    job_id: int
    project: str
    waited_s: float


class EngineObserver(Protocol):
    def pass_ran(self, seconds: float) -> None:
        """A scheduling pass ran: `seconds` of wall time to build its snapshot and decide."""

    def job_started(self, start: JobStarted) -> None:
        """A job started for the first time (its start committed to the store)."""

    def pass_deferred(self) -> None:
        """A due pass began to wait for the submissions in flight (engine/pacing.py)."""


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
