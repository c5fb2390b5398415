"""What the engine keeps of jobs that ended follows what waits, not how many jobs ended
(issue 35, goal 8: memory flat over a soak at a steady rate): the final states `--after`
reads (engine/gating.py `EndedJobs`) are dropped once no waiting job names them, and the
tombstones of removed jobs (engine/state.py) once older than a late event can be; what is
still needed stays."""

from __future__ import annotations

from dataclasses import replace
from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.unit.test_engine_gating import NOW, engine_state, job, ok, run_pass, started

from gpupool.core.job import EndReason, Job, JobState
from gpupool.core.job_control import AfterKind, Dependency
from gpupool.core.store_errors import UnknownJob
from gpupool.engine import gating
from gpupool.engine.events import Finish, JobsStored, PassDecided
from gpupool.engine.gating import EndedJobs
from gpupool.engine.gating_store import gating_read
from gpupool.engine.react import react
from gpupool.engine.state import EngineState
from gpupool.policy import decide
from gpupool.policy.snapshot import Usage

_ENDS = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)
ENDED = 3000  # jobs that come and go: far more than the records kept without a need


def come_and_go(state: EngineState, first_id: int, count: int, step_s: float = 0.0) -> int:
    """`count` jobs submitted, run and ended one after another (a pass after each, the pass
    clock `step_s` later each time); the most ended-job records kept at any point."""
    most = 0
    for i in range(count):
        job_id = first_id + i
        react(state, JobsStored((job(job_id, JobState.RUNNING),)))
        running = state.jobs[job_id].job
        react(state, JobsStored((replace(running, state=JobState.SUCCEEDED, version=2),)))
        run_pass(state, NOW + i * step_s)
        most = max(most, len(state.ended))
    return most


def test_ended_states_no_waiting_job_names_are_dropped() -> None:
    state = engine_state()
    most = come_and_go(state, 100, ENDED)
    assert most <= 300  # not one per ended job: nothing waits on any of them


def test_a_state_a_waiting_job_names_outlives_the_drops() -> None:
    waiting = job(2, after=(ok(1), ok(3)))
    state = engine_state(job(1, JobState.RUNNING), waiting, job(3, JobState.RUNNING))
    react(state, JobsStored((replace(state.jobs[1].job, state=JobState.SUCCEEDED, version=2),)))
    come_and_go(state, 100, ENDED)
    gating = state.gating()
    assert gating.unknown == frozenset()  # job 1's end is still known: no store read
    assert state.decision.pending[2].jobs == (3,)  # waits for job 3 alone
    react(state, JobsStored((replace(state.jobs[3].job, state=JobState.SUCCEEDED, version=2),)))
    assert started(run_pass(state)) == [2]


def test_a_state_dropped_and_named_again_is_unknown_until_read_from_the_store() -> None:
    state = engine_state(job(1, JobState.RUNNING))
    react(state, JobsStored((replace(state.jobs[1].job, state=JobState.FAILED, version=2),)))
    come_and_go(state, 100, ENDED)
    react(state, JobsStored((job(2, after=(ok(1),)),)))
    gating = state.gating()
    assert gating.unknown == {1} and 2 in gating.held  # engine/gating_store.py reads it
    state.ended.record(1, JobState.FAILED)
    assert [f.job_id for f in run_pass(state) if isinstance(f, Finish)] == [2]


def test_an_arrays_failed_task_is_kept_while_its_other_tasks_run() -> None:
    tasks = [job(10 + i, JobState.RUNNING, array=(10, i, None)) for i in range(3)]
    state = engine_state(*tasks)
    react(state, JobsStored((replace(state.jobs[11].job, state=JobState.FAILED, version=2),)))
    come_and_go(state, 100, ENDED)
    react(state, JobsStored((job(50, after=(ok(10),)),)))
    finishes = [i for i in run_pass(state) if isinstance(i, Finish)]
    # cancelled at once, tasks 10 and 12 still running: the failure was not dropped
    assert [(f.job_id, f.reason) for f in finishes] == [(50, EndReason.DEPENDENCY)]
    assert finishes[0].cause.startswith("job 11 (10_1) of array 10 ended FAILED")


def test_an_any_dependency_of_the_same_job_twice_counts_both_names() -> None:
    named_twice = (ok(1), Dependency(1, AfterKind.ANY))
    state = engine_state(
        job(1, JobState.RUNNING), job(2, after=named_twice), job(4, after=(ok(1),))
    )
    react(state, JobsStored((replace(state.jobs[4].job, state=JobState.CANCELLED, version=2),)))
    react(state, JobsStored((replace(state.jobs[1].job, state=JobState.SUCCEEDED, version=2),)))
    come_and_go(state, 100, ENDED)
    assert state.gating().unknown == frozenset()  # job 2 still names job 1
    assert started(run_pass(state)) == [2]


