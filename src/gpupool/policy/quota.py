"""Project quotas, limits and weights in one pass (Run:ai's model): who may start, and in what
order borrowers share the idle GPUs.

A project's **in use** is the GPUs its running jobs hold (a reclaim's victims until they
exit), plus what this pass starts or reclaims for it. A job counts by `core.job.gpu_count`, the
rule every view uses: a fractional job counts as its fraction, `gpu_fraction` when given, else
its GPU memory over the memory of its GPU (for a pending job, of the largest GPU in the pool:
its GPU is not chosen yet), else one whole GPU.

- **Limit**: a project never goes above `limit`; a job that would waits with `Quota`.
- **Quota**: a job that keeps its project within its quota is a *claim*: it is taken first, in
  queue order, and when it does not fit it may reclaim borrowed GPUs (`policy/preemption.py`).
- **Borrowing**: a job above its project's quota runs only on idle GPUs and only if it is
  preemptible (`PendingJob.preemptible`; interactive jobs are not, by default); a
  non-preemptible one waits with `Quota`.
- A job one of these rules holds back for good (more than its project's limit by itself, or
  non-preemptible and more than its quota by itself) waits with `QuotaNeverFits` instead,
  saying what to change (`policy/quota_feasibility.py`, which also refuses it at submit). Borrowers are taken after every claim, each
  priority class in turn (the class stays a hard tier), and inside a class the project with
  the least borrowed per weight, `(in use - quota) / weight`, goes next (queue order inside a
  project and between ties). As each start raises its project's figure, idle GPUs go to
  borrowers roughly in proportion to their weights. While GPUs are being reclaimed for one
  of its jobs, a project's borrowers wait (`Quota`): started now, they would take that job's
  place within the quota by the next pass, and the victims would have been stopped for
  nothing.

A project missing from `Snapshot.projects` has quota 0, no limit and weight 1. Quotas are in
force only when some project has a quota above 0: with none, nothing is guaranteed, so there is
nothing to reclaim for and nothing to borrow from; every job then takes the queue order as
before (a fresh box with only the `default` project, quota 0, schedules as without projects,
interactive jobs included), and only limits apply. With no projects at all, none of this runs.

Cost: O(1) per job, and O(borrowers x log projects) for the borrowers' order (plus scans in C,
at most 16 over the borrowers of a class: `QuotaBook.borrowers`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator
from enum import Enum
from itertools import chain, compress
from operator import attrgetter

from gpupool.core.job import PRIORITY_CLASSES, Resources, gpu_count
from gpupool.core.project import Project, fmt_gpus
from gpupool.policy.node_facts import NodeFacts
from gpupool.policy.quota_feasibility import EPS, never_fits
from gpupool.policy.snapshot import PendingJob, RunningJob, Snapshot
from gpupool.policy.status import Code, Status

_NO_PROJECT = Project("default")  # quota 0, no limit, weight 1: what a missing project gets
_priority = attrgetter("priority")
_project = attrgetter("project")
_EXACT = 2.0**40  # below it, `in use + GPUs` rounds by far less than a GPU: `_least_over`


class Verdict(Enum):
    CLAIM = "claim"  # within its project's quota: goes first, may reclaim
    BORROW = "borrow"  # above quota, preemptible: after the claims, on idle GPUs only
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
        self.limits = any(p.limit is not None for p in self.projects.values())
        facts = NodeFacts.of(snapshot.nodes)
        self._gpu_mem = facts.gpu_memory
        self._largest = facts.largest_gpu_memory
        if whole_in_use is None or partial is None:
            whole_in_use, partial = {}, []
            for r in snapshot.running:
                res = r.resources
                if (
                    res.gpu_fraction is None
                    and res.gpu_memory_bytes is None
                    and r.gpu_memory_bytes is None
                ):
                    whole_in_use[r.project] = whole_in_use.get(r.project, 0.0) + len(r.gpus)
                else:
                    partial.append(r)
        self.in_use: dict[str, float] = dict(whole_in_use)
        for r in partial:
            self.in_use[r.project] = self.in_use.get(r.project, 0.0) + self.held(r)
        self._asks: dict[tuple[int, int | None, float | None], float] = {}
        self._said: dict[tuple[str, str, float], Status] = {}
        self._never_said: dict[tuple[str, float, bool, bool], Status | None] = {}
        self.claiming = False  # a claim is being tried (admitted)
        self.reclaiming: dict[str, int] = {}  # project -> its first job reclaimed for

    @staticmethod
    def of(
        snapshot: Snapshot,
        whole_in_use: dict[str, float] | None = None,
        partial: list[RunningJob] | None = None,
    ) -> QuotaBook | None:
        """None when no project has a quota or a limit: then quotas change nothing."""
        if not any(p.quota > 0 or p.limit is not None for p in snapshot.projects.values()):
            return None
        return QuotaBook(snapshot, whole_in_use, partial)

    def project(self, name: str) -> Project:
        return self.projects.get(name, _NO_PROJECT)

    def held(self, r: RunningJob) -> float:
        """The GPUs a running job counts for (core.job.gpu_count, the rule every view uses)."""
        res = r.resources
        if res.gpu_fraction is None and res.gpu_memory_bytes is None and r.gpu_memory_bytes is None:
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
        p = self.projects.get(name, _NO_PROJECT)
        return (self.in_use.get(name, 0.0) - p.quota) / p.weight

    def admit(self, job: PendingJob) -> Verdict | Status:
        """Whether the job may start as far as its project goes, and how (module docstring)."""
        res = job.resources
        if res.gpu_memory_bytes is None and res.gpu_fraction is None:
            need = float(res.gpus)
        else:
            need = self.ask(res)
        if need <= 0:
            return Verdict.FREE
        name = job.project
        p, use = self.projects.get(name, _NO_PROJECT), self.in_use.get(name, 0.0)
        if p.limit is not None and use + need > p.limit + EPS:
            return self._never(job, need) or self._status("limit", name, use)
        if not self.guarantees:
            return Verdict.FREE
        if use + need <= p.quota + EPS:
            return Verdict.CLAIM
        if not job.preemptible:
            return self._never(job, need) or self._status("borrow", name, use)
        return Verdict.BORROW

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

    def _status(self, kind: str, name: str, use: float) -> Status:
        said = self._said.get((kind, name, use))
        if said is None:
            p = self.project(name)
            if kind == "limit":
                text = f"project {name}: limit {fmt_gpus(p.limit)}, in use {fmt_gpus(use)}"
            elif kind == "reclaiming":
                text = (
                    f"project {name}: GPUs are being reclaimed for its job {use:.0f}, within "
                    "its quota; its jobs borrow again once that one starts"
                )
            else:
                text = (
                    f"project {name}: quota {fmt_gpus(p.quota)}, in use {fmt_gpus(use)}; "
                    "borrowing needs --preemptible"
                )
            said = self._said[(kind, name, use)] = Status(Code.QUOTA, text, "quota")
        return said

    def admitted(
        self,
        ordered: list[PendingJob],
        pending: dict[int, Status],
        now: float,
        impossible: Callable[[PendingJob], bool],
        reclaim: Callable[[PendingJob, Status], Status],
        exhausted: Callable[[], bool],
        settle: Callable[[list[PendingJob]], None],
    ) -> Iterator[PendingJob]:
        """The queue as the pass takes it (lazily): first, in queue order, the claims and the
        jobs quotas do not concern; then the borrowers, in `borrowers` order. A job its project
        holds back gets `Quota` in `pending` and is not yielded (unless the pass refuses it
        for another reason, --begin or unsatisfiable: then it is yielded, to say so). After
        each job: counted in use if it started; if a claim waits for resources, `reclaim`
        says how it waits. `claiming` is true while a claim is tried: it must not take the
        reservation before reclaim had its say. Once `exhausted()` says no borrower can start
        any more (nothing is free), the borrowers left that quotas do not hold back get their
        status from `settle` (which writes it in `pending`) without being tried, in queue
        order: on a full cluster with a long queue that is most of the pass, and no decision
        changes."""
        deferred: list[PendingJob] = []  # the borrowers, in queue order: filled by _claims
        # Chained, not one generator delegating to the other: each borrower (most of what a
        # pass tries) then reaches the pass through one generator, not two.
        return chain(
            self._claims(ordered, deferred, pending, now, impossible, reclaim),
            self.borrowers(deferred, pending, impossible, exhausted, settle),
        )

    def _claims(
        self,
        ordered: list[PendingJob],
        deferred: list[PendingJob],
        pending: dict[int, Status],
        now: float,
        impossible: Callable[[PendingJob], bool],
        reclaim: Callable[[PendingJob, Status], Status],
    ) -> Iterator[PendingJob]:
        """`admitted`'s first part: the jobs that do not borrow, in queue order; the
        borrowers go to `deferred`."""
        # Most of a long queue borrows (a whole-GPU, preemptible job above its project's
        # quota): with no limits, that is `gpus >= self._least_over(project)`, which holds
        # until the next job is tried (only that changes what is in use), instead of `admit`.
        fast = self.guarantees and not self.limits
        least: dict[str, float] = {}
        for job in ordered:
            if job.begin_time is not None and job.begin_time > now:
                yield job
                least.clear()
                continue
            if fast:
                res = job.resources
                if res.gpu_memory_bytes is None and res.gpu_fraction is None and job.preemptible:
                    over = least.get(job.project)
                    if over is None:
                        over = least[job.project] = self._least_over(job.project)
                    if res.gpus >= over:
                        deferred.append(job)
                        continue
            verdict = self.admit(job)
            if verdict is Verdict.BORROW:
                deferred.append(job)
            elif isinstance(verdict, Status) and not impossible(job):
                pending[job.id] = verdict
            else:
                self.claiming = verdict is Verdict.CLAIM
                yield job
                self._tried(job, pending, reclaim)
                least.clear()

    def _least_over(self, name: str) -> float:
        """The fewest whole GPUs a job of `name` can ask for and go above its quota now: the
        least `g >= 1` for which `admit`'s test `use + float(g) <= quota + EPS` fails (the sum
        only grows with `g`, so every larger `g` fails it too). inf where there is none, or
        where the figures are too large for a few steps to find it: then `admit` decides."""
        p, use = self.projects.get(name, _NO_PROJECT), self.in_use.get(name, 0.0)
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

    def _held_back(
        self,
        job: PendingJob,
        limits: bool,
        pending: dict[int, Status],
        impossible: Callable[[PendingJob], bool],
    ) -> bool:
        """A borrower its project holds back gets its `Quota` status (True)."""
        verdict = self._borrower_verdict(job, limits)
        if isinstance(verdict, Status) and not impossible(job):
            pending[job.id] = verdict
            return True
        return False

    def _borrower_verdict(self, job: PendingJob, limits: bool) -> Verdict | Status:
        verdict = self.admit(job) if limits else Verdict.BORROW
        if job.project in self.reclaiming:
            return self._status("reclaiming", job.project, self.reclaiming[job.project])
        return verdict

    def _tried(
        self,
        job: PendingJob,
        pending: dict[int, Status],
        reclaim: Callable[[PendingJob, Status], Status],
    ) -> None:
        status = pending.get(job.id)
        if status is None:
            self.add(job.project, self.ask(job.resources))
        elif self.claiming and status.code is Code.RESOURCES:
            pending[job.id] = reclaim(job, status)
        self.claiming = False

    def add(self, name: str, gpus: float) -> None:
        """A job of `name` starts (or is reclaimed for: gpus > 0), or is preempted (< 0)."""
        self.in_use[name] = self.in_use.get(name, 0.0) + gpus

    def borrowers(
        self,
        deferred: list[PendingJob],
        pending: dict[int, Status],
        impossible: Callable[[PendingJob], bool],
        exhausted: Callable[[], bool],
        settle: Callable[[list[PendingJob]], None],
    ) -> Iterator[PendingJob]:
        """The borrowers (`deferred`, in queue order) as `admitted` takes them, in the order
        they get idle GPUs: class by class, then the project with the least `share` first
        (queue order inside a project, and between ties). Lazy: each project's figure is read
        after the previous job was tried, so a start counts at once. Once `exhausted()`, the
        rest are settled.

        A pass often takes only some of hundreds of borrowers before nothing is free, so a
        project's next job is looked up when it is needed, not queued up front: with few
        projects, by a scan (`list.index`, in C) from the one before; with many, where those
        scans would add up, from a table of each job's next of its project."""
        limits, in_use, projects = self.limits, self.in_use, self.projects
        n = len(deferred)
        klasses = list(map(_priority, deferred))
        taken: list[int] = []
        lo = 0
        while lo < n:
            klass, hi = klasses[lo], n
            if lo or klasses.count(klass) != n:  # more than one class: find where it ends
                hi = lo + 1
                while hi < n and klasses[hi] == klass:
                    hi += 1
            names = list(map(_project, deferred[lo:hi]))
            firsts = dict(zip(reversed(names), range(hi - lo - 1, -1, -1)))  # earliest wins
            after = None if len(firsts) <= _SCANNED_PROJECTS else _next_of_project(names)
            # (share, its next job's place, project): places differ, so names never compare
            heap = [(self.share(name), i, name) for name, i in firsts.items()]
            heapq.heapify(heap)
            while heap:
                _, i, name = heapq.heappop(heap)
                p = projects.get(name, _NO_PROJECT)
                while True:  # this project's jobs, while it stays first
                    if exhausted():  # the rest, but those quotas hold back, are settled
                        untaken = [True] * n
                        for t in taken:
                            untaken[t] = False
                        rest = list(compress(deferred, untaken))  # in queue order
                        if limits or self.reclaiming:
                            back = self._held_back
                            rest = [j for j in rest if not back(j, limits, pending, impossible)]
                        settle(rest)
                        return
                    taken.append(lo + i)
                    job = deferred[lo + i]
                    # Without limits or a reclaim for the project, nothing holds a borrower back.
                    held = (limits or name in self.reclaiming) and self._held_back(
                        job, limits, pending, impossible
                    )
                    if not held:
                        yield job
                        # `_tried` for a job that is not a claim: counted if it started
                        if pending.get(job.id) is None:
                            self.add(name, self.ask(job.resources))
                    if after is not None:
                        i = after[i]
                        if i < 0:
                            break
                    else:
                        try:
                            i = names.index(name, i + 1)
                        except ValueError:
                            break
                    if heap:
                        key = ((in_use.get(name, 0.0) - p.quota) / p.weight, i, name)  # share
                        if key > heap[0]:
                            heapq.heappush(heap, key)
                            break
            lo = hi


_SCANNED_PROJECTS = 16  # up to this many projects in a class, `list.index` finds a next job


def _next_of_project(names: list[str]) -> list[int]:
    """For each place, the next place of the same project (-1: none)."""
    after = [-1] * len(names)
    last: dict[str, int] = {}
    for i in range(len(names) - 1, -1, -1):
        name = names[i]
        after[i] = last.get(name, -1)
        last[name] = i
    return after
