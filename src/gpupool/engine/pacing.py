"""How often the engine may run a scheduling pass: a budget of pass time.

Under a stream of submissions, passes over a long queue would run back to back and hold the
interpreter from the API's threads. Each pass spends the time it took from a bucket that
refills at `share` seconds per second, up to `burst_s`: under a stream, passes take at most
about `share` of the engine's time; after a quiet spell the bucket is full and a pass runs
at once, so a lone submission starts without waiting on the pacing. (A pass that took t was
followed by a wait of t before, whatever came before it: a one-at-a-time submission waited
on it, and a stream gave passes half the time.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

PASS_SHARE = 0.2  # of the engine's time, at most, under a stream of submissions
PASS_BURST_S = 0.25  # seconds of passes that may run back to back after a quiet spell


@dataclass
class PassBudget:
    share: float = PASS_SHARE
    burst_s: float = PASS_BURST_S
    left_s: float = PASS_BURST_S
    at: float = -math.inf  # when the last pass ended

    def spend(self, ended: float, took_s: float) -> float:
        """Account a pass that ended at `ended` after `took_s` seconds; when the next pass
        may start (`ended` itself while the bucket is not empty)."""
        if self.at > -math.inf:
            self.left_s = min(self.burst_s, self.left_s + max(ended - self.at, 0.0) * self.share)
        self.at = ended
        self.left_s -= took_s
        return ended if self.left_s >= 0 else ended + -self.left_s / self.share
