"""GPU type: the node has GPUs of the requested model at all (a static fact of the node).

`matching_gpus` is the one rule for "GPUs of the requested type" (`core.gpu_catalog`'s
`model_matches`, asked once per (type, model) pair: a pass asks it for every node a typed
request is tried on).
"""

from __future__ import annotations

from functools import lru_cache

from gpupool.core.gpu_catalog import model_matches
from gpupool.core.hardware import Node
from gpupool.core.job import Resources
from gpupool.policy.node_free import NodeFree
from gpupool.policy.reasons import Dimension, Insufficient

_matches = lru_cache(maxsize=4096)(model_matches)


def matching_gpus(node: Node, res: Resources) -> list[int]:
    """The indices of the node's GPUs of the requested type (every GPU without one)."""
    if not res.gpu_type:
        return [g.index for g in node.gpus]
    wanted = res.gpu_type
    return [g.index for g in node.gpus if _matches(wanted, g.model)]


def check(free: NodeFree, res: Resources) -> Insufficient | None:
    """Only for a job that asks for a GPU (one without GPUs takes any node, whatever type it
    names: `checks_for` leaves this check out)."""
    if not res.gpu_type or matching_gpus(free.node, res):
        return None
    return Insufficient(free.node.name, Dimension.GPU_TYPE, max(res.gpus, 1), 0, 0)
