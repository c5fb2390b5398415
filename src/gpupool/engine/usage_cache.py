"""Fair-share usage as the engine's passes read it: decayed GPU-seconds per project and
user from the store's history, recomputed every `refresh_s` (it moves slowly, and reading
the history every pass would grow with it)."""

from __future__ import annotations

from collections.abc import Mapping

from gpupool.engine.contracts import EngineStore
from gpupool.policy.fairshare import UsageInterval, decayed_usage
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

    def at(self, now: float) -> Usage:
        if self._at is None or now - self._at >= self.refresh_s:
            half_life = self._half_life_s
            # Older than ten half-lives weighs under 0.1%: not worth reading.
            rows = self._store.usage_history(since=now - 10 * half_life, gpu_memory=self._memory)
            intervals = [UsageInterval(p, u, float(g), st, en) for p, u, g, st, en in rows]
            self._usage = decayed_usage(intervals, now, half_life)
            self._at = now
        return self._usage
