"""Admission of backends' jobs by the pool's policy (engine/admission.py): the backend's own
pass over its engine's capacity, through the reaction table (events in, instructions out),
without a store, an engine or a clock."""

from __future__ import annotations

from dataclasses import replace

from gpupool.core.backends import BackendAdmission, Capacity, EngineNode
from gpupool.core.execution import StopKind
from gpupool.core.hardware import Gpu, Inventory, Node
from gpupool.core.job import Job, JobSpec, JobState, Resources
from gpupool.core.project import Project
from gpupool.engine.events import (
    CapacityRead,
    HandOver,
    Instruction,
    JobsStored,
    PassDecided,
    ProjectsRead,
    Signal,
)
from gpupool.engine.gating import Gating
from gpupool.engine.react import react
from gpupool.engine.state import EngineState
from gpupool.policy import Code, Decision, Status
from gpupool.policy.render import status_text
from gpupool.policy.snapshot import PolicyConfig, Usage
from gpupool.policy.status import Rule

NOW = 10_000.0
INVENTORY = Inventory((Node("box", (Gpu(0, "A100", 80 << 30),)),), source="declared")
TWO_NODES = Capacity((EngineNode("c1", 2, pin="c1"), EngineNode("c2", 2, pin="c2")))


def _state(quotas: dict[str, float] | None = None) -> EngineState:
    admission = {"hpc": BackendAdmission(quotas=quotas or {})}
    state = EngineState(INVENTORY, PolicyConfig(), backends=("hpc",), admission=admission)
    react(state, ProjectsRead((Project("a"), Project("b"))))
    return state


def _job(job_id: int, project: str = "a", gpus: int = 2, **changes: object) -> Job:
    spec = JobSpec(("train",), Resources(gpus=gpus), project=project, backend="hpc")
    spec = replace(spec, **changes)  # type: ignore[arg-type]
    return Job(job_id, spec, "alice", JobState.PENDING, NOW - 100 + job_id, version=1)


def _pass(state: EngineState) -> list[Instruction]:
    snapshot = state.snapshot(0, Usage())
    return react(state, PassDecided(Decision(), snapshot, NOW, Gating()))


def _handovers(out: list[Instruction]) -> dict[int, tuple[str, ...]]:
    return {i.job_id: i.pinned for i in out if isinstance(i, HandOver)}


def test_nothing_is_handed_over_before_the_engine_says_what_it_has() -> None:
    state = _state()
    react(state, JobsStored((_job(1),)))
    assert _handovers(_pass(state)) == {}
    status = state.decision.pending[1]
    assert (status.code, status.backend) == (Code.CAPACITY_UNKNOWN, "hpc")
    react(state, CapacityRead("hpc", Capacity(problem="sinfo: Unable to contact slurm controller")))
    _pass(state)
    status = state.decision.pending[1]
    assert "Unable to contact" in status.detail and "could not be read" in status_text(status)


def test_jobs_are_admitted_pinned_to_free_nodes_until_the_backend_is_full() -> None:
    state = _state()
    react(state, CapacityRead("hpc", TWO_NODES))
    react(state, JobsStored((_job(1), _job(2), _job(3))))
    out = _pass(state)
    handed = _handovers(out)
    assert sorted(handed) == [1, 2]
    assert sorted(handed.values()) == [("c1",), ("c2",)]
    waits = state.decision.pending[3]
    assert waits.code is Code.RESOURCES
    assert state.decision.pending[1].code is Code.QUEUED_IN_BACKEND
    assert "admitted to backend hpc" in next(
        i.log_line.text for i in out if isinstance(i, HandOver) and i.log_line
    )
    # The admitted jobs hold their nodes in the next pass too: nothing more is handed over.
    assert _handovers(_pass(state)) == {}
    assert state.decision.pending[3].code is Code.RESOURCES


def test_gpus_other_tenants_hold_are_not_given() -> None:
    state = _state()
    busy = Capacity((EngineNode("c1", 2, gpus_used=2, pin="c1"), EngineNode("c2", 2, pin="c2")))
    react(state, CapacityRead("hpc", busy))
    react(state, JobsStored((_job(1), _job(2))))
    assert _handovers(_pass(state)) == {1: ("c2",)}
    assert state.decision.pending[2].code is Code.RESOURCES


