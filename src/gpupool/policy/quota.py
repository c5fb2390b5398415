"""Project quotas, limits and weights in one pass (Run:ai's model): who may start, and in what
order borrowers share the idle GPUs.

A project's **in use** is the GPUs its running jobs hold (a reclaim's victims until they
exit), plus what this pass starts or reclaims for it. A job counts by `core.job.gpu_count`, the
rule every view uses: a fractional job counts as its fraction, `gpu_fraction` when given, else
its GPU memory over the memory of its GPU (for a pending job, of the largest GPU in the pool:
its GPU is not chosen yet), else one whole GPU.

- **Limit**: a project never goes above `limit`; a job that would waits with `Quota`.
- **Quota**: a job that keeps its project within its quota is *guaranteed*: it is taken first,
  in queue order, and when it does not fit it may reclaim borrowed GPUs (`policy/reclaim.py`).
- **Borrowing**: a job above its project's quota runs only on idle GPUs and only if it is
  preemptible (`PendingJob.preemptible`; interactive jobs are not, by default); a
  non-preemptible one waits with `Quota`.
- A job one of these rules holds back for good (more than its project's limit by itself, or
  non-preemptible and more than its quota by itself) waits with `QuotaNeverFits` instead,
  saying what to change (`policy/quota_feasibility.py`, which also refuses it at submit). Borrowers are taken after every guaranteed job, each
  priority class in turn (the class stays a hard tier), and inside a class the project with
  the least borrowed per weight, `(in use - quota) / weight`, goes next (queue order inside a
  project and between ties). As each start raises its project's figure, idle GPUs go to
  borrowers roughly in proportion to their weights (`policy/borrowers.py`). While GPUs are reclaimed for one
  of its jobs, a project's borrowers wait (`Quota`): started now, they would take that job's
  place within the quota by the next pass, and the victims would have been stopped for
  nothing.

A project missing from `Snapshot.projects` has quota 0, no limit and weight 1. Quotas are in
force only when some project has a quota above 0: with none, nothing is guaranteed, so there is
nothing to reclaim for and nothing to borrow from; every job then takes the queue order as
before (a fresh box with only the `default` project, quota 0, schedules as without projects,
interactive jobs included), and only limits apply. With no projects at all, none of this runs.

The book answers for one job at a time (`verdict`, `holds_back`); the pass owns the queue:
it takes the guaranteed jobs and those quotas do not concern first, in queue order, then the
borrowers in `BorrowerQueue` order, and tells the book what started (`add`).

Cost: O(1) per job, and O(borrowers x log projects) for the borrowers' order (plus scans in C,
at most 16 over the borrowers of a class: `policy/borrowers.py`).
"""

from __future__ import annotations

import math
from enum import Enum

from gpupool.core.job import PRIORITY_CLASSES, Resources, gpu_count
from gpupool.core.project import Project
from gpupool.policy.node_facts import NodeFacts
from gpupool.policy.quota_feasibility import EPS, never_fits
from gpupool.policy.reasons import Dimension, Insufficient
from gpupool.policy.request import holds_whole_gpus
from gpupool.policy.room_limits import RoomLimits, any_room_limits
from gpupool.policy.snapshot import PendingJob, RunningJob, Snapshot
from gpupool.policy.status import Code, Rule, Status
from gpupool.policy.user_caps import UserCaps, any_caps

NO_PROJECT = Project("default")  # quota 0, no limit, weight 1: what a missing project gets
_EXACT = 2.0**40  # below it, `in use + GPUs` rounds by far less than a GPU: `_least_over`


class Verdict(Enum):
    GUARANTEED = "guaranteed"  # within its project's quota: goes first, may reclaim
    BORROW = "borrow"  # above quota, preemptible: after the guaranteed jobs, on idle GPUs only
    FREE = "free"  # quotas are not in force (or a job without GPUs): queue order


