"""Properties of the engine's reaction table over random histories: submissions, cancels,
exits, lost supervisors, stops taking effect and time passing, with the real policy deciding
every pass. The store and the executor are played by a small model here (their own tests use
the real ones); what is checked is what the engine asks of them:

- no run is ever launched twice;
- every change of a job's state it asks for is an edge of core.job's transition table;
- its view of the active jobs is the store's after every round;
- no GPU is held whole by two running jobs.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
from gpupool.core.job import Job, JobSpec, JobState, Resources, check_transition
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
    Release,
    Released,
    Requeue,
    RequeueRefused,
    Resync,
    Resynced,
    RunPass,
    SetReasons,
    SettleLost,
    Signal,
    Signalled,
    StartsCommitted,
    Tick,
)
from gpupool.engine.react import react
from gpupool.engine.state import EngineState, handle_of
from gpupool.policy import decide
from gpupool.policy.snapshot import PolicyConfig, Usage

PROJECTS = (Project("default"), Project("a", quota=2.0), Project("b", quota=2.0))


class Stale(Exception):
    pass


class World:
    """The engine's state, and a model store and executor that carry out its instructions."""

    def __init__(self) -> None:
        node = Node("box", tuple(Gpu(i, "A100-80GB", 80 << 30) for i in range(4)))
        self.state = EngineState(Inventory((node,), source="declared"), PolicyConfig())
        self.state.replace_all((), PROJECTS)
        self.jobs: dict[int, Job] = {}
        self.version = 0  # the allocation version
        self.runs: dict[Handle, Observation] = {}
        self.stops: dict[Handle, StopKind] = {}  # stops asked, not yet taken effect
        self.stubborn: set[Handle] = set()  # lost runs whose processes survive a kill
        self.launches: Counter[Handle] = Counter()
        self.now = 1000.0

    # -- what users and jobs do

    def submit(self, gpus: int, project: str, held: bool) -> None:
        job_id = len(self.jobs) + 1
        spec = JobSpec(
            command=("x",),
            resources=Resources(gpus=gpus),
            project=project,
            time_limit_s=4 * 3600.0,  # beyond the reclaim patience: borrowers are reclaimed
            begin_time=self.now + 100.0 if held else None,
        )
        self.jobs[job_id] = Job(job_id, spec, "u", JobState.PENDING, self.now, version=1)
        self.tell(JobsStored((self.jobs[job_id],)))

    def cancel(self, job_id: int) -> None:
        job = self.jobs.get(job_id)
        if job is None or job.state.terminal:
            return
        if job.state is JobState.PENDING:
            self.write(job_id, JobState.CANCELLED)
        elif not job.cancel_requested:
            self.jobs[job_id] = replace(job, cancel_requested=True, version=job.version + 1)
        self.tell(JobsStored((self.jobs[job_id],)))

    def end_run(self, pick: int, how: str) -> None:
        live = [h for h, o in sorted(self.runs.items()) if o.state is RunState.RUNNING]
        if how == "stop":  # a stop that was asked for takes effect
            live = [h for h in live if h in self.stops]
        if not live:
            return
        h = live[pick % len(live)]
        if how == "lost":
            self.runs[h] = Observation(RunState.LOST)
            return
        if how == "stop":
            kind = self.stops.pop(h)
            reason = ExitReason.CANCELLED if kind is StopKind.CANCEL else ExitReason.PREEMPTED
            self.runs[h] = exited(143, reason)
            return
        self.runs[h] = exited(int(how), ExitReason.EXITED)

    # -- the engine's round, as engine/loop.py runs it

    def round(self, dt: float) -> None:
        self.now += dt
        running = {handle_of(t.job): t.job.id for t in self.state.running()}
        seen = {running[h]: self.runs.get(h, Observation(RunState.UNLAUNCHED)) for h in running}
        self.tell(Polled(seen, self.now))
        for _ in range(3):
            due = react(self.state, Tick(self.now))
            if not due:
                break
            self.carry_out(due)
            if not self.state.dirty:
                break

    def tell(self, event: Event) -> None:
        self.carry_out(react(self.state, event))

    def carry_out(self, instructions: Iterable[Instruction]) -> None:
        todo = list(instructions)
        while todo:
            for event in self.do(todo.pop(0)):
                todo[:0] = react(self.state, event)

    def do(self, ins: Instruction) -> list[Event]:
        match ins:
            case RunPass(now):
                snapshot = self.state.snapshot(self.version, Usage())
                return [PassDecided(decide(snapshot, now), snapshot, now)]
            case CommitStarts(starts, version, now):
                try:
                    return [StartsCommitted(self.commit(starts, version), now)]
                except Stale:
                    return [CommitRefused("stale", now)]
            case Launch(job_id):
                job = self.jobs[job_id]
                assert job.state is JobState.RUNNING, job
                h = handle_of(job)
                self.launches[h] += 1
                self.runs.setdefault(h, Observation(RunState.RUNNING))
                return []
            case Finish(job_id, to):
                self.write(job_id, to)
                return [JobsStored((self.jobs[job_id],))]
            case Requeue(job_id, _, now):
                if self.jobs[job_id].cancel_requested:
                    return [RequeueRefused(job_id, now)]
                self.write(job_id, JobState.PENDING)
                return [JobsStored((self.jobs[job_id],))]
            case Release(handle, now):
                self.runs[handle] = Observation(RunState.RELEASED)
                return [Released(handle.job_id, True, now)]
            case Signal(handle, kind, why):
                live = self.runs.get(handle, Observation(RunState.UNLAUNCHED))
                delivered = live.state is RunState.RUNNING
                if delivered and self.stops.get(handle) is not StopKind.CANCEL:
                    self.stops[handle] = kind  # a cancel wins over a preemption
                return [Signalled(handle.job_id, kind, delivered, why)]
            case SettleLost(handle, _, now):
                alive = (7,) if handle in self.stubborn else ()
                self.stubborn.discard(handle)  # killed by the next attempt
                return [LostSettled(handle.job_id, Leftovers(7, killed=(7,), alive=alive), now)]
            case Note(job_id, _, _, reason, only_if):
                job = self.jobs[job_id]
                if only_if is not None and job.state is not only_if:
                    return []
                if reason is not None and reason != job.reason:
                    self.jobs[job_id] = replace(job, reason=reason, version=job.version + 1)
                return [JobsStored((self.jobs[job_id],))]
            case SetReasons(reasons):
                for job_id, reason in reasons.items():
                    job = self.jobs[job_id]
                    if job.state is JobState.PENDING and job.reason != reason:
                        self.jobs[job_id] = replace(job, reason=reason, version=job.version + 1)
                return []
            case Resync():
                active = tuple(j for j in self.jobs.values() if not j.state.terminal)
                return [Resynced(active, PROJECTS)]
            case Log():
                return []
        raise AssertionError(f"unexpected instruction {ins!r}")

    # -- the model store

    def commit(self, starts: Iterable[object], version: int) -> tuple[Job, ...]:
        if version != self.version:
            raise Stale
        held = {g for j in self.jobs.values() if j.state is JobState.RUNNING for g in j.gpus}
        out = []
        for s in starts:
            job = self.jobs[s.job_id]  # type: ignore[attr-defined]
            if job.state is not JobState.PENDING or job.cancel_requested:
                raise Stale
            assert not held & set(s.gpus), "a GPU given twice"  # type: ignore[attr-defined]
            held |= set(s.gpus)  # type: ignore[attr-defined]
        self.version += 1
        for s in starts:
            job = self.jobs[s.job_id]  # type: ignore[attr-defined]
            check_transition(job.state, JobState.RUNNING)
            self.jobs[job.id] = replace(
                job,
                state=JobState.RUNNING,
                node=s.node,  # type: ignore[attr-defined]
                gpus=s.gpus,  # type: ignore[attr-defined]
                start_time=self.now,
                reason="",
                version=job.version + 1,
            )
            out.append(self.jobs[job.id])
        return tuple(out)

    def write(self, job_id: int, to: JobState) -> None:
        job = self.jobs[job_id]
        if job.state is to:
            return
        check_transition(job.state, to)  # the property: only edges of the table
        if job.gpus:
            self.version += 1
        restarts = job.restart_count + (to is JobState.PENDING)
        self.jobs[job_id] = replace(
            job,
            state=to,
            node=None if to is JobState.PENDING else job.node,
            gpus=() if to is JobState.PENDING else job.gpus,
            restart_count=restarts,
            reason="",
            version=job.version + 1,
        )


