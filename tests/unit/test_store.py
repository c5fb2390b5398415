"""The Store: jobs, transitions and GPU allocations kept in a database.

Runs on SQLite files; also on PostgreSQL when GPUPOOL_TEST_POSTGRES_URL is set (e.g.
postgresql+psycopg://postgres@127.0.0.1:5432/gpupool_test; that database is wiped per test).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pg_server import empty_public_schema

from gpupool.core.job import JobSpec, JobState, Resources, Transition
from gpupool.store import StaleState, Store, UnknownJob

PG_URL = os.environ.get("GPUPOOL_TEST_POSTGRES_URL")
BACKENDS = ["sqlite"] + (["postgres"] if PG_URL else [])


# Named fixtures, so the other test_store_*.py modules can import them without shadowing.
@pytest.fixture(name="store_url", params=BACKENDS)
def store_url_fixture(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "sqlite":
        # A directory that does not exist yet: open() must create it.
        return f"sqlite:///{tmp_path / 'state' / 'state.db'}"
    assert PG_URL is not None
    empty_public_schema(PG_URL)
    return PG_URL


@pytest.fixture(name="store")
def store_fixture(store_url: str) -> Iterator[Store]:
    s = Store.open(store_url)
    yield s
    s.close()


def spec(gpus: int = 1, **kw) -> JobSpec:
    return JobSpec(command=("python", "train.py"), resources=Resources(gpus=gpus), **kw)


def full_spec() -> JobSpec:
    """Every field away from its default, including values JSON could easily distort."""
    return JobSpec(
        command=("torchrun", "--nproc", "4", "train.py", "--lr=3e-4", "ünïcode ✓", ""),
        resources=Resources(gpus=4, gpu_type="A100-80GB", cpus=32, mem_bytes=256 << 30),
        name="bert-large",
        project="nlp",
        priority=300,
        time_limit_s=5400.5,
        env=(("WANDB_MODE", "offline"), ("A", ""), ("A", "again"), ("QUOTE", "\"x\" = 'y'")),
        base_env=(("PATH", "/usr/bin:/bin"), ("HOME", "/home/alice"), ("LANG", "C.UTF-8")),
        workdir="/home/alice/bert",
        grace_s=12.25,
    )


def start(
    store: Store, job_id: int, node: str = "n1", gpus: tuple[int, ...] = (0,), now: float = 10.0
) -> None:
    store.commit_starts([(job_id, node, gpus)], store.allocation_version(), now)


# -- submit and read


def test_submit_get_round_trips_every_field(store: Store) -> None:
    s = full_spec()
    job = store.submit(s, "alice", 1234.5)
    got = store.get(job.id)
    assert got.spec == s
    assert got == job
    assert (got.user, got.state, got.submit_time) == ("alice", JobState.PENDING, 1234.5)
    assert (got.start_time, got.end_time, got.exit_code, got.node, got.gpus) == (
        None,
        None,
        None,
        None,
        (),
    )
    assert got.events == (Transition(1234.5, None, JobState.PENDING, "submitted by alice"),)


def test_ids_are_sequential_from_one(store: Store) -> None:
    assert [store.submit(spec(), "u", float(i)).id for i in range(3)] == [1, 2, 3]


def test_get_unknown_job(store: Store) -> None:
    with pytest.raises(UnknownJob, match="no job with id 42"):
        store.get(42)
    with pytest.raises(KeyError):  # UnknownJob is a KeyError for callers that expect one
        store.get(42)


def test_same_token_twice_stores_one_job(store: Store) -> None:
    first = store.submit(spec(), "alice", 1.0, token="abc")
    again = store.submit(spec(gpus=2), "alice", 2.0, token="abc")
    assert again.id == first.id
    assert again.spec == first.spec and again.submit_time == 1.0
    assert len(store.list_jobs(include_finished=True)) == 1
    assert store.submit(spec(), "alice", 3.0, token="other").id != first.id
    # No token: never deduplicated.
    assert store.submit(spec(), "alice", 4.0).id != store.submit(spec(), "alice", 4.0).id


def test_list_jobs_filters(store: Store) -> None:
    a1 = store.submit(spec(), "alice", 1.0)
    b1 = store.submit(spec(), "bob", 2.0)
    a2 = store.submit(spec(), "alice", 3.0)
    a3 = store.submit(spec(), "alice", 4.0)
    store.cancel_pending(a2.id, 5.0, "cancelled by alice")
    start(store, a3.id)

    def ids(jobs):
        return [j.id for j in jobs]

    assert ids(store.list_jobs()) == [a1.id, b1.id, a3.id]
    assert ids(store.list_jobs(include_finished=True)) == [a1.id, b1.id, a2.id, a3.id]
    assert ids(store.list_jobs(user="alice")) == [a1.id, a3.id]
    assert ids(store.list_jobs(user="alice", include_finished=True)) == [a1.id, a2.id, a3.id]
    assert ids(store.list_jobs(user="carol")) == []
    assert ids(store.list_jobs(include_finished=True, limit=2)) == [a2.id, a3.id]
    assert ids(store.list_jobs(limit=0)) == []
    assert ids(store.list_jobs(ids={a3.id, a2.id, 999})) == [a3.id]
    assert ids(store.list_jobs(ids=[a3.id, a2.id], include_finished=True)) == [a2.id, a3.id]
    assert ids(store.list_jobs(ids=[])) == []
    assert all(j.events == () for j in store.list_jobs())
    assert ids(store.active_jobs()) == [a1.id, b1.id, a3.id]


# -- starting


def test_commit_starts_happy_path(store: Store) -> None:
    j1 = store.submit(spec(gpus=2), "alice", 1.0)
    j2 = store.submit(spec(gpus=1), "bob", 2.0)
    v = store.allocation_version()
    started = store.commit_starts([(j1.id, "n1", (0, 1)), (j2.id, "n1", (2,))], v, 5.0)

    assert store.allocation_version() == v + 1
    assert [j.id for j in started] == [j1.id, j2.id]
    for job, gpus in ((store.get(j1.id), (0, 1)), (store.get(j2.id), (2,))):
        assert (job.state, job.node, job.gpus, job.start_time) == (
            JobState.RUNNING,
            "n1",
            gpus,
            5.0,
        )
        assert job.events[-1] == Transition(
            5.0, JobState.PENDING, JobState.RUNNING, f"scheduled on n1 GPUs {list(gpus)}"
        )
        assert job.version > 1
    assert started[0] == store.get(j1.id)


def test_empty_starts_is_a_no_op(store: Store) -> None:
    v = store.allocation_version()
    assert store.commit_starts([], v + 7, 1.0) == []
    assert store.allocation_version() == v


def test_stale_version_changes_nothing(store: Store) -> None:
    j1 = store.submit(spec(), "alice", 1.0)
    j2 = store.submit(spec(), "bob", 1.0)
    v = store.allocation_version()
    start(store, j1.id, gpus=(0,))
    before = store.get(j2.id)
    with pytest.raises(StaleState, match="allocation version"):
        store.commit_starts([(j2.id, "n1", (1,))], v, 2.0)
    assert store.allocation_version() == v + 1
    assert store.get(j2.id) == before and store.get(j2.id).events == before.events


def test_same_gpu_twice_in_one_call_is_refused(store: Store) -> None:
    j1 = store.submit(spec(), "alice", 1.0)
    j2 = store.submit(spec(), "bob", 1.0)
    v = store.allocation_version()
    with pytest.raises(StaleState):
        store.commit_starts([(j1.id, "n1", (3,)), (j2.id, "n1", (3,))], v, 2.0)
    # All or nothing: the first start was rolled back too.
    assert store.allocation_version() == v
    assert [store.get(j).state for j in (j1.id, j2.id)] == [JobState.PENDING] * 2
    # The same index on another node is another GPU.
    store.commit_starts([(j1.id, "n1", (3,)), (j2.id, "n2", (3,))], v, 2.0)


def test_gpu_held_by_a_running_job_is_refused_even_with_a_fresh_version(store: Store) -> None:
    j1 = store.submit(spec(), "alice", 1.0)
    j2 = store.submit(spec(), "bob", 1.0)
    start(store, j1.id, gpus=(0,))
    v = store.allocation_version()
    with pytest.raises(StaleState, match="GPU 0 on n1"):
        store.commit_starts([(j2.id, "n1", (0,))], v, 2.0)
    assert store.get(j2.id).state is JobState.PENDING
    assert store.allocation_version() == v


def test_starting_a_cancelled_job_is_stale(store: Store) -> None:
    j = store.submit(spec(), "alice", 1.0)
    v = store.allocation_version()
    store.cancel_pending(j.id, 2.0, "cancelled by alice")
    with pytest.raises(StaleState, match="CANCELLED"):
        store.commit_starts([(j.id, "n1", (0,))], v, 3.0)
    assert store.get(j.id).state is JobState.CANCELLED
    assert store.allocation_version() == v


def test_starting_a_running_job_again_is_stale(store: Store) -> None:
    j = store.submit(spec(), "alice", 1.0)
    start(store, j.id, gpus=(0,))
    with pytest.raises(StaleState):
        store.commit_starts([(j.id, "n1", (1,))], store.allocation_version(), 3.0)
    assert store.get(j.id).gpus == (0,)


def test_starting_an_unknown_job(store: Store) -> None:
    with pytest.raises(UnknownJob):
        store.commit_starts([(99, "n1", (0,))], store.allocation_version(), 1.0)


def test_everything_survives_reopening(store_url: str) -> None:
    first = Store.open(store_url)
    j1 = first.submit(full_spec(), "alice", 1.0, token="tok")
    j2 = first.submit(spec(), "bob", 2.0)
    j3 = first.submit(spec(), "carol", 3.0)
    first.commit_starts(
        [(j1.id, "n1", (0, 1, 2, 3)), (j2.id, "n1", (4,))], first.allocation_version(), 4.0
    )
    first.finish(j2.id, JobState.SUCCEEDED, 0, 5.0, "exited with code 0")
    first.request_cancel(j1.id, 6.0, "cancelled by alice")
    first.set_reasons({j3.id: "Resources"})
    first.set_launch_info(j1.id, {"pid": 7})
    expected = [first.get(j.id) for j in (j1, j2, j3)]
    version = first.allocation_version()
    first.close()

    second = Store.open(store_url)
    try:
        got = [second.get(j.id) for j in (j1, j2, j3)]
        assert got == expected
        assert [g.events for g in got] == [e.events for e in expected]
        assert second.allocation_version() == version
        assert second.launch_info(j1.id) == {"pid": 7}
        assert second.submit(spec(), "alice", 9.0, token="tok").id == j1.id
        assert second.submit(spec(), "dave", 9.0).id == j3.id + 1
        # Allocations survived too: job 1 still holds GPU 0.
        with pytest.raises(StaleState):
            second.commit_starts([(j3.id, "n1", (0,))], version, 10.0)
    finally:
        second.close()


def test_events_keep_the_order_of_the_changes_if_the_clock_steps_back(store: Store) -> None:
    j = store.submit(spec(), "alice", 100.0)
    start(store, j.id, now=200.0)
    store.finish(j.id, JobState.SUCCEEDED, 0, 150.0, "exited with code 0")  # clock stepped back
    assert [e.to for e in store.get(j.id).events] == [
        JobState.PENDING,
        JobState.RUNNING,
        JobState.SUCCEEDED,
    ]
