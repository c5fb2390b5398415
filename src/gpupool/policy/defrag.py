"""Defragmentation: a migration by requeue, so that a job the pool's free GPUs could hold, but
no one node's, starts.

Two 8-GPU nodes with 4 GPUs free on each cannot start an 8-GPU job, though 8 GPUs are free:
the free GPUs are in the wrong places. Quota reclaim (policy/reclaim.py) and order preemption
(policy/order_preemption.py) count GPUs, not where they are; this stage, run by `decide` after
them (`PolicyConfig.defragment`, on by default, with and without quotas), moves the jobs:

- **For whom**: the head of the line only, the job holding the pass's reservation, when it
  waits with `NO_FIT` (it fits on no node now), asks for whole GPUs, is not spread over nodes,
  no node has its GPU count free, but the free GPUs of its type across the pool are enough.
  One job per pass: once it starts, the next one is the head.
- **Victims**: on ONE node, running jobs that `victim_cost.may_preempt` allows (preemptible,
  past their project's `preempt_min_runtime_s`, else `min_runtime_s`, in this attempt,
  requeued fewer than `preempt_max_restarts` times: the budget every preemption shares), of
  no higher priority class than the job, not already a victim of this pass, not spread over
  nodes; with quotas, of the job's own project or of a
  project that stays at or above its quota without them (a borrower): never a job another
  project runs within its quota. Least work lost first (`victim_cost.lost_gpu_s`: so a job
  that checkpoints, or just started, first), then the fewest GPUs; taken until the job fits
  on the node (the feasibility chain: GPU type, CPUs, memory), then every victim the fit does
  not need dropped again (policy/victims.py, the selector reclaim and order preemption use).
- **Only a migration**: a candidate is taken only if it fits at once on the free GPUs of the
  OTHER nodes, with the victims taken before it (best fit, `placement.place`, on copies of
  what the pass left free): the victims lose their attempt (little, by the order), the pool
  loses no capacity. Without that, no preemption.
- **Which node**: of the `_NODES` nodes with the most free GPUs of its type, the plan that
  loses the least work, then stops the fewest GPUs, then the fewest jobs, then the node name.

The job waits with `Resources`, `Rule.DEFRAGMENT`, naming its victims and the figures
(`reasons.DefragCause`: the node, the GPUs freed, the work lost, the pool's free GPUs, the most
on one node); each victim gets a `Preemption` with the same cause. What the job will use that
is free now is held for it. Its reservation's start estimate is dropped: it starts once its
victims stop, not when the reservation said.

Convergence (tests/unit/test_defrag_properties.py): in the next pass (the replay decides again
at once; the daemon once the victims have stopped) the node has the job's GPUs free and the job
is still the first in line that waits, so it starts there; the victims, requeued, fit on the
other nodes, and best fit puts them there before the freed node (every other node has fewer
free GPUs than the job asks: that is why it did not fit). A victim has just started when it
restarts, so `min_runtime_s` keeps it from being a victim again soon, and
`preempt_max_restarts` bounds it for good. While victims finish their grace period the daemon
decides again and names victims again; the engine signals each once (engine/preemption.py).

Cost: nothing unless a reservation is held by a job that waits for GPUs; then O(nodes) to
count the free GPUs, and only when the pool has enough free, O(pending + running) to find the
job and the candidates, and `_NODES` nodes tried, each O(candidates x nodes) for the
re-placement check.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import count

from gpupool.core.job import Resources
from gpupool.policy.filters.gpu_type import matching_gpus
from gpupool.policy.node_free import NodeFree
from gpupool.policy.placement import Placement, place
from gpupool.policy.quota import QuotaBook
from gpupool.policy.quota_feasibility import EPS
from gpupool.policy.reasons import DefragCause
from gpupool.policy.request import RequestKey, counts_only, request_key
from gpupool.policy.scheduling_pass import SchedulingPass
from gpupool.policy.snapshot import PendingJob, Preemption, RunningJob
from gpupool.policy.status import Code, Rule, Status
from gpupool.policy.victim_cost import lost_gpu_s, may_preempt
from gpupool.policy.victims import CountFit, Fit, NodeFit, fill_back, hold, release, take_until_fit

_NODES = 8  # nodes tried per pass, the most free GPUs of the job's type first
_ORDERS = 256  # placements tried to tell that victims restart in any order; beyond: no plan


@dataclass(frozen=True)
class _Plan:
    node: str
    victims: tuple[RunningJob, ...]
    lost: float  # GPU-seconds the victims' restarts throw away

    @property
    def rank(self) -> tuple[float, int, int, str]:
        """Least work lost, then fewest GPUs stopped, fewest jobs, the node name."""
        gpus = sum(len(v.gpus) for v in self.victims)
        return (self.lost, gpus, len(self.victims), self.node)


class _Movable:
    """The guard on victims (policy/victims.py `Guard`): a candidate is taken only if it may
    be stopped for this job by quotas, and fits at once on the other nodes' free GPUs with the
    victims taken before it (each placed, best fit, on copies made as needed)."""

    def __init__(
        self,
        others: Sequence[NodeFree],
        book: QuotaBook | None,
        project: str,
        fit: Fit[RunningJob],
    ) -> None:
        self.others = list(others)
        self.copied: set[str] = set()
        self.book, self.project = book, project
        self.fit = fit
        self.gone: dict[str, float] = {}  # GPUs of each project's victims taken so far
        self.next: Placement | None = None  # where the candidate last allowed goes

    def allows(self, victim: RunningJob) -> bool:
        # A candidate that gives the job nothing is skipped by `take_until_fit` whatever
        # this says: asked first, it saves a placement on every other node.
        if not self.fit.helps(victim) or not self._quota_allows(victim):
            return False
        self.next = place(self.others, victim.resources)
        return self.next is not None

    def took(self, victim: RunningJob) -> None:
        placement = self.next
        assert placement is not None  # `allows` said yes just before
        position = next(i for i, f in enumerate(self.others) if f.node.name == placement.node)
        free = self.others[position]
        if placement.node not in self.copied:  # the pass's own view is never written here
            free = self.others[position] = free.copy()
            self.copied.add(placement.node)
        free.take(placement.gpus, victim.resources)
        if self.book is not None:
            self.gone[victim.project] = self.gone.get(victim.project, 0.0) + self.book.held(victim)

    def _quota_allows(self, victim: RunningJob) -> bool:
        """With quotas, a job of another project only if that project stays at or above its
        quota without it and the victims taken before (it borrows); the job's own, always."""
        book = self.book
        if book is None or victim.project == self.project:
            return True
        left = book.in_use.get(victim.project, 0.0) - self.gone.get(victim.project, 0.0)
        return left - book.held(victim) >= book.project(victim.project).quota - EPS


