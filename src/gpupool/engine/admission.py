"""Admission of a backend's jobs by the pool's policy (core.backends.Admission.POOL; pure).

A backend with `admission = "pool"` (the default) runs its own pass after the pool's, the
same `decide` over that backend's capacity as its engine last reported it
(`Backend.capacity`, read by the loop): its nodes that take work (`BACKEND/node`), each with
the GPUs no other tenant holds; the pool's jobs already admitted there, seated on the nodes
they were admitted to; its waiting jobs; the projects with their quota ON THAT BACKEND
(`BackendAdmission.quotas`, none where not named) and their limits, weights and minimum
run times as everywhere; the pool's fair-share usage. A job the pass starts is admitted:
handed over pinned to the nodes the pass chose (`BackendRequest.pinned`), so the engine
runs it now. Every other keeps the pass's status (Quota, Resources, Priority...), with the
same words and expected start as a local job's.

What the pool cannot know, it takes from the engine. GPUs held by others (another tenant,
a job started by hand) are the engine's count of GPUs in use on a node less the pool's
running jobs seated there: they enter the pass as a running job of no project (`OTHERS`),
never preempted, expected to run the default time limit. A running job's nodes are stored with its start
(`hpc/c1+c2`); after a restart a job admitted but not started yet is seated again by count
(first fit): its quota is counted at once, its exact nodes may differ until it starts.

A gang over several nodes (`--nodes N --gpus K`) asks the pass for N x K GPUs (its quota
and order are the pass's, spread over nodes when wider than one: `spread_wide_jobs`); the
pass does not know the gang's shape, so one it put on other than N nodes is seated on N
nodes with K GPUs free each (those it chose first), or waits (`Rule.GANG_NO_FIT`).

A job admitted but still waiting in the engine is never a victim here (it has lost
nothing: preempting it would only move it), so its RunningJob is not preemptible.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from gpupool.core.backends import (
    BackendAdmission,
    BackendNodes,
    EngineNodeState,
)
from gpupool.core.job import JobState, gpu_count
from gpupool.engine.backend_seats import seat_all, stored_seat
from gpupool.engine.policy_inputs import pending_of
from gpupool.engine.state import EngineState, Seat, Tracked
from gpupool.policy import Code, Decision, PendingJob, RunningJob, Snapshot, Status, decide
from gpupool.policy.feasibility import check_satisfiable
from gpupool.policy.inputs import running_pieces
from gpupool.policy.reasons import Dimension, Insufficient
from gpupool.policy.status import Rule


@dataclass
class Admitted:
    """One backend's pass: its decision (statuses, estimated starts, preemptions), and the
    jobs to hand over with the engine nodes each is pinned to."""

    decision: Decision = field(default_factory=Decision)
    handovers: list[tuple[Tracked, tuple[str, ...]]] = field(default_factory=list)


def admit(
    state: EngineState,
    backend: str,
    rules: BackendAdmission,
    waiting: Sequence[Tracked],
    decided: Snapshot,
    now: float,
) -> Admitted:
    """The pass of `backend` over its `waiting` jobs (PENDING, free to go, not handed over);
    `decided`: the pool's own pass's snapshot (its config, usage and projects)."""
    capacity = state.capacity.get(backend)
    if capacity is None or not capacity.known:
        detail = "not read yet" if capacity is None else capacity.problem
        status = Status(
            Code.CAPACITY_UNKNOWN, Rule.CAPACITY_UNKNOWN, backend=backend, detail=detail
        )
        return Admitted(Decision(pending={t.job.id: status for t in waiting}))
    engine_nodes = [n for n in capacity.nodes if n.state is EngineNodeState.UP and n.gpus > 0]
    occupants = [
        t
        for t in state.in_backends()
        if t.job.spec.backend == backend
        and (t.job.state is JobState.RUNNING or (t.handed_over and t.job.state is JobState.PENDING))
    ]
    nodes, places, others = seat_all(backend, engine_nodes, occupants, now)
    running = [r for t in occupants if t.job.id in places for r in _running(state, t, places, now)]
    running += others
    # What no node of the backend could ever run (its nodes as they are) is said here: the
    # pass spreads only gangs over nodes, never a one-node job wider than every node.
    never: dict[int, Status] = {}
    for t in waiting:
        said = check_satisfiable(t.job.spec.resources, tuple(nodes))
        if said is not None:
            never[t.job.id] = said
    pending = [_pending(state, t) for t in waiting if t.job.id not in never]
    projects = {
        name: replace(p, quota=rules.quotas.get(name, 0.0)) for name, p in decided.projects.items()
    }
    snapshot = Snapshot(
        tuple(nodes),
        tuple(sorted(pending, key=lambda p: p.id)),
        tuple(running),
        0,
        config=replace(decided.config, spread_wide_jobs=True),
        usage=decided.usage,
        projects=projects,
    )
    decision = decide(snapshot, now)
    pins = {n.name: n.pinned_as for n in engine_nodes}
    by_id = {t.job.id: t for t in waiting}
    free, shared = _free_before_starts(snapshot), _shared_before_starts(snapshot)
    handovers: list[tuple[Tracked, tuple[str, ...]]] = []
    statuses: dict[int, Status] = {}
    gangs: list[int] = []  # reshaped gangs so far, in the pass's order
    for start in decision.starts:  # in the order the pass started them
        tracked = by_id[start.job_id]
        chosen = ((start.node, start.gpus), *start.more)
        seat: Seat | None = tuple((_engine_name(backend, n), g) for n, g in chosen)
        spec = tracked.job.spec
        per_node = spec.resources.gpus
        if len(chosen) != spec.nodes or any(len(g) != per_node for _, g in chosen):
            seat = _gang_seat([n for n, _ in seat or ()], per_node, spec.nodes, free)
            if seat is None:  # a gang: K GPUs on each of N nodes, or it waits
                statuses[start.job_id] = _gang_waits(backend, per_node, spec.nodes, free)
                continue
            gangs.append(start.job_id)
        elif spec.resources.fractional and all(s <= free[n] | shared[n] for n, s in _sets(seat)):
            for n, s in _sets(seat):  # a fraction shares its GPU with fractions, never a gang
                free[n] -= s
                shared[n] |= s
        elif all(set(g) <= free[n] for n, g in seat or ()):
            for n, g in seat or ():
                free[n] -= set(g)
        else:  # a gang ahead took some of its GPUs
            statuses[start.job_id] = Status(Code.PRIORITY, Rule.BEHIND_GANG, jobs=(gangs[-1],))
            continue
        assert seat is not None
        tracked.admitted = seat
        handovers.append((tracked, tuple(pins[n] for n, _ in seat)))
    for job_id, status in decision.pending.items():  # a gang's words are per node
        gang = by_id[job_id].job.spec if job_id in by_id else None
        if gang is not None and gang.nodes > 1 and status.code is Code.RESOURCES:
            statuses[job_id] = _gang_waits(backend, gang.resources.gpus, gang.nodes, free)
    waits = {**decision.pending, **statuses, **never}
    return Admitted(replace(decision, starts=(), pending=waits), handovers)


def _free_before_starts(snapshot: Snapshot) -> dict[str, set[int]]:
    """Each engine node's GPUs that neither the pool's jobs nor others hold (by engine name)."""
    free = {n.name: set(n.gpu_indices) for n in snapshot.nodes}
    for r in snapshot.running:
        free[r.node] -= set(r.gpus)
    return {name.split("/", 1)[1]: g for name, g in free.items()}


def _shared_before_starts(snapshot: Snapshot) -> dict[str, set[int]]:
    """Each engine node's GPUs that fractions of the pool's running jobs share (by engine
    name): a fraction the pass starts there shares them too (the pass checked the sum)."""
    shared: dict[str, set[int]] = {n.name.split("/", 1)[1]: set() for n in snapshot.nodes}
    for r in snapshot.running:
        if r.resources.fractional:
            shared[r.node.split("/", 1)[1]] |= set(r.gpus)
    return shared


def _sets(seat: Seat | None) -> list[tuple[str, set[int]]]:
    return [(n, set(g)) for n, g in seat or ()]


def _gang_seat(
    first: list[str], per_node: int, spans: int, free: dict[str, set[int]]
) -> Seat | None:
    """`spans` nodes with `per_node` GPUs free each (the lowest), booked in `free`, for a
    gang the pass put on the nodes `first` (those first, then the freest); None when fewer
    nodes have that room."""
    rest = sorted((n for n in free if n not in first), key=lambda n: (-len(free[n]), n))
    chosen = [n for n in first + rest if len(free[n]) >= per_node][:spans]
    if len(chosen) < spans:
        return None
    seat = tuple((n, tuple(sorted(free[n])[:per_node])) for n in chosen)
    for n, g in seat:
        free[n] -= set(g)
    return seat


def _gang_waits(backend: str, per_node: int, spans: int, free: dict[str, set[int]]) -> Status:
    roomy = sum(1 for g in free.values() if len(g) >= per_node)
    short = Insufficient(None, Dimension.GPU_COUNT, per_node, roomy, spans)
    return Status(Code.RESOURCES, Rule.GANG_NO_FIT, short=short, limit=spans, backend=backend)


def _engine_name(backend: str, name: str) -> str:
    return name[len(backend) + 1 :]


def _pending(state: EngineState, tracked: Tracked) -> PendingJob:
    """A waiting job as the backend's pass reads it: a gang asks for all its GPUs."""
    job = tracked.job
    made = pending_of(job, state.limit_of(job).seconds)
    if job.spec.nodes > 1:
        made = replace(
            made, resources=replace(made.resources, gpus=made.resources.gpus * job.spec.nodes)
        )
    return made


