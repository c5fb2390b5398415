"""Where a job fits: which node, which GPUs.

A chain of small checks per node (GPU type, CPU, memory, GPU count), each naming why it
rejects, then a choice among the nodes that pass: best-fit node (fewest GPUs left free), and
on it the best-connected GPU set (NVLink first) that leaves the largest NVLink-connected
block free for the next multi-GPU job.

Fractional jobs (Resources.fractional: --gpu-memory 20GB, --gpus 0.5) share one GPU by
memory. A GPU is then in one of three states: free (in `NodeFree.gpus`), shared (one or more
fractional jobs on it: `NodeFree.sharers`), or held whole. A whole-GPU job takes only free
GPUs; a fractional job takes a shared or free GPU whose room fits it (its memory, minus what
fractional jobs there were granted, minus `unmanaged` memory). A fraction resolves to
int(fraction x that GPU's memory) bytes. Best fit: a shared GPU before a free one (keep whole
GPUs whole), then the least room, then the lowest index.

Unmanaged memory (held by processes gpupool does not manage, e.g. a display server) shrinks
the room of fractional jobs, but does not make a GPU unavailable to whole-GPU jobs: a whole
job gets the GPU as it is, as it did before fractions existed. Treating such a GPU as in use
(as Run:ai does) would keep every whole-GPU job off the display GPU of a workstation for good.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import combinations
from math import comb
from types import MappingProxyType
from typing import cast

from gpupool.core.gpu_catalog import display_name, model_matches
from gpupool.core.hardware import LinkKind, Node
from gpupool.core.job import Resources
from gpupool.core.units import format_size
from gpupool.policy.snapshot import Snapshot

# Above this many candidate sets we pick greedily instead of enumerating.
_MAX_COMBINATIONS = 2000


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


@dataclass(frozen=True)
class Placement:
    node: str
    gpus: tuple[int, ...]
    gpu_memory_bytes: int | None = None  # fractional jobs: the memory granted on its GPU


def matching_gpus(node: Node, res: Resources) -> list[int]:
    if not res.gpu_type:
        return [g.index for g in node.gpus]
    return [g.index for g in node.gpus if model_matches(res.gpu_type, g.model)]


def shared_choice(free: NodeFree, res: Resources) -> tuple[tuple[bool, int, int], int] | None:
    """For a fractional job: (best-fit key, bytes) of the GPU it gets here, the key being
    (on a free GPU, room, index); None when no shared or free GPU has room for it."""
    best: tuple[tuple[bool, int, int], int] | None = None
    for g in matching_gpus(free.node, res):
        room = free.room(g)
        if room is None:
            continue
        need = granted_bytes(free.node, g, res)
        if need <= room and (best is None or (g in free.gpus, room, g) < best[0]):
            best = ((g in free.gpus, room, g), need)
    return best


def _why_not_shared(free: NodeFree, res: Resources) -> str:
    node = free.node
    kind = f"{display_name(res.gpu_type)} GPU" if res.gpu_type else "GPU"
    if res.gpu_memory_bytes is not None:
        need = f"needs {format_size(res.gpu_memory_bytes)} on one {kind}"
    else:
        need = f"needs {res.gpu_fraction:g} of one {kind}'s memory"
    rooms = [(room, g) for g in matching_gpus(node, res) if (room := free.room(g)) is not None]
    if not rooms:
        return f"node {node.name}: {need}; no {kind} is free or shared (all held whole)"
    room, g = max(rooms)
    of = (
        "" if res.gpu_memory_bytes is not None else f" (of {format_size(node.gpu(g).memory_bytes)})"
    )
    return f"node {node.name}: {need}; the most free on a shared or free {kind} is {format_size(room)}{of}"


def why_not(free: NodeFree, res: Resources) -> str | None:
    """None if the job fits on this node now, else the binding constraint in words."""
    node = free.node
    if res.fractional:
        if shared_choice(free, res) is None:
            return _why_not_shared(free, res)
    elif res.gpus:
        usable = [i for i in matching_gpus(node, res) if i in free.gpus]
        if len(usable) < res.gpus:
            kind = "GPU" if res.gpus == 1 else "GPUs"
            kind = f"{display_name(res.gpu_type)} {kind}" if res.gpu_type else kind
            return f"node {node.name}: needs {res.gpus} {kind}, {len(usable)} free"
    if res.cpus and free.cpus is not None and free.cpus < res.cpus:
        return f"node {node.name}: needs {res.cpus} CPUs, {free.cpus} free"
    if res.mem_bytes and free.mem_bytes is not None and free.mem_bytes < res.mem_bytes:
        return f"node {node.name}: needs {res.mem_bytes >> 20} MiB memory, {free.mem_bytes >> 20} MiB free"
    return None


def _components(node: Node, gpus: set[int]) -> list[set[int]]:
    """NVLink-connected groups among `gpus`."""
    left, groups = set(gpus), []
    while left:
        stack, group = [left.pop()], set()
        while stack:
            g = stack.pop()
            group.add(g)
            for peer in node.nvlink_peers(g):
                if peer in left:
                    left.remove(peer)
                    stack.append(peer)
        groups.append(group)
    return groups


def _set_score(node: Node, chosen: tuple[int, ...], free: set[int]) -> tuple[int, int, int]:
    """Lower is better: worst link inside the set, sum of links, then minus the largest
    NVLink block the choice leaves free (fragmentation-aware)."""
    links = [int(node.link(a, b)) for a, b in combinations(chosen, 2)]
    worst = max(links, default=int(LinkKind.NVLINK))
    remaining = free.difference(chosen)
    largest_left = max((len(c) for c in _components(node, remaining)), default=0)
    return (worst, sum(links), -largest_left)


def choose_gpus(node: Node, usable: list[int], count: int, free: set[int]) -> tuple[int, ...]:
    usable = sorted(usable)
    if count == 0:
        return ()
    if comb(len(usable), count) <= _MAX_COMBINATIONS:
        return min(combinations(usable, count), key=lambda s: (_set_score(node, s, free), s))
    return _greedy(node, usable, count)


def _greedy(node: Node, usable: list[int], count: int) -> tuple[int, ...]:
    """Grow a set from each seed by always adding the best-linked GPU; keep the best set."""
    best: tuple[tuple[int, int], tuple[int, ...]] | None = None
    for seed in usable:
        chosen = [seed]
        rest = [g for g in usable if g != seed]
        while len(chosen) < count:
            nxt = min(rest, key=lambda g: (max(int(node.link(g, c)) for c in chosen), g))
            chosen.append(nxt)
            rest.remove(nxt)
        links = [int(node.link(a, b)) for a, b in combinations(chosen, 2)]
        key = (max(links, default=0), sum(links))
        if best is None or key < best[0]:
            best = (key, tuple(sorted(chosen)))
    assert best is not None
    return best[1]


def _place_shared(frees: list[NodeFree], res: Resources) -> tuple[Placement | None, list[str]]:
    """A fractional job: the node whose best GPU is the best fit (shared before free, least
    room), then the node with the fewest free GPUs and CPUs, then its name."""
    reasons: list[str] = []
    best: tuple[tuple[bool, int, int, int, str], int, int] | None = None
    for free in frees:
        reason = why_not(free, res)
        choice = None if reason else shared_choice(free, res)
        if choice is None:
            reasons.append(reason or f"node {free.node.name}: no room")
            continue
        (on_free, room, g), need = choice
        key = (on_free, room, len(free.gpus), free.cpus or 0, free.node.name)
        if best is None or key < best[0]:
            best = (key, g, need)
    if best is None:
        return None, reasons
    key, g, need = best
    return Placement(key[4], (g,), need), reasons


def place(frees: list[NodeFree], res: Resources) -> tuple[Placement | None, list[str]]:
    """The best placement of `res` now, or None with one reason per node."""
    if res.fractional:
        return _place_shared(frees, res)
    reasons: list[str] = []
    fits: list[tuple[tuple[int, int, str], NodeFree, list[int]]] = []
    for free in frees:
        reason = why_not(free, res)
        if reason:
            reasons.append(reason)
            continue
        usable = [i for i in matching_gpus(free.node, res) if i in free.gpus]
        # Best fit: the node left with the fewest free GPUs, then the fewest free CPUs.
        fits.append(((len(free.gpus) - res.gpus, free.cpus or 0, free.node.name), free, usable))
    if not fits:
        return None, reasons
    _, free, usable = min(fits, key=lambda f: f[0])
    gpus = choose_gpus(free.node, usable, res.gpus, free.gpus)
    return Placement(free.node.name, gpus), reasons
