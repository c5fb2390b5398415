"""Wide jobs: a whole-GPU job asking for more GPUs than any one node has, spread over several
nodes (only with `PolicyConfig.spread_wide_jobs`; the daemon on one box keeps it off).

The trace-replay simulator turns spreading on, as a cluster backend (Slurm, Kubernetes gangs)
would run such a job; everything else in the policy still puts a job on one node.

- **Placement** (`place_wide`): the fewest nodes. Nodes with the most free matching GPUs are
  taken whole first (whole free nodes before partly used ones with as many free, then by
  name), and the last node is the best fit: the one with the fewest free GPUs that still
  covers the remainder, so a fragment is filled before a whole node is broken. Taking the
  largest first and swapping the last for the best fit keeps the node count minimal. The
  GPUs on each node come from `placement.choose_gpus`, as for a one-node job.
- **CPUs and memory** of a wide job are per node: every node it uses must have them (the
  engine runs one task per node, each with the job's --cpus and --mem). A running spread job
  appears in `Snapshot.running` once per node with `resources` = the request with `gpus` =
  its GPUs there, so the policy's per-entry accounting (free view, releases, quota use) is
  right without a special case.
- **Reservation** (`reserve_wide`, `WideShadow`): the earliest release time at which the
  request fits across the pool, with what is free now plus what ends by then. The pass's
  `Reservation` is one node's worth (its first node and GPUs there); `describe()` names the
  whole. It is conservative: while a wide job holds the reservation, a later job may start
  now only if it ends by the reservation time. Letting a job that outlasts it use what the
  reservation does not need would mean tracking the reserved GPUs and the spare CPUs and
  memory of every node it will use; EASY's one-node bookkeeping (`backfill.Shadow`) covers
  only one. A wide job is rare and big, so the lost backfill is small next to the risk of
  delaying it.
- **Reclaim**: a wide job never reclaims borrowed GPUs (a reclaim plan fits one node); a wide
  claim that does not fit reserves like any blocked job.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from gpupool.core.gpu_catalog import display_name
from gpupool.core.hardware import Node
from gpupool.core.job import Resources
from gpupool.policy.backfill import Release, Shadow
from gpupool.policy.backfill import _give_back as give_back
from gpupool.policy.node_facts import NodeFacts
from gpupool.policy.placement import NodeFree, Placement, choose_gpus, matching_gpus
from gpupool.policy.snapshot import Reservation


def _has_room(free: NodeFree, res: Resources) -> bool:
    """Whether the node has the job's per-node CPUs and memory free (undeclared: no limit)."""
    if res.cpus and free.cpus is not None and free.cpus < res.cpus:
        return False
    return not (res.mem_bytes and free.mem_bytes is not None and free.mem_bytes < res.mem_bytes)


def _usable(free: NodeFree, res: Resources) -> list[int]:
    """The free GPUs of the requested type on this node."""
    if not res.gpu_type:
        return sorted(free.gpus)
    return [g for g in matching_gpus(free.node, res) if g in free.gpus]


def _usable_count(free: NodeFree, res: Resources) -> int:
    """len(_usable(...)), without building the list for an untyped request."""
    if not res.gpu_type:
        return len(free.gpus)
    return sum(g in free.gpus for g in matching_gpus(free.node, res))


def _count(free: NodeFree, res: Resources) -> int:
    """What the node can give a wide job now: its usable GPUs, or 0 without the CPUs/memory."""
    return _usable_count(free, res) if _has_room(free, res) else 0


def piece(res: Resources, gpus: Sequence[int]) -> Resources:
    """The part of a wide request on one node: its GPUs there, the per-node CPUs and memory."""
    return replace(res, gpus=len(gpus))


def place_wide(frees: Sequence[NodeFree], res: Resources) -> list[Placement] | None:
    """Where a wide job goes now, one Placement per node, fewest nodes (module docstring);
    None when the nodes with room for it have too few free GPUs in all."""
    if sum(_count(f, res) for f in frees) < res.gpus:
        return None  # the common case on a busy cluster: decided without sorting anything
    options: list[tuple[int, bool, str, NodeFree, list[int]]] = []
    for free in frees:
        if not _has_room(free, res):
            continue
        usable = _usable(free, res)
        if usable:
            whole = len(free.gpus) == len(free.node.gpus)
            options.append((len(usable), whole, free.node.name, free, usable))
    if sum(o[0] for o in options) < res.gpus:
        return None
    options.sort(key=lambda o: (-o[0], not o[1], o[2]))
    need, out, i = res.gpus, [], 0
    while options[i][0] < need:  # the total suffices, so this stops before the end
        count, _, name, free, usable = options[i]
        out.append(Placement(name, choose_gpus(free.node, usable, count, free.gpus)))
        need -= count
        i += 1
    # Every node from i on with enough is a prefix of the rest (sorted by count, descending).
    covering = [o for o in options[i:] if o[0] >= need]
    count, _, name, free, usable = min(covering, key=lambda o: (o[0], len(o[3].gpus), o[2]))
    out.append(Placement(name, choose_gpus(free.node, usable, need, free.gpus)))
    return out


