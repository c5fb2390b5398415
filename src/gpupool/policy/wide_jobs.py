"""The pass's handling of jobs wider than any node (`PolicyConfig.spread_wide_jobs`: the
simulator's; the daemon on one box keeps it off and never reaches this module). Placement,
reservation and their rules are policy/wide.py's; this is how `SchedulingPass` takes such a
job: it starts if it fits now and cannot delay the reservation, else it waits, taking the
reservation if there is none yet.

The pass makes a `WideJobs` and hands it itself. This module never imports the pass's module
(policy/scheduling_pass.py): it names the pass by what it reads and writes (`PassState`), so
the two form no import cycle (tests/unit/test_policy_acyclic.py).
"""

from __future__ import annotations

from typing import Protocol

from gpupool.core.job import Resources
from gpupool.policy.backfill import Shadow
from gpupool.policy.filters.topology import check_spread
from gpupool.policy.learned import Learned
from gpupool.policy.node_index import NodeIndex
from gpupool.policy.placement import Placement
from gpupool.policy.reclaim import ReclaimPlanner
from gpupool.policy.request import counts_only
from gpupool.policy.snapshot import PendingJob, PolicyConfig, Snapshot, Start, WidePlacement
from gpupool.policy.status import Code, Rule, Status
from gpupool.policy.timeline import Release
from gpupool.policy.wide import is_wide, piece, place_wide, reserve_wide


class PassState(Protocol):
    """The pass as `WideJobs` sees it: policy/scheduling_pass.py's `SchedulingPass`. It writes
    the pass's index, reservation timeline and starts in place, and counts a start in
    `version`; it reassigns nothing else."""

    version: int  # one more at each start

    @property
    def snapshot(self) -> Snapshot: ...
    @property
    def config(self) -> PolicyConfig: ...
    @property
    def now(self) -> float: ...
    @property
    def free(self) -> NodeIndex: ...
    @property
    def shadow(self) -> Shadow | None: ...
    @property
    def reclaims(self) -> ReclaimPlanner | None: ...
    @property
    def started(self) -> list[Release]: ...
    @property
    def starts(self) -> list[Start]: ...
    def behind_status(self, shadow: Shadow) -> Status: ...
    def reserve(self, job: PendingJob, req: Learned, status: Status) -> Status: ...


class WideJobs:
    def __init__(self, state: PassState) -> None:
        self.state = state
        self.rule = state.config.wide_placement

    def is_wide(self, res: Resources) -> bool:
        return is_wide(res, self.state.snapshot.nodes)

    def try_start(self, job: PendingJob, req: Learned, end: float) -> Status | None:
        """`SchedulingPass._try_start` for a wide job. Without a reservation it starts if it
        fits now, else takes the reservation. With one, it starts only if it cannot delay it:
        it ends by then, or it keeps to the spare view of each node the reservation holds
        (one node's, or a wide job's several: policy/wide.py). A guaranteed
        wide job that does not fit reserves at once, even while quotas say "reclaim first":
        reclaim plans fit one node, so no reclaim could start it (the planner finds no plan
        and the status stays)."""
        state = self.state
        res, shadow, frees = job.resources, state.shadow, state.free.frees
        if counts_only(res) and state.free.total() < res.gpus:
            # It counts GPUs only and the pool has too few free: what every branch below
            # finds, from the index's counts (on a busy cluster most wide jobs stop here).
            return self.no_fit(job, req)
        if shadow is None or not shadow.outlasts(end):
            placements = place_wide(frees, res, self.rule)
            if placements is None:
                return self.no_fit(job, req)
            self._start(job, placements, end, None)
            return None
        if not req.no_spare:
            placements = place_wide([shadow.spare_of(f) for f in frees], res, self.rule)
            if placements is not None:
                self._start(job, placements, end, shadow)
                return None
            req.no_spare = True
        if place_wide(frees, res, self.rule) is None:
            return self.no_fit(job, req)
        req.behind, req.behind_at = state.behind_status(shadow), state.version
        return req.behind

    def no_fit(self, job: PendingJob, req: Learned) -> Status:
        """`Resources` for a wide job that fits nowhere now (remembered for the request),
        with the reservation if there is none yet."""
        state = self.state
        short, wide = check_spread(
            state.free.frees,
            job.resources,
            state.snapshot.nodes,
            state.free.total(),
            whole_nodes_only=self.rule is WidePlacement.CONSOLIDATE,
        )
        req.no_fit = Status(
            Code.RESOURCES, Rule.WIDE_NO_FIT, short=short, wide=wide, request=job.resources
        )
        return req.no_fit if state.shadow is not None else state.reserve(job, req, req.no_fit)

    def reserve(self, job: PendingJob) -> Shadow | None:
        state = self.state
        taken = () if state.reclaims is None else state.reclaims.taken
        releases = state.free.releases(taken) + state.started
        return reserve_wide(job.id, job.resources, state.free.frees, releases, state.now, self.rule)

    def _start(
        self, job: PendingJob, placements: list[Placement], end: float, shadow: Shadow | None
    ) -> None:
        """One Start (its first node; `more`: the others), one Release per node. `shadow`:
        the reservation it outlasts, whose spare it used on the nodes that holds."""
        state = self.state
        for p in placements:
            part = piece(job.resources, p.gpus)
            state.free.take(p, part)
            if shadow is not None:
                shadow.took_on(p.node, part)
            state.started.append(Release(end, p.node, p.gpus, part))
        state.version += 1
        first, more = placements[0], tuple((p.node, p.gpus) for p in placements[1:])
        state.starts.append(Start(job.id, first.node, first.gpus, more=more))
