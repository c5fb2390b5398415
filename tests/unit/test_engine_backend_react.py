"""The reaction table's rows for backends' jobs (engine/backend_react.py): events in,
instructions out, without a store, a backend or a clock."""

from __future__ import annotations

from dataclasses import replace

from gpupool.core.backends import Admission, BackendAdmission
from gpupool.core.execution import ExitReason, ExitRecord, Handle, Observation, RunState, StopKind
from gpupool.core.hardware import Gpu, Inventory, Node
from gpupool.core.job import EndReason, Hold, Job, JobSpec, JobState, Resources
from gpupool.engine.events import (
    Finish,
    HandOver,
    Instruction,
    JobsStored,
    KeepRef,
    Log,
    Note,
    PassDecided,
    Polled,
    Recovered,
    Signal,
    Signalled,
    StartInBackend,
)
from gpupool.engine.gating import Gating
from gpupool.engine.react import react
from gpupool.engine.state import EngineState
from gpupool.policy import Code, Decision, Status
from gpupool.policy.render import status_text
from gpupool.policy.snapshot import PolicyConfig, Usage
from gpupool.policy.status import Rule

NOW = 1000.0
INVENTORY = Inventory(
    (Node("n1", tuple(Gpu(i, "A100", 80 << 30) for i in range(2))),), source="declared"
)


def _state() -> EngineState:
    """A backend whose engine admits: the rows of the table (admission by the pool's
    policy is tests/unit/test_engine_admission.py's)."""
    engine = {"slurm": BackendAdmission(Admission.ENGINE)}
    return EngineState(INVENTORY, PolicyConfig(), backends=("slurm",), admission=engine)


def _job(
    job_id: int = 1,
    state: JobState = JobState.PENDING,
    backend: str = "slurm",
    **spec_changes: object,
) -> Job:
    spec = JobSpec(("train",), Resources(gpus=4), backend=backend, nodes=2)
    spec = replace(spec, **spec_changes)  # type: ignore[arg-type]
    return Job(job_id, spec, "alice", state, NOW - 10, version=1)


def _pass(state: EngineState, gating: Gating | None = None) -> list[Instruction]:
    snapshot = state.snapshot(0, Usage())
    return react(state, PassDecided(Decision(), snapshot, NOW, gating or Gating()))


def _handed(state: EngineState, job: Job) -> None:
    react(state, JobsStored((job,)))
    _pass(state)


def _exit(reason: ExitReason = ExitReason.EXITED, code: int = 0) -> Observation:
    record = ExitRecord(code, None, reason, NOW - 5, NOW - 1, "")
    return Observation(RunState.EXITED, record, ref="slurm://c/7")


def test_a_backend_job_never_enters_a_pass() -> None:
    state = _state()
    react(state, JobsStored((_job(1), _job(2, backend=None))))  # type: ignore[arg-type]
    snapshot = state.snapshot(0, Usage())
    assert [p.id for p in snapshot.pending] == [2]


def test_a_pending_backend_job_free_to_go_is_handed_over_at_once() -> None:
    state = _state()
    react(state, JobsStored((_job(),)))
    out = _pass(state)
    assert [type(i) for i in out[:2]] == [HandOver, Note]
    hand = out[0]
    assert isinstance(hand, HandOver) and (hand.job_id, hand.backend) == (1, "slurm")
    note = out[1]
    assert isinstance(note, Note) and note.reason == Code.QUEUED_IN_BACKEND.value
    status = state.decision.pending[1]
    assert (status.code, status.backend, status.detail) == (Code.QUEUED_IN_BACKEND, "slurm", "")
    # Handed over once: the next pass does not launch it again.
    assert not any(isinstance(i, HandOver) for i in _pass(state))


def test_gating_holds_a_backend_job_before_hand_over() -> None:
    state = _state()
    react(state, JobsStored((_job(hold=Hold.USER),)))
    held = Status(Code.HELD_USER, Rule.HELD_USER)
    out = _pass(state, Gating(held={1: held}))
    assert not any(isinstance(i, HandOver) for i in out)
    assert state.decision.pending[1] == held


def test_a_backend_job_waits_for_its_begin_time() -> None:
    state = _state()
    react(state, JobsStored((_job(begin_time=NOW + 60),)))
    assert not any(isinstance(i, HandOver) for i in _pass(state))
    assert state.decision.pending[1].code is Code.BEGIN_TIME
    assert state.outlook(NOW).next_begin == NOW + 60


def test_a_job_of_a_backend_not_configured_waits_with_no_backend() -> None:
    state = _state()
    react(state, JobsStored((_job(backend="ray"),)))
    assert not any(isinstance(i, HandOver) for i in _pass(state))
    status = state.decision.pending[1]
    assert (status.code, status.backend) == (Code.NO_BACKEND, "ray")


def test_queued_keeps_it_pending_with_the_backends_words_and_ref() -> None:
    state = _state()
    _handed(state, _job())
    out = react(
        state, Polled({1: Observation(RunState.QUEUED, ref="slurm://c/7", detail="Priority")}, NOW)
    )
    assert KeepRef(1, "slurm://c/7") in out
    assert state.jobs[1].job.reason == Code.QUEUED_IN_BACKEND.value  # the pass's code
    status = state.decision.pending[1]
    assert (status.code, status.detail) == (Code.QUEUED_IN_BACKEND, "Priority")
    assert "waiting in its queue: Priority" in status_text(status)


def test_running_in_the_backend_starts_it_now() -> None:
    state = _state()
    _handed(state, _job())
    out = react(state, Polled({1: Observation(RunState.RUNNING, ref="slurm://c/7")}, NOW))
    # Its engine chose where (admission = "engine"): it holds its 2 x 4 GPUs on "slurm".
    line = out[0].log_line  # type: ignore[union-attr]
    assert [i for i in out if isinstance(i, StartInBackend)] == [
        StartInBackend(1, "slurm", NOW, "slurm://c/7", line, "slurm", tuple(range(8)))
    ]


