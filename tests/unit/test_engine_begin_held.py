"""Jobs held by --begin stay out of the pass until their time comes (engine/policy_inputs.py),
and the engine gives them the status the pass gave them (engine/begin_held.py): each pass
here is the real `decide` on the engine's own snapshot, as the loop runs it."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.test_engine_react import NOW, engine_state, job

from gpupool.core.job import Hold, Job
from gpupool.engine.events import JobsStored, PassDecided, SetReasons
from gpupool.engine.policy_inputs import pending_of
from gpupool.engine.react import react
from gpupool.engine.state import EngineState
from gpupool.policy import Code, Decision, PendingJob, Snapshot, decide
from gpupool.policy.snapshot import Usage
from gpupool.policy.status import Rule

HELD_STATUS = (Code.BEGIN_TIME, Rule.BEGIN_TIME)


def passed(state: EngineState, now: float) -> tuple[Snapshot, list[object]]:
    """One pass at `now`, as the loop runs it: the engine's snapshot, `decide`, the reaction."""
    snapshot = state.snapshot(1, Usage(), now=now)
    return snapshot, list(react(state, PassDecided(decide(snapshot, now), snapshot, now)))


def reasons(out: list[object]) -> dict[int, str]:
    return {k: v for ins in out if isinstance(ins, SetReasons) for k, v in ins.reasons.items()}


def test_a_job_held_by_begin_is_not_a_passes_but_has_its_status_and_estimate() -> None:
    state = engine_state(job(1, begin=NOW + 600), job(2))
    snapshot, _ = passed(state, NOW)
    assert [p.id for p in snapshot.pending] == [2]  # the pass never saw job 1
    status = state.decision.pending[1]
    assert (status.code, status.rule) == HELD_STATUS
    assert state.decision.estimated_start[1] == NOW + 600
    assert [s.job_id for s in state.decision.starts] == [2]
    assert state.committing_checks[1] is status  # its reason is written once 2 started


def test_the_job_is_taken_by_the_first_pass_once_its_time_came() -> None:
    state = engine_state(job(1, begin=NOW + 600))
    passed(state, NOW)
    snapshot, _ = passed(state, NOW + 599.5)
    assert snapshot.pending == ()
    snapshot, _ = passed(state, NOW + 600)  # begin == now: it may start (as the pass says)
    assert [p.id for p in snapshot.pending] == [1]
    assert [s.job_id for s in state.decision.starts] == [1]
    assert 1 not in state.decision.estimated_start


def test_a_job_no_node_could_run_is_told_so_while_it_is_held() -> None:
    state = engine_state(job(1, begin=NOW + 600, gpus=9))  # a 4-GPU box
    passed(state, NOW)
    assert state.decision.pending[1].code is Code.UNSATISFIABLE
    assert 1 not in state.decision.estimated_start


def test_a_held_jobs_reason_is_written_once_not_at_every_pass() -> None:
    state = engine_state(job(1, begin=NOW + 600))
    _, first = passed(state, NOW)
    assert reasons(first) == {1: Code.BEGIN_TIME.value}
    _, second = passed(state, NOW + 1)
    assert reasons(second) == {}
    # A new held job: its reason is written, the first one's is not asked again.
    react(state, JobsStored((job(2, begin=NOW + 900),)))
    _, third = passed(state, NOW + 2)
    assert reasons(third) == {2: Code.BEGIN_TIME.value}


def test_a_job_moved_later_leaves_the_pass_and_a_cancelled_one_leaves_both() -> None:
    state = engine_state(job(1), job(2, begin=NOW + 600))
    passed(state, NOW)
    react(state, JobsStored((job(1, begin=NOW + 300, version=2),)))
    snapshot, _ = passed(state, NOW + 1)
    assert snapshot.pending == ()
    assert state.decision.estimated_start[1] == NOW + 300
    react(state, JobsStored((job(2, cancel=True, version=2),)))
    passed(state, NOW + 2)
    assert set(state.held_by_begin()) == {1}
    assert 2 not in state.decision.pending


@settings(max_examples=60, deadline=None)
@given(
    begins=st.lists(st.one_of(st.none(), st.integers(0, 40)), min_size=1, max_size=8),
    gpus=st.lists(st.integers(1, 5), min_size=8, max_size=8),
    steps=st.lists(st.integers(0, 15), min_size=1, max_size=6),
)
def test_the_statuses_are_those_the_pass_gives_when_it_takes_every_job(
    begins: list[int | None], gpus: list[int], steps: list[int]
) -> None:
    """Differential: at every pass, each job held by --begin has the status and estimate a
    pass given every job (as before jobs were kept apart) gives it, and the jobs a pass
    takes are decided alike."""
    jobs = [
        job(i + 1, gpus=gpus[i], begin=None if b is None else NOW + b) for i, b in enumerate(begins)
    ]
    state = engine_state(*jobs)
    now = NOW
    for step in steps:
        now += step
        snapshot, _ = passed(state, now)
        everyone = Snapshot(
            snapshot.nodes,
            tuple(_pending(state, jobs)),
            snapshot.running,
            1,
            config=snapshot.config,
        )
        whole = decide(everyone, now)
        # Fair share is equal for all (one user, one project, no usage): the same order.
        assert [s.job_id for s in state.decision.starts] == [s.job_id for s in whole.starts]
        for job_id, held in state.held_by_begin().items():
            mine, theirs = state.decision.pending[job_id], whole.pending[job_id]
            assert (mine.code, mine.rule) == (theirs.code, theirs.rule)
            assert state.decision.estimated_start.get(job_id) == whole.estimated_start.get(job_id)
            assert held.begin_time is not None and held.begin_time > now
        state.committing = None  # the starts are not committed: every job still waits
        state.decision = Decision()


def _pending(state: EngineState, jobs: list[Job]) -> list[PendingJob]:
    return [pending_of(j, state.limit_of(j).seconds) for j in jobs]


def test_a_held_job_released_from_its_hold_gets_its_begin_time_reason_back() -> None:
    """A job held by `hold` and by --begin: the hold's reason first; once released, its
    --begin reason, though nothing changed in its --begin."""
    held = replace(
        job(1, begin=NOW + 600), spec=replace(job(1).spec, begin_time=NOW + 600, hold=Hold.USER)
    )
    state = engine_state(held)
    gating = state.gating()
    snapshot = state.snapshot(1, Usage(), gating, now=NOW)
    out = react(state, PassDecided(decide(snapshot, NOW), snapshot, NOW, gating))
    assert reasons(list(out)) == {1: Code.HELD_USER.value}
    state.set_reason(1, Code.HELD_USER.value)
    released = replace(
        held, spec=replace(held.spec, hold=None), reason=Code.HELD_USER.value, version=5
    )
    react(state, JobsStored((released,)))
    _, out2 = passed(state, NOW + 1)
    assert reasons(out2) == {1: Code.BEGIN_TIME.value}


def test_the_heap_of_begin_times_does_not_keep_every_cancelled_held_job() -> None:
    later = NOW + 10 * 365 * 86400.0
    state = engine_state(*(job(i, begin=later) for i in range(1, 1001)))
    passed(state, NOW)
    react(
        state,
        JobsStored(tuple(job(i, begin=later, cancel=True, version=5) for i in range(1, 1000))),
    )
    inputs = state._inputs  # noqa: SLF001 (its size is the point)
    assert list(inputs.later()) == [1000]
    assert len(inputs._begins) <= 2 * 1 + 64  # noqa: SLF001
    assert inputs.next_begin() == later
