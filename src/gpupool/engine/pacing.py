"""How often the engine may run a scheduling pass: a budget of pass time.

Under a stream of submissions, passes over a long queue would run back to back and hold the
interpreter from the API's threads. Each pass spends the time it took from a bucket that
refills at `share` seconds per second, up to `burst_s`: under a stream, passes take at most
about `share` of the engine's time; after a quiet spell the bucket is full and a pass runs
at once, so a lone submission starts without waiting on the pacing. (A pass that took t was
followed by a wait of t before, whatever came before it: a one-at-a-time submission waited
on it, and a stream gave passes half the time.)

A pass that falls due while a burst of submissions is in flight waits for it (`PassDeferral`,
below): the budget alone let passes over a long queue take the first quarter second of a
burst from a full bucket, and the burst's first wave of requests waited on them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

PASS_SHARE = 0.2  # of the engine's time, at most, under a stream of submissions
PASS_BURST_S = 0.25  # seconds of passes that may run back to back after a quiet spell


@dataclass
class PassBudget:
    share: float = PASS_SHARE
    burst_s: float = PASS_BURST_S
    left_s: float = field(init=False)  # in the bucket now; full (burst_s) at first
    at: float = -math.inf  # when the last pass ended

    def __post_init__(self) -> None:
        self.left_s = self.burst_s

    def spend(self, ended: float, took_s: float) -> float:
        """Account a pass that ended at `ended` after `took_s` seconds; when the next pass
        may start (`ended` itself while the bucket is not empty)."""
        if self.at > -math.inf:
            self.left_s = min(self.burst_s, self.left_s + max(ended - self.at, 0.0) * self.share)
        self.at = ended
        self.left_s -= took_s
        return ended if self.left_s >= 0 else ended + -self.left_s / self.share


# A pass that falls due while this many submissions are in flight waits for them, as
# Slurm's scheduler defers while max_rpc_cnt requests are being served: a burst of clients
# is answered first, and its jobs are decided on together. It waits at most DEFER_MAX_S, so
# a stream of submissions that never drains still sees a pass that often.
DEFER_AT = 8
DEFER_MAX_S = 0.5
DEFER_RECHECK_S = 0.01  # how soon a deferred pass looks again


class Arrivals(Protocol):
    """What the engine asks the API's side about its load (the daemon's PoolService)."""

    def submissions_in_flight(self) -> int:
        """Submissions taken in and not yet stored (waiting for, or in, a group commit)."""
        ...


class NoArrivals:
    """The engine's arrivals when no API feeds it (tests, offline commands)."""

    def submissions_in_flight(self) -> int:
        return 0


@dataclass
class PassDeferral:
    at: int = DEFER_AT
    max_s: float = DEFER_MAX_S
    since: float | None = None  # when the pass now waiting first fell due

    def defer(self, now: float, in_flight: int) -> bool:
        """Whether a pass due at `now` waits, `in_flight` submissions being in flight: while
        `at` or more are, for at most `max_s` from when it first fell due (then it runs, and
        the next due pass may wait again)."""
        if in_flight < self.at:
            self.since = None
            return False
        if self.since is None:
            self.since = now
        if now - self.since >= self.max_s:
            self.since = None
            return False
        return True
