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
    EngineNode,
    EngineNodeState,
    node_name,
)
from gpupool.core.hardware import Gpu, Node
from gpupool.core.job import JobState, Resources
from gpupool.engine.policy_inputs import pending_of
from gpupool.engine.state import EngineState, Tracked
from gpupool.policy import Code, Decision, PendingJob, RunningJob, Snapshot, Status, decide
from gpupool.policy.feasibility import check_satisfiable
from gpupool.policy.inputs import running_pieces
from gpupool.policy.reasons import Dimension, Insufficient
from gpupool.policy.status import Rule

Seat = tuple[tuple[str, int], ...]  # (engine node, GPUs) per node
# The project of the GPUs other tenants hold on a backend's node: no project of the pool's,
# so no quota counts them and no rule may preempt them.
OTHERS = "(others)"


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
    nodes, places, others = _seat(backend, engine_nodes, occupants, now)
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
    pins = {n.name: n.pin or n.name for n in engine_nodes}
    by_id = {t.job.id: t for t in waiting}
    free = _free_before_starts(snapshot)
    handovers: list[tuple[Tracked, tuple[str, ...]]] = []
    statuses: dict[int, Status] = {}
    gangs: list[int] = []  # reshaped gangs so far, in the pass's order
    for start in decision.starts:  # in the order the pass started them
        tracked = by_id[start.job_id]
        chosen = ((start.node, len(start.gpus)), *((n, len(g)) for n, g in start.more))
        seat: Seat | None = tuple((_engine_name(backend, n), k) for n, k in chosen)
        spec = tracked.job.spec
        shaped = len(seat or ()) == spec.nodes and all(
            k == spec.resources.gpus for _, k in seat or ()
        )
        if seat is not None and not shaped:  # a gang: K GPUs on each of N nodes
            seat = _gang_seat(seat, spec.resources.gpus, spec.nodes, free)
            if seat is None:
                statuses[start.job_id] = _gang_waits(backend, spec.resources.gpus, spec.nodes, free)
                continue
            gangs.append(start.job_id)
        elif seat is not None and all(free[n] >= k for n, k in seat):
            for n, k in seat:
                free[n] -= k
        else:  # a gang ahead took some of its GPUs
            statuses[start.job_id] = Status(Code.PRIORITY, Rule.BEHIND_GANG, jobs=(gangs[-1],))
            continue
        tracked.admitted = seat
        handovers.append((tracked, tuple(pins[n] for n, _ in seat)))
    for job_id, status in decision.pending.items():  # a gang's words are per node
        gang = by_id[job_id].job.spec if job_id in by_id else None
        if gang is not None and gang.nodes > 1 and status.code is Code.RESOURCES:
            statuses[job_id] = _gang_waits(backend, gang.resources.gpus, gang.nodes, free)
    waits = {**decision.pending, **statuses, **never}
    return Admitted(replace(decision, starts=(), pending=waits), handovers)


def _free_before_starts(snapshot: Snapshot) -> dict[str, int]:
    """Each engine node's GPUs that neither the pool's jobs nor others hold (by engine name)."""
    free = {n.name: len(n.gpus) for n in snapshot.nodes}
    for r in snapshot.running:
        free[r.node] -= len(r.gpus)
    return {name.split("/", 1)[1]: k for name, k in free.items()}


def _gang_seat(seat: Seat, per_node: int, spans: int, free: dict[str, int]) -> Seat | None:
    """`spans` nodes with `per_node` GPUs free each, booked in `free`, for a gang the pass
    gave `seat` (the nodes it chose first, then the freest); None when fewer have that."""
    chosen_first = [n for n, _ in seat]
    rest = sorted((n for n in free if n not in chosen_first), key=lambda n: -free[n])
    chosen = [n for n in chosen_first + rest if free[n] >= per_node][:spans]
    if len(chosen) < spans:
        return None
    for n in chosen:
        free[n] -= per_node
    return tuple((n, per_node) for n in chosen)


def _gang_waits(backend: str, per_node: int, spans: int, free: dict[str, int]) -> Status:
    roomy = sum(1 for k in free.values() if k >= per_node)
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


