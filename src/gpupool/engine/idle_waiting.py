"""The daemon's count of GPU-seconds idle while a job that could use them waited, by cause,
by the rule the trace replay counts by (policy/idle_waiting.py).

After each pass the engine hands the meter the pass's snapshot and decision (`passed`): the
rate they give (the GPUs the running jobs and the starts leave free, the jobs left waiting
and why) holds until the next pass, which the engine runs on every change that matters (a
submission, an exit) and every little while besides. The GPU-seconds since the last pass are
counted when asked (`gpu_s`), so a scrape between passes is up to date.

Kept in the store per hour and cause (store/idle_waiting.py), in batches: the engine's
thread calls `write` after each round, which writes at most every STORE_EVERY_S (by the
monotonic clock), and once more, forced, when the daemon stops; what is not written yet is
kept (`unstored_in` gives a window's part of it, so a report is up to date too). A write
that fails keeps its figures for the next one. A daemon killed outright loses at most the
last STORE_EVERY_S.

At the daemon's start `resume` takes the stored totals as the counter's base: `/metrics`
exports base + counted (`gpupool_idle_while_waiting_gpu_seconds_total{cause}`), so the
counter goes on across restarts instead of falling back to 0. The engine's thread writes, a
scrape or a report reads: a lock keeps them apart.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from gpupool.policy.idle_waiting import IdleCause, add_rate, rate_after_pass
from gpupool.policy.snapshot import Decision, Snapshot
from gpupool.store.idle_waiting import HOUR_S, HourCauseSeconds, hour_in_window, hour_of

# How often the counted GPU-seconds are written to the store at most: a row update a
# minute, not one per pass (passes run many times a second under load).
STORE_EVERY_S = 60.0

# GPU-seconds by (hour's start, cause), not written yet.
_Buckets = dict[tuple[float, IdleCause], float]


class IdleWaitingStore(Protocol):
    """Where the meter keeps its figures (store.Store has it)."""

    def add_idle_waiting(self, amounts: HourCauseSeconds) -> None: ...

    def idle_waiting_totals(self) -> dict[str, float]: ...


class IdleWaitingMeter:
    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._base: dict[str, float] = {}  # what the store held at the start (`resume`)
        self._totals: dict[IdleCause, float] = {}  # counted by this meter
        self._unstored: _Buckets = {}  # counted, not written yet
        self._rate: dict[IdleCause, float] = {}
        self._since: float | None = None
        self._monotonic = monotonic
        self._written_at = monotonic()

    def resume(self, store: IdleWaitingStore) -> None:
        """Start the counter from what the store holds (the daemon's start): idempotent."""
        base = store.idle_waiting_totals()
        with self._lock:
            self._base = base

    def passed(self, snapshot: Snapshot, decision: Decision, now: float) -> None:
        """A pass decided at `now`: count the last rate until now, and hold this one."""
        rate = rate_after_pass(snapshot, decision)
        with self._lock:
            self._count_until(now)
            self._rate = rate

    def gpu_s(self, now: float) -> dict[str, float]:
        """GPU-seconds idle while jobs waited up to `now`, by cause, the stored ones of
        earlier daemons included (every cause, 0 where none)."""
        with self._lock:
            totals = dict(self._totals)
            if self._since is not None:
                add_rate(totals, self._rate, now - self._since)
            base = dict(self._base)
        return {c.value: base.get(c.value, 0.0) + totals.get(c, 0.0) for c in IdleCause}

    def unstored_in(self, since: float, until: float) -> dict[str, float]:
        """GPU-seconds counted up to `until` (a report's now) and not written yet, by cause,
        in the hours that overlap [since, until) (the store's window rule: `hour_in_window`)."""
        with self._lock:
            buckets = dict(self._unstored)
            if self._since is not None:
                _add_by_hour(buckets, self._rate, self._since, until)
        out: dict[str, float] = {}
        for (hour, cause), gpu_s in buckets.items():
            if hour_in_window(hour, since, until):
                out[cause.value] = out.get(cause.value, 0.0) + gpu_s
        return out

    def write(self, store: IdleWaitingStore, now: float, force: bool = False) -> None:
        """Write what was counted up to `now` and not written yet: when STORE_EVERY_S have
        passed since the last write, or `force` (the daemon stops). What a failing write
        raises goes to the caller; its figures are kept for the next write."""
        at = self._monotonic()
        if not force and at - self._written_at < STORE_EVERY_S:
            return
        self._written_at = at  # a failing store is tried again in a minute, not every round
        with self._lock:
            self._count_until(now)
            due, self._unstored = self._unstored, {}
        if not due:
            return
        try:
            store.add_idle_waiting({(hour, cause.value): s for (hour, cause), s in due.items()})
        except BaseException:
            with self._lock:
                for key, gpu_s in due.items():
                    self._unstored[key] = self._unstored.get(key, 0.0) + gpu_s
            raise

    def _count_until(self, now: float) -> None:
        if self._since is not None:
            add_rate(self._totals, self._rate, now - self._since)
            _add_by_hour(self._unstored, self._rate, self._since, now)
        self._since = now if self._since is None else max(self._since, now)


def _add_by_hour(
    buckets: _Buckets, rate: Mapping[IdleCause, float], start: float, end: float
) -> None:
    """Add `rate` GPUs held idle over [start, end) to `buckets`, split at hour boundaries."""
    for hour, seconds in hour_parts(start, end):
        for cause, gpus in rate.items():
            buckets[(hour, cause)] = buckets.get((hour, cause), 0.0) + gpus * seconds


def hour_parts(start: float, end: float) -> Iterator[tuple[float, float]]:
    """(hour's start, seconds of [start, end) inside that hour), in time order."""
    t = start
    while t < end:
        hour = hour_of(t)
        upto = min(end, hour + HOUR_S)
        yield hour, upto - t
        t = upto
