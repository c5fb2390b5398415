"""--after and --array %K in the engine (engine/gating.py, engine/react.py): which waiting
jobs a pass leaves out, the status `why` shows for them, the cancel of a job whose `:ok`
dependency failed; and, over random histories with the real policy deciding every pass,
that no job starts before its dependencies ended as asked and no array runs more than K."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpupool.core.hardware import Gpu, Inventory, Node
from gpupool.core.job import EndReason, Job, JobSpec, JobState, Resources
from gpupool.core.job_control import AfterKind, ArrayTask, Dependency
from gpupool.core.project import Project
from gpupool.engine.events import CommitStarts, Finish, Instruction, JobsStored, PassDecided
from gpupool.engine.react import react
from gpupool.engine.state import EngineState
from gpupool.policy import Code, decide
from gpupool.policy.render import status_text
from gpupool.policy.snapshot import PolicyConfig, Usage

NOW = 1000.0


def job(
    job_id: int,
    state: JobState = JobState.PENDING,
    *,
    after: tuple[Dependency, ...] = (),
    array: tuple[int, int, int | None] | None = None,  # (array id, index, limit)
) -> Job:
    task = None if array is None else ArrayTask(array[1], array[2])
    spec = JobSpec(
        command=("train",),
        resources=Resources(gpus=1),
        time_limit_s=3600.0,
        after=after,
        array_task=task,
    )
    running = state is JobState.RUNNING
    return Job(
        job_id,
        spec,
        "alice",
        state,
        10.0,
        start_time=100.0 if running else None,
        node="box" if running else None,
        gpus=(job_id % 8,) if running else (),
        array_id=None if array is None else array[0],
    )


def engine_state(*jobs: Job, gpus: int = 8) -> EngineState:
    node = Node("box", tuple(Gpu(i, "A100-80GB", 80 << 30) for i in range(gpus)))
    state = EngineState(Inventory((node,), source="declared"), PolicyConfig())
    state.replace_all(jobs, (Project("default"),))
    return state


def run_pass(state: EngineState, now: float = NOW) -> list[Instruction]:
    """One pass as the loop runs it (its gating, the policy, the reaction), no store."""
    gating = state.gating()
    snapshot = state.snapshot(1, Usage(), gating)
    return react(state, PassDecided(decide(snapshot, now), snapshot, now, gating))


def started(instructions: list[Instruction]) -> list[int]:
    return [s.job_id for i in instructions if isinstance(i, CommitStarts) for s in i.starts]


def end(state: EngineState, job_id: int, how: JobState) -> None:
    old = state.jobs[job_id].job
    react(state, JobsStored((replace(old, state=how, version=old.version + 1),)))


def ok(job_id: int) -> Dependency:
    return Dependency(job_id, AfterKind.OK)


def test_a_job_waits_while_its_dependency_runs_and_why_says_for_which() -> None:
    state = engine_state(job(1, JobState.RUNNING), job(2, after=(ok(1),)))
    assert started(run_pass(state)) == []
    status = state.decision.pending[2]
    assert status.code is Code.DEPENDENCY and status.jobs == (1,)
    assert status_text(status) == "waiting for job 1 to end (--after)"


def test_a_job_starts_once_its_ok_dependency_succeeded() -> None:
    state = engine_state(job(1, JobState.RUNNING), job(2, after=(ok(1),)))
    run_pass(state)
    end(state, 1, JobState.SUCCEEDED)
    assert started(run_pass(state)) == [2]


def test_an_ok_dependency_that_failed_cancels_the_job_naming_it() -> None:
    state = engine_state(job(1, JobState.RUNNING), job(2, after=(ok(1),)))
    end(state, 1, JobState.FAILED)
    out = run_pass(state)
    finishes = [i for i in out if isinstance(i, Finish)]
    assert len(finishes) == 1
    cancel = finishes[0]
    assert (cancel.job_id, cancel.state, cancel.reason) == (
        2,
        JobState.CANCELLED,
        EndReason.DEPENDENCY,
    )
    assert cancel.cause == "dependency job 1 ended FAILED, not SUCCEEDED (--after 1:ok)"


def test_an_any_dependency_is_met_by_a_failure() -> None:
    state = engine_state(job(1, JobState.RUNNING), job(2, after=(Dependency(1, AfterKind.ANY),)))
    end(state, 1, JobState.FAILED)
    assert started(run_pass(state)) == [2]


def test_a_dependency_that_ended_before_the_engine_saw_it_is_unknown_until_recorded() -> None:
    state = engine_state(job(2, after=(ok(1),)))
    gating = state.gating()
    assert gating.unknown == {1} and 2 in gating.held  # held until the loop reads the store
    state.ended.record(1, JobState.SUCCEEDED)
    assert started(run_pass(state)) == [2]


def test_an_array_runs_at_most_its_limit_and_the_rest_say_array_limit() -> None:
    tasks = [job(10 + i, array=(10, i, 2)) for i in range(5)]
    state = engine_state(*tasks)
    assert started(run_pass(state)) == [10, 11]
    for job_id in (10, 11):  # committed: now running
        react(state, JobsStored((job(job_id, JobState.RUNNING, array=(10, job_id - 10, 2)),)))
    assert started(run_pass(state)) == []
    status = state.decision.pending[12]
    assert status.code is Code.ARRAY_LIMIT and status.jobs == (10, 11)
    assert status_text(status) == "its array runs 2 tasks at most (%2), and jobs 10, 11 run"
    end(state, 10, JobState.SUCCEEDED)
    assert started(run_pass(state)) == [12]


def test_jobs_without_dependencies_or_limits_are_never_left_out() -> None:
    state = engine_state(job(1), job(2, array=(2, 0, None)), job(3, array=(2, 1, None)))
    assert state.gating().left_out == frozenset()
    assert sorted(started(run_pass(state))) == [1, 2, 3]


# -- properties over random histories ---------------------------------------------------------

_ENDS = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


@st.composite
def workloads(draw: st.DrawFn) -> list[Job]:
    """Plain jobs with random --after on earlier ones, and one array with a %K."""
    jobs: list[Job] = []
    count = draw(st.integers(1, 8))
    for job_id in range(1, count + 1):
        deps = draw(st.lists(st.integers(1, job_id), max_size=2, unique=True))
        after = tuple(Dependency(d, draw(st.sampled_from(AfterKind))) for d in deps if d != job_id)
        jobs.append(job(job_id, after=after))
    first, size = count + 1, draw(st.integers(1, 6))
    limit = draw(st.integers(1, 3))
    jobs += [job(first + i, array=(first, i, limit)) for i in range(size)]
    return jobs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.data())
def test_never_started_before_dependencies_and_never_more_than_k_of_an_array(
    jobs: list[Job], data: st.DataObject
) -> None:
    state = engine_state(*jobs, gpus=4)
    by_id = {j.id: j for j in jobs}
    ended: dict[int, JobState] = {}
    for _ in range(30):
        out = run_pass(state)
        for ins in out:
            if isinstance(ins, Finish):  # a dependency never satisfied: cancelled
                assert ins.reason == EndReason.DEPENDENCY
                deps = by_id[ins.job_id].spec.after
                assert any(
                    d.kind is AfterKind.OK
                    and ended.get(d.job_id, JobState.SUCCEEDED) is not JobState.SUCCEEDED
                    for d in deps
                )
                end(state, ins.job_id, JobState.CANCELLED)
                ended[ins.job_id] = JobState.CANCELLED
        for job_id in started(out):
            for dep in by_id[job_id].spec.after:  # every dependency ended as asked
                assert dep.job_id in ended and dep.met_by(ended[dep.job_id])
            react(
                state,
                JobsStored(
                    (
                        replace(
                            by_id[job_id],
                            state=JobState.RUNNING,
                            node="box",
                            gpus=(0,),
                            start_time=NOW,
                        ),
                    )
                ),
            )
        running = [t.job for t in state.running()]
        arrays = [j for j in running if j.array_id is not None]
        if arrays:
            task = arrays[0].spec.array_task
            assert task is not None and task.limit is not None
            assert len(arrays) <= task.limit
        if not running and not started(out):
            break
        for j in running:  # some of the running jobs end, each in a random way
            if data.draw(st.booleans()):
                how = data.draw(st.sampled_from(_ENDS))
                end(state, j.id, how)
                ended[j.id] = how
