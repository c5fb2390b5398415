"""GPU-seconds idle while jobs waited, kept in the store (store/idle_waiting.py) per hour and
cause: added in batches, summed over a window and in total; the 0014 migration; the meter's
batching (engine/idle_waiting.py: at most once a minute and at stop, split at hours, kept on
a failed write); and a real engine whose counter goes on from the stored total after a
restart, as /metrics and accounting read it. On SQLite (and PostgreSQL when configured)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from executor_helpers import stop_everything
from hypothesis import given
from hypothesis import strategies as st
from test_store import store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.cli.usage import idle_waiting_line
from gpupool.client.usage_views import read_usage_report
from gpupool.core.clock import FakeClock
from gpupool.core.execution import RunAs
from gpupool.core.job import JobSpec, JobState, Resources
from gpupool.core.project import Project
from gpupool.engine import Engine
from gpupool.engine.idle_waiting import STORE_EVERY_S, IdleWaitingMeter, hour_parts
from gpupool.executor import LocalExecutor
from gpupool.inventory import resolve_inventory
from gpupool.policy.idle_waiting import IdleCause
from gpupool.service import PoolService
from gpupool.service.accounting import GroupBy
from gpupool.store import Store
from gpupool.store.idle_waiting import HourCauseSeconds
from gpupool.store.migrations import config, make_engine, upgrade

H = 3600.0
T0 = 1_700_000_000.0 - (1_700_000_000.0 % H)  # an hour's start


# -- the store ----------------------------------------------------------------------------


def test_added_seconds_accumulate_per_hour_and_cause(store: Store) -> None:
    store.add_idle_waiting({(T0, "quota"): 10.0, (T0 + H, "quota"): 5.0})
    store.add_idle_waiting({(T0, "quota"): 2.5, (T0, "fragmentation"): 4.0, (T0, "other"): 0.0})
    assert store.idle_waiting_totals() == {"quota": 17.5, "fragmentation": 4.0}
    assert store.idle_waiting_in_window(T0, T0 + H) == {"quota": 12.5, "fragmentation": 4.0}
    assert store.idle_waiting_in_window(T0 + H, T0 + 2 * H) == {"quota": 5.0}


def test_a_window_counts_the_whole_hours_that_overlap_it(store: Store) -> None:
    store.add_idle_waiting({(T0, "quota"): 1.0, (T0 + H, "quota"): 2.0, (T0 + 2 * H, "quota"): 4.0})
    # [T0 + 30 min, T0 + 90 min) overlaps the first two hours, whole.
    assert store.idle_waiting_in_window(T0 + H / 2, T0 + 1.5 * H) == {"quota": 3.0}
    assert store.idle_waiting_in_window(T0 + H) == {"quota": 6.0}  # no end: up to now
    assert store.idle_waiting_in_window(T0 + 3 * H, T0 + 4 * H) == {}


def test_nothing_added_writes_nothing(store: Store) -> None:
    store.add_idle_waiting({})
    store.add_idle_waiting({(T0, "quota"): 0.0})
    assert store.idle_waiting_totals() == {}


def test_the_idle_waiting_migration_goes_up_and_down(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    engine = make_engine(url, migrating=True)
    with engine.connect() as conn:
        upgrade(conn, "0013")
    engine.dispose()
    s = Store.open(url)  # migrates 0013 -> head: the table is there, empty
    try:
        assert s.idle_waiting_totals() == {}
        s.add_idle_waiting({(T0, "quota"): 7.0})
        assert s.idle_waiting_totals() == {"quota": 7.0}
    finally:
        s.close()
    command.downgrade(config(url), "0013")
    engine = sa.create_engine(url)
    try:
        assert "idle_waiting" not in set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()
    s = Store.open(url)  # and up again, from nothing
    try:
        assert s.idle_waiting_totals() == {}
    finally:
        s.close()


# -- the meter's batching -----------------------------------------------------------------


class Ticker:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class FailingStore:
    """A store whose writes fail (a full disk) until told otherwise."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.failing = True

    def add_idle_waiting(self, amounts: HourCauseSeconds) -> None:
        if self.failing:
            raise OSError(28, "No space left on device")
        self.inner.add_idle_waiting(amounts)

    def idle_waiting_totals(self) -> dict[str, float]:
        return self.inner.idle_waiting_totals()


def held(meter: IdleWaitingMeter, rate: dict[IdleCause, float], now: float) -> None:
    """As a pass at `now` that leaves `rate` idle GPUs would (`passed`, without a pool)."""
    meter._count_until(now)
    meter._rate = rate


def test_writes_come_at_most_once_a_minute_split_at_hours(store: Store) -> None:
    tick = Ticker()
    meter = IdleWaitingMeter(monotonic=tick)
    held(meter, {IdleCause.QUOTA: 2.0}, T0 + H - 100)
    meter.write(store, T0 + H - 50)
    assert store.idle_waiting_totals() == {}  # not a minute since the last write
    tick.t = STORE_EVERY_S
    meter.write(store, T0 + H + 50)  # 2 GPUs for 100 s before the hour's end, 50 s after
    assert store.idle_waiting_in_window(T0, T0 + 1) == {"quota": 200.0}
    assert store.idle_waiting_in_window(T0 + H, T0 + H + 1) == {"quota": 100.0}
    assert meter.unstored_in(T0, T0 + H + 50) == {}  # all of it written
    meter.write(store, T0 + H + 60, force=True)  # the daemon stops: written at once
    assert store.idle_waiting_totals() == {"quota": 320.0}