def test_drained_and_down_nodes_take_nothing() -> None:
    from gpupool.core.backends import EngineNodeState

    state = _state()
    nodes = (
        EngineNode("c1", 2, state=EngineNodeState.DRAINED, detail="maintenance"),
        EngineNode("c2", 2, state=EngineNodeState.DOWN),
        EngineNode("c3", 2, pin="10.0.0.3"),
    )
    react(state, CapacityRead("hpc", Capacity(nodes)))
    react(state, JobsStored((_job(1), _job(2))))
    assert _handovers(_pass(state)) == {1: ("10.0.0.3",)}


def test_a_gang_is_admitted_whole_and_pinned_to_its_nodes() -> None:
    state = _state()
    react(state, CapacityRead("hpc", TWO_NODES))
    react(state, JobsStored((_job(1, nodes=2),)))
    assert _handovers(_pass(state)) == {1: ("c1", "c2")}


def test_quota_on_the_backend_holds_a_job_that_cannot_borrow() -> None:
    state = _state(quotas={"a": 2, "b": 2})
    react(state, CapacityRead("hpc", TWO_NODES))
    fixed = {"project": "a", "preemptible": False}
    react(state, JobsStored((_job(1, **fixed), _job(2, **fixed), _job(3, project="b"))))
    handed = _handovers(_pass(state))
    assert sorted(handed) == [1, 3]
    waits = state.decision.pending[2]
    assert (waits.code, waits.rule) == (Code.QUOTA, Rule.NOT_PREEMPTIBLE)
    assert "quota" in status_text(waits)


def test_a_job_no_quota_on_the_backend_can_ever_admit_never_fits() -> None:
    state = _state(quotas={"b": 2})  # project a has no quota there, and cannot borrow
    react(state, CapacityRead("hpc", TWO_NODES))
    react(state, JobsStored((_job(1, project="a", preemptible=False),)))
    assert _handovers(_pass(state)) == {}
    assert state.decision.pending[1].code is Code.QUOTA_NEVER_FITS


def test_a_borrower_running_on_the_backend_is_reclaimed_for_a_project_within_its_quota() -> None:
    state = _state(quotas={"b": 4})
    react(state, CapacityRead("hpc", Capacity((EngineNode("c1", 2, gpus_used=2),))))
    running = replace(
        _job(1, project="a", preemptible=True),
        state=JobState.RUNNING,
        start_time=NOW - 7200,
        version=2,
    )
    react(state, JobsStored((running,)))  # found running after a restart: seated by count
    react(state, JobsStored((_job(2, project="b"),)))
    out = _pass(state)
    assert _handovers(out) == {}
    assert state.decision.pending[2].code is Code.RECLAIM
    signals = [i for i in out if isinstance(i, Signal)]
    assert [(s.handle.job_id, s.kind) for s in signals] == [(1, StopKind.PREEMPT)]


def test_the_local_pool_and_the_backend_are_decided_apart() -> None:
    state = _state()
    react(state, CapacityRead("hpc", TWO_NODES))
    local = replace(
        _job(1, gpus=1), spec=replace(_job(1).spec, backend=None, resources=Resources(gpus=1))
    )
    react(state, JobsStored((local, _job(2, gpus=2))))
    snapshot = state.snapshot(0, Usage())
    assert [p.id for p in snapshot.pending] == [1]  # the pool's own pass has its own jobs
    out = react(state, PassDecided(Decision(), snapshot, NOW, Gating()))
    assert list(_handovers(out)) == [2]


def test_a_started_job_stores_the_nodes_it_was_admitted_to() -> None:
    from gpupool.core.execution import Observation, RunState
    from gpupool.engine.events import Polled, StartInBackend

    state = _state()
    react(state, CapacityRead("hpc", TWO_NODES))
    react(state, JobsStored((_job(1, nodes=2, gpus=1), _job(2, gpus=1))))
    handed = _handovers(_pass(state))
    assert sorted(handed[1]) == ["c1", "c2"] and handed[2] in {("c1",), ("c2",)}
    out = react(state, Polled({1: Observation(RunState.RUNNING, ref="slurm://c/7")}, NOW))
    (start,) = [i for i in out if isinstance(i, StartInBackend)]
    assert start.node == "hpc/" + "+".join(handed[1]) and len(start.gpus) == 2


