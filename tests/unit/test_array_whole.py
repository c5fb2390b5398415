"""An array's id names the whole array: cancelling, holding or releasing it is ONE store
transaction whatever the number of tasks (issue 35, goal 3), as `scancel`/`scontrol hold`
of an array are one request to slurmctld. Before, each task was a transaction of its own:
`gpupool cancel ARRAY` of 1,000 pending tasks took ~1,000 commits."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, event
from test_engine_view import FAR, pool_fixture  # noqa: F401  (fixture)
from test_store import spec, store_url_fixture  # noqa: F401  (fixture)

from gpupool.core.job import Hold, Job, JobState
from gpupool.core.job_control import ArrayRequest
from gpupool.engine import Engine
from gpupool.service import PoolService
from gpupool.service.steering import hold, release
from gpupool.store import Store
from gpupool.store.migrations import WRITE_OPTION

TASKS = 200
Pool = tuple[Store, Engine, PoolService]


def waiting_array(service: PoolService, now: float) -> Job:
    """An array of TASKS tasks that wait (their --begin is far off); its first task."""
    array = ArrayRequest(tuple(range(TASKS)))
    return service.submit(spec(workdir="/", array=array, begin_time=FAR), "alice", now)


@pytest.fixture
def commits(pool: Pool) -> Iterator[list[object]]:
    """The store's write transactions committed from now on."""
    store = pool[0]
    seen: list[object] = []
    engine = store._engine  # noqa: SLF001 - what is counted

    def count(conn: Connection) -> None:  # write transactions only: reads commit too
        if conn.get_execution_options().get(WRITE_OPTION):
            seen.append(conn)

    event.listen(engine, "commit", count)
    yield seen
    event.remove(engine, "commit", count)


def states(store: Store, array_id: int) -> set[JobState]:
    return {j.state for j in store.list_jobs(include_finished=True, array_id=array_id)}


def test_cancelling_an_arrays_id_is_one_transaction(pool: Pool, commits: list[object]) -> None:
    store, engine, service = pool
    now = time.time()
    first = waiting_array(service, now)
    commits.clear()
    answer = service.cancel(first.id, "alice", now)
    assert len(commits) == 1
    assert answer.id == first.id and answer.state is JobState.CANCELLED
    assert states(store, first.id) == {JobState.CANCELLED}
    assert store.get(first.id + TASKS - 1).events[-1].cause == "cancelled by alice"
    assert not [j for j in engine.view().jobs.values() if j.array_id == first.id]


def test_holding_and_releasing_an_arrays_id_is_one_transaction_each(
    pool: Pool, commits: list[object]
) -> None:
    store, engine, service = pool
    now = time.time()
    first = waiting_array(service, now)
    commits.clear()
    held = hold(service, first, Hold.USER, "alice", now)
    assert len(commits) == 1
    assert len(held.changed) == TASKS and not held.left
    assert {j.spec.hold for j in store.list_jobs(array_id=first.id)} == {Hold.USER}
    assert store.get(first.id + 7).events[-1].cause == "held by alice"
    commits.clear()
    again = hold(service, first, Hold.USER, "alice", now)  # nothing to change: said per task
    assert not again.changed and len(again.left) == TASKS
    assert again.left[0] == (first.id, f"job {first.id} is already held")
    commits.clear()
    released = release(service, first, False, "alice", now)
    assert len(commits) == 1
    assert len(released.changed) == TASKS
    assert {j.spec.hold for j in store.list_jobs(array_id=first.id)} == {None}
    view = [j for j in engine.view().jobs.values() if j.array_id == first.id]
    assert len(view) == TASKS and {j.spec.hold for j in view} == {None}


def test_a_task_the_hold_refuses_is_said_and_the_others_are_held_in_the_same_transaction(
    pool: Pool, commits: list[object]
) -> None:
    store, engine, service = pool
    now = time.time()
    first = waiting_array(service, now)
    node = engine.inventory.nodes[0].name
    store.commit_starts([(first.id + 3, node, (0,))], store.allocation_version(), now)
    engine.stored(store.get(first.id + 3))
    commits.clear()
    held = hold(service, first, Hold.USER, "alice", now)
    assert len(commits) == 1
    running = f"job {first.id + 3} is RUNNING: only a pending job can be held (the array's"
    assert len(held.left) == 1 and held.left[0][0] == first.id + 3
    assert held.left[0][1].startswith(running)
    assert len(held.changed) == TASKS - 1
    assert store.get(first.id + 3).spec.hold is None
    assert store.get(first.id + 4).spec.hold is Hold.USER
    assert store.get(first.id + 4).version == held.changed[3].version  # as stored
