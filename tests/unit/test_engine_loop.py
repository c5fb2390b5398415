"""The engine's loop with a real store (SQLite, and PostgreSQL where the tests have it) and
a real executor: what it reads per pass, what `why` tells after a refused commit, the time
limit a job without --time runs under. Each of these failed before the fix it tests (the
engine of 14a49dc re-read the jobs table every pass, kept the previous decision after a
refused commit, and enforced no default limit)."""

from __future__ import annotations

import errno
import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from executor_helpers import stop_everything, wait_exit, wait_for
from test_store import spec, store_url_fixture  # noqa: F401  (fixture)

from gpupool.core.clock import FakeClock
from gpupool.core.execution import RunAs
from gpupool.core.job import Job, JobSpec, JobState, Resources
from gpupool.core.project import Project
from gpupool.engine import Engine
from gpupool.engine import loop as loop_module
from gpupool.executor import LocalExecutor
from gpupool.inventory import resolve_inventory
from gpupool.service import PoolService, RequestRefused
from gpupool.store import Store

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")
ENV = (("PATH", os.environ.get("PATH", "/usr/bin:/bin")),)


class CountingStore(Store):
    """The real store, counting the calls that read jobs."""

    reads = 0

    def list_jobs(self, **kw: Any) -> list[Job]:
        self.reads += 1
        return super().list_jobs(**kw)

    def active_jobs(self, **kw: Any) -> list[Job]:
        self.reads += 1
        return super().active_jobs(**kw)


class RacingStore(Store):
    """The real store, where a cancel lands between a pass and the commit of its first
    start (an API thread winning the race): the commit is refused as stale."""

    raced = False

    def commit_starts(self, starts: Sequence[Any], expected_version: int, now: float, cause: str = "scheduled") -> list[Job]:  # type: ignore[override]  # fmt: skip
        if not self.raced:
            self.raced = True
            self.cancel_pending(starts[0][0], now, "cancelled by the race")
        return super().commit_starts(starts, expected_version, now, cause)


@pytest.fixture
def executor(tmp_path: Path) -> Iterator[LocalExecutor]:
    # The jobs' users ("alice") are names here, not Unix users: run them as we are.
    ex = LocalExecutor(tmp_path / "jobs-state", run_as=RunAs.DAEMON)
    yield ex
    stop_everything(ex)
    ex.close()


def test_a_pass_reads_no_job_from_the_store_after_recovery(
    store_url: str, executor: LocalExecutor
) -> None:
    store = CountingStore.open(store_url)
    try:
        inventory = resolve_inventory(gpus="1xA100-80GB")
        far = time.time() + 86400.0
        for _ in range(5):  # held: passes have work to look at, and start nothing
            store.submit(spec(begin_time=far), "alice", 1.0)
        engine = Engine(store, executor, inventory)
        engine.recover()
        store.reads = 0
        for _ in range(3):
            decision = engine.run_pass()
        assert len(decision.pending) == 5
        assert store.reads == 0
    finally:
        store.close()


def test_why_tells_the_pass_that_followed_a_refused_commit(
    store_url: str, executor: LocalExecutor
) -> None:
    store = RacingStore.open(store_url)
    try:
        inventory = resolve_inventory(gpus="1xA100-80GB")
        raced = store.submit(spec(workdir="/"), "alice", 1.0)
        held = store.submit(spec(begin_time=time.time() + 3600.0), "alice", 1.0)
        engine = Engine(store, executor, inventory)
        engine.recover()
        engine.run_pass()
        assert store.raced and store.get(raced.id).state is JobState.CANCELLED
        decision = engine.last_decision
        assert decision.starts == ()
        assert raced.id not in decision.pending
        assert decision.pending[held.id].code.value == "BeginTime"
    finally:
        store.close()


def _finish(engine: Engine, store: Store, job_id: int, within_s: float) -> Job:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        engine.run_pass()
        job = store.get(job_id)
        if job.state.terminal:
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} still {store.get(job_id).state.value} after {within_s}s")


