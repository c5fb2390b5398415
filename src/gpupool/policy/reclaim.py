"""Reclaim: which borrowing jobs to preempt so that a project under its quota gets it.

A pending job is *guaranteed* (`policy/quota.py`) when its project is under its quota and the
job keeps it within: `in use + its GPUs <= quota`. A guaranteed job that does not fit in the
free GPUs may take victims among the running jobs of OTHER projects that are borrowing:

- only preemptible jobs, and only of a project still above its quota once this plan's
  victims taken before are gone: a project within its quota is never preempted by another.
  Plans whose victims all leave their projects at or above quota are looked for first, on
  every node; only when there is none is a job that borrows in part preempted whole, even
  though that puts its project under its quota (as Kueue's reclaim within a cohort, KAI and
  Run:ai do): sparing jobs only partly borrowed let one job half over quota keep a
  guaranteed project waiting for a day (issue 30). So a project keeps its own guarantee
  whenever another plan exists, and a guaranteed job never waits for a borrower's shape;
- victims are tried lowest priority first, then the project most above its fair share
  (`(in use - quota) / weight` largest), then the youngest (latest start, then highest id);
- the job must then fit on ONE node: on each node the victims there are taken in that order
  (skipping those whose GPUs, CPUs or memory do not help) until the job fits on what is free
  plus what they hold, with the feasibility chain's rules; then every victim the fit does not
  need is dropped again, so no plan has a victim too many (policy/victims.py, the selector
  order preemption shares);
- among nodes, the plan with the lowest top victim priority wins, then the one that throws
  away the least work (GPU-seconds its victims have run: a requeued job starts over unless it
  checkpoints), then the fewest victims, the fewest GPUs preempted, the node name.

The job waits with `Reclaim`, naming its victims, and gets `Decision.preemptions`. What it
will use that is free now is held for it for the rest of the pass, so no later job takes it,
and a job never takes the pass's reservation while it waits for a reclaim. With a reservation
already made, the reserved GPUs of the reserved node are off limits to the plan.

Reclaim honours quotas, so it ignores `PolicyConfig.min_runtime_s`: today reclaim is the only
reason the policy preempts; any other preemption (by priority, say) would have to spare jobs
younger than `min_runtime_s`.

The policy keeps no memory between passes: while the victims finish their grace period they
are still running in the next snapshots, and the same (deterministic) decision is computed
again, naming the same victims; the engine signals each victim once (`engine/preemption.py`).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterator

from gpupool.core.job import Resources
from gpupool.policy.backfill import Shadow
from gpupool.policy.filters.gpu_type import matching_gpus
from gpupool.policy.node_free import NodeFree
from gpupool.policy.node_index import NodeIndex
from gpupool.policy.placement import place
from gpupool.policy.quota import QuotaBook
from gpupool.policy.quota_feasibility import EPS
from gpupool.policy.reasons import ReclaimCause
from gpupool.policy.request import request_key
from gpupool.policy.snapshot import PendingJob, PolicyConfig, Preemption, RunningJob, Snapshot
from gpupool.policy.status import Code, Rule, Status
from gpupool.policy.timeline import Release
from gpupool.policy.victim_cost import lost_s
from gpupool.policy.victims import NodeFit, Plan, fill_back, hold, take_until_fit

# A lower bound on the rank of the plans on a node, to compare with a plan's rank
# (`ReclaimPlanner.plan`): (top victim priority, work lost, victims, GPUs, node).
_Key = tuple[int, float, int, int, str]
_EXACT = 2.0**40  # whole numbers of GPU-seconds below it add up exactly in any order
_SEARCH = 32  # sets of candidates tried per node before a reclaim gives up on it


class _QuotaFloor:
    """Reclaim's guard on victims (policy/victims.py): only jobs of a project above its quota
    once the victims taken before are gone; with `whole`, a job that borrows in part may be
    taken (its project then goes under its quota), else only one that leaves its project at
    or above its quota. The projects it kept a victim back for (`floored`)."""

    def __init__(self, planner: ReclaimPlanner, whole: bool) -> None:
        self.planner = planner
        self.whole = whole
        self.gone: dict[str, float] = {}
        self.floored: set[str] = set()

    def allows(self, r: RunningJob) -> bool:
        planner = self.planner
        left = planner.left(r.project) - self.gone.get(r.project, 0.0)
        quota = planner.book.project(r.project).quota
        if self.whole:
            allowed = left > quota + EPS  # its project still borrows
        else:
            allowed = left - planner.held(r) >= quota - EPS  # and still will without it
        if not allowed:
            self.floored.add(r.project)
        return allowed

    def took(self, r: RunningJob) -> None:
        self.gone[r.project] = self.gone.get(r.project, 0.0) + self.planner.held(r)


class ReclaimPlanner:
    """The reclaims of one pass: victims already taken, and requests known to find none."""

    def __init__(self, snapshot: Snapshot, book: QuotaBook, now: float = 0.0) -> None:
        self.book = book
        self.now = now
        self.patience = snapshot.config.reclaim_patience_s
        self.config = snapshot.config
        self._running = snapshot.running
        self._by_node: dict[str, list[RunningJob]] | None = None  # built on the first ask
        self._of: dict[str, list[RunningJob]] = {}  # the same by project
        self._floors: dict[str, list[_Key]] = {}  # by project, when first asked: `_floor`
        self._spread: dict[int, list[RunningJob]] | None = None  # jobs on several nodes
        self.taken: set[int] = set()
        self.failed: set[tuple[object, ...]] = set()  # (request key, project): found none
        self.preemptions: list[Preemption] = []
        # GPUs of each project's victims: still running, so still in use (for limits and the
        # borrowers' order) until they exit, but no longer there to be reclaimed.
        self.gone: dict[str, float] = {}

    @property
    def by_node(self) -> dict[str, list[RunningJob]]:
        """The running jobs that may be victims in this pass by node: preemptible, and not
        about to end anyway (within `PolicyConfig.reclaim_patience_s` of its time limit: it
        gives its GPUs back by then anyway, and stopping it now would throw away the most
        work), and it ran its project's `reclaim_min_runtime_s` (KAI's min-runtime: each
        attempt gets that long). Most passes reclaim nothing: built on demand."""
        if self._by_node is None:
            by_node: dict[str, list[RunningJob]] = {}
            of, soon = self._of, self.now + self.patience
            floors: dict[str, float] = {}
            for r in self._running:
                limit = r.time_limit_s
                floor = floors.get(r.project)
                if floor is None:
                    least = self.book.project(r.project).reclaim_min_runtime_s
                    floor = floors[r.project] = self.now - (least or 0.0)
                if (
                    r.preemptible
                    and (limit is None or r.start_time + limit > soon)
                    and r.start_time <= floor
                ):
                    by_node.setdefault(r.node, []).append(r)
                    of.setdefault(r.project, []).append(r)
            self._by_node = by_node
        return self._by_node

    def held(self, r: RunningJob) -> float:
        """The GPUs stopping `r` gives back: all of a job spread over several nodes, which
        the snapshot lists once per node (PolicyConfig.spread_wide_jobs)."""
        if self._spread is None:
            count = Counter(x.id for x in self._running)
            self._spread = {}
            if len(count) < len(self._running):
                for x in self._running:
                    if count[x.id] > 1:
                        self._spread.setdefault(x.id, []).append(x)
        spread = self._spread.get(r.id)
        if spread is None:
            return self.book.held(r)
        return sum(self.book.held(x) for x in spread)

    def lost(self, r: RunningJob) -> float:
        """The work stopping `r` throws away (policy/victim_cost.py): its attempt, or what
        it loses since its last checkpoint, times ALL its GPUs: a job spread over nodes is
        stopped whole, so its row on one node stands for every node's GPUs (counting the
        row's alone made the widest jobs look cheapest: on the Philly replay 53 wide jobs
        lost 3,167 of 5,014 GPU-hours thrown away, 14 once counted whole)."""
        return max(float(len(r.gpus)), self.held(r)) * lost_s(r, self.now, self.config)

    def left(self, name: str) -> float:
        """A project's in use once the victims already chosen are gone."""
        return self.book.in_use.get(name, 0.0) - self.gone.get(name, 0.0)

    def _share(self, name: str) -> float:
        p = self.book.project(name)
        return (self.left(name) - p.quota) / p.weight

    def reclaim_for(
        self, job: PendingJob, index: NodeIndex, shadow: Shadow | None, end: float
    ) -> tuple[Status, Release] | None:
        """Reclaim for `job` if some victims let it start: hold what it will use that is
        free now, record the victims; its status, and what it gives back at `end` (for the
        reservation's timeline). None: no plan, nothing changed."""
        plan = self.plan(job, index.frees, shadow)
        if plan is None:
            return None
        index.take(plan.held, plan.held_res)
        if shadow is not None and plan.held.node == shadow.node:
            shadow.took(plan.held_res, plan.held.gpus, plan.placement.gpu_memory_bytes)
        status, preemptions = self.accept(job, plan)
        self.preemptions.extend(preemptions)
        at = plan.placement
        return status, Release(end, at.node, at.gpus, job.resources, at.gpu_memory_bytes)

    def plan(self, job: PendingJob, frees: list[NodeFree], shadow: Shadow | None) -> Plan | None:
        """The victims that let `job` start, or None. A request that found none for a project
        finds none for the rest of the pass: what is free and who may be a victim only shrink."""
        res = job.resources
        key = (request_key(res), job.project)
        if key in self.failed:
            return None
        share = {name: self._share(name) for name in self.book.in_use}
        lenders = {p for p, s in share.items() if s > 0 and p != job.project}
        # Victims that leave their projects at or above quota first; jobs borrowing in part,
        # whole, only where no such plan exists on any node (module docstring).
        best = self._best(job, frees, shadow, share, lenders, whole=False)
        if best is None:
            best = self._best(job, frees, shadow, share, lenders, whole=True)
        if best is None:
            self.failed.add(key)
            return None
        _, view, victims, free = best
        placement = place([view], res)
        assert placement is not None  # it fits, by _on_node
        return hold(res, placement, victims, free)

    def _best(
        self,
        job: PendingJob,
        frees: list[NodeFree],
        shadow: Shadow | None,
        share: dict[str, float],
        lenders: set[str],
        whole: bool,
    ) -> tuple[_Key, NodeFree, tuple[RunningJob, ...], NodeFree] | None:
        """The best plan over the nodes (its rank, the node as its victims leave it, the
        victims, the node's free view now), under `_QuotaFloor(whole)`; None: none."""
        # Branch and bound: nodes come lowest bound on their plan's rank first (`_nodes`),
        # and once a bound is worse than the best plan found no later node can win. The
        # winner is the same as trying every node: ranks end in the node name, so there are
        # no ties. On a big cluster a reclaim tries a handful of nodes.
        best = None
        for bound, free, mine in self._nodes(job.resources, lenders, frees):
            if best is not None and bound > best[0]:
                break
            mine.sort(key=lambda r: (r.priority, -share[r.project], -r.start_time, -r.id))
            found = self._on_node(job, free, shadow, mine, whole)
            if found is not None:
                # Least work thrown away first (`lost`), then the fewest victims.
                lost = sum(self.lost(v) for v in found[1])
                rank = (max(v.priority for v in found[1]), lost, len(found[1]),
                        sum(len(v.gpus) for v in found[1]), free.node.name)  # fmt: skip
                if best is None or rank < best[0]:
                    best = (rank, found[0], found[1], free)
        return best

    def _nodes(
        self, res: Resources, lenders: set[str], frees: list[NodeFree]
    ) -> Iterator[tuple[_Key, NodeFree, list[RunningJob]]]:
        """The nodes where `lenders` (the projects above their quota, by what this pass's
        victims leave them: only they give victims) have candidates not yet taken, each with
        a lower bound on its plan's rank (`_bound`) and those candidates; lazily, so that
        each bound given is below the rank of every node still to come: a node's bound is
        worked out only once the least key (priority, work lost) of one of its candidates
        comes up (the projects' `_floor`s merged), since no plan ranks better than any of its
        victims. A reclaim works out the bounds of a few dozen nodes, not of hundreds."""
        if not lenders:
            return
        by_node, taken, now = self.by_node, self.taken, self.now
        here = {f.node.name: f for f in frees}
        ready: list[tuple[_Key, NodeFree, list[RunningJob]]] = []
        seen: set[str] = set()
        for floor in heapq.merge(*(self._floor(p) for p in lenders)):
            while ready and ready[0][0] <= floor:
                yield heapq.heappop(ready)
            name = floor[4]
            free = here.get(name)
            if free is None or name in seen:
                continue
            seen.add(name)
            mine = [r for r in by_node[name] if r.project in lenders and r.id not in taken]
            if not mine:
                continue
            mine.sort(key=lambda r: (r.priority, -r.start_time))  # as `_bound` needs
            if res.fractional:
                lacks = 0
            elif res.gpu_type:
                lacks = res.gpus - sum(g in free.gpus for g in matching_gpus(free.node, res))
            else:
                lacks = res.gpus - len(free.gpus)
            bound = _bound(mine, lacks, now, self.config)
            if bound is not None:  # else even all of them would not free enough
                heapq.heappush(ready, ((*bound, name), free, mine))
        while ready:
            yield heapq.heappop(ready)

    def _floor(self, project: str) -> list[_Key]:
        """The nodes with `project`'s candidates (taken ones too: a lower bound still), each
        with the least key (priority, work lost) of one, least first (`_nodes`)."""
        floors = self._floors.get(project)
        if floors is None:
            least: dict[str, tuple[int, float]] = {}
            now, config = self.now, self.config
            for r in self._of.get(project, ()):
                one = (r.priority, len(r.gpus) * lost_s(r, now, config))
                if one < least.get(r.node, (one[0] + 1, 0.0)):
                    least[r.node] = one
            floors = sorted((p, lost, 0, 0, name) for name, (p, lost) in least.items())
            self._floors[project] = floors
        return floors

    def _on_node(
        self,
        job: PendingJob,
        free: NodeFree,
        shadow: Shadow | None,
        mine: list[RunningJob],
        whole: bool,
    ) -> tuple[NodeFree, tuple[RunningJob, ...]] | None:
        """The victims on this node (module docstring), and the node as they would leave it."""
        res = job.resources
        reserved: frozenset[int] = frozenset()
        base = free
        if shadow is not None and shadow.node == free.node.name:
            reserved, base = frozenset(shadow.reservation.gpus), shadow.spare(free)
        # Greedy in the candidates' order, skipping a victim the quota floor refuses
        # (`_QuotaFloor`). A victim taken early may use up its project's room above quota
        # that a later, sufficient set needed: then try again without one of the victims
        # taken from such a project, the first first (depth first, so that where dropping
        # the first finds a plan, that is the plan), up to `_SEARCH` tries per node.
        stack: list[list[RunningJob]] = [list(mine)]
        seen: set[frozenset[int]] = set()
        tries = 0
        while stack and tries < _SEARCH:
            left = stack.pop()
            ids = frozenset(r.id for r in left)
            if ids in seen:
                continue
            seen.add(ids)
            tries += 1
            fit = NodeFit(base, res, reserved)
            floor = _QuotaFloor(self, whole)
            taken, fits = take_until_fit(left, fit, floor)
            if fits:
                taken = fill_back(taken, fit)
                return fit.view_with(taken), tuple(taken)
            culprits = [r for r in taken if r.project in floor.floored]
            for culprit in reversed(culprits):  # the first culprit on top
                stack.append([r for r in left if r is not culprit])
        return None

    def accept(self, job: PendingJob, plan: Plan) -> tuple[Status, list[Preemption]]:
        """Record the plan: its victims are taken, the in-use figures move. The job's status
        and the preemptions, with causes stated on the figures before the plan."""
        book, name = self.book, job.project
        p, use = book.project(name), book.in_use.get(name, 0.0)
        out = []
        for v in plan.victims:
            vq, vuse = book.project(v.project).quota, self.left(v.project)
            cause = ReclaimCause(name, p.quota, use, v.project, vq, vuse)
            out.append(Preemption(v.id, job.id, cause))
        for v in plan.victims:
            self.gone[v.project] = self.gone.get(v.project, 0.0) + self.held(v)
            self.taken.add(v.id)
        book.add(name, book.ask(job.resources), job.user, job.resources)
        book.reclaiming.setdefault(name, job.id)
        ids = tuple(sorted(v.id for v in plan.victims))
        return Status(Code.RECLAIM, Rule.RECLAIM, jobs=ids, project=name), out


