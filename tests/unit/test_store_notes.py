"""A line in a job's history without a state change (Store.note), on every backend."""

from __future__ import annotations

from test_store import spec, start, store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.core.job import JobState
from gpupool.store import Store


def test_a_note_joins_a_pending_jobs_story_and_changes_nothing_else(store: Store) -> None:
    job = store.submit(spec(), "alice", 1.0)
    store.note(job.id, 2.0, "can never start as quotas are now: ...")
    got = store.get(job.id)
    assert got.state is JobState.PENDING and got.version == job.version
    assert [(e.time, e.frm, e.to, e.cause) for e in got.events[1:]] == [
        (2.0, JobState.PENDING, JobState.PENDING, "can never start as quotas are now: ...")
    ]


def test_a_note_on_a_job_no_longer_pending_is_dropped(store: Store) -> None:
    job = store.submit(spec(), "alice", 1.0)
    start(store, job.id)
    assert store.note(job.id, 20.0, "late", only_if=JobState.PENDING) is None
    assert all(e.cause != "late" for e in store.get(job.id).events)
