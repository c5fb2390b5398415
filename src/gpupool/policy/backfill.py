"""EASY backfill: one reservation for the first job that cannot start, and the rule that
keeps every later job from delaying it.

EASY (the Argonne scheduler of Lifka, 1995; Maui's and Slurm's backfill work the same way):
the first job in queue order that does not fit now gets a reservation at the earliest time
("shadow time") at which enough of what it asks for will be free on one node, if every running
job ends at its expected end. A later job may then start now only if it cannot push that time
back: it ends by then, or it leaves the reserved GPUs alone and takes no more CPUs or memory on
the reserved node than will be spare there at that time (Maui's "extra" resources).

Expected ends come from time limits (`request.expected_end`): start + `time_limit_s`, or +
`default_time_limit_s` of `PolicyConfig` for a job without one (policy/timeline.py). Since the engine ends a job at its limit, a job ends by
then at the latest; so with the queue order unchanged, the reserved job starts at or before its
reservation time (tests/unit/test_policy_backfill.py checks this by simulation).

The pass's node index (policy/node_index.py) is what is free now; the jobs that would outlast
the reservation see the reserved node's spare view swapped in (`Shadow.spare`). A wide job's
reservation (policy/wide.py, `WideShadow`) holds GPUs on several nodes and keeps the same
books on each: `holds`, `spare_of`, `took_on` and `place_beside` answer for any node.

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
from collections.abc import Callable, Collection

from gpupool.core.job import Resources
from gpupool.policy.node_free import NodeFree
from gpupool.policy.node_index import End, NodeIndex
from gpupool.policy.placement import Placement, place
from gpupool.policy.reasons import Reserved
from gpupool.policy.request import counts_only
from gpupool.policy.snapshot import Reservation
from gpupool.policy.timeline import Release, earliest, frees_at


class Shadow:
    """The one reservation of a pass, and what a later job may take now without delaying it."""

    # Whether it is a wide job's, over several nodes (policy/wide.py `WideShadow`): a job
    # that outlasts it is placed with every reserved node's spare view (`spare_of`), not by
    # swapping the one reserved node's view into the node index.
    spread = False

    def __init__(
        self, reservation: Reservation, node_at_time: NodeFree, res: Resources, now: float
    ) -> None:
        self.reservation = reservation
        self.node, self.time = reservation.node, reservation.time  # read by every later job
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

    def holds(self, node: str) -> bool:
        """Whether the reservation holds GPUs on `node`."""
        return node == self.node

    def spare_of(self, now_free: NodeFree) -> NodeFree:
        """What a job that outlasts the reservation may take now on any node: the spare view
        of a node it holds, what is free on any other."""
        return self.spare(now_free) if self.holds(now_free.node.name) else now_free

    def place_beside(self, index: NodeIndex, res: Resources) -> Placement | None:
        """Where a job that outlasts the reservation goes now: best fit with the reserved
        node's spare view swapped in (a wide job's reservation: every node's, policy/wide.py)."""
        return index.place(res, swap=self.spare(index.by_name[self.node]))

    def took_on(
        self,
        node: str,
        res: Resources,
        gpus: tuple[int, ...] = (),
        gpu_memory_bytes: int | None = None,
    ) -> None:
        """A job that outlasts the reservation started on `node` (`took` where it holds)."""
        if self.holds(node):
            self.took(res, gpus, gpu_memory_bytes)

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

    def reserved(self) -> Reserved:
        """The reservation as a status names it (policy/reasons.py)."""
        return Reserved(self.reservation, self.time - self.now, len(self.reservation.gpus))


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
    times = [
        (t, f) for f in frees if (t := earliest(f, by_node.get(f.node.name, []), res)) is not None
    ]
    if not times:
        return None
    time = min(t for t, _ in times)
    # The nodes with room at `time` are exactly those whose earliest time is `time`: only
    # they need a view as of then (copying every node was most of this function's cost).
    candidates = [f for t, f in times if t == time]
    at = frees_at(candidates, releases, time)
    placement = place([at[f.node.name] for f in candidates], res)
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
    releases_on: Callable[[Collection[str], float], list[Release]],
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
    at = frees_at(candidates, releases_on(ready, time), time)
    placement = place([at[f.node.name] for f in candidates], res)
    assert placement is not None  # every candidate has room at `time`
    reservation = Reservation(job_id, placement.node, placement.gpus, time)
    return Shadow(reservation, at[placement.node], res, now)


def reserve_for(
    job_id: int,
    res: Resources,
    index: NodeIndex,
    started: list[Release],
    taken: Collection[int],
    now: float,
) -> Shadow | None:
    """The reservation of a one-node job that does not fit now, on what `index` gives back
    (less `taken`, the reclaim victims) and what this pass `started`: by counts
    (`reserve_by_count`) for a request that counts GPUs only where no GPU is shared, the
    common case on a big cluster and the cheap one; else node by node (`reserve`). The one
    place the choice is made; both give the same reservation where both apply (tested)."""
    if not counts_only(res) or index.shared or index.sharing:
        return reserve(job_id, res, index.frees, index.releases(taken) + started, now)
    ends: list[End] = index.ends(taken)
    ends += [(s.end, s.node, len(s.gpus)) for s in started]

    def releases_on(nodes: Collection[str], by: float) -> list[Release]:
        mine = [s for s in started if s.node in nodes and s.end <= by]
        return index.releases(taken, nodes, by) + mine

    return reserve_by_count(job_id, res, index.frees, ends, releases_on, now)