@pytest.mark.parametrize(
    ("project", "pool_default_s", "limit_s", "words"),
    [
        ("ml", 3600.0, 1.0, "project ml's default: no --time"),
        ("default", 1.0, 1.0, "the pool's default: no --time"),
    ],
    ids=["its-projects-default", "the-pools-default"],
)
def test_a_job_without_time_is_stopped_at_the_default_limit(
    store_url: str,
    executor: LocalExecutor,
    project: str,
    pool_default_s: float,
    limit_s: float,
    words: str,
) -> None:
    from gpupool.policy.snapshot import PolicyConfig

    store = Store.open(store_url)
    try:
        store.upsert_project(Project("ml", default_time_limit_s=1.0))
        inventory = resolve_inventory(gpus="1xA100-80GB")
        config = PolicyConfig(default_time_limit_s=pool_default_s)
        engine = Engine(store, executor, inventory, config=config)
        service = PoolService(store, executor, engine, inventory)
        job_spec = JobSpec(
            command=("sleep", "60"), project=project, grace_s=0.5, workdir="/", base_env=ENV
        )
        job = service.submit(job_spec, "alice", time.time())
        shown = store.get(job.id)
        assert shown.spec.time_limit_s == limit_s  # what `show` shows
        assert words in shown.events[0].cause
        done = _finish(engine, store, job.id, within_s=15.0)
        assert (done.state, done.reason) == (JobState.TIMEOUT, "TimeLimit")
        assert "time limit 1s reached" in done.events[-1].cause
    finally:
        store.close()


def test_a_job_with_its_own_time_keeps_it_and_its_story_says_nothing_more(
    store_url: str, executor: LocalExecutor
) -> None:
    store = Store.open(store_url)
    try:
        inventory = resolve_inventory(gpus="1xA100-80GB")
        engine = Engine(store, executor, inventory, clock=FakeClock(1.0))
        service = PoolService(store, executor, engine, inventory)
        job = service.submit(
            JobSpec(command=("true",), time_limit_s=120.0, resources=Resources(gpus=1)), "bob", 1.0
        )
        assert job.spec.time_limit_s == 120.0
        assert store.get(job.id).events[0].cause == "submitted by bob"
    finally:
        store.close()


def _disk_full_error(tmp_path: Path) -> Exception:
    """SQLite's own SQLITE_FULL ("database or disk is full"), through SQLAlchemy."""
    import sqlalchemy as sa

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'capped.db'}")
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA max_page_count=1")
            conn.exec_driver_sql("CREATE TABLE t (x TEXT)")
            conn.exec_driver_sql("INSERT INTO t VALUES (?)", ("y" * 100_000,))
    except sa.exc.DBAPIError as exc:
        return exc
    finally:
        engine.dispose()
    raise AssertionError("the capped database took the row")


def test_a_full_disk_under_the_engine_is_one_warning_line_not_a_traceback_per_round(
    tmp_path: Path, executor: LocalExecutor, caplog: pytest.LogCaptureFixture
) -> None:
    """The engine's own writes (here the pending jobs' reasons) fail at every round while
    the state disk is full: it says so in one line (at most once a minute), and goes on."""
    full = _disk_full_error(tmp_path)

    class FullStore(Store):
        failures = 0

        def set_reasons(self, reasons: Any) -> None:
            self.failures += 1
            raise full

    store = FullStore.open(f"sqlite:///{tmp_path / 'state' / 'state.db'}")
    engine = Engine(store, executor, resolve_inventory(gpus="1xA100-80GB"), poll_interval=0.05)
    engine.recover()
    engine.start()
    try:
        far = time.time() + 86400.0
        for n in range(3):  # each gives a pass new reasons to store
            engine.stored(store.submit(spec(begin_time=far), "alice", 1.0))
            deadline = time.monotonic() + 30
            while store.failures <= n and time.monotonic() < deadline:
                time.sleep(0.01)
        assert store.failures >= 3
    finally:
        engine.stop()
        store.close()
    said = [r for r in caplog.records if "reasons" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]
    (line,) = said
    assert line.levelname == "WARNING" and line.exc_info is None
    assert line.getMessage().startswith(
        "engine: could not store the pending jobs' reasons: the state disk is full ("
    ), line.getMessage()
    assert line.getMessage().endswith("; done again once space is freed")


