"""--after and --array against a real store (SQLite and PostgreSQL): an array stored once
however often its submission is repeated, and a dependency that ended before the engine
started (a restart) read from the store and acted on."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from executor_helpers import stop_everything
from test_store import store_url_fixture  # noqa: F401  (fixture)

from gpupool.core.execution import RunAs
from gpupool.core.job import EndReason, JobSpec, JobState, Resources
from gpupool.core.job_control import AfterKind, ArrayRequest, Dependency
from gpupool.engine import Engine
from gpupool.executor import LocalExecutor
from gpupool.inventory import resolve_inventory
from gpupool.service.arrays import array_tasks
from gpupool.store import Store
from gpupool.store.submissions import NewJob


def spec(**kw: object) -> JobSpec:
    return JobSpec(command=("true",), resources=Resources(gpus=1), **kw)  # type: ignore[arg-type]


@pytest.fixture
def executor(tmp_path: Path) -> Iterator[LocalExecutor]:
    ex = LocalExecutor(tmp_path / "jobs-state", run_as=RunAs.DAEMON)
    yield ex
    stop_everything(ex)
    ex.close()


def test_an_array_is_stored_once_with_its_id_on_every_task(store_url: str) -> None:
    store = Store.open(store_url)
    try:
        new = NewJob(spec(array=ArrayRequest((0, 1, 5), 2)), "alice", 1.0, "tok-1")
        tasks = store.submit_array(array_tasks(new))
        again = store.submit_array(array_tasks(new))  # the same token: the same tasks
        assert [t.id for t in again] == [t.id for t in tasks]
        first = tasks[0].id
        stored = [store.get(t.id) for t in tasks]
        assert {j.array_id for j in stored} == {first}
        got = [
            (j.spec.array_task and (j.spec.array_task.index, j.spec.array_task.limit))
            for j in stored
        ]
        assert got == [(0, 2), (1, 2), (5, 2)]
        assert all(j.spec.array is None for j in stored)
        # The submit answer's task ids (Client.map): in index order; none for no array.
        assert store.array_task_ids(first) == [t.id for t in tasks]
        assert store.array_task_ids(first + 1000) == []
    finally:
        store.close()


def test_a_dependency_that_ended_before_a_restart_is_read_from_the_store(
    store_url: str, executor: LocalExecutor
) -> None:
    store = Store.open(store_url)
    try:
        failed = store.submit(spec(), "alice", 1.0)
        store.finish(failed.id, JobState.FAILED, 1, 2.0, "exited 1")
        on_ok = store.submit(spec(after=(Dependency(failed.id, AfterKind.OK),)), "alice", 3.0)
        far = time.time() + 86400.0  # held by --begin once its dependency is met: not run
        on_any = store.submit(
            spec(after=(Dependency(failed.id, AfterKind.ANY),), begin_time=far), "alice", 3.0
        )
        engine = Engine(store, executor, resolve_inventory(gpus="1xA100-80GB"))
        engine.recover()
        decision = engine.run_pass()
        cancelled = store.get(on_ok.id)
        assert cancelled.state is JobState.CANCELLED
        assert cancelled.reason == EndReason.DEPENDENCY
        assert any(f"dependency job {failed.id} ended FAILED" in e.cause for e in cancelled.events)
        assert decision.pending[on_any.id].code.value == "BeginTime"  # past its dependency
    finally:
        store.close()


def test_an_array_dependency_that_ended_before_a_restart_reads_every_task(
    store_url: str, executor: LocalExecutor
) -> None:
    """--after on an array's id: every task, as the store has them (issue 30, item 3)."""
    store = Store.open(store_url)
    try:
        new = NewJob(spec(array=ArrayRequest((0, 1, 2))), "alice", 1.0)
        tasks = store.submit_array(array_tasks(new))
        first = tasks[0].id
        for task in tasks:  # task 1 failed; the first task, the array's id, succeeded
            store.commit_starts([(task.id, "box", (0,))], store.allocation_version(), 1.5)
            failed = task.id == first + 1
            state = JobState.FAILED if failed else JobState.SUCCEEDED
            store.finish(task.id, state, 1 if failed else 0, 2.0, "ended")
        on_ok = store.submit(spec(after=(Dependency(first, AfterKind.OK),)), "alice", 3.0)
        far = time.time() + 86400.0
        on_any = store.submit(
            spec(after=(Dependency(first, AfterKind.ANY),), begin_time=far), "alice", 3.0
        )
        engine = Engine(store, executor, resolve_inventory(gpus="1xA100-80GB"))
        engine.recover()
        decision = engine.run_pass()
        cancelled = store.get(on_ok.id)
        assert cancelled.state is JobState.CANCELLED, cancelled
        words = f"job {first + 1} ({first}_1) of array {first} ended FAILED, not SUCCEEDED"
        assert any(words in e.cause for e in cancelled.events), cancelled.events
        assert decision.pending[on_any.id].code.value == "BeginTime"
    finally:
        store.close()
