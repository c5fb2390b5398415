"""Memory: enough free host memory on the node (a node that declares none does not count
it)."""

from __future__ import annotations

from gpupool.core.job import Resources
from gpupool.policy.node_free import NodeFree
from gpupool.policy.reasons import Dimension, Insufficient


def check(free: NodeFree, res: Resources) -> Insufficient | None:
    if not res.mem_bytes or free.mem_bytes is None or free.mem_bytes >= res.mem_bytes:
        return None
    node = free.node
    return Insufficient(
        node.name, Dimension.MEMORY, res.mem_bytes, free.mem_bytes, node.memory_bytes
    )
