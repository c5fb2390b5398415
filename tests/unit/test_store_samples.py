"""GPU samples in the store: full rate, rolled up once per period, forgotten after their
retention; each job's GPU use added up a round at a time, in total and per hour. On SQLite
and PostgreSQL."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import command
from test_store import spec, start, store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.core.gpu_usage import Holder, attribute
from gpupool.core.job import Resources
from gpupool.core.monitoring import GpuSample
from gpupool.store import Store
from gpupool.store.migrations import config
from gpupool.store.samples import Retention

GIB = 1 << 30
T0 = 1_700_000_000.0 - (1_700_000_000.0 % 3600)  # an hour's start


def sample(t: float, index: int = 0, util: float | None = 50.0, power: float = 100.0) -> GpuSample:
    return GpuSample("n1", index, t, util, 10 * GIB, 80 * GIB, power, 40.0, (), True)


def rounds(store: Store, times: list[float], util_of=lambda t: 50.0) -> None:
    for t in times:
        store.record_samples([sample(t, 0, util_of(t)), sample(t, 1, util_of(t))], [])


def test_full_rate_samples_come_back_in_time_order(store: Store) -> None:
    rounds(store, [T0 + 10, T0 + 5, T0 + 15])
    got = store.gpu_history(T0, T0 + 60, 0)
    assert [(r.time, r.index) for r in got] == [
        (T0 + 5, 0), (T0 + 5, 1), (T0 + 10, 0), (T0 + 10, 1), (T0 + 15, 0), (T0 + 15, 1)
    ]  # fmt: skip
    assert all(r.simulated and r.samples == 1 for r in got)


def test_roll_up_makes_one_mean_per_minute_and_hour_once(store: Store) -> None:
    # Two minutes of 5 s samples: util 0 in the first minute, 100 in the second.
    times = [T0 + 5 * i for i in range(24)]
    rounds(store, times, util_of=lambda t: 0.0 if t < T0 + 60 else 100.0)
    assert store.roll_up_samples(T0 + 90) == 2  # minute 1 (both GPUs); minute 2 not ended
    assert store.roll_up_samples(T0 + 95) == 0  # nothing new ended
    assert store.roll_up_samples(T0 + 125) == 2  # minute 2
    minutes = store.gpu_history(T0, T0 + 3600, 60)
    assert [(r.time, r.index, r.util_pct, r.samples) for r in minutes] == [
        (T0, 0, 0.0, 12), (T0, 1, 0.0, 12), (T0 + 60, 0, 100.0, 12), (T0 + 60, 1, 100.0, 12)
    ]  # fmt: skip
    assert store.roll_up_samples(T0 + 3600) == 2  # the hour, now ended
    (hour0, _hour1) = store.gpu_history(T0, T0 + 7200, 3600)
    assert (hour0.util_pct, hour0.util_max_pct, hour0.samples) == (50.0, 100.0, 24)


def test_history_includes_the_minutes_not_rolled_up_yet(store: Store) -> None:
    rounds(store, [T0 + 5, T0 + 65, T0 + 70])
    store.roll_up_samples(T0 + 61)  # minute 0 rolled; minute 1 only as full-rate samples
    got = store.gpu_history(T0, T0 + 120, 60)
    assert [(r.time, r.samples) for r in got if r.index == 0] == [(T0, 1), (T0 + 60, 2)]


def test_retention_forgets_each_series_after_its_time(store: Store) -> None:
    rounds(store, [T0 + 5])
    keep = Retention(raw_s=100.0, minute_s=200.0, hour_s=10_000.0)
    store.roll_up_samples(T0 + 3600, keep)
    assert store.gpu_history(T0, T0 + 60, 0) == []  # raw: older than 100 s
    assert store.gpu_history(T0, T0 + 60, 60) == []  # minutes: older than 200 s
    assert [r.time for r in store.gpu_history(T0, T0 + 3600, 3600)] == [T0, T0]


def test_job_usage_adds_up_rounds_in_total_and_per_hour(store: Store) -> None:
    job = store.submit(spec(gpus=2), "alice", T0)
    start(store, job.id, "n1", (0, 1), now=T0)
    holder = Holder(job.id, "n1", (0, 1), Resources(gpus=2))
    for i, util in enumerate([100.0] * 19 + [0.0]):  # the last round straddles the hour
        t = T0 + 3420 + 10 * i
        samples = [sample(t, 0, util), sample(t, 1, util)]
        store.record_samples(samples, attribute(samples, [holder], 10.0))
    (summary,) = store.job_usage([job.id]).values()
    assert summary.samples == 20
    assert summary.mean_util_pct == 95.0
    assert 95.0 <= summary.p95_util_pct <= 100.0
    assert summary.used_gpu_s == 19 * 2 * 10.0
    assert summary.sampled_gpu_s == 20 * 2 * 10.0
    assert summary.energy_j == 20 * 2 * 100.0 * 10.0
    assert summary.peak_memory_bytes == 10 * GIB
    (whole,) = store.usage_in_window(T0)
    assert (whole.job_id, whole.first_hour, whole.used_gpu_s) == (job.id, T0, 19 * 2 * 10.0)
    assert whole.sampled_gpu_s == 20 * 2 * 10.0
    (second,) = store.usage_in_window(T0 + 3601)  # only the hour that overlaps the window
    assert (second.first_hour, second.used_gpu_s) == (T0 + 3600, 1 * 2 * 10.0)
    (first,) = store.usage_in_window(T0, until=T0 + 60)
    assert first.used_gpu_s == 18 * 2 * 10.0
    assert store.usage_in_window(T0 + 7200) == []
    assert store.job_usage([job.id + 1]) == {}


def test_the_samples_migration_goes_up_and_down(store_url: str) -> None:
    s = Store.open(store_url)
    s.submit(spec(), "alice", 1.0)
    s.record_samples([sample(T0)], [])
    s.close()
    command.downgrade(config(store_url), "0005")
    engine = sa.create_engine(store_url)
    try:
        tables = set(sa.inspect(engine).get_table_names())
        assert not {"gpu_samples", "gpu_sample_rollups", "job_usage", "job_usage_hours"} & tables
    finally:
        engine.dispose()
    s = Store.open(store_url)
    try:
        assert len(s.list_jobs()) == 1 and s.gpu_history(0, T0 + 1, 0) == []
    finally:
        s.close()
