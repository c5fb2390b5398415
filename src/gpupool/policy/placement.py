"""Where a job fits: which node, which GPUs.

A chain of small checks per node (GPU type, CPU, memory, GPU count), each naming why it
rejects, then a choice among the nodes that pass: best-fit node (fewest GPUs left free), and
on it the best-connected GPU set (NVLink first) that leaves the largest NVLink-connected
block free for the next multi-GPU job.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import combinations
from math import comb

from gpupool.core.gpu_catalog import model_matches
from gpupool.core.hardware import LinkKind, Node
from gpupool.core.job import Resources

# Above this many candidate sets we pick greedily instead of enumerating.
_MAX_COMBINATIONS = 2000


@dataclass
class NodeFree:
    """What is still free on a node during one scheduling pass."""

    node: Node
    gpus: set[int]
    cpus: int | None  # None: the node does not declare CPUs
    mem_bytes: int | None

    def take(self, gpus: Iterable[int], res: Resources) -> None:
        self.gpus.difference_update(gpus)
        if self.cpus is not None and res.cpus:
            self.cpus -= res.cpus
        if self.mem_bytes is not None and res.mem_bytes:
            self.mem_bytes -= res.mem_bytes


@dataclass(frozen=True)
class Placement:
    node: str
    gpus: tuple[int, ...]


def matching_gpus(node: Node, res: Resources) -> list[int]:
    if not res.gpu_type:
        return [g.index for g in node.gpus]
    return [g.index for g in node.gpus if model_matches(res.gpu_type, g.model)]


def why_not(free: NodeFree, res: Resources) -> str | None:
    """None if the job fits on this node now, else the binding constraint in words."""
    node = free.node
    if res.gpus:
        usable = [i for i in matching_gpus(node, res) if i in free.gpus]
        if len(usable) < res.gpus:
            kind = "GPU" if res.gpus == 1 else "GPUs"
            kind = f"{res.gpu_type} {kind}" if res.gpu_type else kind
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


def place(frees: list[NodeFree], res: Resources) -> tuple[Placement | None, list[str]]:
    """The best placement of `res` now, or None with one reason per node."""
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
