"""Maintenance windows in a replay: GPUs drained for a while (`gpupool sim --drain`), as an
admin drains them on the daemon (docs/operations.md; the pass keeps them empty the same way,
policy/drains.py). Times are seconds after the trace's first submission."""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from gpupool.sim.model import SimCluster

Edge = tuple[float, int, frozenset[tuple[str, int]]]  # (time, +1 start / -1 end, GPUs)


@dataclass(frozen=True)
class SimDrain:
    """`gpu` None drains every GPU of `node`, from `start_s` to `end_s`. Jobs running there
    go on; none starts there meanwhile."""

    node: str
    gpu: int | None
    start_s: float
    end_s: float


def drain_edges(cluster: SimCluster, drains: tuple[SimDrain, ...], t0: float) -> list[Edge]:
    """The drains' starts and ends as a heap, on the trace's clock (`t0`: its first
    submission); ValueError naming a node or GPU the cluster does not have."""
    by_node = {n.name: [g.index for g in n.gpus] for n in cluster.nodes}
    edges: list[Edge] = []
    for d in drains:
        if d.node not in by_node:
            raise ValueError(f"drain: no node {d.node!r} in cluster {cluster.name}")
        if d.gpu is not None and d.gpu not in by_node[d.node]:
            raise ValueError(f"drain: node {d.node} has no GPU {d.gpu}")
        gpus = by_node[d.node] if d.gpu is None else [d.gpu]
        keys = frozenset((d.node, g) for g in gpus)
        edges += [(t0 + d.start_s, 1, keys), (t0 + d.end_s, -1, keys)]
    heapq.heapify(edges)
    return edges