def exited(code: int, reason: ExitReason) -> Observation:
    return Observation(RunState.EXITED, ExitRecord(code, None, reason, 1.0, 2.0, ""))


@dataclass(frozen=True)
class Step:
    kind: str
    a: int = 0
    b: str = ""


steps = st.one_of(
    st.builds(Step, st.just("submit"), st.integers(1, 4), st.sampled_from(["default", "a", "b"])),
    st.builds(Step, st.just("held"), st.integers(1, 2), st.sampled_from(["a", "b"])),
    st.builds(Step, st.just("cancel"), st.integers(1, 30)),
    st.builds(Step, st.just("end"), st.integers(0, 8), st.sampled_from(["0", "1", "lost", "stop"])),
    st.builds(Step, st.just("stubborn"), st.integers(0, 8)),
    st.builds(Step, st.just("round"), st.sampled_from([0, 1, 3, 60, 400])),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(steps, min_size=1, max_size=60))
def test_the_engine_asks_only_for_what_the_store_and_executor_can_do(history: list[Step]) -> None:
    world = World()
    for step in history:
        if step.kind == "submit":
            world.submit(step.a, step.b, held=False)
        elif step.kind == "held":
            world.submit(step.a, step.b, held=True)
        elif step.kind == "cancel":
            world.cancel(step.a)
        elif step.kind == "end":
            world.end_run(step.a, step.b)
        elif step.kind == "stubborn":
            lost = [h for h, o in sorted(world.runs.items()) if o.state is RunState.LOST]
            if lost:
                world.stubborn.add(lost[step.a % len(lost)])
        else:
            world.round(float(step.a))
        # No run is launched twice.
        assert all(n == 1 for n in world.launches.values()), world.launches
        # The engine's view is the store's.
        active = {i: j for i, j in world.jobs.items() if not j.state.terminal}
        assert set(world.state.jobs) == set(active)
        for job_id, job in active.items():
            seen = world.state.jobs[job_id].job
            assert (seen.state, seen.cancel_requested, seen.gpus) == (
                job.state,
                job.cancel_requested,
                job.gpus,
            )
        assert world.state.public == {i: t.job for i, t in world.state.jobs.items()}
        # What a pass is given is what the view holds (kept one job at a time).
        # A job a --begin after now holds is kept apart, with its status (begin_held.py).
        snapshot = world.state.snapshot(world.version, Usage(), now=world.now)
        waiting = [
            j for j in active.values() if j.state is JobState.PENDING and not j.cancel_requested
        ]
        later = {j.id for j in waiting if (j.spec.begin_time or -math.inf) > world.now}
        assert [p.id for p in snapshot.pending] == sorted(
            j.id for j in waiting if j.id not in later
        )
        assert set(world.state.held_by_begin()) == later
        assert [r.id for r in snapshot.running] == sorted(
            j.id for j in active.values() if j.state is JobState.RUNNING
        )
        # No GPU is held by two running jobs.
        held = [g for j in active.values() if j.state is JobState.RUNNING for g in j.gpus]
        assert len(held) == len(set(held))


def test_a_stream_of_preemptions_requeues_each_victim_once_and_launches_each_run_once() -> None:
    world = World()
    for _ in range(4):
        world.submit(1, "default", held=False)  # borrowers fill the box
    world.round(1.0)
    assert sum(t.job.state is JobState.RUNNING for t in world.state.jobs.values()) == 4
    world.submit(2, "a", held=False)  # within a's quota: reclaims two borrowers
    for _ in range(4):
        world.round(1.0)
        for _ in range(4):
            world.end_run(0, "stop")
    states = Counter(j.state for j in world.jobs.values())
    assert world.jobs[5].state is JobState.RUNNING
    assert states[JobState.RUNNING] == 3 and states[JobState.PENDING] == 2
    assert sum(j.restart_count for j in world.jobs.values()) == 2
    assert all(n == 1 for n in world.launches.values())
