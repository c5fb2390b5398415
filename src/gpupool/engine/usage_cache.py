"""Fair-share usage as the engine's passes read it: decayed GPU-seconds per project and user,
kept up to date from what changed rather than re-read from the history.

The first call reads the store's history once (`usage_history`: every run of the last ten
half-lives) and asks the store to keep, from then on, every run a write ends
(`keep_run_ends`, store/run_ends.py: each handed over once, when its write commits, whatever
the date of its end). Every `refresh_s` after that, the runs ended since fold into one
decayed sum per (project, user), decayed as a whole on read (as the simulator keeps it,
sim/usage.py), and only the running runs are read from the store (a row each). So a
refresh costs what changed and the jobs running, not the history: it used to re-read every
run of 70 days each 10 s, 1.2 s of the engine's thread and 62 MB at 100,000 runs
(bench/usage_refresh.py, docs/benchmarks.md, issue 35 goal 8).

The result equals `decayed_usage` over the store's whole history but for float rounding
(tests/unit/test_usage_ledger.py); runs that ended ten half-lives before the first call
are left out, as before (under 0.1% of their weight).

Called by the engine's thread only. The runs a write ends between the store starting to
keep them and the first read are counted once only because those writes (`finish`,
`requeue`) are the engine's own, made in the same thread.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from gpupool.engine.contracts import EndedRun, EngineStore, RunEndsKept
from gpupool.policy.fairshare import UsageInterval, decayed_gpu_seconds, decayed_usage
from gpupool.policy.snapshot import Usage


class UsageCache:
    def __init__(
        self,
        store: EngineStore,
        half_life_s: float,
        refresh_s: float,
        gpu_memory: Mapping[tuple[str, int], int],
    ) -> None:
        """`gpu_memory`: each (node, GPU)'s memory, so that a shared GPU counts its fraction
        (as every view counts it)."""
        self._store = store
        self._half_life_s = half_life_s
        self.refresh_s = refresh_s
        self._memory = gpu_memory
        self._usage = Usage()
        self._at: float | None = None
        self._ended: RunEndsKept | None = None  # from the first refresh on
        self._closed: dict[tuple[str, str], float] = {}  # ended runs, decayed to _closed_at
        self._closed_at = 0.0

    def at(self, now: float) -> Usage:
        if self._at is None or now - self._at >= self.refresh_s:
            self._usage = self._refresh(now)
            self._at = now
        return self._usage

    def _refresh(self, now: float) -> Usage:
        half_life = self._half_life_s
        if self._ended is None:
            self._ended = self._store.keep_run_ends(self._memory)  # before the read: none lost
            # Older than ten half-lives weighs under 0.1%: not worth reading.
            rows = self._store.usage_history(since=now - 10 * half_life, gpu_memory=self._memory)
            self._closed_at = now
            self._fold((p, u, g, st, en) for p, u, g, st, en in rows if en is not None)
            running = [row for row in rows if row[4] is None]  # the same read's
        else:
            if now > self._closed_at:
                factor = 2.0 ** (-(now - self._closed_at) / half_life)
                for key in self._closed:
                    self._closed[key] *= factor
                self._closed_at = now
            self._fold(self._ended.take())
            running = self._store.usage_history(now, self._memory, running_only=True)
        live = decayed_usage(
            [UsageInterval(p, u, float(g), st, None) for p, u, g, st, _ in running],
            now,
            half_life,
        )
        by_user = dict(self._closed)
        for key, used in live.by_user.items():
            by_user[key] = by_user.get(key, 0.0) + used
        by_user = {key: used for key, used in sorted(by_user.items()) if used > 0.0}
        by_project: dict[str, list[float]] = {}
        for (project, _user), used in by_user.items():
            by_project.setdefault(project, []).append(used)
        return Usage(
            by_project={p: math.fsum(parts) for p, parts in by_project.items()},
            by_user=by_user,
        )

    def _fold(self, runs: Iterable[EndedRun]) -> None:
        """Add ended runs, decayed to `_closed_at`, to their (project, user)'s sum."""
        at, half_life = self._closed_at, self._half_life_s
        for project, user, gpus, start, end in runs:
            used = decayed_gpu_seconds(gpus, start, end, at, half_life)
            if used > 0.0:
                key = (project, user)
                self._closed[key] = self._closed.get(key, 0.0) + used
