"""Retries, dependencies and arrays: the spec's rules and the engine's reactions."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_engine_react import NOW, engine_state, exited, running

from gpupool.core.execution import ExitReason, Handle
from gpupool.core.job import EndReason, Job, JobState
from gpupool.core.job_control import format_indices, retry_wanted
from gpupool.engine.events import Finish, Polled, Release, Released, Requeue
from gpupool.engine.react import react
from gpupool.spec import SpecError, build_spec


def retrying(job: Job, retries: int, codes: tuple[int, ...] = ()) -> Job:
    return replace(job, spec=replace(job.spec, retries=retries, retry_on_exit=codes))


@pytest.mark.parametrize(
    ("retries", "codes", "attempt", "code", "wanted"),
    [
        (2, (), 0, 1, True),  # any non-zero code without a list
        (2, (), 2, 1, False),  # two retries made already
        (2, (33, 137), 1, 137, True),
        (2, (33,), 0, 5, False),  # not listed
        (2, (), 0, 0, False),  # a success is never retried
        (0, (), 0, 1, False),
    ],
)
def test_retry_wanted(
    retries: int, codes: tuple[int, ...], attempt: int, code: int, wanted: bool
) -> None:
    assert retry_wanted(retries, codes, attempt, code) is wanted


def test_a_failed_attempt_with_retries_left_is_released_then_requeued_saying_why() -> None:
    job = replace(retrying(running(1, restarts=1), 3, (33,)), failed_attempts=1)
    state = engine_state(job)
    assert react(state, Polled({1: exited(33)}, NOW)) == [Release(Handle(1, 1), NOW)]
    [requeue] = react(state, Released(1, True, NOW))
    assert isinstance(requeue, Requeue)
    assert requeue.cause == "attempt 2 of 4 failed with exit code 33; retrying"
    assert requeue.hold_until is None and requeue.retry


def test_preemptions_do_not_use_up_retries() -> None:
    """A job requeued by three preemptions still has its one retry: only failed attempts
    count against --retry (the restart count counts every requeue, GPUPOOL_RESTART_COUNT)."""
    job = retrying(running(1, restarts=3), 1)
    state = engine_state(job)
    assert react(state, Polled({1: exited(1)}, NOW)) == [Release(Handle(1, 3), NOW)]
    [requeue] = react(state, Released(1, True, NOW))
    assert isinstance(requeue, Requeue) and requeue.retry
    assert requeue.cause == "attempt 1 of 2 failed with exit code 1; retrying"
    used = replace(retrying(running(1, restarts=4), 1), failed_attempts=1)
    [finish] = react(engine_state(used), Polled({1: exited(1)}, NOW))
    assert isinstance(finish, Finish) and finish.state is JobState.FAILED


@pytest.mark.parametrize(
    ("job", "obs", "ends"),
    [
        (retrying(running(1), 3, (33,)), exited(5), JobState.FAILED),  # code not listed
        (
            replace(retrying(running(1, restarts=3), 3), failed_attempts=3),
            exited(1),
            JobState.FAILED,
        ),  # none left
        (retrying(running(1), 3), exited(143, ExitReason.TIMEOUT), JobState.TIMEOUT),
        (
            retrying(running(1, cancel=True), 3),
            exited(143, ExitReason.CANCELLED),
            JobState.CANCELLED,
        ),
        (retrying(running(1, cancel=True), 3), exited(1), JobState.FAILED),  # cancel asked
    ],
    ids=["not-listed", "exhausted", "timeout", "cancelled", "cancel-asked"],
)
def test_runs_that_are_not_retried_finish(job: Job, obs: object, ends: JobState) -> None:
    [finish] = react(engine_state(job), Polled({1: obs}, NOW))  # type: ignore[dict-item]
    assert isinstance(finish, Finish)
    assert finish.state is ends


def test_a_run_killed_by_a_signal_is_retried_by_its_exit_code() -> None:
    job = retrying(running(1), 1, (137,))
    assert react(engine_state(job), Polled({1: exited(137)}, NOW)) == [Release(Handle(1, 0), NOW)]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"retry": "-1"}, "retry: must be a whole number of retries >= 0, got '-1'"),
        ({"retry": "101"}, "retry: must be at most 100 retries"),
        ({"retry_on_exit": "33,x"}, "retry_on_exit: exit codes must be whole numbers from 1"),
        ({"retry_on_exit": "0"}, "retry_on_exit: exit codes must be whole numbers from 1"),
        ({"after": "x"}, "after: must be a job id"),
        ({"after": "3:maybe"}, "after: '3:maybe': the condition must be ok or any"),
        ({"array": "5-1"}, "array: range '5-1' ends before it starts"),
        ({"array": "0-9%0"}, "array: %K must be a whole number of tasks >= 1"),
        ({"array": "a-b"}, "array: must be indices such as 0-99"),
        ({"array": "0-20000"}, "array: must have at most 10000 tasks"),
    ],
)
def test_bad_values_name_their_field(fields: dict[str, str], message: str) -> None:
    with pytest.raises(SpecError) as info:
        build_spec({"command": "true", **fields})
    assert message in str(info.value)


def test_good_values() -> None:
    spec = build_spec(
        {
            "command": "true",
            "retry": 2,
            "retry_on_exit": [137, 33],
            "after": "4,3:any",
            "array": "1,3,5-7%2",
        }
    )
    assert spec.retries == 2 and spec.retry_on_exit == (33, 137)
    assert [str(d) for d in spec.after] == ["3:any", "4:ok"]
    assert spec.array is not None
    assert spec.array.indices == (1, 3, 5, 6, 7) and spec.array.limit == 2
    assert str(spec.array) == "1,3,5-7%2"
    assert build_spec({"command": "true", "array": "0-8:4"}).array.indices == (0, 4, 8)  # type: ignore[union-attr]


def test_format_indices() -> None:
    assert format_indices([7, 1, 3, 5, 6]) == "1,3,5-7"
    assert format_indices([]) == ""


def test_end_reason_of_a_dependency() -> None:
    assert EndReason.DEPENDENCY.value == "DependencyNeverSatisfied"
