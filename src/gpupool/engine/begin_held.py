"""The status of the jobs a `--begin` time keeps out of the pass (engine/policy_inputs.py).

A pass never takes them (Slurm's scheduler leaves such jobs out of its queue too), so the
engine says of each what the pass said of it when it took them all: `BeginTime`, its begin
time as the estimated start (a lower bound), unless no node of the pool could ever run it
(`Unsatisfiable`, which the pass put first: a job held till tonight that can never run is
told so now). The statuses are made once per change of the held jobs or of the nodes, and
added to each pass's decision, as the gating's held jobs are (engine/gating.py).

What a job left out does not do, and did when every pass took it: take a fair share of its
own (`policy/fairshare.py` counts the (project, user) pairs of the jobs a pass takes and of
those running), appear in the pass's order (`gpupool queue` lists it after the jobs a pass
takes, by id, with the jobs held by `hold` or `--after`), and have priority factors
(`queue --priority`, which lists the jobs the last pass ranked, leaves it out). A job whose time has come is taken by the next pass
as any other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from gpupool.core.hardware import Node
from gpupool.policy import Decision, PendingJob, Status
from gpupool.policy.feasibility import check_satisfiable
from gpupool.policy.request import RequestKey, request_key
from gpupool.policy.scheduling_pass import HELD


class BeginHeld:
    """The statuses and estimated starts of the jobs held by --begin, kept up to date one
    job at a time (all again when the nodes change)."""

    def __init__(self) -> None:
        self._nodes: tuple[tuple[Node, ...], bool] | None = None
        self._statuses: dict[int, Status] = {}
        self._estimates: dict[int, float] = {}
        self._never: dict[RequestKey, Status | None] = {}  # by request, on `_nodes`
        # The held jobs the last decision said otherwise of (gating's hold or --after
        # came first): once it no longer does, their own status is new again.
        self._covered: set[int] = set()

    def merged_into(
        self,
        decision: Decision,
        later: Mapping[int, PendingJob],
        changes: tuple[bool, set[int]],
        nodes: tuple[Node, ...],
        spread: bool,
    ) -> tuple[Decision, dict[int, Status]]:
        """`decision` with the status of every job of `later` (the held jobs) added, the
        decision's own first, and their begin time as estimated start where they may run;
        and the statuses that are new since the last call (`changes`: as
        `PolicyInputs.later_changes` tells; and those the last decision said otherwise of,
        a hold for one, that this one does not), which the engine compares with the
        reasons stored (the others it compared before)."""
        reset, changed = changes
        if (nodes, spread) != self._nodes:
            self._nodes, self._never, reset = (nodes, spread), {}, True
        if reset:
            self._statuses, self._estimates, changed = {}, {}, set(later)
        fresh: dict[int, Status] = {}
        for job_id in changed:
            job = later.get(job_id)
            if job is None:
                self._statuses.pop(job_id, None)
                self._estimates.pop(job_id, None)
                continue
            status = fresh[job_id] = self._statuses[job_id] = self._status(job)
            if status is HELD:
                assert job.begin_time is not None  # a held job has one
                self._estimates[job_id] = job.begin_time
            else:
                self._estimates.pop(job_id, None)
        covered = decision.pending.keys() & self._statuses.keys()
        for job_id in self._covered - covered:
            if job_id in self._statuses:
                fresh[job_id] = self._statuses[job_id]
        self._covered = covered
        if not self._statuses:
            return decision, fresh
        merged = replace(
            decision,
            pending={**self._statuses, **decision.pending},
            estimated_start={**self._estimates, **decision.estimated_start},
        )
        return merged, fresh

    def _status(self, job: PendingJob) -> Status:
        key = request_key(job.resources)
        if key not in self._never:
            assert self._nodes is not None
            self._never[key] = check_satisfiable(job.resources, *self._nodes)
        return self._never[key] or HELD
