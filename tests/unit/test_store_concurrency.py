"""The Store shared by threads: API handlers submitting while the engine thread schedules."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from test_store import spec, store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.core.job import JobState
from gpupool.store import StaleState, Store


def run_threads(n: int, target: Callable[[int], Any]) -> tuple[list[Any], list[BaseException]]:
    """Run target(i) in n threads released together; their results and exceptions."""
    barrier = threading.Barrier(n)
    results: list[Any] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def body(i: int) -> None:
        barrier.wait()
        try:
            r = target(i)
        except BaseException as e:  # noqa: BLE001  (collected and asserted on)
            with lock:
                errors.append(e)
        else:
            with lock:
                results.append(r)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    return results, errors


def test_parallel_submits_all_succeed(store: Store) -> None:
    def submit_50(i: int) -> list[int]:
        return [store.submit(spec(), f"user{i}", float(k)).id for k in range(50)]

    results, errors = run_threads(2, submit_50)
    assert errors == []
    ids = [job_id for r in results for job_id in r]
    assert len(ids) == 100 and len(set(ids)) == 100
    assert len(store.list_jobs()) == 100
    assert all(len(store.get(i).events) == 1 for i in ids)


def test_parallel_submits_with_one_token_store_one_job(store: Store) -> None:
    results, errors = run_threads(4, lambda i: store.submit(spec(), "alice", 1.0, token="once").id)
    assert errors == []
    assert len(set(results)) == 1
    assert len(store.list_jobs()) == 1


def test_racing_starts_of_one_gpu_exactly_one_wins(store: Store) -> None:
    for round_ in range(5):
        a = store.submit(spec(), "alice", 1.0)
        b = store.submit(spec(), "bob", 1.0)
        v = store.allocation_version()
        pairs = [(a.id, "n1", (round_,)), (b.id, "n1", (round_,))]
        results, errors = run_threads(
            2, lambda i, pairs=pairs, v=v: store.commit_starts([pairs[i]], v, 2.0)
        )
        assert len(results) == 1 and len(errors) == 1, (results, errors)
        assert isinstance(errors[0], StaleState)
        winner = results[0][0].id
        states = {j: store.get(j).state for j in (a.id, b.id)}
        assert states[winner] is JobState.RUNNING
        assert sorted(states.values()) == [JobState.PENDING, JobState.RUNNING]
        assert store.allocation_version() == v + 1


def test_racing_starts_on_different_gpus_with_one_version_one_wins(store: Store) -> None:
    # The plan of the loser was made from an old picture of the pool: refused as a whole.
    a = store.submit(spec(), "alice", 1.0)
    b = store.submit(spec(), "bob", 1.0)
    v = store.allocation_version()
    starts = [[(a.id, "n1", (0,))], [(b.id, "n1", (1,))]]
    results, errors = run_threads(2, lambda i: store.commit_starts(starts[i], v, 2.0))
    assert len(results) == 1 and [type(e) for e in errors] == [StaleState]


def test_readers_and_writers_side_by_side(store: Store) -> None:
    """An engine thread starting and finishing jobs while API threads submit and read."""
    stop = threading.Event()
    seen_errors: list[BaseException] = []

    def engine() -> None:
        gpu = 0
        while not stop.is_set():
            pending = [j for j in store.active_jobs() if j.state is JobState.PENDING]
            if not pending:
                time.sleep(0.001)
                continue
            try:
                store.commit_starts(
                    [(pending[0].id, "n1", (gpu % 8,))], store.allocation_version(), 1.0
                )
                store.finish(pending[0].id, JobState.SUCCEEDED, 0, 2.0, "done")
            except StaleState:
                pass
            gpu += 1

    def api(i: int) -> None:
        for _k in range(30):
            job = store.submit(spec(), f"u{i}", 0.0)
            store.get(job.id)
            store.list_jobs(include_finished=True, limit=10)

    t = threading.Thread(target=lambda: _guard(engine, seen_errors))
    t.start()
    try:
        _, errors = run_threads(3, api)
    finally:
        stop.set()
        t.join(timeout=60)
    assert errors == [] and seen_errors == []
    assert len(store.list_jobs(include_finished=True)) == 90


def _guard(fn: Callable[[], None], errors: list[BaseException]) -> None:
    try:
        fn()
    except BaseException as e:  # noqa: BLE001
        errors.append(e)


def test_racing_finishes_of_one_job_record_one_end(store: Store) -> None:
    for _ in range(5):
        j = store.submit(spec(), "alice", 1.0)
        store.commit_starts([(j.id, "n1", (0,))], store.allocation_version(), 2.0)
        results, errors = run_threads(
            3, lambda i, j=j: store.finish(j.id, JobState.FAILED, 1, 3.0 + i, "exited with code 1")
        )
        assert errors == []
        assert len({r.end_time for r in results}) == 1  # all saw the one recorded end
        assert [e.to for e in store.get(j.id).events].count(JobState.FAILED) == 1


def test_cancel_racing_a_start_one_of_them_wins_cleanly(store: Store) -> None:
    for gpu in range(5):
        j = store.submit(spec(), "alice", 1.0)
        v = store.allocation_version()
        ops = [
            lambda j=j, g=gpu, v=v: store.commit_starts([(j.id, "n1", (g,))], v, 2.0),
            lambda j=j: store.cancel_pending(j.id, 2.0, "cancelled by alice"),
        ]
        results, errors = run_threads(2, lambda i, ops=ops: ops[i]())
        final = store.get(j.id)
        if final.state is JobState.CANCELLED:  # the cancel won: the start was refused
            assert [type(e) for e in errors] == [StaleState]
        else:  # the start won: the cancel left the running job to be signalled
            assert final.state is JobState.RUNNING and errors == [] and None in results
            store.finish(j.id, JobState.CANCELLED, None, 3.0, "signalled")
