"""The feasibility chain: one small check per dimension, each answering for one node whether
a request fits what is free there now, and if not, an `Insufficient` with its figures (as
Nomad's feasibility checkers, each with its own reason). In order:

- `gpu_type`: GPUs of the requested model on the node at all;
- `gpu_count`: enough free ones for a job holding whole GPUs (the whole job on one node);
- `gpu_memory`: room on one shared or free GPU for a fractional job;
- `cpus`, `memory`: enough free CPUs and host memory, where the node declares them;
- `topology` answers across the pool for a job spread over nodes (policy/wide.py).

A node fits when every check passes; the first that fails is its binding dimension. Only the
checks a request can fail are run (`checks_for`): a request that counts GPUs only runs one.
"""

from __future__ import annotations

from collections.abc import Callable

from gpupool.core.job import Resources
from gpupool.policy.filters import cpus, gpu_count, gpu_memory, gpu_type, memory
from gpupool.policy.node_free import NodeFree
from gpupool.policy.reasons import Dimension, Insufficient

Check = Callable[[NodeFree, Resources], Insufficient | None]

CHAIN: tuple[Check, ...] = (
    gpu_type.check,
    gpu_count.check,
    gpu_memory.check,
    cpus.check,
    memory.check,
)
# How far along the chain a dimension is: a node failing a later check comes closer.
_ORDER = {
    d: i
    for i, d in enumerate(
        (
            Dimension.GPU_TYPE,
            Dimension.GPU_COUNT,
            Dimension.GPU_MEMORY,
            Dimension.CPUS,
            Dimension.MEMORY,
        )
    )
}


def checks_for(res: Resources) -> tuple[Check, ...]:
    """The checks of the chain that `res` can fail, in chain order."""
    out: list[Check] = []
    if res.gpu_type and (res.gpus or res.fractional):  # a job without GPUs takes any node
        out.append(gpu_type.check)
    if res.fractional:
        out.append(gpu_memory.check)
    elif res.gpus:
        out.append(gpu_count.check)
    if res.cpus:
        out.append(cpus.check)
    if res.mem_bytes:
        out.append(memory.check)
    return tuple(out)


def insufficient(free: NodeFree, res: Resources) -> Insufficient | None:
    """The first check `res` fails on this node now; None: it fits."""
    for check in checks_for(res):
        found = check(free, res)
        if found is not None:
            return found
    return None


def fits(free: NodeFree, res: Resources) -> bool:
    return insufficient(free, res) is None


def closest(found: list[Insufficient]) -> Insufficient:
    """Of the nodes' binding checks, the node that comes closest to fitting: the furthest
    along the chain, then the most of the request free, then the first name."""
    return min(
        found,
        key=lambda i: (
            -_ORDER.get(i.dimension, 0),
            -(i.free / i.requested if i.requested > 0 else 0.0),
            i.node or "",
        ),
    )
