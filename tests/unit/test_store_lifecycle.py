"""The Store after the start: finishing, requeueing, cancelling, reasons and launch info."""

from __future__ import annotations

import pytest
from test_store import spec, start, store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool.core.job import InvalidTransition, JobState, Transition
from gpupool.store import StaleState, Store, UnknownJob


def test_finish_frees_gpus_for_the_next_job(store: Store) -> None:
    j1 = store.submit(spec(), "alice", 1.0)
    j2 = store.submit(spec(), "bob", 1.0)
    start(store, j1.id, gpus=(0,))
    v = store.allocation_version()
    done = store.finish(j1.id, JobState.SUCCEEDED, 0, 20.0, "exited with code 0")
    assert store.allocation_version() == v + 1
    assert (done.state, done.exit_code, done.end_time) == (JobState.SUCCEEDED, 0, 20.0)
    assert done.gpus == (0,)  # kept as history
    assert done.events[-1] == Transition(
        20.0, JobState.RUNNING, JobState.SUCCEEDED, "exited with code 0"
    )
    store.commit_starts([(j2.id, "n1", (0,))], v + 1, 21.0)
    assert store.get(j2.id).state is JobState.RUNNING


def test_finish_is_idempotent(store: Store) -> None:
    j = store.submit(spec(), "alice", 1.0)
    start(store, j.id)
    first = store.finish(j.id, JobState.FAILED, 3, 20.0, "exited with code 3", reason="NonZeroExit")
    v = store.allocation_version()
    again = store.finish(j.id, JobState.FAILED, 3, 30.0, "exited with code 3")
    assert again == first and len(again.events) == len(first.events)
    assert (again.reason, again.end_time) == ("NonZeroExit", 20.0)
    assert store.allocation_version() == v
    with pytest.raises(InvalidTransition):
        store.finish(j.id, JobState.SUCCEEDED, 0, 31.0, "too late")


def test_invalid_transitions_are_refused(store: Store) -> None:
    j = store.submit(spec(), "alice", 1.0)
    with pytest.raises(InvalidTransition):
        store.finish(j.id, JobState.SUCCEEDED, 0, 2.0, "never ran")
    with pytest.raises(InvalidTransition):
        store.finish(j.id, JobState.RUNNING, None, 2.0, "not terminal")
    with pytest.raises(InvalidTransition):
        store.requeue(j.id, 2.0, "not running")
    after = store.get(j.id)
    assert after.state is JobState.PENDING and len(after.events) == 1


def test_requeue(store: Store) -> None:
    j1 = store.submit(spec(gpus=2), "alice", 1.0)
    start(store, j1.id, gpus=(0, 1))
    v = store.allocation_version()
    back = store.requeue(j1.id, 30.0, "node n1 lost")
    assert (back.state, back.restart_count, back.node, back.gpus, back.start_time) == (
        JobState.PENDING,
        1,
        None,
        (),
        None,
    )
    assert back.cancel_requested is False
    assert back.events[-1] == Transition(30.0, JobState.RUNNING, JobState.PENDING, "node n1 lost")
    assert store.allocation_version() == v + 1
    # Its GPUs are free again, and it can run again.
    j2 = store.submit(spec(), "bob", 31.0)
    store.commit_starts([(j2.id, "n1", (0,)), (j1.id, "n1", (1,))], v + 1, 32.0)
    assert store.requeue(j1.id, 40.0, "preempted").restart_count == 2
    assert [e.to for e in store.get(j1.id).events] == [
        JobState.PENDING,
        JobState.RUNNING,
        JobState.PENDING,
        JobState.RUNNING,
        JobState.PENDING,
    ]


def test_requeue_with_a_cancel_request_is_stale(store: Store) -> None:
    j = store.submit(spec(), "alice", 1.0)
    start(store, j.id)
    store.request_cancel(j.id, 5.0, "cancelled by alice")
    with pytest.raises(StaleState):
        store.requeue(j.id, 6.0, "preempted")
    assert store.get(j.id).state is JobState.RUNNING


def test_cancel_pending(store: Store) -> None:
    pending = store.submit(spec(), "alice", 1.0)
    running = store.submit(spec(), "alice", 1.0)
    start(store, running.id)
    v = store.allocation_version()

    cancelled = store.cancel_pending(pending.id, 5.0, "cancelled by alice")
    assert cancelled is not None
    assert (cancelled.state, cancelled.end_time) == (JobState.CANCELLED, 5.0)
    assert cancelled.events[-1] == Transition(
        5.0, JobState.PENDING, JobState.CANCELLED, "cancelled by alice"
    )
    assert store.cancel_pending(running.id, 5.0, "cancelled by alice") is None
    assert store.get(running.id).state is JobState.RUNNING
    assert store.cancel_pending(pending.id, 6.0, "again") is None
    assert len(store.get(pending.id).events) == 2
    assert store.allocation_version() == v
    with pytest.raises(UnknownJob):
        store.cancel_pending(999, 5.0, "x")


def test_request_cancel_of_a_running_job(store: Store) -> None:
    j = store.submit(spec(), "alice", 1.0)
    start(store, j.id)
    assert store.cancel_request(j.id) is None
    marked = store.request_cancel(j.id, 15.0, "cancelled by alice")
    assert marked.state is JobState.RUNNING and marked.cancel_requested
    assert len(marked.events) == 2  # a request is not a state change
    store.request_cancel(j.id, 16.0, "cancelled by root")
    assert store.cancel_request(j.id) == (15.0, "cancelled by alice")  # the first one counts
    done = store.finish(j.id, JobState.CANCELLED, -15, 17.0, "stopped by SIGTERM")
    assert done.events[-1].cause == "stopped by SIGTERM; cancelled by alice"
    # A cancelled job's GPUs are free.
    other = store.submit(spec(), "bob", 18.0)
    start(store, other.id, gpus=(0,))


