"""CPUs: enough free CPUs on the node (a node that declares none does not count them)."""

from __future__ import annotations

from gpupool.core.job import Resources
from gpupool.policy.node_free import NodeFree
from gpupool.policy.reasons import Dimension, Insufficient


def check(free: NodeFree, res: Resources) -> Insufficient | None:
    if not res.cpus or free.cpus is None or free.cpus >= res.cpus:
        return None
    return Insufficient(free.node.name, Dimension.CPUS, res.cpus, free.cpus, free.node.cpus)
