"""Decayed GPU usage kept up to date as a replay runs, for the fair-share factor.

The daemon recomputes `Snapshot.usage` from its job history (`policy.fairshare.decayed_usage`
over the intervals of the last ten half-lives). A replay asks for it at every pass, ~100,000
times, so it keeps per (project, user) sums from which the same integral follows in O(entities):

- finished intervals: their decayed GPU-seconds, stored as the value at the time `closed_at`
  and decayed on read (usage decays as a whole: `U(t) = U(t0) * 2 ** (-(t - t0) / h)`);
- running jobs: `sum g * h/ln2 * (1 - 2 ** (-(now - s) / h))`
  `= h/ln2 * (G - 2 ** (-now / h) * sum g * 2 ** (s / h))`, so two running sums per entity
  (G = sum g, S = sum g * 2 ** (s / h)) give it. Times are relative to the trace start, so
  `2 ** (s / h)` stays well inside a float for any real trace (a year at h = 7 days is
  2**52; floats overflow only past ~1,000 half-lives).

tests/unit/test_sim_engine.py checks it against `decayed_usage` on random intervals.
"""

from __future__ import annotations

import math

from gpupool.policy.fairshare import decayed_gpu_seconds
from gpupool.policy.snapshot import Usage

_LN2 = math.log(2.0)


class UsageTracker:
    def __init__(self, half_life_s: float) -> None:
        self.h = half_life_s
        self._closed: dict[tuple[str, str], float] = {}  # decayed value at _closed_at
        self._closed_at = 0.0
        self._g: dict[tuple[str, str], float] = {}
        self._s: dict[tuple[str, str], float] = {}

    def _decay_closed(self, now: float) -> None:
        if now > self._closed_at:
            factor = 2.0 ** (-(now - self._closed_at) / self.h)
            for key in self._closed:
                self._closed[key] *= factor
            self._closed_at = now

    def start(self, project: str, user: str, gpus: float, at: float) -> None:
        key = (project, user)
        self._g[key] = self._g.get(key, 0.0) + gpus
        self._s[key] = self._s.get(key, 0.0) + gpus * 2.0 ** (at / self.h)

    def stop(self, project: str, user: str, gpus: float, started: float, at: float) -> None:
        key = (project, user)
        self._g[key] -= gpus
        self._s[key] -= gpus * 2.0 ** (started / self.h)
        self._decay_closed(at)
        used = decayed_gpu_seconds(gpus, started, at, at, self.h)
        self._closed[key] = self._closed.get(key, 0.0) + used

    def usage(self, now: float) -> Usage:
        self._decay_closed(now)
        scale = self.h / _LN2
        now_factor = 2.0 ** (-now / self.h)
        by_user: dict[tuple[str, str], float] = {}
        for key in self._closed.keys() | self._g.keys():
            running = scale * (self._g.get(key, 0.0) - now_factor * self._s.get(key, 0.0))
            total = self._closed.get(key, 0.0) + max(0.0, running)
            if total > 0.0:
                by_user[key] = total
        by_project: dict[str, float] = {}
        for (project, _user), used in by_user.items():
            by_project[project] = by_project.get(project, 0.0) + used
        return Usage(by_project=by_project, by_user=by_user)
