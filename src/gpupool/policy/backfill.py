"""EASY backfill: one reservation for the first job that cannot start, and the rule that
keeps every later job from delaying it.

EASY (the Argonne scheduler of Lifka, 1995; Maui's and Slurm's backfill work the same way):
the first job in queue order that does not fit now gets a reservation at the earliest time
("shadow time") at which enough of what it asks for will be free on one node, if every running
job ends at its expected end. A later job may then start now only if it cannot push that time
back: it ends by then, or it leaves the reserved GPUs alone and takes no more CPUs or memory on
the reserved node than will be spare there at that time (Maui's "extra" resources).

Expected ends come from time limits: start + `time_limit_s`, or + `default_time_limit_s` of
`PolicyConfig` for a job without one. Since the engine ends a job at its limit, a job ends by
then at the latest; so with the queue order unchanged, the reserved job starts at or before its
reservation time (tests/unit/test_policy_backfill.py checks this by simulation).

`FreeIndex` is what is free now, indexed for the many placements of one pass, with the reserved
node's spare view swapped in for the jobs that would outlast the reservation.

Fractional jobs (placement.py) take the reservation like any other job, in GPU memory over
time: the earliest time some GPU of the right type will have room for it, as running jobs
end (a whole-GPU holder gives the whole GPU back, a sharer its memory; memory held outside
gpupool stays held), and there the GPU `place` picks. What it reserves is memory on that GPU
(`Reservation.gpu_memory_bytes`), not the GPU: a later job that outlasts it may share that
GPU within what the reserved job leaves of its memory at the reservation time (the spare, as
Maui's "extra" CPUs and memory), never take it whole. Against a whole-GPU reservation a later
fractional job follows the same rule as any other: it starts now if it ends by the
reservation time, or else only on GPUs that are not reserved (a reserved GPU that is shared
now is off limits too), within the spare CPUs and memory. So no later job delays a
reservation, fractional or whole, and a fractional job cannot starve behind a stream of
whole-GPU jobs (tests/unit/test_fractional_backfill.py checks this by simulation).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable
from typing import NamedTuple

from gpupool.core.job import Resources
from gpupool.core.units import format_duration, format_size
from gpupool.policy.placement import NodeFree, Placement, granted_bytes, place, why_not
from gpupool.policy.running_view import RunningView
from gpupool.policy.snapshot import PolicyConfig, Reservation


def expected_end(start: float, limit_s: float | None, config: PolicyConfig, now: float) -> float:
    """When a job started at `start` is expected to end; a job already past it ends `now`."""
    limit = config.default_time_limit_s if limit_s is None else limit_s
    return max(now, start + limit)


class Release(NamedTuple):
    """What a running job (or one started earlier in this pass) gives back, and when. A
    named tuple, not a dataclass: a pass builds one per running job, and a tuple is built
    several times faster."""

    end: float
    node: str
    gpus: tuple[int, ...]
    resources: Resources
    gpu_memory_bytes: int | None = None  # fractional jobs; None: what placement grants


def _copy(free: NodeFree) -> NodeFree:
    return free.copy()


def _give_back(free: NodeFree, release: Release) -> None:
    res = release.resources
    if res.fractional:
        for g in release.gpus:
            nbytes = release.gpu_memory_bytes
            free.share(g, granted_bytes(free.node, g, res) if nbytes is None else nbytes, -1)
    else:
        free.gpus.update(release.gpus)
    if free.cpus is not None and res.cpus:
        free.cpus += res.cpus
    if free.mem_bytes is not None and res.mem_bytes:
        free.mem_bytes += res.mem_bytes


def _frees_at(
    frees: list[NodeFree], releases: Iterable[Release], time: float
) -> dict[str, NodeFree]:
    """Each node as it will be at `time`: free now, plus what ends by then."""
    at = {f.node.name: _copy(f) for f in frees}
    for r in releases:
        if r.end <= time and r.node in at:
            _give_back(at[r.node], r)
    return at


def _earliest(free: NodeFree, releases: list[Release], res: Resources) -> float | None:
    """The first release time after which `res` fits on this node; None: never."""
    if not (
        res.gpu_type or res.cpus or res.mem_bytes or res.fractional or free.sharers
    ) and not any(r.resources.fractional for r in releases):
        return _earliest_by_count(len(free.gpus), releases, res.gpus)
    state = _copy(free)
    mine = sorted(releases, key=lambda r: r.end)
    i = 0
    while i < len(mine):
        end = mine[i].end
        # Everything ending at the same time is back before the check.
        while i < len(mine) and mine[i].end == end:
            _give_back(state, mine[i])
            i += 1
        if why_not(state, res) is None:
            return end
    return None


def _earliest_by_count(free: int, releases: list[Release], need: int) -> float | None:
    """`_earliest` for a request that only counts GPUs, on a node without shared GPUs (so no
    fractional releases either): the same answer from running sums, without copying the node's view for every release (the
    reservation asks this of every node, every pass)."""
    ends = sorted([(r.end, len(r.gpus)) for r in releases])
    have = free
    for end, gpus in ends:
        have += gpus
        if have >= need:
            return end
    return None


class Shadow:
    """The one reservation of a pass, and what a later job may take now without delaying it."""

    def __init__(
        self, reservation: Reservation, node_at_time: NodeFree, res: Resources, now: float
    ) -> None:
        self.reservation = reservation
        self.now = now
        self._reserved = frozenset(reservation.gpus)
        # What the reserved node will have left at the reservation time once the reserved job
        # has what it needs: jobs running past that time may use this much, and no more.
        cpus, mem = node_at_time.cpus, node_at_time.mem_bytes
        self.extra_cpus = None if cpus is None else cpus - (res.cpus or 0)
        self.extra_mem = None if mem is None else mem - (res.mem_bytes or 0)
        # A fractional reservation: the memory its GPU will have left at the reservation time
        # once the reserved job has its share; jobs outlasting it may share the GPU within it.
        self.extra_gpu_mem: int | None = None
        granted = reservation.gpu_memory_bytes
        if granted is not None:
            room = node_at_time.room(reservation.gpus[0])
            assert room is not None  # the reserved job fits there then
            self.extra_gpu_mem = room - granted

    @property
    def node(self) -> str:
        return self.reservation.node

    @property
    def time(self) -> float:
        return self.reservation.time

    def outlasts(self, end: float) -> bool:
        """Whether a job ending at `end` would still run when the reservation begins (an
        endless job always would, even against an endless reservation)."""
        return end > self.time or math.isinf(end)

    def spare(self, now_free: NodeFree) -> NodeFree:
        """What a job that outlasts the reservation may take now on the reserved node: its
        free GPUs except the reserved ones, and CPUs/memory within the extra. A fractional
        reservation's GPU stays in it as a shared GPU whose room is at most the extra GPU
        memory: sharers may join within it, a whole-GPU job can never take it."""
        cpus, mem = now_free.cpus, now_free.mem_bytes
        if cpus is not None and self.extra_cpus is not None:
            cpus = min(cpus, self.extra_cpus)
        if mem is not None and self.extra_mem is not None:
            mem = min(mem, self.extra_mem)
        reserved = self._reserved
        sharers = {g: n for g, n in now_free.sharers.items() if g not in reserved}
        granted = {g: n for g, n in now_free.granted.items() if g not in reserved}
        if self.extra_gpu_mem is not None:
            (gpu,) = self.reservation.gpus
            room = now_free.room(gpu)
            if room is not None:  # free or shared now (not held whole)
                # As if granted: all but min(room now, extra), so `room()` gives that.
                usable = now_free.node.gpu(gpu).memory_bytes - now_free.unmanaged.get(gpu, 0)
                sharers[gpu] = max(1, now_free.sharers.get(gpu, 0))
                granted[gpu] = usable - min(room, self.extra_gpu_mem)
        return NodeFree(
            now_free.node, now_free.gpus - reserved, cpus, mem, sharers, granted,
            now_free.unmanaged,
        )  # fmt: skip

    def took(
        self, res: Resources, gpus: tuple[int, ...] = (), gpu_memory_bytes: int | None = None
    ) -> None:
        """A job that outlasts the reservation started on the reserved node, on `gpus` (with
        `gpu_memory_bytes` granted, if fractional): it uses up extra."""
        if self.extra_cpus is not None and res.cpus:
            self.extra_cpus -= res.cpus
        if self.extra_mem is not None and res.mem_bytes:
            self.extra_mem -= res.mem_bytes
        if self.extra_gpu_mem is not None and res.fractional and self.reservation.gpus[0] in gpus:
            assert gpu_memory_bytes is not None, "a fractional start states its memory"
            self.extra_gpu_mem -= gpu_memory_bytes

    def when(self) -> str:
        """The reservation time relative to now, in words (the policy has no clock to print)."""
        if self.time <= self.now:
            return "as soon as jobs past their time limit there end"
        if math.isinf(self.time):
            return "never (running jobs there have no end)"
        return f"from now+{format_duration(self.time - self.now)}"

    def describe(self) -> str:
        """E.g. "reserved GPUs 0,1,2,3 on box from now+1h05m", "reserved 40GiB of GPU 1 on
        box from now+10m" (a fractional job's)."""
        gpus, granted = self.reservation.gpus, self.reservation.gpu_memory_bytes
        what = f"GPU{'s' if len(gpus) > 1 else ''} {','.join(map(str, gpus))}" if gpus else "room"
        if granted is not None:
            what = f"{format_size(granted)} of {what}"
        return f"reserved {what} on {self.node} {self.when()}"


