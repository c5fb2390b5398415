"""One scheduling pass: strict priority order, whole job on one node, best-fit GPUs.

Jobs are taken in queue order. The first job that cannot start blocks every job behind it
(reason `Priority`), so a big job is never starved by a stream of small ones; backfill, which
lets small jobs run ahead without delaying it, replaces this rule in the next policy.
"""

from __future__ import annotations

from gpupool.core.hardware import Node
from gpupool.policy.feasibility import check_satisfiable
from gpupool.policy.ordering import rank
from gpupool.policy.placement import NodeFree, place
from gpupool.policy.snapshot import Decision, Snapshot, Start
from gpupool.policy.status import Code, Status


def _free_view(snapshot: Snapshot) -> list[NodeFree]:
    used = snapshot.used_gpus()
    cpus_used: dict[str, int] = {}
    mem_used: dict[str, int] = {}
    for r in snapshot.running:
        cpus_used[r.node] = cpus_used.get(r.node, 0) + (r.resources.cpus or 0)
        mem_used[r.node] = mem_used.get(r.node, 0) + (r.resources.mem_bytes or 0)

    def view(n: Node) -> NodeFree:
        return NodeFree(
            node=n,
            gpus={g.index for g in n.gpus} - used.get(n.name, set()),
            cpus=(n.cpus - cpus_used.get(n.name, 0)) if n.cpus else None,
            mem_bytes=(n.memory_bytes - mem_used.get(n.name, 0)) if n.memory_bytes else None,
        )

    return [view(n) for n in sorted(snapshot.nodes, key=lambda n: n.name)]


def decide(snapshot: Snapshot, now: float) -> Decision:
    """Which pending jobs start now and where, and why each other one waits."""
    frees = _free_view(snapshot)
    starts: list[Start] = []
    pending: dict[int, Status] = {}
    blocker: int | None = None
    ordered, priorities = rank(snapshot, now)
    for job in ordered:
        impossible = check_satisfiable(job.resources, snapshot.nodes)
        if impossible is not None:
            # Refused at submit normally; the inventory may have shrunk since.
            pending[job.id] = impossible
            continue
        if blocker is not None:
            pending[job.id] = Status(
                Code.PRIORITY,
                f"waiting behind job {blocker}, which is first in the queue",
                "ordering",
            )
            continue
        placement, reasons = place(frees, job.resources)
        if placement is None:
            pending[job.id] = Status(Code.RESOURCES, "; ".join(reasons), "placement")
            blocker = job.id
            continue
        for free in frees:
            if free.node.name == placement.node:
                free.take(placement.gpus, job.resources)
        starts.append(Start(job.id, placement.node, placement.gpus))
    return Decision(starts=tuple(starts), pending=pending, priorities=priorities)