def test_a_submission_token_used_by_another_user_is_refused_and_shows_nothing(
    store_url: str, executor: LocalExecutor
) -> None:
    # Submission tokens make a retry idempotent; one user's token must not hand another
    # user's job back (its id, its spec) to a second user who sends it.
    store = Store.open(store_url)
    try:
        inventory = resolve_inventory(gpus="1xA100-80GB")
        engine = Engine(store, executor, inventory)
        service = PoolService(store, executor, engine, inventory)
        job_spec = JobSpec(command=("true",), workdir="/", base_env=ENV, begin_time=4e9)
        first = service.submit(job_spec, "alice", time.time(), "t-shared")
        again = service.submit(job_spec, "alice", time.time(), "t-shared")
        assert again.id == first.id  # the owner's retry: the same job
        with pytest.raises(RequestRefused) as refused:
            service.submit(job_spec, "bob", time.time(), "t-shared")
        assert refused.value.code == "token_in_use"
        assert str(first.id) not in refused.value.message
        assert [j.user for j in store.active_jobs()] == ["alice"]
    finally:
        store.close()


def test_rounds_woken_by_submissions_ask_the_executor_at_most_once_a_poll_gap(
    store_url: str, executor: LocalExecutor, tmp_path: Path
) -> None:
    """A storm of submissions wakes a round each; the running jobs are asked about at most
    once in _POLL_GAP_S, not in every round (each asked the executor, and each backend,
    before issue 35's goal 4). A job's end is still seen within the interval."""
    store = Store.open(store_url)
    interval = 0.5
    engine = Engine(store, executor, resolve_inventory(gpus="1xA100-80GB"), poll_interval=interval)
    gate = tmp_path / "gate"
    try:
        running = _running_until(gate, store, engine)
        polls, began = engine.polls, time.monotonic()
        far = time.time() + 86400.0
        for _ in range(300):
            engine.stored(store.submit(spec(begin_time=far), "alice", 1.0))
        took = time.monotonic() - began
        assert engine.passes >= 3  # the storm woke rounds
        most = took / loop_module._POLL_GAP_S + 2
        assert engine.polls - polls <= most, (engine.polls - polls, took)
        _release(gate)
        wait_for(lambda: store.get(running.id).state is not JobState.RUNNING, 30, "its end seen")
    finally:
        engine.stop()
        store.close()


def test_a_submission_after_a_job_ended_finds_its_gpus_free_in_the_same_round(
    store_url: str, executor: LocalExecutor, tmp_path: Path
) -> None:
    """The round a submission wakes asks about the running jobs (once _POLL_GAP_S has
    passed): a job that ended since is seen there, and the new job starts on its GPU at
    once, not at the next timer poll (a `poll_interval` of an hour here). Without it, a
    pass of its own for the end spent the pass budget the submission's then waited for."""
    store = Store.open(store_url)
    engine = Engine(store, executor, resolve_inventory(gpus="1xA100-80GB"), poll_interval=3600)
    gate = tmp_path / "gate"
    try:
        running = _running_until(gate, store, engine)
        _release(gate)
        wait_exit(executor, running.id, 30)  # its exit recorded: a poll sees it
        second = store.submit(spec(workdir="/", base_env=ENV), "alice", 2.0)
        engine.stored(second)
        wait_for(
            lambda: store.get(second.id).state is JobState.RUNNING,
            20,
            "the second job's start: it waited for a timer poll",
        )
        assert store.get(running.id).state is JobState.SUCCEEDED
    finally:
        engine.stop()
        store.close()


def _running_until(gate: Path, store: Store, engine: Engine) -> Job:
    """A 1-GPU job that runs until `_release(gate)` (it reads the FIFO `gate`, made here,
    to its end), submitted and seen RUNNING with `engine` started (recovered first)."""
    os.mkfifo(gate)
    code = f"open({str(gate)!r}).read()"
    spec_ = JobSpec(
        command=("python", "-c", code), resources=Resources(gpus=1), base_env=ENV, workdir="/"
    )
    job = store.submit(spec_, "alice", 1.0)
    engine.recover()
    engine.start()
    wait_for(lambda: store.get(job.id).state is JobState.RUNNING, 30, "the job's start")
    return job


def _release(gate: Path) -> None:
    """End the job of `_running_until`: its read of `gate` meets the end, once it reads."""

    def writer() -> int | None:
        try:
            return os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise
            return None

    os.close(wait_for(writer, 30, "the job reading its gate"))