def reserve(
    job_id: int,
    res: Resources,
    frees: list[NodeFree],
    releases: list[Release],
    now: float,
) -> Shadow | None:
    """The reservation for a job that does not fit now: the earliest time some node will have
    room for it, and on the nodes that have room then, the node and GPUs that `place` picks
    (best fit, best links) as if it were that time. None if no node ever will (only when the
    job is unsatisfiable, which the caller has ruled out). A fractional job's reservation
    is memory on one GPU (module docstring)."""
    by_node: dict[str, list[Release]] = {}
    for r in releases:
        by_node.setdefault(r.node, []).append(r)
    earliest = [
        (t, f) for f in frees if (t := _earliest(f, by_node.get(f.node.name, []), res)) is not None
    ]
    if not earliest:
        return None
    time = min(t for t, _ in earliest)
    # The nodes with room at `time` are exactly those whose earliest time is `time`: only
    # they need a view as of then (copying every node was most of this function's cost).
    candidates = [f for t, f in earliest if t == time]
    at = _frees_at(candidates, releases, time)
    placement, _ = place([at[f.node.name] for f in candidates], res)
    assert placement is not None  # some node has room at `time`, by the choice of `time`
    reservation = Reservation(
        job_id, placement.node, placement.gpus, time, placement.gpu_memory_bytes
    )
    return Shadow(reservation, at[placement.node], res, now)


