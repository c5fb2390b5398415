"""What the running jobs (and this pass's starts) give back, and when: the timeline backfill
reserves on (policy/backfill.py) and wide jobs reserve on (policy/wide.py).

Every running job is expected to end at its expected end (`request.expected_end`); one
already past it ends any moment, so it counts as ending now.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from gpupool.core.job import Resources
from gpupool.policy.filters import checks_for
from gpupool.policy.node_free import NodeFree
from gpupool.policy.request import counts_only


class Release(NamedTuple):
    """What a running job (or one started earlier in this pass) gives back, and when. A
    named tuple, not a dataclass: a pass builds one per running job, and a tuple is built
    several times faster."""

    end: float
    node: str
    gpus: tuple[int, ...]
    resources: Resources
    gpu_memory_bytes: int | None = None  # fractional jobs; None: what placement grants


def give_back(free: NodeFree, release: Release) -> None:
    free.give(release.gpus, release.resources, release.gpu_memory_bytes)


def frees_at(
    frees: Iterable[NodeFree], releases: Iterable[Release], time: float
) -> dict[str, NodeFree]:
    """Each node as it will be at `time`: free now, plus what ends by then."""
    at = {f.node.name: f.copy() for f in frees}
    for r in releases:
        if r.end <= time and r.node in at:
            give_back(at[r.node], r)
    return at


def earliest(free: NodeFree, releases: list[Release], res: Resources) -> float | None:
    """The first release time after which `res` fits on this node; None: never."""
    if counts_only(res) and not free.sharers and not any(r.resources.fractional for r in releases):
        return earliest_by_count(len(free.gpus), releases, res.gpus)
    checks = checks_for(res)
    state = free.copy()
    mine = sorted(releases, key=lambda r: r.end)
    i = 0
    while i < len(mine):
        end = mine[i].end
        # Everything ending at the same time is back before the check.
        while i < len(mine) and mine[i].end == end:
            give_back(state, mine[i])
            i += 1
        if all(check(state, res) is None for check in checks):
            return end
    return None


def earliest_by_count(free: int, releases: list[Release], need: int) -> float | None:
    """`earliest` for a request that only counts GPUs, on a node without shared GPUs (so no
    fractional releases either): the same answer from running sums, without copying the
    node's view for every release (the reservation asks this of every node, every pass)."""
    ends = sorted([(r.end, len(r.gpus)) for r in releases])
    have = free
    for end, gpus in ends:
        have += gpus
        if have >= need:
            return end
    return None
