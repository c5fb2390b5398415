"""Where a job fits: which node, which GPUs.

The feasibility chain (policy/filters/: GPU type, GPU count, GPU memory, CPUs, memory) says
which nodes can take the job now; among them the best fit wins: the node left with the
fewest free GPUs (then the fewest free CPUs, then the name), and on it the best-connected GPU
set (NVLink first) that leaves the largest NVLink-connected block free for the next
multi-GPU job (`choose_gpus`).

Fractional jobs (Resources.fractional: --gpu-memory 20GB, --gpus 0.5) share one GPU by
memory (node_free.py): a whole-GPU job takes only free GPUs; a fractional job takes a shared
or free GPU whose room fits it (its memory, minus what fractional jobs there were granted,
minus `unmanaged` memory). A fraction resolves to int(fraction x that GPU's memory) bytes.
Best fit: a shared GPU before a free one (keep whole GPUs whole), then the least room, then
the lowest index (filters/gpu_memory.py).

Unmanaged memory (held by processes gpupool does not manage, e.g. a display server) shrinks
the room of fractional jobs, but does not make a GPU unavailable to whole-GPU jobs: a whole
job gets the GPU as it is, as it did before fractions existed. Treating such a GPU as in use
(as Run:ai does) would keep every whole-GPU job off the display GPU of a workstation for good.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from math import comb

from gpupool.core.hardware import LinkKind, Node
from gpupool.core.job import Resources
from gpupool.policy.filters import checks_for
from gpupool.policy.filters.gpu_memory import shared_choice
from gpupool.policy.filters.gpu_type import matching_gpus
from gpupool.policy.node_free import NodeFree
from gpupool.policy.reasons import Insufficient

# Above this many candidate sets we pick greedily instead of enumerating.
_MAX_COMBINATIONS = 2000


@dataclass(frozen=True)
class Placement:
    node: str
    gpus: tuple[int, ...]
    gpu_memory_bytes: int | None = None  # fractional jobs: the memory granted on its GPU


def why_none(frees: Sequence[NodeFree], res: Resources) -> list[Insufficient]:
    """Each node's binding check for `res` (the first of the chain it fails), for the nodes
    where it does not fit now."""
    checks = checks_for(res)
    out = []
    for free in frees:
        for check in checks:
            found = check(free, res)
            if found is not None:
                out.append(found)
                break
    return out


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


def _place_shared(frees: Sequence[NodeFree], res: Resources) -> Placement | None:
    """A fractional job: the node whose best GPU is the best fit (shared before free, least
    room), then the node with the fewest free GPUs and CPUs, then its name."""
    checks = checks_for(res)
    best: tuple[tuple[bool, int, int, int, str], int, int] | None = None
    for free in frees:
        if any(check(free, res) is not None for check in checks):
            continue
        choice = shared_choice(free, res)
        if choice is None:
            continue
        (on_free, room, g), need = choice
        key = (on_free, room, len(free.gpus), free.cpus or 0, free.node.name)
        if best is None or key < best[0]:
            best = (key, g, need)
    if best is None:
        return None
    key, g, need = best
    return Placement(key[4], (g,), need)


def place(frees: Sequence[NodeFree], res: Resources) -> Placement | None:
    """The best placement of `res` now (module docstring), or None: it fits on no node."""
    if res.fractional:
        return _place_shared(frees, res)
    checks, need = checks_for(res), res.gpus
    best: tuple[tuple[int, int, str], NodeFree] | None = None
    for free in frees:
        # Fewer free GPUs than asked fails the GPU count check whatever the type: said
        # here without the `Insufficient` the check would make (a busy pool's nodes mostly
        # fail so, and defragmentation places on every node, several times a pass).
        if len(free.gpus) < need or any(check(free, res) is not None for check in checks):
            continue
        # Best fit: the node left with the fewest free GPUs, then the fewest free CPUs.
        key = (len(free.gpus) - res.gpus, free.cpus or 0, free.node.name)
        if best is None or key < best[0]:
            best = (key, free)
    if best is None:
        return None
    free = best[1]
    usable = [i for i in matching_gpus(free.node, res) if i in free.gpus]
    return Placement(free.node.name, choose_gpus(free.node, usable, res.gpus, free.gpus))