def _bound(
    mine: list[RunningJob], lacks: int, now: float, config: PolicyConfig
) -> tuple[int, float, int, int] | None:
    """A lower bound on the rank (top victim priority, work lost, victims, GPUs) of any plan
    taking its victims from `mine` (lowest priority first, then youngest first) for a job that
    lacks `lacks` GPUs; None when all of `mine` hold fewer. The victims hold at least `lacks`
    GPUs, so the top priority is at least the lowest at which `mine` hold that many; a plan of
    that priority takes some of the jobs up to it that hold as many, so it ranks no better than
    the best such set (a small knapsack over a node's few jobs)."""
    held = 0
    for r in mine:
        held += len(r.gpus)
        if held >= lacks:
            top = r.priority
            break
    else:
        return None
    items = [(len(r.gpus) * lost_s(r, now, config), len(r.gpus)) for r in mine if r.priority <= top]
    want = max(1, lacks)  # every plan has a victim
    found: tuple[float, int, int] | None
    if want == 1:  # the best is one job
        found = min((lost, 1, n) for lost, n in items if n or lacks <= 0)
    else:  # best[c]: the best (work lost, victims, GPUs) of a set holding c GPUs (or more)
        best: list[tuple[float, int, int] | None] = [None] * (want + 1)
        best[0] = (0.0, 0, 0)
        for lost, n in items:
            for c in range(want - 1, -1, -1):  # each job once: from the most GPUs down
                got = best[c]
                if got is not None:
                    to = min(want, c + n)
                    trial, old = (got[0] + lost, got[1] + 1, got[2] + n), best[to]
                    if old is None or trial < old:
                        best[to] = trial
        found = best[want]
    assert found is not None  # `items` hold `lacks` GPUs
    # `lost` is worked out as `plan` does. Whole numbers add up exactly in any order: then the
    # bound is exact and tells ties apart. Otherwise `plan` sums in another order, which may
    # round lower than here: the bound is made a little lower.
    if all(float(lost).is_integer() and lost < _EXACT for lost, _ in items):
        return top, found[0], found[1], found[2]
    return top, found[0] * (1 - 1e-9), 0, 0