def defragment(state: SchedulingPass, taken: Sequence[Preemption]) -> tuple[Preemption, ...]:
    """The preemptions that defragment a node for the head of the line, after the pass
    `state` (and the stages after it: `taken`, their preemptions); its status and estimate are
    updated in `state`. () when there is nothing to do (module docstring)."""
    shadow = state.shadow
    if shadow is None:
        return ()
    job_id = shadow.reservation.job_id
    status = state.pending.get(job_id)
    if status is None or status.rule is not Rule.NO_FIT or status.request is None:
        return ()
    res = status.request
    if res.fractional or res.gpus < 1:
        return ()
    frees = state.free.frees
    free_of = {f.node.name: _matching_free(f, res) for f in frees}
    pool_free, most = sum(free_of.values()), max(free_of.values(), default=0)
    if pool_free < res.gpus or most >= res.gpus:
        return ()  # the pool lacks GPUs (nothing to move), or not by the GPU count
    job = next((p for p in state.snapshot.pending if p.id == job_id), None)
    if job is None:
        return ()
    by_node = _candidates(state, job, {p.job_id for p in taken})
    budget = _loss_budget(res.gpus * (shadow.time - state.now), state)
    plan = _best_plan(state, job, by_node, free_of, budget)
    if plan is None or plan.lost > budget:
        return ()
    free = state.free.by_name[plan.node]
    view = free.copy()
    for v in plan.victims:
        release(view, v)
    placement = place([view], res)
    assert placement is not None  # it fits once the victims are gone, by the plan's fit
    held = hold(res, placement, plan.victims, free)
    state.free.take(held.held, held.held_res)
    freed = sum(len(v.gpus) for v in plan.victims)
    cause = DefragCause(plan.node, res.gpus, freed, plan.lost, pool_free, most)
    ids = tuple(sorted(v.id for v in plan.victims))
    state.pending[job.id] = Status(
        Code.RESOURCES, Rule.DEFRAGMENT, jobs=ids, defrag=cause, request=res
    )
    state.estimated.pop(job.id, None)
    return tuple(Preemption(v, job.id, cause) for v in ids)


