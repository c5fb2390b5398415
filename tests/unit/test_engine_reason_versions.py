"""The view's versions against the store's when pending reasons are stored in batches.

The engine counts a version on a job for every reason a pass gives it (`set_reason`), but
stores reasons at most once a second (engine/loop.py, `_write_reasons`): a reason that
changed three times between two writes is one write in the store, or none. A start the
store committed after that has a lower version than the view's count; it was taken for an
old copy and dropped, so the view kept a running job as waiting (not polled, its GPUs free
to the next pass: started twice over). tests/unit/test_same_decisions.py found it.
"""

from __future__ import annotations

from test_engine_react import engine_state, job, running

from gpupool.core.job import JobState
from gpupool.engine.events import JobsStored
from gpupool.engine.react import react
from gpupool.policy.snapshot import Usage


def test_a_start_committed_after_batched_reasons_is_taken_in() -> None:
    state = engine_state(job(1, version=1))
    for reason in ("Resources", "Priority", "Resources"):  # three passes, one second
        state.set_reason(1, reason)
    assert state.jobs[1].job.version == 4
    # The store wrote one of them (version 2), then committed the start (version 3).
    react(state, JobsStored((running(1, version=3),)))
    assert state.jobs[1].job.state is JobState.RUNNING
    assert [r.id for r in state.snapshot(1, Usage()).running] == [1]
    assert state.snapshot(1, Usage()).pending == ()


def test_a_copy_older_than_the_one_read_is_still_no_news_after_reasons() -> None:
    state = engine_state(job(1, version=2))
    state.set_reason(1, "Resources")
    state.set_reason(1, "Priority")
    react(state, JobsStored((job(1, version=1),)))  # a submission's event, late
    assert state.jobs[1].job.reason == "Priority"
    react(state, JobsStored((job(1, version=2),)))  # the very copy the view read
    assert state.jobs[1].job.reason == "Priority"
