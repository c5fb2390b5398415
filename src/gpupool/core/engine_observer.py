"""What the engine reports as it works (engine/observer.py calls it), as types every layer
may implement without importing the engine: the API's `/metrics` is an `EngineObserver`.

The engine's thread calls it, inside a round: an observer must be quick, must not block and
must not call back into the engine. What it raises is logged and dropped: measuring never
stops the pool.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


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
