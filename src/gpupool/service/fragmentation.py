"""How fragmented the pool's free GPUs are: the largest job that could start now, per node and
for the pool, against the free GPU count (issue 33, item 3).

A job runs on one node, so 8 free GPUs spread 4 and 4 over two nodes start no 8-GPU job: the
pool's largest startable job is 4 GPUs while 8 are free. The policy moves jobs to close that
gap when a waiting job needs it (policy/defrag.py); these figures show it to people:
`gpupool gpus` (its summary line), the dashboard's GPUs page (both from GET /v1/gpus) and
/metrics (`gpupool_largest_startable_gpus`, `gpupool_free_gpus`).

By GPU count, whole GPUs: a GPU is free when no job holds it, not even a share of it; the
largest job that could start on a node is its free GPUs (a job that also asks for a GPU type,
CPUs or memory may find less), and the pool's is the most of any node. One definition, from
either source the readers have: the GPUs' holders (the API) or the pool's GPU figures
(`pool_stats.GpuStats`, /metrics).
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass

from gpupool.core.hardware import Inventory
from gpupool.core.job import Job
from gpupool.service.pool_stats import GpuStats


@dataclass(frozen=True)
class NodeRoom:
    node: str
    free_gpus: int  # whole GPUs no job holds
    largest_startable_gpus: int  # the largest job (by GPU count) that could start here now


@dataclass(frozen=True)
class Fragmentation:
    nodes: tuple[NodeRoom, ...]  # in the inventory's order
    free_gpus: int  # across the pool
    largest_startable_gpus: int  # the most on one node

    @property
    def fragmented(self) -> bool:
        """Some free GPUs start no job as large as their count: they are on several nodes."""
        return self.free_gpus > self.largest_startable_gpus


def fragmentation(free_by_node: Iterable[tuple[str, int]]) -> Fragmentation:
    """The figures from each node's free whole GPUs (node, count), in the inventory's order."""
    nodes = tuple(NodeRoom(name, free, free) for name, free in free_by_node)
    largest = max((n.largest_startable_gpus for n in nodes), default=0)
    return Fragmentation(nodes, sum(n.free_gpus for n in nodes), largest)


def from_holders(
    inventory: Inventory,
    holders: Mapping[tuple[str, int], list[Job]],
    drained: Container[tuple[str, int]] = (),
) -> Fragmentation:
    """From the GPUs' holders (`pool_stats.gpu_holders`): a GPU without one is free, unless
    it is drained (core/drain.py)."""
    return fragmentation(
        (
            node.name,
            sum(
                not holders.get((node.name, g.index)) and (node.name, g.index) not in drained
                for g in node.gpus
            ),
        )
        for node in inventory.nodes
    )


def from_gpu_stats(gpus: Iterable[GpuStats]) -> Fragmentation:
    """From the pool's GPU figures (`PoolStats.gpus`, in the inventory's order): a GPU with
    nothing allocated is free, unless it is drained."""
    free: dict[str, int] = {}
    for g in gpus:
        free[g.node] = free.get(g.node, 0) + (g.allocated <= 0 and not g.drained)
    return fragmentation(free.items())