def test_request_cancel_of_a_pending_job_cancels_it(store: Store) -> None:
    j = store.submit(spec(), "alice", 1.0)
    assert store.request_cancel(j.id, 2.0, "cancelled by alice").state is JobState.CANCELLED
    ended = store.request_cancel(j.id, 3.0, "again")
    assert ended.state is JobState.CANCELLED and len(ended.events) == 2


def test_set_reasons(store: Store) -> None:
    j1 = store.submit(spec(), "alice", 1.0)
    j2 = store.submit(spec(), "bob", 1.0)
    j3 = store.submit(spec(), "carol", 1.0)
    start(store, j3.id)
    store.set_reasons({j1.id: "Resources", j2.id: "Priority", j3.id: "Resources", 99: "X"})
    assert [store.get(j).reason for j in (j1.id, j2.id, j3.id)] == ["Resources", "Priority", ""]
    v1 = store.get(j1.id).version
    store.set_reasons({j1.id: "Resources", j2.id: "Resources"})
    assert store.get(j1.id).version == v1  # unchanged reason: row untouched
    assert store.get(j2.id).reason == "Resources"
    store.set_reasons({})


def test_launch_info(store: Store) -> None:
    j = store.submit(spec(), "alice", 1.0)
    assert store.launch_info(j.id) == {}
    store.set_launch_info(j.id, {"pid": 4242, "log": "/var/log/j1.log", "argv": ["a", "b"]})
    assert store.launch_info(j.id) == {"pid": 4242, "log": "/var/log/j1.log", "argv": ["a", "b"]}
    with pytest.raises(UnknownJob):
        store.set_launch_info(99, {})
    with pytest.raises(UnknownJob):
        store.launch_info(99)


def test_finish_takes_the_true_end_time_when_it_is_known(store: Store) -> None:
    # The job ended at 20 while the daemon was down; the restarted daemon finishes it at 95.
    j = store.submit(spec(), "alice", 1.0)
    start(store, j.id, gpus=(0,))
    v = store.allocation_version()
    done = store.finish(j.id, JobState.SUCCEEDED, 0, 95.0, "exited with code 0", end_time=20.0)
    assert done.end_time == 20.0
    assert done.events[-1] == Transition(
        20.0, JobState.RUNNING, JobState.SUCCEEDED, "exited with code 0"
    )
    assert store.allocation_version() == v + 1  # its GPUs are free from now on
    assert store.usage_history(since=0.0) == [("default", "alice", 1, 10.0, 20.0)]


def test_a_note_tells_the_story_without_changing_the_state(store: Store) -> None:
    j = store.submit(spec(), "alice", 1.0)
    start(store, j.id, gpus=(0,))
    v = store.allocation_version()
    noted = store.note(j.id, 30.0, "its supervisor died; pid 7 still runs", reason="Lost")
    assert (noted.state, noted.reason, noted.gpus) == (JobState.RUNNING, "Lost", (0,))
    assert noted.events[-1] == Transition(
        30.0, JobState.RUNNING, JobState.RUNNING, "its supervisor died; pid 7 still runs"
    )
    assert store.allocation_version() == v  # the GPUs stay held
    again = store.note(j.id, 31.0, "still there")
    assert again.reason == "Lost" and len(again.events) == len(noted.events) + 1
    done = store.finish(j.id, JobState.FAILED, None, 40.0, "lost", reason="NodeFail")
    assert done.reason == "NodeFail"
    with pytest.raises(UnknownJob):
        store.note(99, 1.0, "no such job")


def test_a_requeue_with_a_hold_sets_the_begin_time(store: Store) -> None:
    job = store.submit(spec(), "alice", 1.0)
    start(store, job.id)
    held = store.requeue(job.id, 50.0, "idle; requeued, held", hold_until=80.0)
    assert held.state is JobState.PENDING and held.spec.begin_time == 80.0
    assert store.get(job.id).spec.begin_time == 80.0


def test_fair_share_usage_keeps_every_run_of_a_requeued_job(store: Store) -> None:
    # Fair share charges every run a job had, as accounting and the simulator's replay do: a
    # requeue clears the job's start and end, and its earlier runs must not go with them.
    j = store.submit(spec(gpus=2), "alice", 1.0)
    start(store, j.id, gpus=(0, 1), now=10.0)
    store.requeue(j.id, 20.0, "preempted; requeued")  # ran 10 -> 20 on 2 GPUs
    assert store.usage_history(since=0.0) == [("default", "alice", 2, 10.0, 20.0)]
    start(store, j.id, gpus=(2, 3), now=30.0)
    store.finish(j.id, JobState.SUCCEEDED, 0, 45.0, "exited with code 0")
    assert sorted(store.usage_history(since=0.0)) == [
        ("default", "alice", 2, 10.0, 20.0),
        ("default", "alice", 2, 30.0, 45.0),
    ]
    # A run that ended before `since` is left out, as a finished job's is.
    assert store.usage_history(since=25.0) == [("default", "alice", 2, 30.0, 45.0)]
