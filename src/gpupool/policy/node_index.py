"""What is free on each node during a pass, and what the running jobs give back when: the
node index every stage of the pass reads (`NodeIndex`).

Two implementations, chosen in one place (`node_index`):

- `CountedIndex`, the plain path: counted from the snapshot's running jobs at the start of the
  pass (`free_view`, one walk). The daemon always takes it.
- `KeptIndex`, over a `RunningView` that a caller running many passes (the trace replay)
  keeps up to date as jobs start and stop (`Snapshot.running_view`): nothing is counted; the
  view's containers are copied and a node only when the pass writes to it. Taken only when
  the view serves the snapshot (`RunningView.serves`); the decisions are the same (tested:
  tests/unit/test_policy_running_view.py, and the replay's `check_running_view`).

Both group the nodes by free GPU count (`_Grouped`): best fit wants the node left with the
fewest free GPUs, so placement looks at the smallest group that could fit first and usually
checks a few nodes, not all; the most free GPUs of any node is the top non-empty group. A
request that counts GPUs only is placed from the group alone (every node of a group fits it).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from typing import Protocol

from gpupool.core.job import Resources
from gpupool.policy.free_view import free_view
from gpupool.policy.node_free import NodeFree
from gpupool.policy.placement import Placement, place
from gpupool.policy.request import counts_only, expected_end
from gpupool.policy.running_view import RunningView
from gpupool.policy.snapshot import RunningJob, Snapshot
from gpupool.policy.timeline import Release

End = tuple[float, str, int]  # (expected end, node, GPUs): a release that counts GPUs only


class NodeIndex(Protocol):
    """What a pass reads and takes from (module docstring)."""

    frees: list[NodeFree]  # every node, in name order
    by_name: dict[str, NodeFree]
    sharing: set[str]  # nodes with a shared GPU now
    shared: bool  # some GPU was shared at the start of the pass (or memory held outside)
    whole_in_use: dict[str, float]  # project -> GPUs of its running whole-GPU jobs
    partial: list[RunningJob]  # the running jobs holding part of a GPU

    def place(self, res: Resources, swap: NodeFree | None = None) -> Placement | None: ...
    def take(self, placement: Placement, res: Resources) -> None: ...
    def most(self, without: str | None = None) -> int: ...
    def total(self) -> int: ...
    def fullest(self) -> tuple[str, int]: ...
    def releases(
        self, taken: Collection[int], nodes: Collection[str] | None = None, by: float = math.inf
    ) -> list[Release]: ...
    def ends(self, taken: Collection[int]) -> list[End]: ...


def node_index(snapshot: Snapshot, now: float) -> NodeIndex:
    """The index of this pass: over the snapshot's running view when it is a `RunningView`
    that serves, else counted (module docstring). The one place the choice is made."""
    view = snapshot.running_view
    if isinstance(view, RunningView) and view.serves(snapshot):
        return KeptIndex(snapshot, view, now)
    return CountedIndex(snapshot, now)


class _Grouped:
    """The nodes grouped by free GPU count, and placing on them (module docstring)."""

    frees: list[NodeFree]
    by_name: dict[str, NodeFree]
    groups: list[dict[str, NodeFree]]
    sharing: set[str]
    _borrowed: dict[str, int] | None  # nodes still the view's (KeptIndex): copy before writing

    def _group(self, frees: list[NodeFree]) -> None:
        self.frees = frees
        self.by_name = {f.node.name: f for f in frees}
        top = max((len(f.gpus) for f in frees), default=0)
        self.groups = [{} for _ in range(top + 1)]
        for f in frees:
            self.groups[len(f.gpus)][f.node.name] = f
        self.sharing = {f.node.name for f in frees if f.sharers}
        self._borrowed = None

    def take(self, placement: Placement, res: Resources) -> None:
        free = self.by_name[placement.node]
        del self.groups[len(free.gpus)][placement.node]
        borrowed = self._borrowed
        if borrowed is not None and placement.node in borrowed:
            free = self._own(free, borrowed.pop(placement.node))
        free.take(placement.gpus, res)
        self.groups[len(free.gpus)][placement.node] = free
        if free.sharers:
            self.sharing.add(placement.node)

    def _own(self, free: NodeFree, position: int) -> NodeFree:
        """This pass's own copy of a node borrowed from a view, in every place it is listed
        (`frees` is the list callers hold, so it is updated in place)."""
        mine = NodeFree(free.node, set(free.gpus), free.cpus, free.mem_bytes)
        self.frees[position] = self.by_name[free.node.name] = mine
        return mine

    def total(self) -> int:
        """Free GPUs in all (whole ones: not those shared by fractional jobs)."""
        return sum(count * len(group) for count, group in enumerate(self.groups))

    def most(self, without: str | None = None) -> int:
        """The most free GPUs of any node (other than `without`). Any node with a shared GPU,
        `without` too, counts as one: a fractional job may fit there (the caller compares
        this with a request's GPU count, 1 for a fractional job, to skip what cannot fit)."""
        for count in range(len(self.groups) - 1, 0, -1):
            group = self.groups[count]
            if len(group) > (without in group):
                return count
        return 1 if self.sharing else 0

    def fullest(self) -> tuple[str, int]:
        """The node with the most free GPUs (the first name of those), and how many."""
        for count in range(len(self.groups) - 1, -1, -1):
            if self.groups[count]:
                return min(self.groups[count]), count
        return "", 0

    def place(self, res: Resources, swap: NodeFree | None = None) -> Placement | None:
        """`placement.place`'s choice; `swap` stands in for its node (the reserved node's
        spare view). The order inside a group does not matter: `place` breaks ties by node
        name."""
        if res.fractional:  # shared GPUs are on nodes of any group: look at every node
            frees = [swap if swap is not None and f.node is swap.node else f for f in self.frees]
            return place(frees, res)
        only_count = counts_only(res)
        for count in range(res.gpus, len(self.groups)):
            group = list(self.groups[count].values())
            if swap is not None:
                group = [f for f in group if f.node is not swap.node]
                if len(swap.gpus) == count:
                    group.append(swap)
            if group and only_count:
                # Every node of the group fits: `place` would take the first by free CPUs,
                # then name, so only that one need be checked.
                group = [min(group, key=lambda f: (f.cpus or 0, f.node.name))]
            if group:
                placement = place(group, res)
                if placement is not None:
                    return placement
        return None


class CountedIndex(_Grouped):
    """The plain path: counted from the snapshot at the start of the pass."""

    def __init__(self, snapshot: Snapshot, now: float) -> None:
        view = free_view(snapshot)
        self._group(view.frees)
        self.shared = view.shared
        self.whole_in_use, self.partial = view.whole_in_use, view.partial
        self._running = snapshot.running
        self._now, self._default = now, snapshot.config.default_time_limit_s

    def releases(
        self, taken: Collection[int], nodes: Collection[str] | None = None, by: float = math.inf
    ) -> list[Release]:
        """What each running job (less `taken`, reclaim victims) gives back, and when; only
        on `nodes` and by `by` when given. An end already past is now."""
        return _releases(self._running, taken, nodes, by, self._now, self._default)

    def ends(self, taken: Collection[int]) -> list[End]:
        """(expected end, node, GPUs) of each running job less `taken`; an end already past
        stays as it is (reserve_by_count counts it as now)."""
        default = self._default
        return [
            (expected_end(r.start_time, r.time_limit_s, default), r.node, len(r.gpus))
            for r in self._running
            if r.id not in taken
        ]


class KeptIndex(_Grouped):
    """Over a `RunningView` kept between passes (module docstring)."""

    def __init__(self, snapshot: Snapshot, view: RunningView, now: float) -> None:
        self.frees = list(view.frees)
        self.by_name = dict(view.by_name)
        self.groups = [dict(g) for g in view.groups]
        self.sharing = set()  # the view serves only passes without shared GPUs
        self._borrowed = dict(view.position)
        self.shared = False
        self.whole_in_use = view.whole_in_use
        self.partial: list[RunningJob] = []
        self._view, self._running = view, snapshot.running
        self._now, self._default = now, snapshot.config.default_time_limit_s

    def releases(
        self, taken: Collection[int], nodes: Collection[str] | None = None, by: float = math.inf
    ) -> list[Release]:
        running: Iterable[RunningJob] = self._running
        if nodes is not None:  # only the pieces on those nodes
            on_node = self._view.on_node
            running = [r for name in nodes for r in on_node.get(name, {}).values()]
        return _releases(running, taken, nodes, by, self._now, self._default)

    def ends(self, taken: Collection[int]) -> list[End]:
        if taken:
            return [e for (job_id, _), e in self._view.ends.items() if job_id not in taken]
        return list(self._view.ends.values())


def _releases(
    running: Iterable[RunningJob],
    taken: Collection[int],
    nodes: Collection[str] | None,
    by: float,
    now: float,
    default_limit: float,
) -> list[Release]:
    out = []
    for r in running:
        if (nodes is None or r.node in nodes) and r.id not in taken:
            end = expected_end(r.start_time, r.time_limit_s, default_limit)
            if end <= by:
                out.append(Release(now if end < now else end, r.node, r.gpus, r.resources))
    return out
