"""Shared GPUs in the store: several fractional jobs on one GPU, never mixed with a whole-GPU
job; the granted memory read back; the database's own guard; migrating 0002 -> 0003."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command
from test_store import spec, store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.core.job import JobSpec, JobState, Resources
from gpupool.store import StaleState, Store
from gpupool.store.migrations import config

GiB = 1 << 30


def frac_spec() -> JobSpec:
    return JobSpec(command=("x",), resources=Resources(gpus=1, gpu_fraction=0.5))


def test_two_fractional_jobs_share_a_gpu(store: Store) -> None:
    a, b = store.submit(frac_spec(), "u", 1.0), store.submit(frac_spec(), "u", 1.0)
    started = store.commit_starts(
        [(a.id, "n1", (0,), 40 * GiB), (b.id, "n1", (0,), 40 * GiB)],
        store.allocation_version(),
        2.0,
    )
    assert [(j.state, j.gpus, j.gpu_memory_bytes) for j in started] == [
        (JobState.RUNNING, (0,), 40 * GiB),
        (JobState.RUNNING, (0,), 40 * GiB),
    ]
    assert store.get(a.id).gpu_memory_bytes == 40 * GiB  # 40GiB: past a 32-bit integer
    # Its history says the share as the pool prints sizes (it said "42949672960 bytes of GPU").
    assert store.get(a.id).events[-1].cause == "scheduled on n1 40GiB of GPU 0"
    # Whole-GPU 3-tuples still work, next to the shared GPU.
    c = store.submit(spec(), "u", 1.0)
    (job,) = store.commit_starts([(c.id, "n1", (1,))], store.allocation_version(), 3.0)
    assert job.gpu_memory_bytes is None


def test_whole_and_shared_never_mix(store: Store) -> None:
    a, b, c = (store.submit(s, "u", 1.0) for s in (frac_spec(), spec(), frac_spec()))
    store.commit_starts([(a.id, "n1", (0,), GiB)], store.allocation_version(), 2.0)
    v = store.allocation_version()
    with pytest.raises(StaleState, match="held shared by job"):
        store.commit_starts([(b.id, "n1", (0,))], v, 3.0)
    assert store.allocation_version() == v  # nothing written
    store.commit_starts([(b.id, "n1", (1,))], v, 3.0)
    with pytest.raises(StaleState, match="held whole by job"):
        store.commit_starts([(c.id, "n1", (1,), GiB)], store.allocation_version(), 4.0)
    assert store.get(c.id).state is JobState.PENDING


def test_mixing_inside_one_call_is_refused(store: Store) -> None:
    a, b = store.submit(frac_spec(), "u", 1.0), store.submit(spec(), "u", 1.0)
    with pytest.raises(StaleState):
        store.commit_starts(
            [(a.id, "n1", (0,), GiB), (b.id, "n1", (0,), None)], store.allocation_version(), 2.0
        )
    assert store.get(a.id).state is JobState.PENDING


def test_a_shared_allocation_is_one_gpu(store: Store) -> None:
    a = store.submit(frac_spec(), "u", 1.0)
    with pytest.raises(ValueError, match="one GPU"):
        store.commit_starts([(a.id, "n1", (0, 1), GiB)], store.allocation_version(), 2.0)


def test_ending_one_sharer_keeps_the_other(store: Store) -> None:
    a, b = store.submit(frac_spec(), "u", 1.0), store.submit(frac_spec(), "u", 1.0)
    store.commit_starts(
        [(a.id, "n1", (0,), GiB), (b.id, "n1", (0,), GiB)], store.allocation_version(), 2.0
    )
    store.finish(a.id, JobState.SUCCEEDED, 0, 3.0, "done")
    assert store.get(a.id).gpu_memory_bytes == GiB  # kept as history, like gpus
    c = store.submit(spec(), "u", 1.0)
    with pytest.raises(StaleState, match=f"held shared by job {b.id}"):
        store.commit_starts([(c.id, "n1", (0,))], store.allocation_version(), 4.0)
    requeued = store.requeue(b.id, 5.0, "preempted")
    assert requeued.gpu_memory_bytes is None and requeued.gpus == ()
    store.commit_starts([(c.id, "n1", (0,))], store.allocation_version(), 6.0)


def test_the_database_refuses_a_gpu_whole_twice(store: Store, store_url: str) -> None:
    a, b = store.submit(spec(), "u", 1.0), store.submit(frac_spec(), "u", 1.0)
    store.commit_starts([(a.id, "n1", (0,))], store.allocation_version(), 2.0)
    engine = sa.create_engine(store_url)
    try:
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
            conn.exec_driver_sql(
                f"INSERT INTO allocations (node, gpu_index, job_id) VALUES ('n1', 0, {b.id})"
            )
        with engine.begin() as conn:  # shared rows are the code's to check, not the index's
            conn.exec_driver_sql(
                "INSERT INTO allocations (node, gpu_index, job_id, memory_bytes)"
                f" VALUES ('n1', 1, {b.id}, 1024)"
            )
    finally:
        engine.dispose()


def test_migrating_0002_to_0003_keeps_running_jobs(store_url: str) -> None:
    cfg = config(store_url)
    command.upgrade(cfg, "0002")
    engine = sa.create_engine(store_url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "INSERT INTO jobs (username, name, project, priority, state, submit_time,"
                " reason, gpus, restart_count, cancel_requested, spec, version)"
                " VALUES ('u', 'x', 'default', 200, 'RUNNING', 1.0, '', '[0]', 0, false,"
                ' \'{"command": ["x"], "resources": {"gpus": 1}}\', 1)'
            )
            conn.exec_driver_sql(
                "INSERT INTO allocations (node, gpu_index, job_id) VALUES ('n1', 0, 1)"
            )
    finally:
        engine.dispose()
    store = Store.open(store_url)  # migrates to head
    try:
        job = store.get(1)
        assert job.gpus == (0,) and job.gpu_memory_bytes is None
        b = store.submit(frac_spec(), "u", 2.0)
        with pytest.raises(StaleState, match="held whole by job 1"):
            store.commit_starts([(b.id, "n1", (0,), GiB)], store.allocation_version(), 3.0)
    finally:
        store.close()
    command.downgrade(cfg, "0002")  # and back, with the whole-GPU row kept
    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as conn:
            rows = conn.exec_driver_sql("SELECT node, gpu_index, job_id FROM allocations").all()
        assert [tuple(r) for r in rows] == [("n1", 0, 1)]
    finally:
        engine.dispose()


def test_usage_history_counts_a_shared_gpu_as_its_fraction(store: Store) -> None:
    """Fair share's raw material counts a job as every view does (core.job.gpu_count): a
    --gpus 0.5 job 0.5, a 20GiB job on an 80GiB GPU 0.25, whole jobs their GPUs."""
    half = store.submit(frac_spec(), "u", 1.0)
    mem = store.submit(
        JobSpec(command=("x",), resources=Resources(gpus=1, gpu_memory_bytes=20 * GiB)), "u", 1.0
    )
    whole = store.submit(spec(gpus=2), "u", 1.0)
    store.commit_starts(
        [(half.id, "n1", (0,), 40 * GiB), (mem.id, "n1", (0,), 20 * GiB), (whole.id, "n1", (1, 2))],
        store.allocation_version(),
        2.0,
    )
    store.finish(half.id, JobState.SUCCEEDED, 0, 12.0, "done")
    memory = {("n1", g): 80 * GiB for g in range(4)}
    rows = sorted(store.usage_history(since=0.0, gpu_memory=memory), key=lambda r: r[2])
    assert [(r[2], r[3], r[4]) for r in rows] == [
        (0.25, 2.0, None),
        (0.5, 2.0, 12.0),
        (2.0, 2.0, None),
    ]
    # Without the GPUs' memory a memory request counts its one GPU (as the quota book does).
    assert sorted(r[2] for r in store.usage_history(since=0.0)) == [0.5, 1.0, 2.0]


def test_the_engines_fair_share_usage_counts_a_half_gpu_job_as_half(store: Store) -> None:
    import math

    from gpupool.core.clock import FakeClock
    from gpupool.engine import Engine
    from gpupool.inventory import resolve_inventory
    from gpupool.policy.snapshot import PolicyConfig

    half = store.submit(frac_spec(), "alice", 1.0)
    inventory = resolve_inventory(gpus="1xA100-80GB")
    node = inventory.nodes[0].name
    store.commit_starts([(half.id, node, (0,), 40 * GiB)], store.allocation_version(), 100.0)
    config = PolicyConfig(fairshare_half_life_s=math.inf)  # plain GPU-seconds
    engine = Engine(store, None, inventory, clock=FakeClock(1100.0), config=config)
    assert engine.usage().by_project == {"default": 0.5 * 1000.0}
