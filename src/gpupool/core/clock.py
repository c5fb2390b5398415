"""Time as a dependency: the daemon uses the system clock, the simulator and tests a fake one."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float: ...


class SystemClock:
    """Wall-clock seconds since the epoch (what the store records)."""

    def now(self) -> float:
        return time.time()


class FakeClock:
    """A clock that only moves when told to: deterministic tests and trace replay."""

    def __init__(self, start: float = 0.0) -> None:
        self._t = start

    def now(self) -> float:
        return self._t

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        self._t += seconds

    def set(self, t: float) -> None:
        if t < self._t:
            raise ValueError("a clock does not go backwards")
        self._t = t