def test_tombstones_are_kept_for_a_time_not_for_every_job() -> None:
    state = engine_state()
    come_and_go(state, 100, ENDED, step_s=0.5)  # 2 jobs a second, as the soak
    assert state.removals_remembered() <= 245  # 120 s of them, not 3,000


def test_a_late_copy_within_the_time_does_not_bring_a_job_back() -> None:
    state = engine_state(replace(job(1), version=1))
    run_pass(state, NOW)
    react(state, JobsStored((replace(job(1, JobState.CANCELLED), version=2),)))
    run_pass(state, NOW + 60.0)  # a minute on: a late event is seconds behind
    react(state, JobsStored((replace(job(1), version=1),)))
    assert 1 not in state.jobs


# -- the drops change no decision: a differential property ---------------------------------


class _EndedStore:
    """The store's side of engine/gating_store.py's reads, over the jobs that ended so far
    (the test's record of them): `get` and an array's tasks."""

    def __init__(self) -> None:
        self.jobs: dict[int, Job] = {}

    def get(self, job_id: int) -> Job:
        if job_id not in self.jobs:
            raise UnknownJob(job_id)
        return self.jobs[job_id]

    def list_jobs(self, include_finished: bool, array_id: int) -> list[Job]:
        return [j for j in self.jobs.values() if j.array_id == array_id]


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Job], list[Job]]:
    """Jobs queued at the start (plain ones, then an array), and jobs that come later
    naming any of them in --after, the array's id included."""
    count = draw(st.integers(1, 6))
    first = count + 1
    size = draw(st.integers(1, 5))
    limit = draw(st.sampled_from([None, 1, 2]))
    start = [job(i) for i in range(1, count + 1)]
    start += [job(first + i, array=(first, i, limit)) for i in range(size)]
    named = st.sampled_from([j.id for j in start if j.array_id in (None, j.id)])
    late: list[Job] = []
    for k in range(draw(st.integers(1, 5))):
        deps = draw(st.lists(named, min_size=1, max_size=2, unique=True))
        after = tuple(Dependency(d, draw(st.sampled_from(AfterKind))) for d in deps)
        late.append(job(100 + k, after=after))
    return start, late


def _pass(state: EngineState, store: _EndedStore, now: float) -> tuple[list[int], list[int]]:
    """One pass as the loop runs it, its gating reading the store for what the view does
    not know: (started, finished) ids."""
    gating = gating_read(state, store)  # type: ignore[arg-type]  # the reads it makes
    snapshot = state.snapshot(1, Usage(), gating)
    out = react(state, PassDecided(decide(snapshot, now), snapshot, now, gating))
    return sorted(started(out)), sorted(i.job_id for i in out if isinstance(i, Finish))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.data())
def test_dropping_ended_states_decides_as_keeping_them_all(
    history: tuple[list[Job], list[Job]], data: st.DataObject
) -> None:
    start, late = history
    with patch.object(gating, "_PRUNE_SLACK", 0):  # a drop at every record: the harshest
        dropping = engine_state(*start, gpus=3)
        keeping = engine_state(*start, gpus=3)
        keeping.ended = EndedJobs(lambda _id: True)  # never drops
        store = _EndedStore()
        for step in range(30):
            if late and data.draw(st.booleans()):
                newcomer = late.pop(0)
                for state in (dropping, keeping):
                    react(state, JobsStored((newcomer,)))
            now = NOW + step
            decided = _pass(dropping, store, now)
            assert decided == _pass(keeping, store, now)
            assert dropping.decision.pending == keeping.decision.pending
            begun, cancelled = decided
            for job_id in begun:
                for state in (dropping, keeping):
                    old = state.jobs[job_id].job
                    running = replace(old, state=JobState.RUNNING, node="box", gpus=(0,))
                    react(state, JobsStored((replace(running, start_time=now, version=2),)))
            ending = [(i, JobState.CANCELLED) for i in cancelled]
            ending += [
                (t.job.id, data.draw(st.sampled_from(_ENDS)))
                for t in sorted(dropping.running(), key=lambda t: t.job.id)
                if t.job.id not in begun and data.draw(st.booleans())
            ]
            for job_id, how in ending:
                for state in (dropping, keeping):
                    old = state.jobs[job_id].job
                    react(state, JobsStored((replace(old, state=how, version=old.version + 1),)))
                store.jobs[job_id] = replace(old, state=how)
            if not dropping.jobs and not late:
                break
