"""Preemption after the pass, by two rules that stop running jobs for a waiting one that does
not fit (it waits with `Resources` or `Priority`):

- **A higher priority class** (`PolicyConfig.preempt_lower_classes`; Slurm's QOS preemption,
  Kubernetes' PriorityClass, Kueue's `withinClusterQueue: LowerPriority`): victims are
  preemptible jobs of a LOWER class that ran their project's `preempt_min_runtime_s` (the
  pool's `min_runtime_s` where the project sets none), of the waiting job's own project or
  of a project above its quota (a borrower). A job of another project within its quota is
  never a victim: a class orders work inside a share, it does not take another's share. So
  another project's job goes only while that project stays at or above its quota without
  it (and without the GPUs the pass's reclaims and this stage already take from it); a job
  borrowing only in part is not taken whole, as quota reclaim may.
- **Where it pays** (`PolicyConfig.preempt_where_it_pays`): a job of the same or a lower class
  that checkpoints, would hold its GPUs at least `preempt_gain_ratio` times longer than the
  waiting job needs (by their time limits), and whose stop loses at most
  `preempt_max_loss_gpu_s`; of the same projects as above. Measured on the Philly replay
  (docs/scheduling-quality.md): with jobs that do not checkpoint such stops cost more than
  they give (bounded slowdown 1.70 -> 1.63, average JCT +1%, p99 queue +8%), so a victim
  must checkpoint.

Both take victims only among `victim_cost.may_preempt` jobs (the restart bound: no job
thrashes), least work lost first, then the lowest class, on the ONE node where the job then
fits with the least work lost; jobs spread over several nodes are never victims here (their
stop frees GPUs on nodes the job does not use). What the job will use is held, so later
jobs count only what is left; a victim is stopped for one job only. The walk looks at the
first `preempt_look_ahead` waiting jobs in queue order: the head of the line, where a
preemption changes who starts next.

Convergence: a victim ranks no better than the job it is stopped for (a lower class; or, for
where it pays, one with more expected service: `ordering.service_factor`), and a requeued
victim was preempted once more (`restarts`), so the bound ends any cycle.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpupool.policy.backfill import Shadow
from gpupool.policy.node_free import NodeFree
from gpupool.policy.node_index import NodeIndex
from gpupool.policy.placement import place
from gpupool.policy.quota import QuotaBook
from gpupool.policy.reasons import ClassCause, PaysCause
from gpupool.policy.request import counts_only
from gpupool.policy.snapshot import PendingJob, PolicyConfig, Preemption, RunningJob, Snapshot
from gpupool.policy.status import Code, Rule, Status
from gpupool.policy.victim_cost import lost_gpu_s, may_preempt
from gpupool.policy.victims import CountFit, Fit, NodeFit, fill_back, hold, release, take_until_fit

_WAITING = (Code.RESOURCES, Code.PRIORITY)
_EPS = 1e-9


@dataclass(frozen=True, slots=True)
class _Candidate:
    job: RunningJob
    lost_gpu_s: float
    left_s: float  # until its time limit ends
    min_runtime_ok: bool  # ran its project's preempt_min_runtime_s


def preempt_after_pass(
    snapshot: Snapshot,
    now: float,
    ranked: Sequence[PendingJob],
    index: NodeIndex,
    waiting: Mapping[int, Status],
    book: QuotaBook | None,
    shadow: Shadow | None = None,
    gone: Mapping[str, float] | None = None,
    already: Collection[int] = (),
) -> tuple[list[Preemption], dict[int, Status]]:
    """The preemptions of both rules, and the new status of each job they are for.
    `shadow`: the pass's reservation (a job behind it never gets the GPUs, CPUs or memory it
    holds); `gone`: GPUs of each project the pass's reclaims already stop; `already`: jobs
    earlier stages preempt (never chosen twice). What each job is given is booked in `book`
    (its project's GPUs in use), so limits hold for the jobs after it."""
    config = snapshot.config
    if not (config.preempt_lower_classes or config.preempt_where_it_pays):
        return [], {}
    # Every order puts the class first (ordering.py, orders.py): the head holds the top one.
    top = ranked[0].priority if ranked else None
    cands = _candidates(snapshot, now, top, already)
    if not cands:
        return [], {}
    chooser = _Chooser(snapshot, index, book, shadow, dict(gone or {}))
    out: list[Preemption] = []
    statuses: dict[int, Status] = {}
    looked = 0
    default = config.default_time_limit_s
    for job in ranked:
        status = waiting.get(job.id)
        if status is None or status.code not in _WAITING:
            continue
        looked += 1
        if looked > config.preempt_look_ahead:
            break
        if book is not None and _over_limit(job, book):
            continue
        need_s = job.time_limit_s if job.time_limit_s is not None else default
        found = chooser.victims_for(job, need_s, cands)
        if found is None:
            continue
        rule, victims = found
        for v in victims:
            if rule is Rule.CLASS_PREEMPTION:
                cause: ClassCause | PaysCause = ClassCause(
                    job.priority, v.job.priority, v.job.project, v.lost_gpu_s
                )
            else:
                cause = PaysCause(need_s, v.left_s, v.lost_gpu_s)
            out.append(Preemption(v.job.id, job.id, cause))
        ids = tuple(sorted(v.job.id for v in victims))
        statuses[job.id] = Status(Code.PRIORITY, rule, jobs=ids)
    return out, statuses


def _over_limit(job: PendingJob, book: QuotaBook) -> bool:
    """Whether the job would take its project past its limit (claims earlier in the pass,
    reclaims and this stage's own, counted: they are booked as they are made)."""
    if book.caps is not None and book.caps.held(job, book.ask(job.resources)) is not None:
        return True  # its user's cap in its project (policy/user_caps.py)
    if book.room is not None and book.room.held(job) is not None:
        return True  # its project's CPU or memory limit (policy/room_limits.py)
    limit = book.project(job.project).limit
    if limit is None:
        return False
    return book.in_use.get(job.project, 0.0) + book.ask(job.resources) > limit + _EPS


def _candidates(
    snapshot: Snapshot,
    now: float,
    top: int | None,
    already: Collection[int],
) -> dict[str, list[_Candidate]]:
    """Running jobs either rule could stop for some waiting job, by node, least work lost
    first: one row each (jobs spread over nodes left out), borrowers or any job without
    quotas (a job's own project is checked per waiting job in `_allowed`)."""
    config = snapshot.config
    if top is None:
        return {}
    lower = config.preempt_lower_classes
    pays = config.preempt_where_it_pays
    # The cheap tests first: on most passes no running job is of a lower class than the
    # queue's top or checkpoints, and this walk is all the rules cost.
    maybe = [
        r
        for r in snapshot.running
        if (lower and r.priority < top) or (pays and r.checkpointing and r.priority <= top)
    ]
    if not maybe:
        return {}
    rows: dict[int, int] = {}
    for r in maybe:  # a spread job's rows are alike: all of them are here, or none
        rows[r.id] = rows.get(r.id, 0) + 1
    out: dict[str, list[_Candidate]] = {}
    default = config.default_time_limit_s
    for r in maybe:
        if rows[r.id] > 1 or r.id in already:
            continue
        if not may_preempt(r, now, config, min_runtime_s=0.0):
            continue  # the run time floor is the project's (`min_runtime_ok`)
        lost = lost_gpu_s(r, now, config)
        if not (lower and r.priority < top) and lost > config.preempt_max_loss_gpu_s:
            continue  # only where it pays could take it, and it would lose too much
        project = snapshot.projects.get(r.project)  # read with quotas off too
        least = None if project is None else project.preempt_min_runtime_s
        floor = config.min_runtime_s if least is None else least
        limit = r.time_limit_s if r.time_limit_s is not None else default
        left = max(0.0, r.start_time + limit - now)
        out.setdefault(r.node, []).append(_Candidate(r, lost, left, now - r.start_time >= floor))
    for cs in out.values():
        cs.sort(key=lambda c: (c.lost_gpu_s, c.job.priority, -c.job.start_time, c.job.id))
    return out


def _allowed(job: PendingJob, c: _Candidate, need_s: float, config: PolicyConfig) -> Rule | None:
    """Which rule lets `c` be stopped for `job` (module docstring), or None; the quotas are
    the chooser's guard (`_Chooser.allows`)."""
    v = c.job
    if config.preempt_lower_classes and v.priority < job.priority and c.min_runtime_ok:
        return Rule.CLASS_PREEMPTION
    if (
        config.preempt_where_it_pays
        and v.priority <= job.priority
        and v.checkpointing
        and c.min_runtime_ok
        and c.lost_gpu_s <= config.preempt_max_loss_gpu_s
        and c.left_s >= config.preempt_gain_ratio * need_s
    ):
        return Rule.PAYS_PREEMPTION
    return None


class _Chooser:
    """The victims of this stage, job by job: who is taken, and each project's GPUs gone."""

    def __init__(
        self,
        snapshot: Snapshot,
        index: NodeIndex,
        book: QuotaBook | None,
        shadow: Shadow | None,
        gone: dict[str, float],
    ) -> None:
        self.snapshot, self.config, self.index = snapshot, snapshot.config, index
        self.book, self.shadow, self.gone = book, shadow, gone
        self.taken: set[int] = set()
        self.reserved: dict[str, tuple[int, ...]] = {}
        if shadow is not None:
            self.reserved = dict(shadow.reservation.parts())

    def victims_for(
        self, job: PendingJob, need_s: float, cands: dict[str, list[_Candidate]]
    ) -> tuple[Rule, list[_Candidate]] | None:
        """The victims on the best node (the class rule first, then least work lost, fewest,
        the node name), what the job will use there held and booked; None: none."""
        best: tuple[tuple[bool, float, int, str], list[_Candidate], Rule, NodeFit | None] | None
        best = None
        for name, cs in cands.items():
            free = self.index.by_name.get(name)
            if free is None:
                continue
            allowed = [(c, r) for c in cs if c.job.id not in self.taken
                       and (r := _allowed(job, c, need_s, self.config)) is not None]  # fmt: skip
            if not allowed:
                continue
            for rule in _rules(allowed):
                usable = [c for c, r in allowed if rule is Rule.PAYS_PREEMPTION or r is rule]
                found = self._fit(job, free, usable)
                if found is None:
                    continue
                victims, fit = found
                lost = sum(c.lost_gpu_s for c in victims)
                rank = (rule is not Rule.CLASS_PREEMPTION, lost, len(victims), name)
                if best is None or rank < best[0]:
                    best = (rank, victims, rule, fit)
                break
        if best is None:
            return None
        (_, _, _, node), victims, rule, fit = best
        res = job.resources
        free = self.index.by_name[node]
        if fit is not None:
            view = fit.view_with([c.job for c in victims])
        else:
            view = free.copy()
            for c in victims:
                release(view, c.job)
        placement = place([view], res)
        if placement is None:
            return None
        plan = hold(res, placement, tuple(c.job for c in victims), free)
        self.index.take(plan.held, plan.held_res)
        for c in victims:
            self.taken.add(c.job.id)
            self._took(c.job)
        if self.book is not None:
            self.book.add(job.project, self.book.ask(res), job.user, res)
        return rule, victims

    def _fit(
        self, job: PendingJob, free: NodeFree, usable: list[_Candidate]
    ) -> tuple[list[_Candidate], NodeFit | None] | None:
        """The least-lost victims among `usable` that let the job fit on `free`'s node, none
        too many, and the fit (None: counted by GPUs alone); None: they cannot. A job behind
        the reservation fits on the node's spare view, the reserved GPUs never given back."""
        res = job.resources
        by_id = {c.job.id: c for c in usable}
        guard = _QuotaGuard(self, job.project)
        reserved = self.reserved.get(free.node.name)
        behind = self.shadow is not None and self.shadow.reservation.job_id != job.id
        fit: Fit[RunningJob]
        node_fit: NodeFit | None = None
        if behind and reserved is not None and self.shadow is not None:
            fit = node_fit = NodeFit(self.shadow.spare_of(free), res, frozenset(reserved))
        elif counts_only(res) and not free.sharers:
            if len(free.gpus) + sum(len(c.job.gpus) for c in usable) < res.gpus:
                return None
            fit = CountFit(res.gpus - len(free.gpus))
        else:
            fit = node_fit = NodeFit(free, res)
        chosen, fits = take_until_fit((c.job for c in usable), fit, guard)
        if not fits:
            return None
        return [by_id[v.id] for v in fill_back(chosen, fit)], node_fit

    def allows(self, victim: RunningJob, project: str, extra: float) -> bool:
        """Whether `victim` may go for a job of `project`: its own project's always; another
        project's only while that project stays at or above its quota without it (and
        without the GPUs `extra` this plan already takes from it)."""
        book = self.book
        if book is None or victim.project == project:
            return True
        p = victim.project
        left = book.in_use.get(p, 0.0) - self.gone.get(p, 0.0) - extra
        return left - book.held(victim) >= book.project(p).quota - _EPS

    def _took(self, victim: RunningJob) -> None:
        if self.book is not None:
            self.gone[victim.project] = self.gone.get(victim.project, 0.0) + self.book.held(victim)


class _QuotaGuard:
    """`_Chooser.allows` as the victim selector's guard (policy/victims.py) for one plan."""

    def __init__(self, chooser: _Chooser, project: str) -> None:
        self.chooser, self.project = chooser, project
        self.extra: dict[str, float] = {}

    def allows(self, victim: RunningJob) -> bool:
        return self.chooser.allows(victim, self.project, self.extra.get(victim.project, 0.0))

    def took(self, victim: RunningJob) -> None:
        book = self.chooser.book
        held = book.held(victim) if book is not None else float(len(victim.gpus))
        self.extra[victim.project] = self.extra.get(victim.project, 0.0) + held


def _rules(allowed: Iterable[tuple[_Candidate, Rule]]) -> list[Rule]:
    """The rules to try on a node: the class rule with its victims alone first."""
    found = {r for _, r in allowed}
    return [r for r in (Rule.CLASS_PREEMPTION, Rule.PAYS_PREEMPTION) if r in found]
