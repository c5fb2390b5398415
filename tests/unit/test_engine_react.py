"""The engine's reaction table (engine/react.py), without a store, an executor or a clock:
events in, instructions out, one readable case per row (Kueue's table-driven style)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

import pytest

from gpupool.core.execution import (
    ExitReason,
    ExitRecord,
    Handle,
    Leftovers,
    Observation,
    RunState,
    StopKind,
)
from gpupool.core.hardware import Gpu, Inventory, Node
from gpupool.core.job import EndReason, HeldReason, Job, JobSpec, JobState, Resources
from gpupool.core.project import Project
from gpupool.engine.events import (
    CommitRefused,
    CommitStarts,
    Event,
    Finish,
    Instruction,
    JobsStored,
    Launch,
    Log,
    LostSettled,
    Note,
    PassDecided,
    Polled,
    ProjectsRead,
    Recovered,
    Release,
    Released,
    Requeue,
    RequeueRefused,
    Resync,
    RunPass,
    SetReasons,
    SettleLost,
    Signal,
    Signalled,
    StartsCommitted,
    Tick,
)
from gpupool.engine.react import react
from gpupool.engine.state import EngineState
from gpupool.policy import Code, Decision, Snapshot, Start, Status
from gpupool.policy.reasons import Dimension, Insufficient, ReclaimCause
from gpupool.policy.render import preemption_text, status_text
from gpupool.policy.snapshot import PolicyConfig, Preemption
from gpupool.policy.status import Rule

NOW = 1000.0
DAY = 86400.0


def inventory(gpus: int = 4, name: str = "box") -> Inventory:
    node = Node(name, tuple(Gpu(i, "A100-80GB", 80 << 30) for i in range(gpus)))
    return Inventory((node,), source="declared")


def job(
    job_id: int,
    state: JobState = JobState.PENDING,
    *,
    gpus: int = 1,
    held: tuple[int, ...] = (),
    node: str | None = None,
    limit: float | None = 3600.0,
    project: str = "default",
    begin: float | None = None,
    restarts: int = 0,
    cancel: bool = False,
    reason: str = "",
    version: int = 1,
    grace: float = 30.0,
) -> Job:
    spec = JobSpec(
        command=("train",),
        resources=Resources(gpus=gpus),
        project=project,
        time_limit_s=limit,
        begin_time=begin,
        grace_s=grace,
    )
    running = state is JobState.RUNNING
    return Job(
        job_id,
        spec,
        "alice",
        state,
        10.0,
        start_time=100.0 if running else None,
        node=(node or "box") if running else None,
        gpus=held if held or not running else tuple(range(gpus)),
        restart_count=restarts,
        cancel_requested=cancel,
        reason=reason,
        version=version,
    )


def running(job_id: int, **kw: object) -> Job:
    return job(job_id, JobState.RUNNING, **kw)  # type: ignore[arg-type]


def engine_state(*jobs: Job, projects: tuple[Project, ...] = (), gpus: int = 4) -> EngineState:
    state = EngineState(inventory(gpus), PolicyConfig())
    state.replace_all(jobs, (Project("default"), *projects))
    return state


def record(code: int = 0, reason: ExitReason = ExitReason.EXITED, end: float = 500.0) -> ExitRecord:
    return ExitRecord(code, None, reason, 100.0, end, "")


def exited(code: int = 0, reason: ExitReason = ExitReason.EXITED) -> Observation:
    return Observation(RunState.EXITED, record(code, reason))


@dataclass(frozen=True)
class Case:
    name: str
    jobs: tuple[Job, ...]
    event: Event
    expected: list[Instruction]
    told_held: tuple[int, ...] = ()  # jobs whose lost processes were already noted
    stopped: dict[int, str] = field(default_factory=dict)  # stops delivered, and why


def said_of(ins: Instruction) -> str:
    return getattr(ins, "log_line").text  # noqa: B009  (every case below has one)


def strip(instructions: list[Instruction]) -> list[Instruction]:
    """Instructions without their log lines (checked on their own where they matter)."""
    out: list[Instruction] = []
    for ins in instructions:
        out.append(
            replace(ins, log_line=None)
            if hasattr(ins, "log_line") and not isinstance(ins, Log)
            else ins
        )  # type: ignore[arg-type]
    return out


CASES = [
    Case(
        "a run that exited 0 succeeds, ended when its record says",
        (running(1),),
        Polled({1: exited(0)}, NOW),
        [Finish(1, JobState.SUCCEEDED, 0, "exited with code 0", EndReason.NONE, NOW, 500.0)],
    ),
    Case(
        "a run that exited 3 fails with NonZeroExit",
        (running(1),),
        Polled({1: exited(3)}, NOW),
        [Finish(1, JobState.FAILED, 3, "exited with code 3", EndReason.NON_ZERO_EXIT, NOW, 500.0)],
    ),
    Case(
        "a run stopped at its limit times out, the history naming the limit in force",
        (running(1, limit=7200.0),),
        Polled({1: exited(143, ExitReason.TIMEOUT)}, NOW),
        [
            Finish(
                1,
                JobState.TIMEOUT,
                143,
                "time limit 2h00m reached",
                EndReason.TIME_LIMIT,
                NOW,
                500.0,
            )
        ],
    ),
    Case(
        "a run without a limit of its own times out under its project's default",
        (running(1, limit=None, project="vision"),),
        Polled({1: exited(143, ExitReason.TIMEOUT)}, NOW),
        [
            Finish(
                1,
                JobState.TIMEOUT,
                143,
                "time limit 5m00s reached",
                EndReason.TIME_LIMIT,
                NOW,
                500.0,
            )
        ],
    ),
    Case(
        "a preempted run is released before its job is requeued",
        (running(1, restarts=2),),
        Polled({1: exited(143, ExitReason.PREEMPTED)}, NOW),
        [Release(Handle(1, 2), NOW)],
    ),
    Case(
        "a lost run's processes are killed, waiting for them the first time",
        (running(1),),
        Polled({1: Observation(RunState.LOST)}, NOW),
        [SettleLost(Handle(1, 0), 1.0, NOW)],
    ),
    Case(
        "a lost run already noted as held is tried again without waiting",
        (running(1),),
        Polled({1: Observation(RunState.LOST)}, NOW),
        [SettleLost(Handle(1, 0), 0.0, NOW)],
        told_held=(1,),
    ),
    Case(
        "a run never launched is launched, under its limit",
        (running(1, limit=600.0),),
        Polled({1: Observation(RunState.UNLAUNCHED)}, NOW),
        [Launch(1, 600.0)],
    ),
    Case(
        "a run released but not requeued (the daemon died in between) is requeued",
        (running(1),),
        Polled({1: Observation(RunState.RELEASED)}, NOW),
        [Requeue(1, "preempted; requeued", NOW)],
    ),
    Case(
        "a running job with a cancel request is told to stop",
        (running(1, cancel=True),),
        Polled({1: Observation(RunState.RUNNING)}, NOW),
        [Signal(Handle(1, 0), StopKind.CANCEL, "cancelled")],
    ),
    Case(
        "a running job whose cancel was delivered is not told again",
        (running(1, cancel=True),),
        Polled({1: Observation(RunState.RUNNING)}, NOW),
        [],
        stopped={1: "cancel"},
    ),
    Case(
        "a run the executor cannot tell about now is asked about again later",
        (running(1),),
        Polled({1: Observation(RunState.UNKNOWN)}, NOW),
        [],
    ),
    Case(
        "what an executor says of a job that is not running changes nothing",
        (job(1),),
        Polled({1: exited(0)}, NOW),
        [],
    ),
    Case(
        "a released run is requeued, its history saying why it was stopped",
        (running(1),),
        Released(1, True, NOW),
        [Requeue(1, "preempted (job 7 needs GPUs); requeued", NOW)],
        stopped={1: "job 7 needs GPUs"},
    ),
    Case(
        "a run still holding on is asked again soon",
        (running(1),),
        Released(1, False, NOW),
        [],
    ),
    Case(
        "a requeue refused for a cancel request finishes the job CANCELLED",
        (running(1, cancel=True),),
        RequeueRefused(1, NOW),
        [
            Finish(
                1, JobState.CANCELLED, None, "cancelled while preempted", EndReason.CANCELLED, NOW
            )
        ],
    ),
    Case(
        "a lost run with nothing left running fails with NodeFail",
        (running(1),),
        LostSettled(1, Leftovers(42, killed=(42,)), NOW),
        [
            Finish(
                1,
                JobState.FAILED,
                None,
                "its supervisor died without recording an exit; killed its process 42 before "
                "freeing its GPUs",
                EndReason.NODE_FAIL,
                NOW,
            )
        ],
    ),
    Case(
        "a lost run whose processes still run keeps its GPUs, noted once",
        (running(1),),
        LostSettled(1, Leftovers(42, alive=(42,)), NOW),
        [
            Note(
                1,
                "its supervisor died without recording an exit; its processes 42 still run: "
                "its GPUs stay held until they are gone (tried again at every poll)",
                NOW,
                reason=HeldReason.SUPERVISOR_LOST,
            )
        ],
    ),
    Case(
        "a lost run already noted as held is not noted again",
        (running(1),),
        LostSettled(1, Leftovers(42, alive=(42,)), NOW),
        [],
        told_held=(1,),
    ),
    Case(
        "a cancel request stored for a running job is delivered at once",
        (running(1, version=1),),
        JobsStored((running(1, cancel=True, version=2),)),
        [Signal(Handle(1, 0), StopKind.CANCEL, "cancelled")],
    ),
    Case(
        "a commit refused reads the store again",
        (job(1),),
        CommitRefused("job 1 is CANCELLED, not PENDING", NOW),
        [Resync(NOW)],
    ),
    Case(
        "after a restart, a job still running under its supervisor is re-adopted",
        (),
        Recovered((running(1),), (), {1: Observation(RunState.RUNNING)}, NOW),
        [Log(log_line=None)],  # type: ignore[arg-type]  # the line is checked on its own
    ),
    Case(
        "after a restart, a job committed but never launched is launched",
        (),
        Recovered((running(1),), (), {1: Observation(RunState.UNLAUNCHED)}, NOW),
        [Launch(1, 3600.0)],
    ),
    Case(
        "after a restart, a job that ended while the daemon was down is finished",
        (),
        Recovered((running(1),), (), {1: exited(0)}, NOW),
        [Finish(1, JobState.SUCCEEDED, 0, "exited with code 0", EndReason.NONE, NOW, 500.0)],
    ),
    Case(
        "after a restart, a job on GPUs gone from the inventory is stopped to be requeued",
        (),
        Recovered((running(1, gpus=2, held=(3, 4)),), (), {1: Observation(RunState.RUNNING)}, NOW),
        [
            Note(
                1,
                "its GPU 4 on box is not in the pool's inventory any more: stopping it to "
                "requeue it",
                NOW,
                reason=HeldReason.GPUS_GONE,
            ),
            Signal(
                Handle(1, 0),
                StopKind.PREEMPT,
                "its GPU 4 on box is not in the pool's inventory any more",
            ),
        ],
    ),
    Case(
        "after a restart, a job never launched on a node gone is requeued at once",
        (),
        Recovered((running(1, node="gone"),), (), {1: Observation(RunState.UNLAUNCHED)}, NOW),
        [
            Requeue(
                1,
                "its node gone is not in the pool's inventory any more; requeued before it was "
                "launched",
                NOW,
            )
        ],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_reaction_table(case: Case) -> None:
    vision = Project("vision", default_time_limit_s=300.0)
    state = engine_state(*case.jobs, projects=(vision,))
    if isinstance(case.event, Recovered):
        case = replace(case, event=replace(case.event, projects=(Project("default"), vision)))
    for job_id in case.told_held:
        state.jobs[job_id].survivors_reported = True
    for job_id, why in case.stopped.items():
        if why == "cancel":
            state.jobs[job_id].cancel_delivered = True
        else:
            state.jobs[job_id].stop_why = why
    got = react(state, case.event)
    if case.expected and isinstance(case.expected[0], Log):
        assert [type(i) for i in got] == [Log]
        return
    assert strip(got) == case.expected


def test_log_lines_say_what_happened_in_words() -> None:
    state = engine_state(running(1), running(2, cancel=True, grace=10.0))
    finish, signal = react(state, Polled({1: exited(3), 2: Observation(RunState.RUNNING)}, 1500.0))
    assert said_of(finish) == "job 1 FAILED (exit 3) after 6m40s: exited with code 3"
    assert said_of(signal) == "job 2: stopping it (cancelled; 10s grace)"
    (log,) = react(state, Recovered((running(3),), (), {3: Observation(RunState.RUNNING)}, NOW))
    assert isinstance(log, Log)
    assert log.log_line.text == "job 3 is still running under its supervisor: re-adopted"
    lost = react(engine_state(running(4)), LostSettled(4, Leftovers(9, alive=(9,)), NOW))
    assert getattr(lost[0], "log_line").level == logging.WARNING  # noqa: B009


def test_a_delivered_stop_is_remembered_and_not_asked_again() -> None:
    state = engine_state(running(1, cancel=True))
    (signal,) = react(state, Polled({1: Observation(RunState.RUNNING)}, NOW))
    assert isinstance(signal, Signal)
    assert react(state, Signalled(1, StopKind.CANCEL, False, "cancelled")) == []
    assert len(react(state, Polled({1: Observation(RunState.RUNNING)}, NOW))) == 1  # again
    react(state, Signalled(1, StopKind.CANCEL, True, "cancelled"))
    assert react(state, Polled({1: Observation(RunState.RUNNING)}, NOW)) == []


# -- passes: when one is due, and what its decision becomes ---------------------------------


def decided(
    state: EngineState, decision: Decision, version: int = 5, now: float = NOW
) -> list[Instruction]:
    snapshot = Snapshot(state.inventory.nodes, version=version)
    return react(state, PassDecided(decision, snapshot, now))


def test_a_pass_runs_when_something_changed_and_not_again_until_something_does() -> None:
    state = engine_state(job(1))
    assert react(state, Tick(NOW)) == [RunPass(NOW)]
    decided(state, Decision(pending={1: Status(Code.RESOURCES, Rule.NO_FIT)}))
    assert react(state, Tick(NOW + 0.5)) == []
    react(state, JobsStored((job(2),)))  # a submission
    assert react(state, Tick(NOW + 1)) == [RunPass(NOW + 1)]


def test_a_reason_written_by_the_engine_does_not_call_for_a_pass() -> None:
    state = engine_state(job(1, version=1))
    decided(state, Decision(pending={1: Status(Code.PRIORITY, Rule.BEHIND_HEAD)}))
    assert state.jobs[1].job.reason == "Priority"
    react(state, JobsStored((job(1, version=2, reason="Priority"),)))  # the store's copy
    assert react(state, Tick(NOW + 1)) == []


def test_jobs_held_by_begin_call_for_no_pass_until_the_first_begin_time() -> None:
    state = engine_state(*(job(i, begin=NOW + 40.0 * i) for i in range(1, 50)))
    decided(state, Decision())
    for t in (NOW + 1, NOW + 20, NOW + 39.9):
        assert react(state, Tick(t)) == []
    assert react(state, Tick(NOW + 40.0)) == [RunPass(NOW + 40.0)]


def test_a_job_that_fits_by_count_calls_for_a_pass_every_quiet_period() -> None:
    # 2 GPUs asked, 4 free: a pass may start it (if its type or memory let it).
    state = engine_state(job(1, gpus=2))
    decided(state, Decision())
    assert react(state, Tick(NOW + 1.0)) == []
    assert react(state, Tick(NOW + state.quiet_s)) == [RunPass(NOW + state.quiet_s)]


def test_a_full_pool_calls_for_no_pass_but_the_periodic_refresh() -> None:
    state = engine_state(running(1, gpus=4), job(2, gpus=1))
    decided(state, Decision())
    assert react(state, Tick(NOW + 30.0)) == []
    assert react(state, Tick(NOW + state.refresh_s)) == [RunPass(NOW + state.refresh_s)]


def test_a_project_within_its_quota_may_reclaim_so_its_waiting_job_calls_for_passes() -> None:
    ml = Project("ml", quota=2.0)
    state = engine_state(running(1, gpus=4), job(2, gpus=1, project="ml"), projects=(ml,))
    decided(state, Decision())
    assert react(state, Tick(NOW + state.quiet_s)) == [RunPass(NOW + state.quiet_s)]


RECLAIMED = ReclaimCause("ml", 4.0, 0.0, "default", 0.0, 2.0)
RECLAIMED_WORDS = preemption_text(Preemption(1, 3, RECLAIMED))


def test_starts_are_committed_then_launched_then_victims_and_reasons_follow() -> None:
    state = engine_state(running(1, gpus=2, held=(0, 1)), job(2, gpus=2), job(3, gpus=4))
    decision = Decision(
        starts=(Start(2, "box", (2, 3)),),
        pending={3: Status(Code.RESOURCES, Rule.NO_FIT)},
        preemptions=(Preemption(1, 3, RECLAIMED),),
    )
    assert decided(state, decision, version=7) == [CommitStarts(decision.starts, 7, NOW)]
    started = running(2, gpus=2, held=(2, 3), version=2)
    out = react(state, StartsCommitted((started,), NOW))
    assert strip(out) == [
        Launch(2, 3600.0),
        Signal(Handle(1, 0), StopKind.PREEMPT, RECLAIMED_WORDS),
        SetReasons({3: "Resources"}),
    ]
    assert said_of(out[0]) == "job 2 started on box:2,3"
    react(state, Signalled(1, StopKind.PREEMPT, True, RECLAIMED_WORDS))
    # The next pass names the same victim and reason: nothing more to do.
    decision = Decision(
        pending={3: Status(Code.RESOURCES, Rule.NO_FIT)},
        preemptions=(Preemption(1, 3, RECLAIMED),),
    )
    assert decided(state, decision) == []


def test_a_refused_commit_forgets_the_pass_and_calls_for_another() -> None:
    state = engine_state(job(1))
    decided(state, Decision(starts=(Start(1, "box", (0,)),)))
    assert react(state, CommitRefused("stale", NOW)) == [Resync(NOW)]
    assert state.committing is None
    assert react(state, Tick(NOW)) == [RunPass(NOW)]


def test_the_last_decision_is_the_last_pass_even_when_its_commit_is_refused() -> None:
    state = engine_state(job(1), job(2))
    first = Decision(
        starts=(Start(1, "box", (0,)),), pending={2: Status(Code.RESOURCES, Rule.NO_FIT)}
    )
    decided(state, first)
    assert state.decision is first  # `why` tells this pass, not the one before
    react(state, CommitRefused("stale", NOW))
    retry = Decision(pending={2: Status(Code.RESOURCES, Rule.NO_FIT)})
    decided(state, retry)
    assert state.decision is retry


def test_quota_never_fits_is_noted_when_it_comes_and_when_it_goes() -> None:
    state = engine_state(job(1, reason="Quota"))
    never = Status(
        Code.QUOTA_NEVER_FITS,
        Rule.NEVER_QUOTA,
        short=Insufficient(None, Dimension.QUOTA, 2.0, 1.0, 1.0),
        project="ml",
    )
    out = decided(state, Decision(pending={1: never}))
    assert strip(out) == [
        Note(
            1,
            f"can never start while quotas stay as they are: {status_text(never)}",
            NOW,
            only_if=JobState.PENDING,
        ),
        SetReasons({1: "QuotaNeverFits"}),
    ]
    assert decided(state, Decision(pending={1: never})) == []  # told once
    out = decided(state, Decision(pending={1: Status(Code.QUOTA, Rule.NOT_PREEMPTIBLE)}))
    assert strip(out) == [
        Note(1, "its project's quota or limit lets it start again", NOW, only_if=JobState.PENDING),
        SetReasons({1: "Quota"}),
    ]


# -- the view: which copy of a job wins -----------------------------------------------------


def test_an_older_copy_of_a_job_never_replaces_a_newer_one() -> None:
    state = engine_state(job(1, version=3, reason="Resources"))
    react(state, JobsStored((job(1, version=2, reason="Priority"),)))
    assert state.jobs[1].job.reason == "Resources"


def test_a_finished_job_leaves_the_view_and_a_late_copy_does_not_bring_it_back() -> None:
    state = engine_state(job(1, version=1))
    react(state, JobsStored((job(1, JobState.CANCELLED, version=2),)))
    assert 1 not in state.jobs
    react(state, JobsStored((job(1, version=1),)))  # a submission's event, late
    assert 1 not in state.jobs


def test_a_cancel_that_won_the_race_wins_over_the_reason_the_engine_wrote() -> None:
    state = engine_state(job(1, version=1))
    decided(state, Decision(pending={1: Status(Code.RESOURCES, Rule.NO_FIT)}))
    assert state.jobs[1].job.version == 2  # as the store's set_reasons would make it
    # The store refused that reason (the job was cancelled first, at version 2).
    react(state, JobsStored((job(1, JobState.CANCELLED, version=2),)))
    assert 1 not in state.jobs


def test_a_job_back_in_the_queue_is_a_new_run_with_nothing_delivered() -> None:
    state = engine_state(running(1, version=3))
    state.jobs[1].stop_why = "job 2 needs GPUs"
    react(state, JobsStored((job(1, version=4, restarts=1),)))
    assert state.jobs[1].stop_why is None and state.jobs[1].job.restart_count == 1


def test_projects_read_change_the_limits_of_waiting_jobs() -> None:
    state = engine_state(job(1, limit=None, project="ml"))
    assert state.snapshot(1, state_usage()).pending[0].time_limit_s == DAY
    react(state, ProjectsRead((Project("default"), Project("ml", default_time_limit_s=60.0))))
    assert state.snapshot(1, state_usage()).pending[0].time_limit_s == 60.0


def state_usage():  # type: ignore[no-untyped-def]
    from gpupool.policy.snapshot import Usage

    return Usage()


def test_the_gpu_use_an_engine_measured_goes_with_the_end_or_the_requeue() -> None:
    """A backend's exit record may carry its GPUs' utilization (Slurm's gres/gpuutil): the
    finish stores it, and a preempted run's requeue, after its release, stores it too."""
    measured = replace(record(0), gpu_utilization=0.6)
    state = engine_state(running(1))
    [finish] = react(state, Polled({1: Observation(RunState.EXITED, measured)}, NOW))
    assert isinstance(finish, Finish) and finish.gpu_utilization == 0.6

    state = engine_state(running(2))
    preempted = replace(record(143, ExitReason.PREEMPTED), gpu_utilization=0.3)
    react(state, Polled({2: Observation(RunState.EXITED, preempted)}, NOW))
    [requeue] = react(state, Released(2, True, NOW))
    assert isinstance(requeue, Requeue) and requeue.gpu_utilization == 0.3
