"""What is still free on a node during one pass (`NodeFree`), and the arithmetic of taking
and giving back.

A GPU is in one of three states: free (in `NodeFree.gpus`), shared (one or more fractional
jobs on it: `NodeFree.sharers`), or held whole. Unmanaged memory (held by processes gpupool
does not manage, e.g. a display server) shrinks the room of fractional jobs, but does not make
a GPU unavailable to whole-GPU jobs (policy/placement.py says why).
"""

from __future__ import annotations

from collections.abc import Iterable
from types import MappingProxyType
from typing import cast

from gpupool.core.hardware import Node
from gpupool.core.job import Resources
from gpupool.policy.snapshot import Snapshot


def granted_bytes(node: Node, gpu: int, res: Resources) -> int:
    """The GPU memory a fractional request gets on GPU `gpu` of `node` (at least 1 byte)."""
    if res.gpu_memory_bytes is not None:
        return res.gpu_memory_bytes
    assert res.gpu_fraction is not None, "granted_bytes is for fractional requests"
    return max(1, int(res.gpu_fraction * node.gpu(gpu).memory_bytes))


# The shared GPU maps of a node with none: read-only, so that a write that forgot to give
# the node its own map fails loudly instead of leaking into every other node.
_NONE = cast("dict[int, int]", MappingProxyType({}))


class NodeFree:
    """What is still free on a node during one scheduling pass.

    A plain class with slots, not a dataclass: a pass builds one per node (352 on a big
    simulated cluster, every pass), and nodes without shared GPUs share one empty, read-only
    map until `share` or `with_shared_gpus` gives them their own."""

    __slots__ = ("node", "gpus", "cpus", "mem_bytes", "sharers", "granted", "unmanaged")

    def __init__(
        self,
        node: Node,
        gpus: set[int],  # free: no job at all on them (whole-GPU jobs take only these)
        cpus: int | None,  # None: the node does not declare CPUs
        mem_bytes: int | None,
        # Shared GPUs: how many fractional jobs run on each, and the memory they were granted.
        sharers: dict[int, int] | None = None,
        granted: dict[int, int] | None = None,
        unmanaged: dict[int, int] | None = None,  # bytes held outside gpupool
    ) -> None:
        self.node = node
        self.gpus = gpus
        self.cpus = cpus
        self.mem_bytes = mem_bytes
        self.sharers = _NONE if sharers is None else sharers
        self.granted = _NONE if granted is None else granted
        self.unmanaged = _NONE if unmanaged is None else unmanaged

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NodeFree):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it was

    def __repr__(self) -> str:
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in self.__slots__)
        return f"NodeFree({fields})"

    def room(self, gpu: int) -> int | None:
        """Memory a fractional job could get on `gpu`; None when it is held whole."""
        if gpu not in self.gpus and gpu not in self.sharers:
            return None
        used = self.granted.get(gpu, 0) + self.unmanaged.get(gpu, 0)
        return self.node.gpu(gpu).memory_bytes - used

    def share(self, gpu: int, nbytes: int, sign: int = 1) -> None:
        """A fractional job with `nbytes` starts on `gpu` (sign 1) or gives it back (-1)."""
        count = self.sharers.get(gpu, 0) + sign
        if self.sharers is _NONE:
            self.sharers, self.granted = {}, {}
        if count > 0:
            self.gpus.discard(gpu)
            self.sharers[gpu] = count
            self.granted[gpu] = self.granted.get(gpu, 0) + sign * nbytes
        else:  # the last one left: the GPU is free again
            self.sharers.pop(gpu, None)
            self.granted.pop(gpu, None)
            self.gpus.add(gpu)

    def take(self, gpus: Iterable[int], res: Resources) -> None:
        if res.fractional:
            for g in gpus:
                self.share(g, granted_bytes(self.node, g, res))
        else:
            self.gpus.difference_update(gpus)
        if self.cpus is not None and res.cpus:
            self.cpus -= res.cpus
        if self.mem_bytes is not None and res.mem_bytes:
            self.mem_bytes -= res.mem_bytes

    def give(self, gpus: Iterable[int], res: Resources, gpu_memory_bytes: int | None) -> None:
        """A job holding `gpus` with `res` ends (or is counted as gone): its GPUs, or its
        share of them (`gpu_memory_bytes` granted; None: what placement grants), its CPUs
        and memory come back."""
        if res.fractional:
            for g in gpus:
                nbytes = (
                    granted_bytes(self.node, g, res)
                    if gpu_memory_bytes is None
                    else (gpu_memory_bytes)
                )
                self.share(g, nbytes, -1)
        else:
            self.gpus.update(gpus)
        if self.cpus is not None and res.cpus:
            self.cpus += res.cpus
        if self.mem_bytes is not None and res.mem_bytes:
            self.mem_bytes += res.mem_bytes

    def copy(self) -> NodeFree:
        return NodeFree(
            self.node,
            set(self.gpus),
            self.cpus,
            self.mem_bytes,
            dict(self.sharers),
            dict(self.granted),
            dict(self.unmanaged),
        )


def with_shared_gpus(frees: list[NodeFree], snapshot: Snapshot) -> list[NodeFree]:
    """`frees` (built from the snapshot's whole-GPU view, every running job's GPUs taken)
    with its shared GPUs: the fractional jobs running on each, and unmanaged memory."""
    by_name = {f.node.name: f for f in frees}
    for (node, gpu), nbytes in snapshot.unmanaged_memory.items():
        if node in by_name and nbytes > 0:
            held = by_name[node]
            if held.unmanaged is _NONE:
                held.unmanaged = {}
            held.unmanaged[gpu] = nbytes
    for r in snapshot.running:
        free = by_name.get(r.node)
        if free is None or not r.resources.fractional:
            continue
        for g in r.gpus:
            granted = r.gpu_memory_bytes
            if granted is None:  # not recorded: what placement would have granted
                granted = granted_bytes(free.node, g, r.resources)
            free.share(g, granted)
    return frees