def test_an_exit_ends_a_running_backend_job_as_a_local_exit_does() -> None:
    state = _state()
    running = replace(_job(state=JobState.RUNNING), backend_ref="slurm://c/7", start_time=NOW - 5)
    react(state, JobsStored((running,)))
    out = react(state, Polled({1: _exit(code=3)}, NOW))
    finish = [i for i in out if isinstance(i, Finish)]
    assert len(finish) == 1 and (finish[0].state, finish[0].exit_code) == (JobState.FAILED, 3)
    assert finish[0].end_time == NOW - 1


def test_a_backends_words_about_a_failure_go_into_the_story() -> None:
    state = _state()
    running = replace(_job(state=JobState.RUNNING), backend_ref="ray://h/7", start_time=NOW - 5)
    react(state, JobsStored((running,)))
    gone = ExitRecord(1, None, ExitReason.EXITED, NOW - 5, NOW - 1, "the head restarted")
    out = react(state, Polled({1: Observation(RunState.EXITED, gone, ref="ray://h/7")}, NOW))
    finish = [i for i in out if isinstance(i, Finish)]
    assert finish[0].cause == "exited with code 1; backend slurm: the head restarted"


def test_an_exit_while_pending_starts_it_then_the_next_poll_ends_it() -> None:
    state = _state()
    _handed(state, _job())
    out = react(state, Polled({1: _exit()}, NOW))
    assert [type(i) for i in out] == [KeepRef, StartInBackend]
    assert state.poll_soon


def test_cancelled_in_the_backend_while_queued_is_cancelled() -> None:
    state = _state()
    _handed(state, _job())
    out = react(state, Polled({1: _exit(ExitReason.CANCELLED, 143)}, NOW))
    finish = [i for i in out if isinstance(i, Finish)]
    assert finish and finish[0].state is JobState.CANCELLED
    assert finish[0].reason == EndReason.CANCELLED


def test_unknown_changes_nothing_and_is_noted_once() -> None:
    state = _state()
    _handed(state, _job())
    first = react(state, Polled({1: Observation(RunState.UNKNOWN)}, NOW))
    assert [type(i) for i in first] == [Note]
    assert "cannot be reached" in first[0].cause  # type: ignore[union-attr]
    assert react(state, Polled({1: Observation(RunState.UNKNOWN)}, NOW + 1)) == []
    assert state.jobs[1].job.state is JobState.PENDING and state.jobs[1].handed_over


def test_a_handed_over_jobs_cancel_goes_to_its_backend() -> None:
    state = _state()
    _handed(state, _job())
    out = react(state, JobsStored((replace(_job(), cancel_requested=True, version=5),)))
    assert [i for i in out if isinstance(i, Signal)] == [
        Signal(Handle(1, 0), StopKind.CANCEL, "cancelled", out[0].log_line)  # type: ignore[union-attr]
    ]
    react(state, Signalled(1, StopKind.CANCEL, True, "cancelled"))
    # Delivered: not again; the backend's EXITED ends it CANCELLED from PENDING.
    assert not any(
        isinstance(i, Signal) for i in react(state, Polled({1: Observation(RunState.QUEUED)}, NOW))
    )
    out = react(state, Polled({1: _exit(ExitReason.CANCELLED, 143)}, NOW))
    assert any(isinstance(i, Finish) and i.state is JobState.CANCELLED for i in out)


def test_a_cancel_before_hand_over_just_cancels() -> None:
    state = _state()
    react(state, JobsStored((replace(_job(), cancel_requested=True),)))
    out = _pass(state)
    assert not any(isinstance(i, HandOver | Signal) for i in out)
    finish = [i for i in out if isinstance(i, Finish)]
    assert finish and finish[0].state is JobState.CANCELLED


def test_restart_adoption_finds_what_was_handed_over() -> None:
    state = _state()
    queued, running, never = (
        _job(1),
        replace(_job(2, state=JobState.RUNNING), start_time=NOW - 50),
        _job(3),
    )
    observations = {
        1: Observation(RunState.QUEUED, ref="slurm://c/1", detail="Resources"),
        2: Observation(RunState.RUNNING, ref="slurm://c/2"),
        3: Observation(RunState.UNLAUNCHED),
    }
    out = react(state, Recovered((queued, running, never), (), observations, NOW))
    assert state.jobs[1].handed_over and not state.jobs[3].handed_over
    assert any(isinstance(i, Log) and "re-adopted" in i.log_line.text for i in out)
    assert KeepRef(2, "slurm://c/2") in out
    # The one never handed over goes at the next pass; the others are not launched again.
    handed = [i.job_id for i in _pass(state) if isinstance(i, HandOver)]
    assert handed == [3]


def test_a_running_job_the_backend_no_longer_knows_fails() -> None:
    state = _state()
    react(state, JobsStored((replace(_job(state=JobState.RUNNING), start_time=NOW - 5),)))
    out = react(state, Polled({1: Observation(RunState.UNLAUNCHED)}, NOW))
    finish = [i for i in out if isinstance(i, Finish)]
    assert finish and finish[0].state is JobState.FAILED and "no longer knows" in finish[0].cause


def test_a_pending_run_the_backend_lost_is_handed_over_again() -> None:
    state = _state()
    _handed(state, _job())
    out = react(state, Polled({1: Observation(RunState.UNLAUNCHED)}, NOW))
    assert [i.job_id for i in out if isinstance(i, HandOver)] == [1]
