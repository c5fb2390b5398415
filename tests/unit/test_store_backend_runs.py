"""What the store keeps of backends' jobs (store/backend_runs.py), on SQLite and PostgreSQL:
the pool's id, a start with no GPU of the pool, the backend's name for the run, and a
cancel of a backend's PENDING job left to the engine."""

from __future__ import annotations

import re
from dataclasses import replace

from test_store import spec, store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.core.job import JobState
from gpupool.store import Store


def _backend_job(store: Store, nodes: int = 2) -> int:
    return store.submit(replace(spec(gpus=2), backend="slurm", nodes=nodes), "alice", 1.0).id


def test_the_pool_id_is_chosen_once_and_kept(store: Store, store_url: str) -> None:
    first = store.pool_id()
    assert re.fullmatch(r"[a-z0-9]{8}", first)
    assert store.pool_id() == first
    again = Store.open(store_url)  # another daemon of the same database
    try:
        assert again.pool_id() == first
    finally:
        again.close()


def test_a_backend_job_keeps_its_backend_and_nodes(store: Store) -> None:
    job = store.get(_backend_job(store, nodes=3))
    assert (job.spec.backend, job.spec.nodes, job.backend_ref) == ("slurm", 3, None)


def test_a_start_in_the_backend_holds_no_gpu_and_keeps_the_ref(store: Store) -> None:
    job_id = _backend_job(store)
    version = store.allocation_version()
    assert store.set_backend_ref(job_id, "slurm://c/41") is not None
    started = store.start_in_backend(job_id, 5.0, "slurm", "slurm://c/42")
    assert started is not None
    assert started.state is JobState.RUNNING and started.start_time == 5.0
    assert (started.node, started.gpus, started.backend_ref) == (None, (), "slurm://c/42")
    assert store.allocation_version() == version  # the pool's GPUs are untouched
    assert started.events[-1].cause == "started in backend slurm (slurm://c/42)"
    # Only a PENDING job starts: a repeat writes nothing.
    assert store.start_in_backend(job_id, 6.0, "slurm", None) is None
    ended = store.finish(job_id, JobState.SUCCEEDED, 0, 9.0, "exited with code 0")
    assert ended.backend_ref == "slurm://c/42"  # kept in the history
    assert store.set_backend_ref(job_id, "slurm://c/43") is None


def test_a_requeue_forgets_the_runs_ref(store: Store) -> None:
    job_id = _backend_job(store)
    store.start_in_backend(job_id, 5.0, "slurm", "slurm://c/42")
    requeued = store.requeue(job_id, 8.0, "attempt 1 failed; retrying", retry=True)
    assert (requeued.state, requeued.backend_ref, requeued.restart_count) == (
        JobState.PENDING,
        None,
        1,
    )


def test_a_backend_jobs_pending_cancel_is_asked_not_done(store: Store) -> None:
    job_id = _backend_job(store)
    assert store.cancel_pending(job_id, 2.0, "cancelled by alice") is None
    asked = store.request_cancel(job_id, 2.0, "cancelled by alice")
    assert asked.state is JobState.PENDING and asked.cancel_requested
    # A local PENDING job is still cancelled at once.
    local = store.submit(spec(), "alice", 1.0)
    done = store.cancel_pending(local.id, 2.0, "cancelled by alice")
    assert done is not None and done.state is JobState.CANCELLED


def test_a_job_of_backend_any_is_routed_once_and_says_why(store: Store) -> None:
    job_id = store.submit(replace(spec(gpus=1), route_to=("hpc", "ray")), "alice", 1.0).id
    kept = store.get(job_id)
    assert (kept.spec.backend, kept.spec.route_to) == (None, ("hpc", "ray"))  # stored, read back
    assert store.route_to_backend(job_id, "lsf", 2.0, "routed") is None  # not one of its routes
    routed = store.route_to_backend(job_id, "ray", 2.0, "routed to backend ray: it starts there")
    assert routed is not None
    assert (routed.spec.backend, routed.spec.route_to, routed.state) == (
        "ray",
        (),
        JobState.PENDING,
    )
    assert routed.events[-1].cause == "routed to backend ray: it starts there"
    assert store.route_to_backend(job_id, "hpc", 3.0, "again") is None  # routed once


def test_a_run_never_ends_before_the_pool_saw_it_start(store: Store) -> None:
    """An engine's end time is its own clock's, in whole seconds (Slurm's): a short run the
    pool first saw running at 10.5 may end "at 10". Its end is kept no earlier than its
    start, so its GPU-hours are not negative or lost (accounting, fair share)."""
    job_id = _backend_job(store, nodes=1)
    store.start_in_backend(job_id, 10.5, "slurm", "slurm://c/42", node="slurm/n1", gpus=(0, 1))
    ended = store.finish(job_id, JobState.SUCCEEDED, 0, 11.0, "exited 0", end_time=10.0)
    assert ended.start_time == 10.5 and ended.end_time == 10.5
    assert ended.events[-1].time == 10.5
