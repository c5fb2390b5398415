"""Drained GPUs in a pass (core/drain.py): no job starts on one, and a job that could run
only with drained GPUs waits with `Drained`, not `Resources`.

`Snapshot.drained` names them by (node, GPU index). `with_drains` gives the pass a snapshot in
which each drained GPU is held for good by a holder of its own: a running job that is not
preemptible, whose time limit never ends, with an id below 0 (`HOLDER_IDS`). So every stage
(free view, placement, backfill's timeline, reclaim, preemption, defragmentation) sees the
GPU taken now and in the future, with no rule of its own. A real job still running on a
drained GPU (a drain without --now waits for it) has that GPU moved to the holder: it is made
not preemptible (stopping it would free nothing a job may use), and a whole-GPU job's holder
counts for the job's project, so its project's GPUs in use stay exact; a holder of an idle
GPU, or of a shared one, counts for `DRAIN_PROJECT`, which has no quota.

`drained_status`: for a job that waits with `Resources`, whether the pool without its
drained GPUs could never run it (feasibility's check on the nodes less those GPUs): then it
waits for a resume, and says so, with the figures of what the drains take away.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace

from gpupool.core.hardware import Node
from gpupool.core.job import Resources
from gpupool.policy.feasibility import check_satisfiable
from gpupool.policy.request import holds_whole_gpus
from gpupool.policy.snapshot import PendingJob, RunningJob, Snapshot
from gpupool.policy.status import Code, Rule, Status

DRAIN_PROJECT = ""  # what a holder of an idle or shared drained GPU counts for: no quota
_ONE_GPU = Resources(gpus=1)


def holder_id(place: int) -> int:
    """The id of the `place`-th holder (0, 1, ...): below 0, never a job's."""
    return -1 - place


def drained_on(nodes: Iterable[Node], drained: frozenset[tuple[str, int]]) -> list[tuple[str, int]]:
    """The drained GPUs that exist on `nodes`, in (node, GPU) order."""
    return sorted((n.name, g.index) for n in nodes for g in n.gpus if (n.name, g.index) in drained)


def with_drains(snapshot: Snapshot, now: float) -> Snapshot:
    """The snapshot a pass schedules on (module docstring); the same one without drains."""
    drained = snapshot.drained
    if not drained:
        return snapshot
    keys = drained_on(snapshot.nodes, drained)
    if not keys:
        return snapshot
    on = set(keys)
    project_of: dict[tuple[str, int], str] = {}
    running: list[RunningJob] = []
    for r in snapshot.running:
        mine = [g for g in r.gpus if (r.node, g) in on]
        if not mine:
            running.append(r)
            continue
        whole = holds_whole_gpus(r.resources, r.gpu_memory_bytes)
        for g in mine:
            project_of[(r.node, g)] = r.project if whole else DRAIN_PROJECT
        kept = tuple(g for g in r.gpus if (r.node, g) not in on)
        running.append(replace(r, gpus=kept, preemptible=False))
    for place, (node, gpu) in enumerate(keys):
        running.append(
            RunningJob(
                holder_id(place),
                node,
                (gpu,),
                _ONE_GPU,
                now,
                project=project_of.get((node, gpu), DRAIN_PROJECT),
                time_limit_s=math.inf,
                preemptible=False,
            )
        )
    return replace(snapshot, running=tuple(running), running_view=None)


def without_drained(nodes: Iterable[Node], drained: frozenset[tuple[str, int]]) -> tuple[Node, ...]:
    """The nodes with their drained GPUs (and those GPUs' links) taken out."""
    out = []
    for n in nodes:
        if not any((n.name, g.index) in drained for g in n.gpus):
            out.append(n)
            continue
        gpus = tuple(g for g in n.gpus if (n.name, g.index) not in drained)
        keep = {g.index for g in gpus}
        links = tuple(lk for lk in n.links if lk.a in keep and lk.b in keep)
        out.append(replace(n, gpus=gpus, links=links))
    return tuple(out)


class DrainCheck:
    """`drained_status` for the jobs of one pass: the nodes less their drained GPUs built
    once, each distinct request checked once."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.nodes = without_drained(snapshot.nodes, snapshot.drained)
        self.spread = snapshot.config.spread_wide_jobs
        self._seen: dict[Resources, Status | None] = {}

    def status(self, job: PendingJob, waiting: Status) -> Status | None:
        """`Drained` for a job that waits with `Resources` and could never run on the
        GPUs that are not drained; None: the drains are not what keeps it."""
        if waiting.code is not Code.RESOURCES:
            return None
        res = job.resources
        if res not in self._seen:
            never = check_satisfiable(res, self.nodes, self.spread)
            # No reservation: it can start only after a resume, at no time the timeline
            # knows (a reservation on drained GPUs would be at no time at all).
            drained = (
                None if never is None else replace(never, code=Code.DRAINED, rule=Rule.DRAINED)
            )
            self._seen[res] = drained
        return self._seen[res]