def test_after_a_restart_a_running_job_is_seated_where_its_start_says() -> None:
    state = _state()
    capacity = Capacity((EngineNode("c1", 2, pin="c1"), EngineNode("c2", 2, gpus_used=2, pin="c2")))
    react(state, CapacityRead("hpc", capacity))
    running = replace(
        _job(1), state=JobState.RUNNING, start_time=NOW - 60, node="hpc/c2", gpus=(0, 1), version=2
    )
    react(state, JobsStored((running, _job(2))))
    assert _handovers(_pass(state)) == {2: ("c1",)}
    assert state.jobs[1].admitted == (("c2", (0, 1)),)


def test_a_gang_the_pass_put_on_one_node_takes_one_per_node_and_goes_first() -> None:
    state = _state()
    react(state, CapacityRead("hpc", TWO_NODES))
    react(state, JobsStored((_job(1, nodes=2, gpus=1), _job(2, gpus=2))))
    assert _handovers(_pass(state)) == {1: ("c1", "c2")}
    waits = state.decision.pending[2]
    assert (waits.code, waits.rule, waits.jobs) == (Code.PRIORITY, Rule.BEHIND_GANG, (1,))
    assert "waiting behind job 1" in status_text(waits)


def test_a_gang_waits_until_enough_nodes_have_its_gpus_free() -> None:
    state = _state()
    busy = Capacity((EngineNode("c1", 2, gpus_used=1), EngineNode("c2", 2, gpus_used=2)))
    react(state, CapacityRead("hpc", busy))
    react(state, JobsStored((_job(1, nodes=2, gpus=1),)))
    assert _handovers(_pass(state)) == {}
    waits = state.decision.pending[1]
    assert (waits.code, waits.rule) == (Code.RESOURCES, Rule.GANG_NO_FIT)
    text = status_text(waits)
    assert "1 GPU free on each of 2 nodes of backend hpc; 1 node has that now" in text


def test_a_one_node_job_wider_than_every_node_is_never_spread() -> None:
    state = _state()
    react(state, CapacityRead("hpc", TWO_NODES))
    react(state, JobsStored((_job(1, gpus=4),)))
    assert _handovers(_pass(state)) == {}
    waits = state.decision.pending[1]
    assert waits.code is Code.UNSATISFIABLE
    assert "hpc/c" in status_text(waits) and "4" in status_text(waits)


def _half(job_id: int) -> Job:
    return _job(job_id, resources=Resources(gpus=1, gpu_fraction=0.5))


def test_two_halves_share_one_gpu_of_a_node_whose_engine_gives_no_gpu_memory() -> None:
    from gpupool.core.execution import Observation, RunState
    from gpupool.engine.events import Polled

    state = _state()
    react(state, CapacityRead("hpc", Capacity((EngineNode("c1", 1, pin="10.0.0.1"),))))
    react(state, JobsStored((_half(1), _half(2), _half(3))))
    assert _handovers(_pass(state)) == {1: ("10.0.0.1",), 2: ("10.0.0.1",)}
    assert state.jobs[1].admitted == state.jobs[2].admitted == (("c1", (0,)),)
    assert state.decision.pending[3].code is Code.RESOURCES
    # Both seated on the one GPU in the next passes, waiting in the engine and running (the
    # engine counts the two halves as its one GPU in use: Ray's 1.0, rounded up).
    assert _handovers(_pass(state)) == {}
    react(state, Polled({1: Observation(RunState.RUNNING), 2: Observation(RunState.RUNNING)}, NOW))
    react(state, CapacityRead("hpc", Capacity((EngineNode("c1", 1, 1, pin="10.0.0.1"),))))
    assert _handovers(_pass(state)) == {}
    assert state.decision.pending[3].code is Code.RESOURCES
    # `gpupool gpus` shows each half as half a GPU, the two as the one GPU they hold.
    from gpupool.engine.admission import backend_nodes

    [hpc] = backend_nodes(state)
    assert hpc.jobs == {"c1": ((1, 0.5), (2, 0.5))}