def test_a_failed_write_keeps_its_figures_for_the_next(store: Store) -> None:
    tick = Ticker()
    meter = IdleWaitingMeter(monotonic=tick)
    failing = FailingStore(store)
    held(meter, {IdleCause.FRAGMENTATION: 1.0}, T0)
    with pytest.raises(OSError):
        meter.write(failing, T0 + 30, force=True)
    assert meter.unstored_in(T0, T0 + 40) == {"fragmentation": 40.0}  # kept, and counting
    failing.failing = False
    meter.write(failing, T0 + 40, force=True)
    assert store.idle_waiting_totals() == {"fragmentation": 40.0}
    assert meter.gpu_s(T0 + 40)["fragmentation"] == 40.0  # counted once, not twice


def test_resume_starts_the_counter_from_the_stored_total(store: Store) -> None:
    store.add_idle_waiting({(T0, "quota"): 30.0, (T0, "reservation"): 5.0})
    meter = IdleWaitingMeter()
    meter.resume(store)
    meter.resume(store)  # idempotent
    held(meter, {IdleCause.QUOTA: 1.0}, T0 + 100)
    got = meter.gpu_s(T0 + 110)
    assert got == {"fragmentation": 0.0, "reservation": 5.0, "quota": 40.0, "other": 0.0}


@given(
    start=st.floats(min_value=T0 - 2 * H, max_value=T0 + 2 * H),
    length=st.floats(min_value=0.0, max_value=5 * H),
)
def test_hour_parts_cover_the_interval_once_each_inside_its_hour(
    start: float, length: float
) -> None:
    parts = list(hour_parts(start, start + length))
    assert sum(s for _, s in parts) == pytest.approx(length, abs=1e-6)
    assert all(hour % H == 0 and 0 < s <= H for hour, s in parts)
    hours = [hour for hour, _ in parts]
    assert hours == sorted(set(hours))  # one part per hour, in time order


# -- a real engine across a restart -------------------------------------------------------


def test_the_counter_and_the_report_survive_an_engine_restart(tmp_path: Path) -> None:
    """A project limited to 1 GPU on 2: its second job waits while a GPU is free (quota).
    Passes write nothing until a minute has passed; stop writes the rest; a new engine
    resumes the counter from the store and accounting reports the window."""
    store = Store.open(f"sqlite:///{tmp_path / 'state.db'}")
    executor = LocalExecutor(tmp_path / "jobs-state", run_as=RunAs.DAEMON)
    inventory = resolve_inventory(gpus="2xA100-80GB")
    clock = FakeClock(T0 + 1000.0)
    engines: list[Engine] = []

    def new_engine() -> tuple[Engine, PoolService]:
        engine = Engine(store, executor, inventory, clock=clock)
        engine.idle_waiting = IdleWaitingMeter(monotonic=clock.now)  # the cadence on the clock
        engines.append(engine)
        return engine, PoolService(store, executor, engine, inventory)

    try:
        engine, service = new_engine()
        store.create_project(Project("p", quota=1, limit=1))
        engine.projects_changed(store.projects())
        spec = JobSpec(
            command=("sleep", "60"), workdir="/", resources=Resources(gpus=1), project="p"
        )
        first = service.submit(spec, "alice", clock.now())
        second = service.submit(spec, "alice", clock.now())
        engine.run_pass()
        assert store.get(first.id).state is JobState.RUNNING
        assert store.get(second.id).state is JobState.PENDING  # p's limit
        clock.advance(30.0)
        engine.run_pass()
        assert store.idle_waiting_totals() == {}  # a pass alone writes nothing
        now = clock.now()
        report = service.accounting().report(GroupBy.USER, now - H, now)
        assert report.idle_waiting_gpu_h["quota"] * H == 30.0  # not stored yet, reported
        clock.advance(40.0)
        engine.run_pass()  # over a minute since the engine began: written
        assert store.idle_waiting_totals() == {"quota": 70.0}
        clock.advance(10.0)
        engine.stop()  # the last 10 s, at stop
        assert store.idle_waiting_totals() == {"quota": 80.0}

        engine, service = new_engine()
        engine.start()  # resumes from the store (and re-adopts the running job)
        assert engine.idle_waiting_gpu_s()["quota"] == 80.0
        now = clock.now()
        report = service.accounting().report(GroupBy.USER, now - H, now)
        assert report.idle_waiting_gpu_h["quota"] * H == 80.0
        assert report.idle_waiting_gpu_h["fragmentation"] == 0.0
    finally:
        for engine in engines:
            engine.stop()
        stop_everything(executor)
        executor.close()
        store.close()


# -- the client and the CLI ---------------------------------------------------------------


def usage_answer(**more: object) -> dict[str, object]:
    row = {
        "group": "total", "jobs": 0, "allocated_gpu_hours": 0.0, "used_gpu_hours": 0.0,
        "sampled_gpu_hours": 0.0, "efficiency": None, "mean_wait_s": None,
        "preempted_gpu_hours": 0.0, "idle_reclaimed_gpu_hours": 0.0, "energy_kwh": 0.0,
    }  # fmt: skip
    return {"by": "user", "since": 0.0, "until": H, "simulated": False, "rows": [],
            "total": row, **more}  # fmt: skip


def test_an_older_daemons_report_reads_as_no_idle_figures() -> None:
    assert read_usage_report(usage_answer()).idle_waiting_gpu_hours is None
    got = read_usage_report(usage_answer(idle_waiting_gpu_hours={"quota": 1.5}))
    assert got.idle_waiting_gpu_hours == {"quota": 1.5}


def test_the_usage_line_gives_the_total_and_each_cause_in_order() -> None:
    line = idle_waiting_line(
        {"other": 0.0, "reservation": 0.25, "quota": 1.0, "fragmentation": 0.5, "new": 0.125}
    )
    assert line == (
        "GPU-hours idle while jobs waited: 1.88 (quota 1.00, fragmentation 0.50, "
        "reservation 0.25, other 0.00, new 0.12)"
    )