def _loss_budget(wait_gpu_s: float, state: SchedulingPass) -> float:
    """The most work a plan's victims may lose (a plan pays when it loses at most this):
    `defrag_loss_share` of the GPU-time the job would wait for its reservation (its GPUs x
    the time until it, `wait_gpu_s`). Without that bound the Philly replay lost 840
    GPU-hours more and its average JCT grew 2% (docs/scheduling.md)."""
    return state.config.defrag_loss_share * wait_gpu_s


def _matching_free(free: NodeFree, res: Resources) -> int:
    """Free GPUs of the request's type on a node (any type: every free GPU)."""
    if not res.gpu_type:
        return len(free.gpus)
    return sum(g in free.gpus for g in matching_gpus(free.node, res))


def _candidates(
    state: SchedulingPass, job: PendingJob, taken: set[int]
) -> dict[str, list[RunningJob]]:
    """The running jobs that may be stopped for `job`, by node, in the snapshot's order (the
    quota rule is the guard's: it depends on the victims taken before)."""
    snapshot, now, config = state.snapshot, state.now, state.config
    if state.reclaims is not None:
        taken = taken | state.reclaims.taken
    spread = _spread(snapshot.running)
    by_node: dict[str, list[RunningJob]] = {}
    for r in snapshot.running:
        project = snapshot.projects.get(r.project)  # its own floor, read with quotas off too
        floor = None if project is None else project.preempt_min_runtime_s
        if (
            r.priority <= job.priority
            and r.id not in taken
            and r.id not in spread
            and r.node in state.free.by_name
            and may_preempt(r, now, config, floor)
        ):
            by_node.setdefault(r.node, []).append(r)
    return by_node


def _spread(running: Sequence[RunningJob]) -> set[int]:
    """The ids of jobs spread over nodes (more than one row): none in the daemon's pool and
    in most of a replay's passes, which a set made in C tells without counting."""
    ids = [r.id for r in running]
    if len(set(ids)) == len(ids):
        return set()
    return {i for i, rows in Counter(ids).items() if rows > 1}


def _by_loss(
    state: SchedulingPass, cands: list[RunningJob]
) -> tuple[list[RunningJob], dict[int, float]]:
    """A node's candidates, least work lost first, then the fewest GPUs, the latest start,
    the id, and each one's work lost (`lost_gpu_s`, worked out once here): only for the
    nodes a plan is tried on (`_NODES` of them), not for every node that has candidates."""
    now, config = state.now, state.config
    lost = {r.id: lost_gpu_s(r, now, config) for r in cands}
    return sorted(cands, key=lambda r: (lost[r.id], len(r.gpus), -r.start_time, r.id)), lost