def reserve_by_count(
    job_id: int,
    res: Resources,
    frees: list[NodeFree],
    ends: list[tuple[float, str, int]],
    releases_on: Callable[[set[str], float], list[Release]],
    now: float,
) -> Shadow | None:
    """`reserve` for a request that only counts GPUs on a cluster without shared GPUs, from
    (end, node, GPU count) per release: the same reservation, found by one sweep over the
    releases in time order that stops at the first node with room, instead of a timeline
    per node. `releases_on(nodes, time)` gives the full releases by `time` on the nodes that
    have room then, for the placement. On a busy cluster of hundreds of nodes this is most of
    what a pass that reserves costs. An end before `now` counts as `now`. `ends` is consumed."""
    need = res.gpus
    have = {f.node.name: len(f.gpus) for f in frees}
    heapq.heapify(ends)
    time, ready = math.inf, set()
    while ends and ends[0][0] <= time:
        end, name, gpus = heapq.heappop(ends)
        count = have.get(name)
        if count is None:
            continue  # a node gone from the inventory
        have[name] = count + gpus
        if count + gpus >= need:  # as `_earliest_by_count`: checked as each release comes back
            time = end if end > now else now  # a job past its expected end ends any moment
            ready.add(name)
    if not ready:
        return None
    candidates = [f for f in frees if f.node.name in ready]
    at = _frees_at(candidates, releases_on(ready, time), time)
    placement, _ = place([at[f.node.name] for f in candidates], res)
    assert placement is not None  # every candidate has room at `time`
    reservation = Reservation(job_id, placement.node, placement.gpus, time)
    return Shadow(reservation, at[placement.node], res, now)


class FreeIndex:
    """What is free now on each node, grouped by free GPU count. Best fit wants the node left
    with the fewest free GPUs, so placement looks at the smallest group that could fit first
    and usually checks a few nodes, not all; the most free GPUs of any node is the top
    non-empty group."""

    def __init__(self, frees: list[NodeFree]) -> None:
        self.frees = frees  # by node name
        self.by_name = {f.node.name: f for f in frees}
        top = max((len(f.gpus) for f in frees), default=0)
        self.groups: list[dict[str, NodeFree]] = [{} for _ in range(top + 1)]
        for f in frees:
            self.groups[len(f.gpus)][f.node.name] = f
        self.sharing = {f.node.name for f in frees if f.sharers}  # nodes with shared GPUs
        # From a RunningView: its NodeFree objects, not to be written; `take` copies a node
        # first. None: `frees` belongs to this pass.
        self._borrowed: dict[str, int] | None = None

    @classmethod
    def from_view(cls, view: RunningView) -> FreeIndex:
        """An index over what `view` says is free (it serves a pass only without shared
        GPUs: `RunningView.serves`). Its containers are copied, its nodes only on write: a
        pass starts jobs on a few of hundreds of nodes."""
        index = cls.__new__(cls)
        index.frees = list(view.frees)
        index.by_name = dict(view.by_name)
        index.groups = [dict(g) for g in view.groups]
        index.sharing = set()
        index._borrowed = dict(view.position)
        return index

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

    def place(self, res: Resources, swap: NodeFree | None = None) -> Placement | None:
        """`place`'s choice, without reasons; `swap` stands in for its node (the reserved
        node's spare view). The order inside a group does not matter: `place` breaks ties by
        node name."""
        if res.fractional:  # shared GPUs are on nodes of any group: look at every node
            frees = [swap if swap is not None and f.node is swap.node else f for f in self.frees]
            return place(frees, res)[0]
        for count in range(res.gpus, len(self.groups)):
            group = list(self.groups[count].values())
            if swap is not None:
                group = [f for f in group if f.node is not swap.node]
                if len(swap.gpus) == count:
                    group.append(swap)
            if group and not (res.gpu_type or res.cpus or res.mem_bytes):
                # Every node of the group fits: `place` would take the first by free CPUs,
                # then name, so only that one need be checked.
                group = [min(group, key=lambda f: (f.cpus or 0, f.node.name))]
            if group:
                placement, _ = place(group, res)
                if placement is not None:
                    return placement
        return None
