"""Fair-share usage kept from what changed (engine/usage_cache.py, store/run_ends.py) equals
usage recomputed from the store's whole history (`decayed_usage` over `usage_history`),
whatever the order of starts, ends, requeues and cancels, and wherever the engine began to
keep it: the kept usage never re-reads the history after its first read (issue 35, goal 8)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_store import store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.core.job import JobSpec, JobState, Resources
from gpupool.engine.contracts import UsageRow
from gpupool.engine.usage_cache import UsageCache
from gpupool.policy.fairshare import UsageInterval, decayed_usage
from gpupool.policy.snapshot import Usage
from gpupool.store import StaleState, Store

HALF_LIFE_S = 6 * 3600.0  # short, so that the decay between steps matters
GIB = 1 << 30
GPUS = 8
MEMORY = {("n1", i): 80 * GIB for i in range(GPUS)}  # a shared GPU's fraction needs it
USERS = ("ana", "bo", "cy")


def full_recompute(
    history: Callable[..., list[UsageRow]], now: float, since: float = -1e18
) -> Usage:
    """From `history` (a store's `usage_history`); `since`: the ledger's first read leaves
    out runs ended ten half-lives before it."""
    rows = history(since, MEMORY)
    intervals = [UsageInterval(p, u, float(g), s, e) for p, u, g, s, e in rows]
    return decayed_usage(intervals, now, HALF_LIFE_S)


def assert_same(kept: Usage, full: Usage) -> None:
    assert kept.by_user.keys() == full.by_user.keys()
    assert kept.by_project.keys() == full.by_project.keys()
    for key, used in full.by_user.items():
        assert math.isclose(kept.by_user[key], used, rel_tol=1e-9, abs_tol=1e-6), key
    for key, used in full.by_project.items():
        assert math.isclose(kept.by_project[key], used, rel_tol=1e-9, abs_tol=1e-6), key


class Pool:
    """A store driven as the engine drives it, on one 8-GPU node."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.now = 1_000.0
        self.pending: list[int] = []
        self.running: dict[int, tuple[tuple[int, ...], bool]] = {}  # id: (GPUs, shared)

    def submit(self, user: str, kind: int) -> None:
        if kind == 0:  # a shared GPU: a quarter of its memory
            res = Resources(gpus=1, gpu_memory_bytes=20 * GIB)
        else:
            res = Resources(gpus=kind)
        spec = JobSpec(command=("true",), resources=res)
        self.pending.append(self.store.submit(spec, user, self.now).id)

    def start(self, pick: int) -> None:
        if not self.pending:
            return
        job_id = self.pending[pick % len(self.pending)]
        job = self.store.get(job_id)
        whole = {g for gpus, shared in self.running.values() if not shared for g in gpus}
        shared = job.spec.resources.gpu_memory_bytes is not None
        free = [g for g in range(GPUS) if g not in whole]
        if shared:
            start: Any = (job_id, "n1", (free[0],), 20 * GIB) if free else None
        else:
            busy = whole | {g for gpus, s in self.running.values() if s for g in gpus}
            free = [g for g in range(GPUS) if g not in busy]
            n = job.spec.resources.gpus
            start = (job_id, "n1", tuple(free[:n])) if len(free) >= n else None
        if start is None:
            return
        try:
            self.store.commit_starts([start], self.store.allocation_version(), self.now)
        except StaleState:
            return
        self.pending.remove(job_id)
        self.running[job_id] = (start[2], shared)

    def end(self, pick: int, how: str) -> None:
        if not self.running:
            return
        job_id = sorted(self.running)[pick % len(self.running)]
        del self.running[job_id]
        if how == "requeue":
            self.store.requeue(job_id, self.now, "preempted")
            self.pending.append(job_id)
        else:
            state = JobState.SUCCEEDED if how == "finish" else JobState.FAILED
            self.store.finish(job_id, state, 0 if how == "finish" else 1, self.now, "ended")

    def cancel(self, pick: int, many: bool) -> None:
        if not self.pending:
            return
        if many:
            self.store.cancel_many(list(self.pending), self.now, "cancelled")
            self.pending.clear()
        else:
            job_id = self.pending.pop(pick % len(self.pending))
            self.store.cancel_pending(job_id, self.now, "cancelled")


STEP = st.tuples(
    st.sampled_from(
        ["submit", "submit", "start", "start", "finish", "fail", "requeue", "cancel", "refresh"]
    ),
    st.integers(0, 11),
    st.floats(1.0, 2 * 3600.0),
)


def drive(pool: Pool, cache: UsageCache | None, step: tuple[str, int, float]) -> None:
    action, pick, dt = step
    pool.now += dt
    if action == "submit":
        pool.submit(USERS[pick % len(USERS)], pick % 3)
    elif action == "start":
        pool.start(pick)
    elif action in ("finish", "fail", "requeue"):
        pool.end(pick, action)
    elif action == "cancel":
        pool.cancel(pick, many=pick % 4 == 0)
    elif cache is not None:
        cache.at(pool.now)


@pytest.fixture(name="sqlite_store")
def sqlite_store_fixture(tmp_path: Path) -> Iterator[Store]:
    """One store for all of a test's examples (opening one migrates it: ~0.2 s); each
    example leaves it with nothing active, later in time than the one before."""
    store = Store.open(f"sqlite:///{tmp_path / 'state.db'}")
    yield store
    store.close()


_CLOCK = [1_000.0]  # where the next example starts: after every run already stored


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    before=st.lists(STEP, max_size=25),
    after=st.lists(STEP, max_size=35),
)
def test_kept_usage_equals_the_whole_history_recomputed(
    sqlite_store: Store,
    before: list[tuple[str, int, float]],
    after: list[tuple[str, int, float]],
) -> None:
    pool = Pool(sqlite_store)
    pool.now = _CLOCK[0]
    try:
        for step in before:  # history the ledger's first read finds
            drive(pool, None, step)
        cache = UsageCache(sqlite_store, HALF_LIFE_S, 0.0, MEMORY)
        window = pool.now - 10 * HALF_LIFE_S  # what its first read takes
        assert_same(
            cache.at(pool.now), full_recompute(sqlite_store.usage_history, pool.now, window)
        )
        for step in after:  # and what it is handed, one write at a time
            drive(pool, cache, step)
        assert_same(
            cache.at(pool.now), full_recompute(sqlite_store.usage_history, pool.now, window)
        )
    finally:
        pool.now += 1.0
        for job_id in list(pool.running):
            sqlite_store.finish(job_id, JobState.SUCCEEDED, 0, pool.now, "ended")
        sqlite_store.cancel_many(pool.pending, pool.now, "cancelled")
        _CLOCK[0] = pool.now + 1.0


def test_a_refresh_reads_no_ended_run_again(store: Store) -> None:
    """On both databases: once kept, the ended runs come from the writes, not the history:
    the store is read for the running ones only."""
    pool = Pool(store)
    for user in USERS * 2:
        pool.submit(user, 1)
    for pick in range(6):
        pool.start(pick)
    pool.now += 600.0
    for how in ("finish", "requeue", "fail"):
        pool.end(0, how)
    cache = UsageCache(store, HALF_LIFE_S, 0.0, MEMORY)
    cache.at(pool.now)
    reads: list[bool] = []
    history = store.usage_history

    def counted(since: float, gpu_memory: Any = None, *, running_only: bool = False) -> Any:
        reads.append(running_only)
        return history(since, gpu_memory, running_only=running_only)

    store.usage_history = counted  # type: ignore[method-assign]
    for step in range(4):
        pool.now += 900.0
        pool.end(step, "finish")
        assert_same(cache.at(pool.now), full_recompute(history, pool.now))
    assert reads and all(reads)
