"""GPU count: enough free GPUs of the requested type on one node, for a job that holds its
GPUs whole (a gang: the whole job on one node). A GPU shared by fractional jobs is not free."""

from __future__ import annotations

from gpupool.core.job import Resources
from gpupool.policy.filters.gpu_type import matching_gpus
from gpupool.policy.node_free import NodeFree
from gpupool.policy.reasons import Dimension, Insufficient


def usable_gpus(free: NodeFree, res: Resources) -> list[int]:
    """The node's free GPUs of the requested type."""
    if not res.gpu_type:
        return list(free.gpus)
    return [i for i in matching_gpus(free.node, res) if i in free.gpus]


def check(free: NodeFree, res: Resources) -> Insufficient | None:
    if not res.gpus:
        return None
    if not res.gpu_type:
        have = len(free.gpus)
        if have >= res.gpus:
            return None
        return Insufficient(
            free.node.name, Dimension.GPU_COUNT, res.gpus, have, len(free.node.gpus)
        )
    matching = matching_gpus(free.node, res)
    have = sum(i in free.gpus for i in matching)
    if have >= res.gpus:
        return None
    return Insufficient(free.node.name, Dimension.GPU_COUNT, res.gpus, have, len(matching))
