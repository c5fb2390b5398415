"""`--after ARRAY` in the engine (engine/gating.py): an array's id stands for every task of
it, as in Slurm (issue 30, item 3). A dependent waits while any task is active; `:ok` can
never be met once any task ended otherwise (cancelled at once, naming the task); once every
task has ended, the array's outcome is read from the store (memory may have missed tasks
that ended before a restart) and decides."""

from __future__ import annotations

from dataclasses import replace

from test_engine_gating import end, engine_state, job, ok, run_pass, started

from gpupool.core.job import EndReason, Job, JobState
from gpupool.core.job_control import AfterKind, Dependency
from gpupool.engine.events import Finish
from gpupool.policy.render import status_text


def array(first: int, size: int, state: JobState = JobState.RUNNING) -> list[Job]:
    return [job(first + i, state, array=(first, i, None)) for i in range(size)]


def test_a_dependent_waits_for_every_task_not_only_the_first() -> None:
    state = engine_state(*array(10, 3), job(2, after=(Dependency(10, AfterKind.ANY),)))
    end(state, 10, JobState.SUCCEEDED)
    assert started(run_pass(state)) == []
    status = state.decision.pending[2]
    assert status.jobs == (11, 12)
    assert status_text(status) == "waiting for jobs 11, 12 to end (--after)"


def test_an_ok_dependent_is_cancelled_when_any_task_fails_naming_it() -> None:
    state = engine_state(*array(10, 3), job(2, after=(ok(10),)))
    end(state, 11, JobState.FAILED)
    finishes = [i for i in run_pass(state) if isinstance(i, Finish)]
    assert [(f.job_id, f.state, f.reason) for f in finishes] == [
        (2, JobState.CANCELLED, EndReason.DEPENDENCY)
    ]
    assert finishes[0].cause == (
        "job 11 (10_1) of array 10 ended FAILED, not SUCCEEDED (--after 10:ok)"
    )


def test_once_every_task_ended_the_arrays_outcome_comes_from_the_store() -> None:
    tasks = array(10, 2)
    state = engine_state(*tasks, job(2, after=(ok(10),)), job(3, after=(ok(11),)))
    end(state, 10, JobState.SUCCEEDED)
    end(state, 11, JobState.SUCCEEDED)
    gating = state.gating()
    # Task 11 named alone is that task; the array's id waits for the store's word.
    assert gating.unknown == {10} and 2 in gating.held and 3 not in gating.held
    ended = [replace(t, state=JobState.SUCCEEDED) for t in tasks]
    state.ended.record_array(10, ended)
    assert sorted(started(run_pass(state))) == [2, 3]


def test_a_long_array_is_counted_in_words_not_listed() -> None:
    state = engine_state(*array(100, 30), job(2, after=(ok(100),)), gpus=8)
    run_pass(state)
    status = state.decision.pending[2]
    assert len(status.jobs) == 30  # the data lists them all
    assert status_text(status).endswith("119 and 10 more to end (--after)"), status_text(status)
