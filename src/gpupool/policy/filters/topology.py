"""Topology: which nodes a job's GPUs may be on.

A one-node job's GPUs are all on one node: that is the GPU count check, per node
(`gpu_count.py`); `placement.choose_gpus` then ranks the GPU sets of the chosen node by their
links (NVLink first) and rejects none. A job wider than any node (`spread_wide_jobs`, the
simulator's: policy/wide.py) is spread over several, and this check says, across the pool,
why the nodes cannot hold it now: too few free matching GPUs, too few of them on nodes with
the CPUs and memory it needs on each, or, by the consolidate rule, too few whole free nodes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpupool.core.hardware import Node
from gpupool.core.job import Resources
from gpupool.policy.filters.gpu_type import matching_gpus
from gpupool.policy.node_facts import NodeFacts
from gpupool.policy.node_free import NodeFree
from gpupool.policy.reasons import Dimension, Insufficient, WideShortfall
from gpupool.policy.request import counts_only


def has_room(free: NodeFree, res: Resources) -> bool:
    """Whether the node has the job's per-node CPUs and memory free (undeclared: no limit)."""
    if res.cpus and free.cpus is not None and free.cpus < res.cpus:
        return False
    return not (res.mem_bytes and free.mem_bytes is not None and free.mem_bytes < res.mem_bytes)


def usable_count(free: NodeFree, res: Resources) -> int:
    """The node's free GPUs of the requested type."""
    if not res.gpu_type:
        return len(free.gpus)
    return sum(g in free.gpus for g in matching_gpus(free.node, res))


def spread_count(free: NodeFree, res: Resources) -> int:
    """What the node can give a spread job now: its usable GPUs, or 0 without the room."""
    return usable_count(free, res) if has_room(free, res) else 0


def is_whole_free(free: NodeFree, res: Resources) -> bool:
    """Every GPU of the node free, the room there, and some GPU of the type (consolidate)."""
    return (
        len(free.gpus) == len(free.node.gpus)
        and has_room(free, res)
        and bool(usable_count(free, res))
    )


def check_spread(
    frees: Sequence[NodeFree],
    res: Resources,
    nodes: tuple[Node, ...],
    free_total: int,
    whole_nodes_only: bool,
) -> tuple[Insufficient, WideShortfall]:
    """Why a spread job does not fit now (module docstring): its GPU count across the pool,
    and the rest. `free_total`: the whole free GPUs of `frees` (the free index's total), all a
    request that only counts GPUs needs; `whole_nodes_only`: the consolidate rule."""
    facts = NodeFacts.of(nodes)
    fewest = math.ceil(res.gpus / max(1, facts.widest(res.gpu_type)))
    if counts_only(res):
        total = roomy = free_total
        capacity = facts.total_gpus
    else:
        total = sum(usable_count(f, res) for f in frees)
        roomy = sum(spread_count(f, res) for f in frees)
        capacity = sum(len(matching_gpus(n, res)) for n in nodes)
    whole = sum(1 for f in frees if is_whole_free(f, res)) if whole_nodes_only else None
    short = Insufficient(None, Dimension.GPU_COUNT, res.gpus, total, capacity)
    return short, WideShortfall(fewest, roomy, whole)