def test_a_third_half_takes_another_gpu_and_a_whole_gpu_job_waits_for_a_free_one() -> None:
    state = _state()
    react(state, CapacityRead("hpc", Capacity((EngineNode("c1", 2, pin="c1"),))))
    whole = _job(4, gpus=1)
    react(state, JobsStored((_half(1), _half(2), _half(3), whole)))
    handed = _handovers(_pass(state))
    assert sorted(handed) == [1, 2, 3]
    gpus = sorted(state.jobs[i].admitted[0][1] for i in (1, 2, 3))
    assert gpus in ([(0,), (0,), (1,)], [(0,), (1,), (1,)])
    assert state.decision.pending[4].code is Code.RESOURCES


def test_a_gpu_partly_used_by_another_tenant_is_not_free_for_a_whole_gpu_job() -> None:
    state = _state()  # Ray's 0.5 GPU of another tenant on c1: 1 GPU in use, rounded up
    react(state, CapacityRead("hpc", Capacity((EngineNode("c1", 1, 1, pin="c1"),))))
    react(state, JobsStored((_job(1, gpus=1),)))
    assert _handovers(_pass(state)) == {}
    assert state.decision.pending[1].code is Code.RESOURCES


def _anywhere(job_id: int) -> Job:
    """A `--backend any` job as the store keeps it: on the pool's machine, routable to hpc."""
    spec = JobSpec(("train",), Resources(gpus=1), project="a", route_to=("hpc",))
    return Job(job_id, spec, "alice", JobState.PENDING, NOW - 50, version=1)


def test_a_job_of_backend_any_goes_where_it_starts_first() -> None:
    from gpupool.engine.events import Route

    state = _state()
    react(state, CapacityRead("hpc", TWO_NODES))
    react(state, JobsStored((_anywhere(7),)))
    here = Status(Code.PRIORITY, Rule.BEHIND_HEAD, jobs=(1,))  # the box's pass: it waits
    snapshot = state.snapshot(0, Usage())
    out = react(state, PassDecided(Decision(pending={7: here}), snapshot, NOW, Gating()))
    routes = [i for i in out if isinstance(i, Route)]
    assert [(r.job_id, r.backend) for r in routes] == [(7, "hpc")]
    assert "it starts there first" in routes[0].cause and "waiting behind job 1" in routes[0].cause
    kinds = [type(i).__name__ for i in out if isinstance(i, Route | HandOver)]
    assert kinds == ["Route", "HandOver"]  # its spec names hpc before it is launched there
    assert _handovers(out) == {7: ("c1",)}


def test_a_job_of_backend_any_the_box_starts_is_not_routed() -> None:
    from gpupool.engine.events import Route
    from gpupool.policy.snapshot import Start

    state = _state()
    react(state, CapacityRead("hpc", TWO_NODES))
    react(state, JobsStored((_anywhere(7),)))
    decision = Decision(starts=(Start(7, "box", (0,)),))
    out = react(state, PassDecided(decision, state.snapshot(0, Usage()), NOW, Gating()))
    assert not any(isinstance(i, Route | HandOver) for i in out)


def test_a_job_of_backend_any_no_backend_starts_keeps_the_boxs_reason() -> None:
    state = _state(quotas={"b": 4})
    full = Capacity((EngineNode("c1", 2, gpus_used=2),))
    react(state, CapacityRead("hpc", full))
    react(state, JobsStored((_anywhere(7),)))
    here = Status(Code.PRIORITY, Rule.BEHIND_HEAD, jobs=(1,))
    out = react(
        state, PassDecided(Decision(pending={7: here}), state.snapshot(0, Usage()), NOW, Gating())
    )
    assert _handovers(out) == {}
    assert state.decision.pending[7] == here


def test_a_backends_checkpoint_dir_is_each_jobs_checkpoint_dir_there() -> None:
    from gpupool.engine.backend_io import launch_request

    job = replace(_job(42), spec=replace(_job(42).spec, base_env=(("HOME", "/home/alice"),)))
    request = launch_request(job, 3600.0, ("c1",), "/shared/ckpt/")
    assert request.env["GPUPOOL_CHECKPOINT_DIR"] == "/shared/ckpt/42"
    assert request.backend is not None
    assert request.backend.job_env["GPUPOOL_CHECKPOINT_DIR"] == "/shared/ckpt/42"
    plain = launch_request(job, 3600.0)
    assert "GPUPOOL_CHECKPOINT_DIR" not in plain.env  # no checkpoint_dir: none given
