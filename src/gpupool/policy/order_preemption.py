"""Preemption by queue order (`PolicyConfig.preempt_for_order`): the preemptive baselines,
srtf and las, stop running jobs that rank behind waiting ones.

The rule is the SRTF of the Helios artifact (Hu et al., SC'21), made placement-aware. Every
job, running or pending, is taken in `orders.sort_key` order against a budget of the
cluster's GPUs: a job that fits in what is left of the budget is *kept* (it takes its GPUs
from the budget); one that does not is passed over, and a running job passed over is not
kept. The kept jobs are those the order says should hold the GPUs now. Then the waiting
jobs are taken in order, and each that does not fit in what is free takes *victims* among
the running jobs that are not kept, rank behind it, are preemptible and ran at least
`min_runtime_s` in this attempt:

- on the node where the fewest victims make it fit (lowest-ranked victims tried first, those
  the fit does not need dropped again: policy/victims.py, the selector quota reclaim shares),
  then the node whose best victim ranks lowest, the fewest GPUs stopped, the node name;
- for a job wider than any node (`spread_wide_jobs`), across nodes by GPU count: the
  lowest-ranked victims until the free GPUs and theirs add up to the job's (and, by the
  `consolidate` wide placement, until it can be placed by that rule: whole free nodes).

What the job will use is then held for it (free GPUs taken, victims each used once), so later
jobs count only what is left; a waiting job that fits now (behind the reservation, say) holds
what it would use too. The walk stops at the first waiting job that is not kept or finds no
victims: that job will hold the pass's reservation (EASY backfill), and a later job could
start only where it does not delay it, so victims stopped for a later job might free GPUs
that job may not take.

The Helios artifact walks a single GPU count and never asks whether the freed GPUs are on
one node: here a job preempts only when the victims make it fit, so no job is stopped for a
job that still could not start.

Convergence: the replay applies the preemptions at once and decides again at the same time.
Preemption is only ever for the head of the line, the waiting jobs before any that would be
blocked: every job ahead of them runs (or is held for other reasons), so in the next pass
the first of them finds its victims' GPUs free, starts, and can only be stopped later for a
job ranked ahead of it, which there is none of. A victim ranks behind the job it was stopped
for, and once requeued ranks no better (a running job beats a pending one only at an equal
order value). Both rules go beyond the Helios one, on purpose: there a small job that fits in
the budget a big one left may stop that big one though it ranks behind; requeued, the big
one starts again (backfill) and the two swap forever; and a job behind the reservation may
stop jobs for GPUs the next reservation then takes (the replay's property test found both).
A higher class is never stopped for a lower one.

Cost: the jobs are merged in order (the pending queue is already sorted by the same key; the
running jobs are sorted here), and the walk stops once the budget is spent, so a pass costs
O(running log running + the jobs before the budget runs out), plus, for each job that needs
victims, a look at the nodes that have any: an O(1) bound, then counting GPUs (copies of the
node's view only for GPU types, CPUs, memory or shared GPUs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import takewhile

from gpupool.core.job import Resources
from gpupool.policy.filters.gpu_type import matching_gpus
from gpupool.policy.node_free import NodeFree
from gpupool.policy.node_index import NodeIndex
from gpupool.policy.orders import Key, gpu_amount, key_function, standing
from gpupool.policy.placement import Placement, place
from gpupool.policy.reasons import OrderCause
from gpupool.policy.request import counts_only
from gpupool.policy.snapshot import PendingJob, Preemption, RunningJob, Snapshot, WidePlacement
from gpupool.policy.status import Code, Rule, Status
from gpupool.policy.victims import CountFit, Fit, NodeFit, fill_back, hold, release, take_until_fit
from gpupool.policy.wide import is_wide, place_wide

EPS = 1e-9
_WAITING = (Code.RESOURCES, Code.PRIORITY)  # waits for GPUs: may be kept, may preempt

Candidate = tuple[int, RunningJob]  # (place in the order: larger ranks lower, one row)


class _Rows:
    """A fit on rows (policy/victims.py) as a fit on candidates."""

    def __init__(self, fit: Fit[RunningJob]) -> None:
        self.fit = fit

    def helps(self, c: Candidate) -> bool:
        return self.fit.helps(c[1])

    def give(self, c: Candidate) -> None:
        self.fit.give(c[1])

    def fits(self) -> bool:
        return self.fit.fits()

    def fits_with(self, cs: Sequence[Candidate]) -> bool:
        return self.fit.fits_with([c[1] for c in cs])


class _WideFit:
    """A job spread over nodes as victims go: the free matching GPUs across the pool add up
    to its count, and by the consolidate rule it can be placed (`_Chooser.places`)."""

    def __init__(self, chooser: _Chooser, res: Resources, have: int) -> None:
        self.chooser, self.res, self.have = chooser, res, have
        self.wanted = {f.node.name: set(matching_gpus(f.node, res)) for f in chooser.index.frees}
        self.views: dict[str, NodeFree] = {}
        self.total = have

    def helps(self, c: Candidate) -> bool:
        return True

    def give(self, c: Candidate) -> None:
        self.total += self.chooser.release_rows(c[1], self.views, self.wanted)

    def fits(self) -> bool:
        return self.total >= self.res.gpus and self.chooser.places(self.res, self.views)

    def fits_with(self, cs: Sequence[Candidate]) -> bool:
        views: dict[str, NodeFree] = {}
        gained = sum(self.chooser.release_rows(r, views, self.wanted) for _, r in cs)
        return self.have + gained >= self.res.gpus and self.chooser.places(self.res, views)


def preempt_for_order(
    snapshot: Snapshot,
    now: float,
    ranked: Sequence[PendingJob],
    index: NodeIndex,
    waiting: Mapping[int, Status],
) -> tuple[list[Preemption], dict[int, Status]]:
    """The preemptions of this pass, and the new status of each job they are for.

    `ranked`: the pending jobs in queue order (`rank`), `index`: what is free after the pass
    (what the jobs are given is taken from it), `waiting`: the status of each job the pass did
    not start. A pending job counts in the walk if the pass started it or it waits for GPUs
    (Resources, Priority); jobs held by --begin, quotas or unsatisfiable are left out.
    """
    config = snapshot.config
    floor = now - config.min_runtime_s
    if not any(r.preemptible and r.start_time <= floor for r in snapshot.running):
        return [], {}
    key = key_function(config.order, now, config)

    rows: dict[int, list[RunningJob]] = {}
    for r in snapshot.running:
        rows.setdefault(r.id, []).append(r)
    running: list[tuple[Key, float, RunningJob]] = []
    for same in rows.values():
        job, amount = same[0], sum(gpu_amount(r.resources) for r in same)
        if len(same) > 1:  # spread over nodes: key it on all its GPUs
            job = replace(job, resources=replace(job.resources, gpus=int(amount)))
        running.append((key(job), amount, job))
    running.sort(key=lambda e: e[0])

    # Merge the two sorted lists, keeping the budget, until it is spent.
    budget = float(sum(len(n.gpus) for n in snapshot.nodes))
    kept: list[tuple[int, PendingJob]] = []  # the head of the line, with their place
    head = True  # no waiting job so far was passed over by the budget
    place_of: dict[int, int] = {}  # running jobs not kept -> their place in the order
    i = j = pos = 0
    pending = [p for p in ranked if (s := waiting.get(p.id)) is None or s.code in _WAITING]
    pkey = key(pending[0]) if pending else None
    while budget > EPS and (i < len(running) or pkey is not None):
        if i < len(running) and (pkey is None or running[i][0] < pkey):
            _, amount, rjob = running[i]
            i += 1
            if amount <= budget + EPS:
                budget -= amount
            else:
                place_of[rjob.id] = pos
        else:
            pjob = pending[j]
            j += 1
            pkey = key(pending[j]) if j < len(pending) else None
            amount = gpu_amount(pjob.resources)
            if amount <= budget + EPS:
                budget -= amount
                if pjob.id in waiting and head:
                    kept.append((pos, pjob))
            elif pjob.id in waiting:
                head = False
        pos += 1
    for _, _, rjob in running[i:]:  # past the budget: none of them is kept
        place_of[rjob.id] = pos
        pos += 1
    if not kept or not place_of:
        return [], {}

    by_node: dict[str, list[Candidate]] = {}
    for r in snapshot.running:
        if r.id in place_of and r.preemptible and r.start_time <= floor and r.node in index.by_name:
            by_node.setdefault(r.node, []).append((place_of[r.id], r))
    if not by_node:
        return [], {}
    for cands in by_node.values():
        cands.sort(key=lambda c: -c[0])  # lowest-ranked first
    return _Chooser(snapshot, now, index, by_node).run(kept)


class _Chooser:
    """The victims of one pass, job by job, with what is left free and who is left to stop."""

    def __init__(
        self, snapshot: Snapshot, now: float, index: NodeIndex, by_node: dict[str, list[Candidate]]
    ) -> None:
        self.snapshot, self.now, self.config, self.index = snapshot, now, snapshot.config, index
        self.by_node = by_node
        self.left = {name: sum(len(r.gpus) for _, r in c) for name, c in by_node.items()}
        self.rows: dict[int, list[RunningJob]] = {}  # a candidate's rows, one per node
        for cands in by_node.values():
            for _, r in cands:
                self.rows.setdefault(r.id, []).append(r)
        self.alive = len(self.rows)

    def run(self, kept: list[tuple[int, PendingJob]]) -> tuple[list[Preemption], dict[int, Status]]:
        out: list[Preemption] = []
        statuses: dict[int, Status] = {}
        for at, job in kept:
            if self.alive <= 0:
                break
            res = job.resources
            if self._is_wide(res):
                victims = self._wide(res, at)
            else:
                victims = self._one_node(res, at)
            if victims is None:
                break  # it will hold the reservation: the head of the line ends here
            if not victims:
                continue  # it fits now: what it will use is held
            for v in victims:
                self._take(v)
            ahead = standing(job, self.now, self.config)
            out.extend(
                Preemption(v.id, job.id, OrderCause(ahead, standing(v, self.now, self.config)))
                for v in victims
            )
            ids = tuple(sorted(v.id for v in victims))
            statuses[job.id] = Status(
                Code.PRIORITY, Rule.ORDER_PREEMPTION, jobs=ids, standing=ahead
            )
        return out, statuses

    def _take(self, victim: RunningJob) -> None:
        self.alive -= 1
        for r in self.rows[victim.id]:  # off the candidate lists: they hold only the living
            self.left[r.node] -= len(r.gpus)
            rest = [c for c in self.by_node[r.node] if c[1].id != victim.id]
            if rest:
                self.by_node[r.node] = rest
            else:
                del self.by_node[r.node]

    def _is_wide(self, res: Resources) -> bool:
        return self.config.spread_wide_jobs and is_wide(res, self.snapshot.nodes)

    def _one_node(self, res: Resources, at: int) -> list[RunningJob] | None:
        """The victims that let `res` start on one node ([] if it fits now), what it will use
        held; None: no node has enough."""
        fits = self.index.place(res)
        if fits is not None:
            self.index.take(fits, res)
            return []
        best: tuple[tuple[int, int, int, str], list[Candidate]] | None = None
        for name, cands in self.by_node.items():
            free = self.index.by_name[name]
            if not res.fractional and len(free.gpus) + self.left[name] < res.gpus:
                continue  # even every victim here would not be enough
            chosen = self._on_node(res, free, cands, at)
            if chosen is None:
                continue
            rank = (len(chosen), -min(p for p, _ in chosen),
                    sum(len(r.gpus) for _, r in chosen), name)  # fmt: skip
            if best is None or rank < best[0]:
                best = (rank, chosen)
        if best is None:
            return None
        chosen = best[1]
        view = self.index.by_name[best[0][3]].copy()
        for _, r in chosen:
            release(view, r)
        placement = place([view], res)
        assert placement is not None  # it fits, by _on_node
        victims = tuple(r for _, r in chosen)
        plan = hold(res, placement, victims, self.index.by_name[placement.node])
        self.index.take(plan.held, plan.held_res)
        return list(victims)

    def _on_node(
        self, res: Resources, free: NodeFree, cands: list[Candidate], at: int
    ) -> list[Candidate] | None:
        """The lowest-ranked victims here that make `res` fit, none too many; only those that
        rank behind the job (at place `at`) may be victims."""
        behind = takewhile(lambda c: c[0] > at, cands)  # the rest rank ahead of the job
        fit: Fit[RunningJob]
        if counts_only(res) and not free.sharers:
            fit = CountFit(res.gpus - len(free.gpus))
        else:
            fit = NodeFit(free, res)
        rows = _Rows(fit)
        chosen, fits = take_until_fit(behind, rows)
        return fill_back(chosen, rows) if fits else None

    def _wide(self, res: Resources, at: int) -> list[RunningJob] | None:
        """A job wider than any node: the lowest-ranked victims across nodes until the free
        matching GPUs add up to its count ([] if they do already), none too many; the free
        GPUs it will use are held (the most free nodes first)."""
        wanted = {f.node.name: set(matching_gpus(f.node, res)) for f in self.index.frees}
        have = sum(len(wanted[f.node.name] & f.gpus) for f in self.index.frees)
        chosen: list[Candidate] = []
        if have < res.gpus or not self.places(res, {}):
            behind = {r.id: (p, r) for c in self.by_node.values() for p, r in c if p > at}
            fit = _WideFit(self, res, have)
            chosen, fits = take_until_fit(sorted(behind.values(), key=lambda c: -c[0]), fit)
            if not fits:
                return None
            chosen = fill_back(chosen, fit)
            views: dict[str, NodeFree] = {}
            need = res.gpus - sum(self.release_rows(r, views, wanted) for _, r in chosen)
        else:
            need = res.gpus
        frees = sorted(self.index.frees, key=lambda f: (-len(f.gpus), f.node.name))
        for f in frees:
            if need <= 0:
                break
            use = tuple(sorted(wanted[f.node.name] & f.gpus)[:need])
            if use:
                self.index.take(Placement(f.node.name, use), Resources(gpus=len(use)))
                need -= len(use)
        return [r for _, r in chosen]

    def places(self, res: Resources, views: dict[str, NodeFree]) -> bool:
        """Whether the wide placement rule places `res` on what is free with `views` (nodes
        with victims given back) in place of the index's nodes. By count (`spread`) the
        callers' sums say it; `consolidate` needs whole free nodes, so it asks the rule."""
        if self.config.wide_placement is not WidePlacement.CONSOLIDATE:
            return True
        frees = [views.get(f.node.name, f) for f in self.index.frees]
        return place_wide(frees, res, WidePlacement.CONSOLIDATE) is not None

    def release_rows(
        self, victim: RunningJob, views: dict[str, NodeFree], wanted: dict[str, set[int]]
    ) -> int:
        """Give back every row of `victim` in `views` (copies of the free view, made as
        needed); how many matching GPUs that frees (a shared GPU only once its last user goes)."""
        gained = 0
        for row in self.rows[victim.id]:
            view = views.get(row.node)
            if view is None:
                view = views[row.node] = self.index.by_name[row.node].copy()
            before = len(view.gpus & wanted[row.node])
            release(view, row)
            gained += len(view.gpus & wanted[row.node]) - before
        return gained