def _running(
    state: EngineState,
    tracked: Tracked,
    places: dict[int, list[tuple[str, tuple[int, ...]]]],
    now: float,
) -> Iterable[RunningJob]:
    job = tracked.job
    start = job.start_time if job.state is JobState.RUNNING and job.start_time else now
    pieces = running_pieces(_pending(state, tracked), start, places[job.id])
    if job.state is JobState.RUNNING:
        return pieces
    return (replace(p, preemptible=False) for p in pieces)  # module docstring


def backend_nodes(state: EngineState) -> tuple[BackendNodes, ...]:
    """Every backend of `state`, by name: made in the engine's thread (after each pass and
    each capacity read) and kept whole in `state.backend_view` for other threads."""
    out: list[BackendNodes] = []
    seated: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for t in state.in_backends():
        backend = t.job.spec.backend or ""
        # A job that started is tracked afresh: its nodes are its stored start's.
        for n, gpus in t.admitted or stored_seat(backend, t):
            res = t.job.spec.resources  # `--gpus 0.5` counts 0.5
            count = gpu_count(res, len(gpus)) if res.fractional else len(gpus)
            seated.setdefault(backend, {}).setdefault(n, []).append((t.job.id, count))
    for name in sorted(state.backends):
        jobs = {n: tuple(v) for n, v in seated.get(name, {}).items()}
        out.append(BackendNodes(name, state.admission[name], state.capacity.get(name), jobs))
    return tuple(out)