def is_wide(res: Resources, nodes: tuple[Node, ...]) -> bool:
    """A whole-GPU job asking for more GPUs of its type than any node has: it runs spread
    over nodes (when PolicyConfig.spread_wide_jobs is on)."""
    return not res.fractional and res.gpus > NodeFacts.of(nodes).widest(res.gpu_type)


def shortfall(
    frees: Sequence[NodeFree], res: Resources, nodes: tuple[Node, ...], free_total: int
) -> str:
    """Why a wide job does not fit now, e.g. "needs 32 GPUs on at least 4 nodes; 20 free
    across the pool" (at least: were all nodes as large as the largest). `free_total`: the
    whole free GPUs of `frees` (FreeIndex.total), all a request that only counts GPUs needs."""
    kind = "GPU" if res.gpus == 1 else "GPUs"
    what = (
        f"{res.gpus} {display_name(res.gpu_type)} {kind}" if res.gpu_type else f"{res.gpus} {kind}"
    )
    fewest = math.ceil(res.gpus / max(1, NodeFacts.of(nodes).widest(res.gpu_type)))
    if res.gpu_type or res.cpus or res.mem_bytes:
        total = sum(_usable_count(f, res) for f in frees)
        usable = sum(_count(f, res) for f in frees)
    else:
        total = usable = free_total
    text = f"needs {what} on at least {fewest} nodes; {total} free across the pool"
    if usable < total:
        text += f", {usable} of them on nodes with the CPUs and memory it needs on each"
    return text


class WideShadow(Shadow):
    """The pass's reservation held by a wide job. As a `Shadow` it stands for the first node
    of the reserved placement (what `Reservation` can say, what a reclaim plan keeps off);
    `placements` is all of it. The pass lets no job that would outlast it start (module
    docstring): it checks for this class before the one-node spare rule."""

    def __init__(
        self,
        reservation: Reservation,
        first_at_time: NodeFree,
        res: Resources,
        now: float,
        placements: list[Placement],
    ) -> None:
        super().__init__(reservation, first_at_time, piece(res, reservation.gpus), now)
        self.placements = placements
        self.gpus = res.gpus

    def describe(self) -> str:
        """E.g. "reserved 32 GPUs on 4 nodes from now+1h"."""
        return f"reserved {self.gpus} GPUs on {len(self.placements)} nodes {self.when()}"

    def holds_back(self) -> str:
        """The Priority message of a job that fits now but would outlast this reservation."""
        return (
            f"waiting for job {self.reservation.job_id}, which holds a reservation "
            f"({self.describe()}): while a multi-node job holds it, only jobs that end by "
            "then may start (a shorter --time may let this one start now)"
        )


def reserve_wide(
    job_id: int,
    res: Resources,
    frees: Sequence[NodeFree],
    releases: Sequence[Release],
    now: float,
) -> WideShadow | None:
    """The reservation for a wide job that does not fit now: the earliest release time by
    which what is free plus what has ended fits it (`place_wide` then). None if it never
    will (only when it is unsatisfiable, ruled out by the caller)."""
    at = {f.node.name: f.copy() for f in frees}
    counts = {name: _count(f, res) for name, f in at.items()}
    total = sum(counts.values())
    ordered = sorted((r for r in releases if r.node in at), key=lambda r: r.end)
    time, i = now, 0
    while total < res.gpus:
        if i == len(ordered):
            return None
        time = ordered[i].end
        # Everything ending at the same time is back before the check.
        while i < len(ordered) and ordered[i].end == time:
            name = ordered[i].node
            give_back(at[name], ordered[i])
            total -= counts[name]
            counts[name] = _count(at[name], res)
            total += counts[name]
            i += 1
    placements = place_wide([at[f.node.name] for f in frees], res)
    assert placements is not None  # the nodes with room have enough GPUs, by the loop
    first = placements[0]
    reservation = Reservation(job_id, first.node, first.gpus, time)
    return WideShadow(reservation, at[first.node], res, now, placements)
