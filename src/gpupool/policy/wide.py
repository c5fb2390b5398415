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
  request fits across the pool by the placement rule, with what is free now plus what ends by then. The pass's
  `Reservation` is one node's worth (its first node and GPUs there); `reserved()` names the
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

from collections.abc import Sequence
from dataclasses import replace

from gpupool.core.hardware import Node
from gpupool.core.job import Resources
from gpupool.policy.backfill import Shadow
from gpupool.policy.filters.gpu_count import usable_gpus
from gpupool.policy.filters.topology import has_room, spread_count
from gpupool.policy.node_facts import NodeFacts
from gpupool.policy.node_free import NodeFree
from gpupool.policy.placement import Placement, choose_gpus
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
    """The pass's reservation held by a wide job. As a `Shadow` it stands for the first node
    of the reserved placement (what `Reservation` can say, what a reclaim plan keeps off);
    `placements` is all of it. The pass lets no job that would outlast it start (module
    docstring): it checks `conservative` before the one-node spare rule."""

    conservative = True

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

    def reserved(self) -> Reserved:
        """The reservation as a status names it: all its GPUs and nodes (policy/reasons.py)."""
        return Reserved(
            self.reservation, self.time - self.now, self.gpus, len(self.placements), wide=True
        )


def reserve_wide(
    job_id: int,
    res: Resources,
    frees: Sequence[NodeFree],
    releases: Sequence[Release],
    now: float,
    rule: WidePlacement = SPREAD,
) -> WideShadow | None:
    """The reservation for a wide job that does not fit now: the earliest release time by
    which what is free plus what has ended fits it (`place_wide` by `rule` then). None if it
    never will (only when it is unsatisfiable, ruled out by the caller: once everything has
    ended, either rule places a job the pool's total covers)."""
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
    first = placements[0]
    reservation = Reservation(job_id, first.node, first.gpus, time)
    return WideShadow(reservation, at[first.node], res, now, placements)
