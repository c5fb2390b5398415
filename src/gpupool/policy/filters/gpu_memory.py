"""GPU memory: room on one shared or free GPU of the requested type, for a fractional job
(--gpu-memory 20GB, --gpus 0.5). A GPU held whole has no room; a fraction resolves to that
fraction of each GPU's memory (node_free.granted_bytes).

`shared_choice` is also placement's choice among the GPUs that have room: best fit, a shared
GPU before a free one (keep whole GPUs whole), then the least room, then the lowest index.
"""

from __future__ import annotations

from gpupool.core.job import Resources
from gpupool.policy.filters.gpu_type import matching_gpus
from gpupool.policy.node_free import NodeFree, granted_bytes
from gpupool.policy.reasons import Dimension, Insufficient

ShareKey = tuple[bool, int, int]  # (on a free GPU, room, index): lower is the better fit


def shared_choice(free: NodeFree, res: Resources) -> tuple[ShareKey, int] | None:
    """(best-fit key, bytes granted) of the GPU the job gets here; None: no GPU has room."""
    best: tuple[ShareKey, int] | None = None
    for g in matching_gpus(free.node, res):
        room = free.room(g)
        if room is None:
            continue
        need = granted_bytes(free.node, g, res)
        if need <= room and (best is None or (g in free.gpus, room, g) < best[0]):
            best = ((g in free.gpus, room, g), need)
    return best


def check(free: NodeFree, res: Resources) -> Insufficient | None:
    if not res.fractional or shared_choice(free, res) is not None:
        return None
    node = free.node
    rooms = [(room, g) for g in matching_gpus(node, res) if (room := free.room(g)) is not None]
    if not rooms:  # every GPU of the type is held whole
        g = max(matching_gpus(node, res), key=lambda i: node.gpu(i).memory_bytes, default=None)
        total = 0 if g is None else node.gpu(g).memory_bytes
        need = (
            res.gpu_memory_bytes
            if g is None or res.gpu_fraction is None
            else (granted_bytes(node, g, res))
        )
        return Insufficient(node.name, Dimension.GPU_MEMORY, need or 0, 0, total)
    room, g = max(rooms)
    total = node.gpu(g).memory_bytes
    return Insufficient(node.name, Dimension.GPU_MEMORY, granted_bytes(node, g, res), room, total)