class QuotaBook:
    """Each project's quota, limit, weight and GPUs in use during one pass."""

    def __init__(
        self,
        snapshot: Snapshot,
        whole_in_use: dict[str, float] | None = None,
        partial: list[RunningJob] | None = None,
    ) -> None:
        """`whole_in_use` and `partial`: the running jobs' GPUs by project as the pass's free
        view counted them (free_view.FreeView), to save a walk; else counted here."""
        self.projects = snapshot.projects
        self.guarantees = any(p.quota > 0 for p in self.projects.values())
        # Per-user caps (policy/user_caps.py) hold jobs back as limits do.
        self.caps: UserCaps | None = None
        self.limits = any(p.limit is not None for p in self.projects.values())
        facts = NodeFacts.of(snapshot.nodes)
        self._gpu_mem = facts.gpu_memory
        self._largest = facts.largest_gpu_memory
        if whole_in_use is None or partial is None:
            whole_in_use, partial = {}, []
            for r in snapshot.running:
                if holds_whole_gpus(r.resources, r.gpu_memory_bytes):
                    whole_in_use[r.project] = whole_in_use.get(r.project, 0.0) + len(r.gpus)
                else:
                    partial.append(r)
        self.in_use: dict[str, float] = dict(whole_in_use)
        for r in partial:
            self.in_use[r.project] = self.in_use.get(r.project, 0.0) + self.held(r)
        if any_caps(self.projects, snapshot.config):
            self.caps = UserCaps(self.projects, snapshot.config, snapshot.running, self.held)
            self.limits = True
        self.room: RoomLimits | None = None  # CPU and memory limits (policy/room_limits.py)
        if any_room_limits(self.projects):
            self.room = RoomLimits(self.projects, snapshot.running)
            self.limits = True
        self._asks: dict[tuple[int, int | None, float | None], float] = {}
        # Statuses said already, by (rule, project, in use, GPUs asked): the same figures
        # give the same status; a queue holds many jobs of one project held back alike.
        self._said: dict[tuple[Rule, str, float, float], Status] = {}
        self._never_said: dict[tuple[str, float, bool, bool], Status | None] = {}
        self.reclaiming: dict[str, int] = {}  # project -> its first job reclaimed for
        # Most of a long queue borrows (a whole-GPU, preemptible job above its project's
        # quota): with no limits, that is `gpus >= self._least_over(project)`, which holds
        # until a figure in use changes (`add`), instead of `admit` (`verdict`).
        self._fast = self.guarantees and not self.limits
        self._least: dict[str, float] = {}

    @staticmethod
    def of(
        snapshot: Snapshot,
        whole_in_use: dict[str, float] | None = None,
        partial: list[RunningJob] | None = None,
    ) -> QuotaBook | None:
        """None when no project has a quota or a limit, and no per-user cap is set: then
        quotas change nothing."""
        projects = snapshot.projects
        if not (
            any(p.quota > 0 or p.limit is not None for p in projects.values())
            or any_caps(projects, snapshot.config)
            or any_room_limits(projects)
        ):
            return None
        return QuotaBook(snapshot, whole_in_use, partial)

    def project(self, name: str) -> Project:
        return self.projects.get(name, NO_PROJECT)

    def held(self, r: RunningJob) -> float:
        """The GPUs a running job counts for (core.job.gpu_count, the rule every view uses)."""
        res = r.resources
        if holds_whole_gpus(res, r.gpu_memory_bytes):
            return float(len(r.gpus))
        total = self._gpu_mem.get((r.node, r.gpus[0])) if r.gpus else None
        return gpu_count(res, len(r.gpus), r.gpu_memory_bytes, total)

    def ask(self, res: Resources) -> float:
        """The GPUs a pending job would count for (core.job.gpu_count: a GPU memory request
        over the largest GPU in the pool, its GPU not being chosen yet)."""
        key = (res.gpus, res.gpu_memory_bytes, res.gpu_fraction)
        got = self._asks.get(key)
        if got is None:
            got = self._asks[key] = gpu_count(res, gpu_memory_bytes=self._largest)
        return got

    def share(self, name: str) -> float:
        """How far above its quota a project is, per weight (below 0: under its quota)."""
        p = self.projects.get(name, NO_PROJECT)
        return (self.in_use.get(name, 0.0) - p.quota) / p.weight

    def verdict(self, job: PendingJob) -> Verdict | Status:
        """`admit`, answered for most borrowers from the project's borrow floor (the fast
        path: the same verdict, tested against `admit`; SchedulingPass.run has it in line)."""
        if self._fast:
            res = job.resources
            if res.gpu_memory_bytes is None and res.gpu_fraction is None and job.preemptible:
                over = self._least.get(job.project)
                if over is None:
                    over = self.borrow_floor(job.project)
                if res.gpus >= over:
                    return Verdict.BORROW
        return self.admit(job)

    def borrow_floors(self) -> dict[str, float] | None:
        """The borrow floors worked out so far, by project (emptied by `add`, when they may no
        longer hold); None when the fast path does not apply (limits, or no quota). A
        preemptible job asking whole GPUs, at least its project's floor, borrows."""
        return self._least if self._fast else None

    def borrow_floor(self, project: str) -> float:
        """The fewest whole GPUs with which a job of `project` is over its quota
        (`_least_over`), remembered in `borrow_floors` until the next `add`."""
        floor = self._least[project] = self._least_over(project)
        return floor

    def admit(self, job: PendingJob) -> Verdict | Status:
        """Whether the job may start as far as its project goes, and how (module docstring)."""
        res = job.resources
        if res.gpu_memory_bytes is None and res.gpu_fraction is None:
            need = float(res.gpus)
        else:
            need = self.ask(res)
        if self.caps is not None and (capped := self.caps.held(job, need)) is not None:
            return capped
        if self.room is not None and (roomless := self.room.held(job)) is not None:
            return roomless
        if need <= 0:
            return Verdict.FREE
        name = job.project
        p, use = self.projects.get(name, NO_PROJECT), self.in_use.get(name, 0.0)
        if p.limit is not None and use + need > p.limit + EPS:
            return self._never(job, need) or self._held(Rule.OVER_LIMIT, name, use, need)
        if not self.guarantees:
            return Verdict.FREE
        if use + need <= p.quota + EPS:
            return Verdict.GUARANTEED
        if not job.preemptible:
            return self._never(job, need) or self._held(Rule.NOT_PREEMPTIBLE, name, use, need)
        return Verdict.BORROW

    def holds_back(self, job: PendingJob) -> Status | None:
        """A borrower's `Quota` status when its project holds it back now, at its turn in the
        borrowers' order: its limit, or a reclaim under way for the project (module
        docstring); None: it may borrow."""
        if not (self.limits or job.project in self.reclaiming):
            return None
        verdict = self.admit(job) if self.limits else Verdict.BORROW
        reclaimed_for = self.reclaiming.get(job.project)
        if reclaimed_for is not None:
            return self._held(Rule.RECLAIMING, job.project, float(reclaimed_for), 0.0)
        return verdict if isinstance(verdict, Status) else None

    def _never(self, job: PendingJob, need: float) -> Status | None:
        """`QuotaNeverFits` for a job held back that its project can never let start
        (quota_feasibility.py), else None: it waits its turn with `Quota`."""
        interactive = job.priority >= PRIORITY_CLASSES["interactive"]
        key = (job.project, need, job.preemptible, interactive)
        if key not in self._never_said:
            self._never_said[key] = never_fits(
                need,
                job.preemptible,
                job.priority,
                job.project,
                self.projects.get(job.project),
                self.guarantees,
            )
        return self._never_said[key]

    def _held(self, rule: Rule, name: str, use: float, need: float) -> Status:
        """The `Quota` status of a job asking for `need` GPUs that its project `name` holds
        back by `rule` with `use` GPUs in use (RECLAIMING: `use` is the job reclaimed for)."""
        key = (rule, name, use, need)
        said = self._said.get(key)
        if said is None:
            p = self.project(name)
            if rule is Rule.RECLAIMING:
                said = Status(Code.QUOTA, rule, jobs=(int(use),), project=name)
            else:
                cap = p.quota if rule is Rule.NOT_PREEMPTIBLE else p.limit
                assert cap is not None
                dim = Dimension.QUOTA if rule is Rule.NOT_PREEMPTIBLE else Dimension.LIMIT
                short = Insufficient(None, dim, need, cap - use, cap)
                said = Status(Code.QUOTA, rule, short=short, project=name)
            self._said[key] = said
        return said

    def _least_over(self, name: str) -> float:
        """The fewest whole GPUs a job of `name` can ask for and go above its quota now: the
        least `g >= 1` for which `admit`'s test `use + float(g) <= quota + EPS` fails (the sum
        only grows with `g`, so every larger `g` fails it too). inf where there is none, or
        where the figures are too large for a few steps to find it: then `admit` decides."""
        p, use = self.projects.get(name, NO_PROJECT), self.in_use.get(name, 0.0)
        bound = p.quota + EPS
        if not use + 1.0 <= bound:
            return 1
        room = bound - use
        if not (abs(use) < _EXACT and abs(room) < _EXACT):  # also inf and nan
            return math.inf
        g = max(1, int(room))  # a guess: the sums round, so step to the least that fails
        while g > 1 and not use + float(g - 1) <= bound:
            g -= 1
        while use + float(g) <= bound:
            g += 1
        return g

    def add(
        self, name: str, gpus: float, user: str | None = None, res: Resources | None = None
    ) -> None:
        """A job of `name` starts (or is reclaimed for: gpus > 0), or is preempted (< 0);
        `user`: whose job starts, for the per-user caps; `res`: what it asks, for the CPU and
        memory limits."""
        self.in_use[name] = self.in_use.get(name, 0.0) + gpus
        if user is not None and self.caps is not None and gpus >= 0:
            self.caps.took(name, user, gpus)
        if res is not None and self.room is not None and gpus >= 0:
            self.room.took(name, res)
        self._least.clear()  # what `_least_over` said may no longer hold