def _best_plan(
    state: SchedulingPass,
    job: PendingJob,
    by_node: dict[str, list[RunningJob]],
    free_of: dict[str, int],
    budget: float,
) -> _Plan | None:
    """The best plan over the `_NODES` nodes with the most free GPUs of the job's type among
    those where stopping every candidate would free enough (module docstring); a node none
    of whose plans could lose at most `budget` GPU-seconds (`_least_loss`) is not tried:
    the best plan is the one that loses least, and `defragment` takes it only if it loses at
    most that, so the outcome is the same (the Philly replay found 1,476 plans of 1,539
    that did not pay, each searched in full)."""
    res = job.resources
    nodes = [
        name
        for name, cands in by_node.items()
        if free_of[name] + sum(len(r.gpus) for r in cands) >= res.gpus
    ]
    nodes.sort(key=lambda name: (-free_of[name], name))
    best: _Plan | None = None
    for name in nodes[:_NODES]:
        ordered, lost = _by_loss(state, by_node[name])
        if _least_loss(ordered, lost, res.gpus - free_of[name]) > budget * (1 + 1e-9):
            continue
        plan = _plan_on(state, job, name, ordered, lost)
        if plan is not None and (best is None or plan.rank < best.rank):
            best = plan
    return best


def _least_loss(cands: list[RunningJob], lost: dict[int, float], lack: int) -> float:
    """A floor under the work any plan on a node loses: its victims free at least `lack`
    GPUs, each losing at least the least work lost per GPU of the node's candidates (a
    plan's lost >= that x its victims' GPUs >= that x `lack`)."""
    per_gpu = [lost[r.id] / len(r.gpus) for r in cands if r.gpus]
    return min(per_gpu, default=0.0) * max(lack, 0)


def _plan_on(
    state: SchedulingPass,
    job: PendingJob,
    name: str,
    cands: list[RunningJob],
    lost: dict[int, float],
) -> _Plan | None:
    """The victims on node `name` (of `cands`, least work lost first; `lost`: each one's
    work lost) that let `job` fit there and fit elsewhere at once, none too many; None:
    there are none."""
    free = state.free.by_name[name]
    res = job.resources
    fit: Fit[RunningJob]
    if counts_only(res) and not free.sharers:
        fit = CountFit(res.gpus - len(free.gpus))
    else:
        fit = NodeFit(free, res)
    others = _roomy([f for f in state.free.frees if f.node.name != name], cands)
    guard = _Movable(others, state.book, job.project, fit)
    chosen, fits = take_until_fit(cands, fit, guard)
    if not fits:
        return None
    victims = tuple(fill_back(chosen, fit))
    if not _fits_in_any_order([v.resources for v in victims], others):
        return None
    return _Plan(name, victims, sum(lost[v.id] for v in victims))


def _roomy(frees: list[NodeFree], victims: Sequence[RunningJob]) -> list[NodeFree]:
    """The nodes a victim could be placed on: those with a free GPU, when every victim
    asks for whole GPUs (`place` skips a node with fewer free GPUs than asked, so the
    placements are the same; a busy pool's nodes are mostly full); else every node."""
    if all(v.resources.gpus >= 1 and not v.resources.fractional for v in victims):
        return [f for f in frees if f.gpus]
    return frees


def _fits_in_any_order(requests: list[Resources], others: Sequence[NodeFree]) -> bool:
    """Whether the victims' requests, requeued, each find room on `others` by best fit
    (`placement.place`, as the next pass places them) in whatever order the queue puts them:
    every order of the distinct requests is tried, within `_ORDERS` placements (False past
    it: no plan rather than a victim left to land on the freed node)."""
    budget = count()

    def search(frees: list[NodeFree], left: Counter[RequestKey]) -> bool:
        for key in [k for k, n in left.items() if n > 0]:
            if next(budget) >= _ORDERS:
                return False
            res = shapes[key]
            placement = place(frees, res)
            if placement is None:
                return False
            position = next(i for i, f in enumerate(frees) if f.node.name == placement.node)
            after = list(frees)
            after[position] = frees[position].copy()
            after[position].take(placement.gpus, res)
            left[key] -= 1
            found = search(after, left)
            left[key] += 1
            if not found:
                return False
        return True

    shapes = {request_key(r): r for r in requests}
    return search(list(others), Counter(request_key(r) for r in requests))