def _seat(
    backend: str, engine_nodes: Sequence[EngineNode], occupants: Sequence[Tracked], now: float
) -> tuple[list[Node], dict[int, list[tuple[str, tuple[int, ...]]]], list[RunningJob]]:
    """The backend's nodes as a pass reads them, the GPUs of each occupant on them, and what
    other tenants hold there as running jobs of no project that are never preempted
    (module docstring: seating again by count after a restart)."""
    size = {n.name: n.gpus for n in engine_nodes}
    seats: dict[int, Seat] = {}
    for t in occupants:
        if not t.admitted:
            t.admitted = _stored_seat(backend, t)
        if t.admitted and all(n in size for n, _ in t.admitted):
            seats[t.job.id] = t.admitted
    ours: dict[str, int] = {}
    unexplained = {n.name: n.gpus_used for n in engine_nodes}  # in use, not by a seated job
    for t in occupants:
        for n, k in seats.get(t.job.id, ()):
            ours[n] = ours.get(n, 0) + k
            if t.job.state is JobState.RUNNING:
                unexplained[n] = max(0, unexplained[n] - k)
    # Seated again: a running job where the engine counts GPUs in use that no seated job
    # explains; a job waiting in the engine where GPUs are free.
    for running in (True, False):
        for t in occupants:
            if t.job.id in seats or (t.job.state is JobState.RUNNING) is not running:
                continue
            seat = _first_fit(t, engine_nodes, unexplained, ours, running)
            if seat is None:
                continue  # counted by the engine's use (`unexplained`) until it ends
            t.admitted = seats[t.job.id] = seat
            for n, k in seat:
                ours[n] = ours.get(n, 0) + k
                if running:
                    unexplained[n] -= k
    nodes: list[Node] = []
    nxt: dict[str, int] = {}
    others: list[RunningJob] = []
    for en in engine_nodes:
        count = max(en.gpus, ours.get(en.name, 0) + unexplained[en.name])
        model = en.gpu_model or "GPU"
        gpus = tuple(Gpu(i, model, en.gpu_memory_bytes) for i in range(count))
        full = node_name(backend, en.name)
        nodes.append(Node(full, gpus, cpus=en.cpus, memory_bytes=en.memory_bytes))
        held = unexplained[en.name]
        if held:
            first = count - held
            others.append(
                RunningJob(
                    id=-len(nodes),
                    node=full,
                    gpus=tuple(range(first, count)),
                    resources=Resources(gpus=held),
                    start_time=now,
                    project=OTHERS,
                    preemptible=False,
                )
            )
        nxt[en.name] = 0
    places: dict[int, list[tuple[str, tuple[int, ...]]]] = {}
    for t in occupants:
        for n, k in seats.get(t.job.id, ()):
            first = nxt[n]
            nxt[n] = first + k
            full = node_name(backend, n)
            places.setdefault(t.job.id, []).append((full, tuple(range(first, first + k))))
    return nodes, places, others


def _stored_seat(backend: str, tracked: Tracked) -> Seat:
    """Where a running job was admitted, as its start stored it (`hpc/c1+c2` and its GPUs
    in all: backend_react.where_it_runs); () for one that stored no admitted nodes."""
    job = tracked.job
    prefix = f"{backend}/"
    if job.state is not JobState.RUNNING or not job.node or not job.node.startswith(prefix):
        return ()
    names = job.node[len(prefix) :].split("+")
    per_node = len(job.gpus) // len(names)
    return tuple((n, per_node) for n in names)


def _first_fit(
    tracked: Tracked,
    engine_nodes: Sequence[EngineNode],
    unexplained: dict[str, int],
    ours: dict[str, int],
    running: bool,
) -> Seat | None:
    spec = tracked.job.spec
    per_node, spans = max(spec.resources.gpus, 0), spec.nodes
    chosen: list[tuple[str, int]] = []
    for n in engine_nodes:
        room = (
            unexplained[n.name] if running else n.gpus - unexplained[n.name] - ours.get(n.name, 0)
        )
        if room >= per_node:
            chosen.append((n.name, per_node))
            if len(chosen) == spans:
                return tuple(chosen)
    return None


def backend_nodes(state: EngineState) -> tuple[BackendNodes, ...]:
    """Every backend of `state`, by name: made in the engine's thread (after each pass and
    each capacity read) and kept whole in `state.backend_view` for other threads."""
    out: list[BackendNodes] = []
    seated: dict[str, dict[str, list[tuple[int, int]]]] = {}
    for t in state.in_backends():
        backend = t.job.spec.backend or ""
        # A job that started is tracked afresh: its nodes are its stored start's.
        for n, k in t.admitted or _stored_seat(backend, t):
            seated.setdefault(backend, {}).setdefault(n, []).append((t.job.id, k))
    for name in sorted(state.backends):
        jobs = {n: tuple(v) for n, v in seated.get(name, {}).items()}
        out.append(BackendNodes(name, state.admission[name], state.capacity.get(name), jobs))
    return tuple(out)
