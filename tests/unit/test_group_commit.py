"""Group commit (service/group_commit.py) and the store's batch of submissions it drives
(store/submissions.py: submit_many), on SQLite and, where the tests have it, PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest
from test_store import spec, store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.core.job import JobState
from gpupool.service.group_commit import GroupCommit
from gpupool.store import Store
from gpupool.store.submissions import NewJob


def test_a_lone_write_is_written_at_once_as_a_batch_of_one() -> None:
    batches: list[list[int]] = []

    def write_many(items: Sequence[int]) -> list[int]:
        batches.append(list(items))
        return [i * 10 for i in items]

    group: GroupCommit[int, int] = GroupCommit(write_many)
    assert [group.write(i) for i in (1, 2, 3)] == [10, 20, 30]
    assert batches == [[1], [2], [3]]


def test_writes_that_arrive_during_a_write_are_written_together() -> None:
    first_started, release = threading.Event(), threading.Event()
    batches: list[list[int]] = []

    def write_many(items: Sequence[int]) -> list[int]:
        batches.append(list(items))
        if len(batches) == 1:  # hold the first write until the others wait behind it
            first_started.set()
            assert release.wait(10)
        return [i * 10 for i in items]

    group: GroupCommit[int, int] = GroupCommit(write_many)
    results: dict[int, int] = {}

    def writer(i: int) -> None:
        results[i] = group.write(i)

    first = threading.Thread(target=writer, args=(0,))
    first.start()
    assert first_started.wait(10)
    others = [threading.Thread(target=writer, args=(i,)) for i in range(1, 21)]
    for t in others:
        t.start()
    deadline = time.monotonic() + 10
    while len(group._waiting) < 20 and time.monotonic() < deadline:  # all queued behind it
        time.sleep(0.005)
    release.set()
    for t in [first, *others]:
        t.join(10)
    assert results == {i: i * 10 for i in range(21)}
    assert batches[0] == [0] and sorted(batches[1]) == list(range(1, 21)) and len(batches) == 2


def test_in_flight_counts_the_items_queued_and_being_written_until_they_resolve() -> None:
    # The engine's passes wait while many submissions are in flight (engine/pacing.py).
    started, release = threading.Event(), threading.Event()
    batches: list[list[int]] = []

    def write_many(items: Sequence[int]) -> list[int]:
        batches.append(list(items))
        started.set()
        assert release.wait(10)
        if len(batches) == 1:
            raise OSError(5, "Input/output error")
        return list(items)

    group: GroupCommit[int, int] = GroupCommit(write_many)
    assert group.in_flight == 0
    first = group.submit(0)
    assert started.wait(10)
    rest = [group.submit(i) for i in range(1, 4)]
    assert group.in_flight == 4  # one being written, three queued behind it
    release.set()
    with pytest.raises(OSError):
        first.result(10)
    assert [f.result(10) for f in rest] == [1, 2, 3]
    assert group.in_flight == 0  # a failed batch and a written one both leave nothing


def test_a_failed_batch_fails_every_writer_in_it_and_the_next_batch_goes_on() -> None:
    calls = 0

    def write_many(items: Sequence[int]) -> list[int]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise OSError(28, "No space left on device")
        return list(items)

    group: GroupCommit[int, int] = GroupCommit(write_many)
    with pytest.raises(OSError, match="No space"):
        group.write(1)
    assert group.write(2) == 2


def test_submit_many_stores_a_batch_in_order_with_its_tokens(store: Store) -> None:
    before = store.submit(spec(), "alice", 1.0, token="t-old")
    jobs = store.submit_many(
        [
            NewJob(spec(gpus=1), "bob", 2.0, "t-1"),
            NewJob(spec(gpus=2), "carol", 3.0, None, "submitted by carol; time limit 1d0h"),
            NewJob(spec(gpus=3), "bob", 4.0, "t-1"),  # the same submission, retried
            NewJob(spec(gpus=4), "dave", 5.0, "t-old"),  # stored before
        ]
    )
    assert [j.id for j in jobs] == [before.id + 1, before.id + 2, before.id + 1, before.id]
    assert [j.user for j in jobs] == ["bob", "carol", "bob", "alice"]
    assert all(j.state is JobState.PENDING for j in jobs)
    assert jobs[1].events[0].cause == "submitted by carol; time limit 1d0h"
    assert [j.id for j in store.active_jobs()] == [before.id, before.id + 1, before.id + 2]
    assert store.submit_many([]) == []


def test_the_jobs_submit_many_returns_are_the_jobs_stored(store: Store) -> None:
    """New jobs are built from what was inserted, not read back: they must be what a read
    gives, events included."""
    from test_store import full_spec

    jobs = store.submit_many(
        [NewJob(full_spec(), "alice", 2.5, "t-a"), NewJob(spec(gpus=2), "bob", 3.0, None, "why")]
    )
    jobs.append(store.submit(full_spec(), "carol", 4.0))
    for job in jobs:
        read = store.get(job.id)
        assert job == read
        assert job.spec == read.spec and job.events == read.events


def test_a_submission_awaited_in_an_event_loop_resolves_to_its_result() -> None:
    # The API's submit awaits the group commit in its event loop (no thread parked on it).
    import asyncio

    group: GroupCommit[int, int] = GroupCommit(lambda items: [i + 1 for i in items])

    async def submit_three() -> list[int]:
        futures = [asyncio.wrap_future(group.submit(i)) for i in (1, 2, 3)]
        return list(await asyncio.gather(*futures))

    assert asyncio.run(submit_three()) == [2, 3, 4]


def test_a_batch_given_too_few_results_fails_its_writers_instead_of_leaving_them_waiting() -> None:
    calls = 0

    def write_many(items: Sequence[int]) -> list[int]:
        nonlocal calls
        calls += 1
        return [] if calls == 1 else list(items)

    group: GroupCommit[int, int] = GroupCommit(write_many)
    with pytest.raises(RuntimeError, match="0 results for a batch of 1"):
        group.submit(1).result(timeout=10)
    assert group.write(2) == 2  # the writer goes on


def test_items_submitted_in_an_event_loop_resolve_in_it_with_their_batchs_results() -> None:
    """`submit_in_loop`: an event loop's own futures, resolved in the loop, each to its
    item's result; an error of the batch reaches every caller; a caller that left
    (cancelled) does not keep the others from their results."""
    import asyncio

    release, writing = threading.Event(), threading.Event()
    batches: list[list[int]] = []

    def write_many(items: list[int]) -> list[int]:
        writing.set()
        release.wait(10)  # the first item's batch waits: the rest gather in one batch
        batches.append(list(items))
        if 13 in items:
            raise OSError("No space left on device")
        return [i * 10 for i in items]

    group: GroupCommit[int, int] = GroupCommit(write_many)

    async def callers() -> tuple[list[int], bool, list[str]]:
        first = group.submit_in_loop(0)
        # The writer took the first item alone (waited for off the loop, which must run on).
        assert await asyncio.get_running_loop().run_in_executor(None, writing.wait, 10)
        rest = [group.submit_in_loop(i) for i in (1, 2, 3)]
        leaving = group.submit_in_loop(4)
        leaving.cancel()
        release.set()
        results = await asyncio.gather(first, *rest)
        failing = [group.submit_in_loop(13), group.submit_in_loop(14)]
        errors = await asyncio.gather(*failing, return_exceptions=True)
        return list(results), leaving.cancelled(), [str(e) for e in errors]

    results, left, errors = asyncio.run(callers())
    assert results == [0, 10, 20, 30]
    assert left
    assert errors == ["No space left on device"] * 2
    assert batches[:2] == [[0], [1, 2, 3, 4]]
