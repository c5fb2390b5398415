"""Wide jobs: a whole-GPU job asking for more GPUs than any one node has, spread over several
nodes (only with `PolicyConfig.spread_wide_jobs`; the daemon on one box keeps it off).

The trace-replay simulator turns spreading on, as a cluster backend (Slurm, Kubernetes gangs)
would run such a job; everything else in the policy still puts a job on one node.

- **Placement** (`place_wide`), by `PolicyConfig.wide_placement`:
  - `spread` (the default): the fewest nodes, as soon as enough GPUs are free anywhere. The
    nodes with the most free matching GPUs are taken first, partly used or not (a whole free
    node before a partly used one with as many free, then by name), all their free GPUs;
    the last node is the best fit: the one with the fewest free GPUs that still covers the
    remainder, so a fragment is filled before a whole node is broken. Taking the largest
    first and swapping the last for the best fit keeps the node count minimal. So a
    16-GPU job on one whole free node and two with 7 free each starts now on 8 + 7 + 1.
  - `consolidate`: whole free nodes only (every GPU of the node free, all of them used),
    largest first, then by name, each while it does not exceed what is still needed; what
    is left (a size that is not a multiple of the node size) goes on the one other node
    with the most free GPUs that covers it, a whole free one if any is left. Otherwise the
    job waits, whatever is free on partly used nodes. On nodes of 8 GPUs this is the
    consolidate placer of the Helios artifact (Hu et al., SC'21: `placer/consolidate.py`,
    k whole nodes for 8k GPUs; for 8k + r, k whole nodes and r on the node with the most
    free GPUs after them), and for multiples of the node size Slurm's `--exclusive`. It
    makes no job wait that `spread` would not place either, only later.
  The GPUs on each node come from `placement.choose_gpus`, as for a one-node job.
- **CPUs and memory** of a wide job are per node: every node it uses must have them (the
  engine runs one task per node, each with the job's --cpus and --mem). A running spread job
  appears in `Snapshot.running` once per node with `resources` = the request with `gpus` =
  its GPUs there, so the policy's per-entry accounting (free view, releases, quota use) is
  right without a special case.
- **Reservation** (`reserve_wide`, `WideShadow`): the earliest release time at which the
  request fits across the pool by the placement rule, with what is free now plus what ends
  by then, and the placement the rule makes then. The reservation is pinned to it: it names
  every node and the GPUs it holds on each (`Reservation.parts()`), and on each of those
  nodes the CPUs and memory the job will need there. A later job that would outlast it may
  start now where it keeps off all of that: anywhere on the nodes the reservation does not
  use, and on those it does within each one's spare view (EASY's one-node rule,
  `backfill.Shadow`, node by node). By the consolidate rule a node taken whole is held whole
  (a GPU of another type on it, taken by a later job, would leave it not whole, and the rule
  would not place the job there then). So no later job delays the wide job: at its time the
  GPUs it holds are free and each of its nodes has its room, which is a placement either
  rule takes (tests/unit/test_wide_reservation_properties.py). Before issue 33 the
  reservation was conservative (no job that outlasted it started anywhere), which left a
  1-GPU job waiting on a node the wide job never used.
- **Reclaim**: a wide job never reclaims borrowed GPUs (a reclaim plan fits one node); a wide
  claim that does not fit reserves like any blocked job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gpupool.core.hardware import Node
from gpupool.core.job import Resources
from gpupool.policy.backfill import Shadow
from gpupool.policy.filters.gpu_count import usable_gpus
from gpupool.policy.filters.topology import has_room, spread_count
from gpupool.policy.node_facts import NodeFacts
from gpupool.policy.node_free import NodeFree
from gpupool.policy.node_index import NodeIndex
from gpupool.policy.placement import Placement, choose_gpus, place
from gpupool.policy.reasons import Reserved
from gpupool.policy.snapshot import Reservation, WidePlacement
from gpupool.policy.timeline import Release, give_back

SPREAD, CONSOLIDATE = WidePlacement.SPREAD, WidePlacement.CONSOLIDATE


def piece(res: Resources, gpus: Sequence[int]) -> Resources:
    """The part of a wide request on one node: its GPUs there, the per-node CPUs and memory."""
    return replace(res, gpus=len(gpus))


def place_wide(
    frees: Sequence[NodeFree], res: Resources, rule: WidePlacement = SPREAD
) -> list[Placement] | None:
    """Where a wide job goes now by `rule`, one Placement per node (module docstring); None
    when it does not fit now."""
    if sum(spread_count(f, res) for f in frees) < res.gpus:
        return None  # the common case on a busy cluster: decided without sorting anything
    options: list[tuple[int, bool, str, NodeFree, list[int]]] = []
    for free in frees:
        if not has_room(free, res):
            continue
        usable = sorted(usable_gpus(free, res))
        if usable:
            whole = len(free.gpus) == len(free.node.gpus)
            options.append((len(usable), whole, free.node.name, free, usable))
    if sum(o[0] for o in options) < res.gpus:
        return None
    options.sort(key=lambda o: (-o[0], not o[1], o[2]))
    if rule is CONSOLIDATE:
        return _consolidated(options, res.gpus)
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


def _consolidated(
    options: list[tuple[int, bool, str, NodeFree, list[int]]], gpus: int
) -> list[Placement] | None:
    """`place_wide` by the consolidate rule; `options` sorted by free count (descending),
    whole free nodes first, then name."""
    need, out, taken = gpus, [], set()
    for count, whole, name, free, usable in options:
        if whole and count <= need:
            out.append(Placement(name, choose_gpus(free.node, usable, count, free.gpus)))
            taken.add(name)
            need -= count
            if need == 0:
                return out
    # The remainder on one more node: the first (most free GPUs) that covers it, if any.
    for count, _, name, free, usable in options:
        if name not in taken and count >= need:
            out.append(Placement(name, choose_gpus(free.node, usable, need, free.gpus)))
            return out
    return None


def is_wide(res: Resources, nodes: tuple[Node, ...]) -> bool:
    """A whole-GPU job asking for more GPUs of its type than any node has: it runs spread
    over nodes (when PolicyConfig.spread_wide_jobs is on)."""
    return not res.fractional and res.gpus > NodeFacts.of(nodes).widest(res.gpu_type)


class WideShadow(Shadow):
    """The pass's reservation held by a wide job, pinned to the nodes of its placement
    (module docstring). As a `Shadow` it is its first node's (`node`, `spare`, `took`: what a
    reclaim plan reads); `others` are the one-node shadows of the rest. `holds`, `spare_of`
    and `took_on` answer for every node it holds."""

    spread = True

    def __init__(
        self,
        reservation: Reservation,
        at_time: dict[str, NodeFree],
        res: Resources,
        now: float,
    ) -> None:
        first = reservation.node
        super().__init__(reservation, at_time[first], piece(res, reservation.gpus), now)
        self.others = {
            name: Shadow(
                Reservation(reservation.job_id, name, gpus, reservation.time),
                at_time[name],
                piece(res, gpus),
                now,
            )
            for name, gpus in reservation.more
        }
        self.gpus = res.gpus

    def holds(self, node: str) -> bool:
        return node == self.node or node in self.others

    def spare(self, now_free: NodeFree) -> NodeFree:
        """`Shadow.spare` of whichever node it holds `now_free` is."""
        other = self.others.get(now_free.node.name)
        return super().spare(now_free) if other is None else other.spare(now_free)

    def took_on(
        self,
        node: str,
        res: Resources,
        gpus: tuple[int, ...] = (),
        gpu_memory_bytes: int | None = None,
    ) -> None:
        other = self.others.get(node)
        if other is not None:
            other.took(res, gpus, gpu_memory_bytes)
        elif node == self.node:
            self.took(res, gpus, gpu_memory_bytes)

    def place_beside(self, index: NodeIndex, res: Resources) -> Placement | None:
        """Where a one-node job that outlasts the reservation goes now: `place`'s best fit
        with each node it holds seen through its spare view. Spare views only take away, so
        when the best fit on what is free is on a node it does not hold, the answer is the
        better of that node and the spare views (best fit is a key per node); only when it
        is on a held node are all nodes looked at again."""
        best = index.place(res)
        if best is None:
            return None
        if self.holds(best.node):
            return place([self.spare_of(f) for f in index.frees], res)
        spares = [self.spare(index.by_name[name]) for name in (self.node, *self.others)]
        return place([index.by_name[best.node], *spares], res)

    def reserved(self) -> Reserved:
        """The reservation as a status names it: all its GPUs and nodes (policy/reasons.py)."""
        nodes = 1 + len(self.others)
        return Reserved(self.reservation, self.time - self.now, self.gpus, nodes, wide=True)


def _held_gpus(
    placement: Placement, at: NodeFree, res: Resources, rule: WidePlacement
) -> tuple[int, ...]:
    """The GPUs a wide reservation holds on one node of its placement: those the job will
    use there; by the consolidate rule, every GPU of a node it takes whole (module
    docstring)."""
    whole = len(at.gpus) == len(at.node.gpus)
    if rule is CONSOLIDATE and whole and len(placement.gpus) == len(usable_gpus(at, res)):
        return tuple(sorted(at.gpus))
    return placement.gpus


def reserve_wide(
    job_id: int,
    res: Resources,
    frees: Sequence[NodeFree],
    releases: Sequence[Release],
    now: float,
    rule: WidePlacement = SPREAD,
) -> WideShadow | None:
    """The reservation for a wide job that does not fit now: the earliest release time by
    which what is free plus what has ended fits it (`place_wide` by `rule` then), pinned to
    the nodes and GPUs of that placement. None if it never will (only when it is
    unsatisfiable, ruled out by the caller: once everything has ended, either rule places a
    job the pool's total covers)."""
    at = {f.node.name: f.copy() for f in frees}
    counts = {name: spread_count(f, res) for name, f in at.items()}
    total = sum(counts.values())
    ordered = sorted((r for r in releases if r.node in at), key=lambda r: r.end)
    time, i = now, 0
    # By count first (necessary for both rules), then, for consolidate, the rule itself.
    while total < res.gpus or (
        rule is CONSOLIDATE and place_wide([at[f.node.name] for f in frees], res, rule) is None
    ):
        if i == len(ordered):
            return None
        time = ordered[i].end
        # Everything ending at the same time is back before the check.
        while i < len(ordered) and ordered[i].end == time:
            name = ordered[i].node
            give_back(at[name], ordered[i])
            total -= counts[name]
            counts[name] = spread_count(at[name], res)
            total += counts[name]
            i += 1
    placements = place_wide([at[f.node.name] for f in frees], res, rule)
    assert placements is not None  # it fits by the rule, by the loop
    held = [(p.node, _held_gpus(p, at[p.node], res, rule)) for p in placements]
    (node, gpus), more = held[0], tuple(held[1:])
    reservation = Reservation(job_id, node, gpus, time, more=more)
    return WideShadow(reservation, {name: at[name] for name, _ in held}, res, now)
