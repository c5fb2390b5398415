"""Properties of admission by the pool's policy (engine/admission.py), on random backends
and queues (hypothesis): what it admits fits what the engine has free, node by node; a
gang is seated one piece per node, on as many distinct nodes as it spans, and pinned
there; a job that cannot borrow stays within its project's quota on that backend (where any
project has one there: without, quotas change nothing, as on the box); passes
that follow admit nothing twice and never more than is free."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.core.backends import BackendAdmission, Capacity, EngineNode
from gpupool.core.hardware import Gpu, Inventory, Node
from gpupool.core.job import Job, JobSpec, JobState, Resources
from gpupool.core.project import Project
from gpupool.engine.events import CapacityRead, HandOver, JobsStored, PassDecided, ProjectsRead
from gpupool.engine.gating import Gating
from gpupool.engine.react import react
from gpupool.engine.state import EngineState
from gpupool.policy import Decision
from gpupool.policy.snapshot import PolicyConfig, Usage

NOW = 50_000.0
INVENTORY = Inventory((Node("box", (Gpu(0, "A100", 80 << 30),)),), source="declared")


@st.composite
def engine_nodes(draw: st.DrawFn) -> tuple[EngineNode, ...]:
    count = draw(st.integers(1, 4))
    out = []
    for i in range(count):
        gpus = draw(st.integers(1, 8))
        out.append(EngineNode(f"c{i}", gpus, gpus_used=draw(st.integers(0, gpus)), pin=f"p{i}"))
    return tuple(out)


jobs_st = st.lists(
    st.tuples(
        st.integers(1, 4),  # GPUs per node
        st.integers(1, 3),  # nodes
        st.sampled_from(["a", "b"]),
        st.booleans(),  # preemptible
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(
    nodes=engine_nodes(),
    asks=jobs_st,
    quota_a=st.integers(0, 8),
    quota_b=st.integers(0, 8),
)
def test_admission_fits_what_is_free_and_keeps_quotas(
    nodes: tuple[EngineNode, ...],
    asks: list[tuple[int, int, str, bool]],
    quota_a: int,
    quota_b: int,
) -> None:
    quotas = {"a": float(quota_a), "b": float(quota_b)}
    admission = {"hpc": BackendAdmission(quotas=quotas)}
    state = EngineState(INVENTORY, PolicyConfig(), backends=("hpc",), admission=admission)
    react(state, ProjectsRead((Project("a"), Project("b"))))
    react(state, CapacityRead("hpc", Capacity(nodes)))
    jobs = []
    for i, (gpus, spans, project, preemptible) in enumerate(asks, start=1):
        spec = JobSpec(
            ("x",),
            Resources(gpus=gpus),
            project=project,
            backend="hpc",
            nodes=spans,
            preemptible=preemptible,
        )
        jobs.append(Job(i, spec, "u", JobState.PENDING, NOW - 1000 + i, version=1))
    react(state, JobsStored(tuple(jobs)))
    by_id = {j.id: j for j in jobs}
    pins = {n.pin: n for n in nodes}
    taken: dict[str, set[int]] = {}
    admitted: set[int] = set()
    for _ in range(2):  # a second pass admits nothing twice, nor past what is free
        snapshot = state.snapshot(0, Usage())
        out = react(state, PassDecided(Decision(), snapshot, NOW, Gating()))
        for ins in out:
            if not isinstance(ins, HandOver):
                continue
            assert ins.job_id not in admitted
            admitted.add(ins.job_id)
            spec = by_id[ins.job_id].spec
            seat = state.jobs[ins.job_id].admitted
            assert len(seat) == spec.nodes == len(ins.pinned)
            assert len({n for n, _ in seat}) == spec.nodes  # distinct nodes
            assert all(len(g) == spec.resources.gpus for _, g in seat)
            assert [pins[p].name for p in ins.pinned] == [n for n, _ in seat]
            for n, g in seat:
                assert not set(g) & taken.setdefault(n, set())  # no GPU given twice
                taken[n] |= set(g)
    for n in nodes:
        assert len(taken.get(n.name, ())) <= n.gpus - n.gpus_used
    if not any(quotas.values()):
        return  # no project has a quota there: quotas change nothing (policy/quota.py)
    for project, quota in quotas.items():
        fixed = sum(
            by_id[i].spec.resources.gpus * by_id[i].spec.nodes
            for i in admitted
            if by_id[i].spec.project == project and not by_id[i].spec.preemptible
        )
        assert fixed <= quota
