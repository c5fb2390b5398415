"""Where the pool's jobs sit on a backend's nodes, as its admission pass reads them
(engine/admission.py; pure).

A job admitted by the pool keeps the GPUs the pass gave it (`Tracked.admitted`: engine node
and GPU indices per node), and its start stores them (`hpc/c1+c2` and the indices in order:
backend_react.where_it_runs), so every later pass sees the same GPUs taken as the pass that
admitted it left them, and as a replay of the same jobs does (sim/domains.py). The indices
are the pool's bookkeeping of a node's GPUs; which physical GPUs the engine gives is its own.

What the pool cannot know it takes from the engine: GPUs in use on a node beyond the pool's
running jobs seated there are other tenants' (a running job of no project, `OTHERS`, never
preempted, on the highest free indices). A job whose GPUs are not known (after a restart, a
job admitted but not started; a node that shrank) is seated again by count, lowest free
indices first: a running one where the engine counts GPUs in use that no seated job
explains, one waiting in the engine where GPUs are free.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpupool.core.backends import EngineNode, node_name
from gpupool.core.hardware import Gpu, Node
from gpupool.core.job import JobState, Resources
from gpupool.engine.state import Seat, Tracked
from gpupool.policy import RunningJob

# The project of the GPUs other tenants hold on a backend's node: no project of the pool's,
# so no quota counts them and no rule may preempt them.
OTHERS = "(others)"
# The memory each GPU of a backend's node has in the pass when its engine does not say
# (`EngineNode.gpu_memory_bytes` 0: Ray, which counts a GPU's share, not its bytes). Only the
# fraction matters there (`--gpus 0.5` is granted half of it), so any size would do; without
# one, every fraction's share would be 0 bytes and any number would fit on one GPU.
NOMINAL_GPU_MEMORY = 1 << 40

Places = dict[int, list[tuple[str, tuple[int, ...]]]]  # job id -> (pool's node name, GPUs)


def seat_all(
    backend: str, engine_nodes: Sequence[EngineNode], occupants: Sequence[Tracked], now: float
) -> tuple[list[Node], Places, list[RunningJob]]:
    """The backend's nodes as a pass reads them, the GPUs of each occupant on them, and what
    other tenants hold there (module docstring)."""
    size = {n.name: n.gpus for n in engine_nodes}
    held: dict[str, set[int]] = {n.name: set() for n in engine_nodes}
    shared: dict[str, set[int]] = {n.name: set() for n in engine_nodes}  # by fractions only
    seats: dict[int, Seat] = {}
    for t in occupants:
        seat = t.admitted or stored_seat(backend, t)
        fraction = t.job.spec.resources.fractional  # may share a GPU with other fractions
        if seat and _fits(seat, size, held, shared if fraction else None):
            seats[t.job.id] = t.admitted = seat
            for n, gpus in seat:
                held[n].update(gpus)
                if fraction:
                    shared[n].update(gpus)
    # In use, not by a seated job: the engine's count less the GPUs the pool's running jobs
    # hold, each GPU once (two halves of one GPU are one GPU in use, as the engine rounds up).
    unexplained = {n.name: n.gpus_used for n in engine_nodes}
    mine: dict[str, set[int]] = {n.name: set() for n in engine_nodes}
    for t in occupants:
        if t.job.state is JobState.RUNNING:
            for n, gpus in seats.get(t.job.id, ()):
                mine[n].update(gpus)
    for n, indices in mine.items():
        unexplained[n] = max(0, unexplained[n] - len(indices))
    for running in (True, False):
        for t in occupants:
            if t.job.id in seats or (t.job.state is JobState.RUNNING) is not running:
                continue
            found = _first_fit(t, engine_nodes, unexplained, held, running)
            if found is None:
                continue  # counted by the engine's use (`unexplained`) until it ends
            seats[t.job.id] = t.admitted = found
            for n, gpus in found:
                held[n].update(gpus)
                if running:
                    unexplained[n] -= len(gpus)
    nodes: list[Node] = []
    others: list[RunningJob] = []
    for en in engine_nodes:
        taken = held[en.name]
        count = max(en.gpus, len(taken) + unexplained[en.name], max(taken, default=-1) + 1)
        model = en.gpu_model or "GPU"
        memory = en.gpu_memory_bytes or NOMINAL_GPU_MEMORY
        full = node_name(backend, en.name)
        nodes.append(
            Node(
                full,
                tuple(Gpu(i, model, memory) for i in range(count)),
                cpus=en.cpus,
                memory_bytes=en.memory_bytes,
            )
        )
        if unexplained[en.name]:
            free = [i for i in range(count) if i not in taken]
            gpus = tuple(sorted(free[-unexplained[en.name] :]))
            others.append(
                RunningJob(
                    id=-len(nodes),
                    node=full,
                    gpus=gpus,
                    resources=Resources(gpus=len(gpus)),
                    start_time=now,
                    project=OTHERS,
                    preemptible=False,
                )
            )
    places: Places = {}
    for t in occupants:
        for n, gpus in seats.get(t.job.id, ()):
            places.setdefault(t.job.id, []).append((node_name(backend, n), gpus))
    return nodes, places, others


def stored_seat(backend: str, tracked: Tracked) -> Seat:
    """Where a running job was admitted, as its start stored it (`hpc/c1+c2`, its GPUs in
    node order); () for one that stored no admitted nodes (its engine chose)."""
    job = tracked.job
    prefix = f"{backend}/"
    if job.state is not JobState.RUNNING or not job.node or not job.node.startswith(prefix):
        return ()
    names = job.node[len(prefix) :].split("+")
    per_node = len(job.gpus) // len(names)
    if not per_node or per_node * len(names) != len(job.gpus):
        return ()
    return tuple(
        (n, tuple(job.gpus[i * per_node : (i + 1) * per_node])) for i, n in enumerate(names)
    )


def _fits(
    seat: Seat,
    size: dict[str, int],
    held: dict[str, set[int]],
    shared: dict[str, set[int]] | None = None,
) -> bool:
    """A known seat still stands: its nodes are there, its GPUs within them, and no other
    seated job holds them; a fraction's seat (`shared`: the GPUs fractions hold) may share
    its GPU with other fractions (the pass checks their sum)."""
    return all(
        n in size
        and all(
            0 <= g < size[n] and (g not in held[n] or (shared is not None and g in shared[n]))
            for g in gpus
        )
        for n, gpus in seat
    )


def _first_fit(
    tracked: Tracked,
    engine_nodes: Sequence[EngineNode],
    unexplained: dict[str, int],
    held: dict[str, set[int]],
    running: bool,
) -> Seat | None:
    spec = tracked.job.spec
    per_node, spans = max(spec.resources.gpus, 0), spec.nodes
    chosen: list[tuple[str, tuple[int, ...]]] = []
    for n in engine_nodes:
        taken = held[n.name]
        room = unexplained[n.name] if running else n.gpus - unexplained[n.name] - len(taken)
        if room < per_node:
            continue
        free = [i for i in range(max(n.gpus, len(taken) + per_node)) if i not in taken]
        chosen.append((n.name, tuple(free[:per_node])))
        if len(chosen) == spans:
            return tuple(chosen)
    return None
