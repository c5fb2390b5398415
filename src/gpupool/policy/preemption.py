"""Reclaim: which borrowing jobs to preempt so that a project under its quota gets it.

A pending job is a *claim* (`policy/quota.py`) when its project is under its quota and the job
keeps it within: `in use + its GPUs <= quota`. A claim that does not fit in the free GPUs may
take victims among the running jobs of OTHER projects that are borrowing:

- only preemptible jobs, and only while the victim's project stays at or above its quota once
  this plan's victims are gone: a project within its quota is never preempted by another;
- victims are tried lowest priority first, then the project most above its fair share
  (`(in use - quota) / weight` largest), then the youngest (latest start, then highest id);
- the job must then fit on ONE node: on each node the victims there are taken in that order
  (skipping those whose GPUs, CPUs or memory do not help) until the job fits on what is free
  plus what they hold, with `place`'s gang and GPU type rules; then every victim the fit does
  not need is dropped again, so no plan has a victim too many;
- among nodes, the plan with the lowest top victim priority wins, then the one that throws
  away the least work (GPU-seconds its victims have run: a requeued job starts over unless it
  checkpoints), then the fewest victims, the fewest GPUs preempted, the node name.

The claim waits with `Reclaim`, naming its victims, and gets `Decision.preemptions`. What it
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

from dataclasses import dataclass, replace

from gpupool.core.job import Resources
from gpupool.core.project import fmt_gpus
from gpupool.policy.backfill import FreeIndex, Release, Shadow
from gpupool.policy.backfill import _give_back as give_back
from gpupool.policy.placement import NodeFree, Placement, matching_gpus, place, why_not
from gpupool.policy.quota import EPS, QuotaBook
from gpupool.policy.snapshot import PendingJob, Preemption, RunningJob, Snapshot
from gpupool.policy.status import Code, Status


@dataclass(frozen=True)
class Plan:
    placement: Placement  # where the job will run once the victims are gone
    victims: tuple[RunningJob, ...]
    held: Placement  # the part of `placement` that is free now: held for it from now on
    held_res: Resources  # with the CPUs and memory held now


class Reclaimer:
    """The reclaims of one pass: victims already taken, and requests known to find none."""

    def __init__(self, snapshot: Snapshot, book: QuotaBook, now: float = 0.0) -> None:
        self.book = book
        self.now = now
        self.patience = snapshot.config.reclaim_patience_s
        self._running = snapshot.running
        self._by_node: dict[str, list[RunningJob]] | None = None  # built on the first claim
        self._spread: dict[int, list[RunningJob]] | None = None  # jobs on several nodes
        self.taken: set[int] = set()
        self.failed: set[tuple[object, ...]] = set()
        self.preemptions: list[Preemption] = []
        # GPUs of each project's victims: still running, so still in use (for limits and the
        # borrowers' order) until they exit, but no longer there to be reclaimed.
        self.gone: dict[str, float] = {}

    @property
    def by_node(self) -> dict[str, list[RunningJob]]:
        """The running jobs that may be victims in this pass by node: preemptible, and not
        about to end anyway (`_ends_soon`). Most passes reclaim nothing: built on demand."""
        if self._by_node is None:
            self._by_node = {}
            for r in self._running:
                if r.preemptible and not self._ends_soon(r):
                    self._by_node.setdefault(r.node, []).append(r)
        return self._by_node

    def _held(self, r: RunningJob) -> float:
        """The GPUs stopping `r` gives back: all of a job spread over several nodes, which
        the snapshot lists once per node (PolicyConfig.spread_wide_jobs)."""
        if self._spread is None:
            pieces: dict[int, list[RunningJob]] = {}
            for x in self._running:
                pieces.setdefault(x.id, []).append(x)
            self._spread = {i: p for i, p in pieces.items() if len(p) > 1}
        spread = self._spread.get(r.id)
        if spread is None:
            return self.book.held(r)
        return sum(self.book.held(x) for x in spread)

    def _ends_soon(self, r: RunningJob) -> bool:
        """Within `PolicyConfig.reclaim_patience_s` of its time limit: it gives its GPUs
        back by then anyway, and stopping it now would throw away the most work."""
        limit = r.time_limit_s
        return limit is not None and r.start_time + limit <= self.now + self.patience

    def _left(self, name: str) -> float:
        """A project's in use once the victims already chosen are gone."""
        return self.book.in_use.get(name, 0.0) - self.gone.get(name, 0.0)

    def _share(self, name: str) -> float:
        p = self.book.project(name)
        return (self._left(name) - p.quota) / p.weight

    def claim(
        self, job: PendingJob, index: FreeIndex, shadow: Shadow | None, end: float
    ) -> tuple[Status, Release] | None:
        """Reclaim for `job` if some victims let it start: hold what it will use that is
        free now, record the victims; its status, and what it gives back at `end` (for the
        reservation's timeline). None: no plan, nothing changed."""
        plan = self.plan(job, index.frees, shadow)
        if plan is None:
            return None
        index.take(plan.held, plan.held_res)
        if shadow is not None and plan.held.node == shadow.node:
            shadow.took(plan.held_res)
        status, preemptions = self.accept(job, plan)
        self.preemptions.extend(preemptions)
        at = plan.placement
        return status, Release(end, at.node, at.gpus, job.resources, at.gpu_memory_bytes)

    def plan(self, job: PendingJob, frees: list[NodeFree], shadow: Shadow | None) -> Plan | None:
        """The victims that let `job` start, or None. A request that found none for a project
        finds none for the rest of the pass: what is free and who may be a victim only shrink."""
        res = job.resources
        key = (res.gpus, res.gpu_type, res.cpus, res.mem_bytes, res.gpu_memory_bytes,
               res.gpu_fraction, job.project)  # fmt: skip
        if key in self.failed:
            return None
        book, best = self.book, None
        share = {name: self._share(name) for name in book.in_use}
        # Branch and bound: each node's plan has a lower bound on its rank (lowest victim
        # priority, work lost if the GPUs it lacks come from its youngest candidates); nodes
        # are tried best bound first, and once a bound is worse than the best plan found no
        # later node can win. The winner is the same as trying every node: ranks end in the
        # node name, so there are no ties. On a big cluster a claim tries a handful of nodes.
        now, typed = self.now, res.gpu_type or res.fractional
        bounded = []
        for free in frees:
            mine = [
                r for r in self.by_node.get(free.node.name, ())
                if r.project != job.project and r.id not in self.taken and share[r.project] > 0
            ]  # fmt: skip
            if not mine:
                continue
            if res.fractional:
                lacks = 0
            else:
                have = (
                    sum(g in free.gpus for g in matching_gpus(free.node, res))
                    if typed
                    else len(free.gpus)
                )
                lacks = res.gpus - have
                if lacks > sum(len(r.gpus) for r in mine):
                    continue  # even all of them would not free enough
            youngest = min(now - r.start_time for r in mine)
            floor = max(0, lacks) * max(0.0, youngest)
            bounded.append(((min(r.priority for r in mine), floor), free.node.name, free, mine))
        bounded.sort(key=lambda b: (b[0], b[1]))
        for bound, _, free, mine in bounded:
            if best is not None and bound > best[0][:2]:
                break
            mine.sort(key=lambda r: (r.priority, -share[r.project], -r.start_time, -r.id))
            found = self._on_node(job, free, shadow, mine)
            if found is not None:
                # Least work thrown away first (GPU-seconds the victims have run: a
                # requeued job starts over unless it checkpoints), then the fewest victims.
                lost = sum(len(v.gpus) * max(0.0, now - v.start_time) for v in found[1])
                rank = (max(v.priority for v in found[1]), lost, len(found[1]),
                        sum(len(v.gpus) for v in found[1]), free.node.name)  # fmt: skip
                if best is None or rank < best[0]:
                    best = (rank, found[0], found[1], free)
        if best is None:
            self.failed.add(key)
            return None
        _, view, victims, free = best
        placement, _ = place([view], res)
        assert placement is not None  # it fits, by _on_node
        return _plan(res, placement, victims, free)

    def _on_node(
        self, job: PendingJob, free: NodeFree, shadow: Shadow | None, mine: list[RunningJob]
    ) -> tuple[NodeFree, tuple[RunningJob, ...]] | None:
        """The victims on this node (module docstring), and the node as they would leave it."""
        res = job.resources
        reserved: frozenset[int] = frozenset()
        base = free.copy()
        if shadow is not None and shadow.node == free.node.name:
            reserved, base = frozenset(shadow.reservation.gpus), shadow.spare(free)
        wanted = set(matching_gpus(free.node, res)) - reserved
        left: list[RunningJob] = list(mine)
        while True:
            taken, fits, floored = self._greedy(res, base, reserved, wanted, left)
            if fits:
                break
            # A victim taken early may have used up its project's room above quota that a
            # later, sufficient one needed: try again without the first such victim.
            culprit = next((r for r in taken if r.project in floored), None)
            if culprit is None:
                return None
            left.remove(culprit)
        for r in reversed(list(taken)):  # drop every victim the fit does not need
            rest = [v for v in taken if v is not r]
            trial = base.copy()
            for v in rest:
                _release(trial, v, reserved)
            if why_not(trial, res) is None:
                taken = rest
        view = base.copy()
        for v in taken:
            _release(view, v, reserved)
        return view, tuple(taken)

    def _greedy(
        self,
        res: Resources,
        base: NodeFree,
        reserved: frozenset[int],
        wanted: set[int],
        mine: list[RunningJob],
    ) -> tuple[list[RunningJob], bool, set[str]]:
        """Victims in order until the job fits; whether it does; the projects whose quota
        kept a victim back."""
        view, taken, floored = base.copy(), [], set()
        gone: dict[str, float] = {}
        for r in mine:
            held = self._held(r)
            if self._left(r.project) - gone.get(r.project, 0.0) - held < (
                self.book.project(r.project).quota - EPS
            ):
                floored.add(r.project)  # its project would go under its quota
                continue
            if not _helps(r, view, res, wanted):
                continue
            _release(view, r, reserved)
            taken.append(r)
            gone[r.project] = gone.get(r.project, 0.0) + held
            if why_not(view, res) is None:
                return taken, True, floored
        return taken, False, floored

    def accept(self, job: PendingJob, plan: Plan) -> tuple[Status, list[Preemption]]:
        """Record the plan: its victims are taken, the in-use figures move. The job's status
        and the preemptions, with reasons stated on the figures before the plan."""
        book, name = self.book, job.project
        p, use = book.project(name), book.in_use.get(name, 0.0)
        claim = f"project {name} (quota {fmt_gpus(p.quota)}, in use {fmt_gpus(use)})"
        out = []
        for v in plan.victims:
            vq, vuse = book.project(v.project).quota, self._left(v.project)
            why = (
                f"reclaimed for {claim}: job {v.id} borrowed above project {v.project}'s quota "
                f"({fmt_gpus(vq)}, in use {fmt_gpus(vuse)})"
            )
            out.append(Preemption(v.id, job.id, why))
        for v in plan.victims:
            self.gone[v.project] = self.gone.get(v.project, 0.0) + self._held(v)
            self.taken.add(v.id)
        book.add(name, book.ask(job.resources))
        book.reclaiming.setdefault(name, job.id)
        ids = sorted(v.id for v in plan.victims)
        who = f"job {ids[0]}" if len(ids) == 1 else "jobs " + ", ".join(map(str, ids))
        text = f"waiting for {who} to stop (preempted to give project {name} its quota)"
        return Status(Code.RECLAIM, text, "reclaim"), out


def _helps(r: RunningJob, view: NodeFree, res: Resources, wanted: set[int]) -> bool:
    """Whether preempting `r` gives the job something it lacks on this node."""
    if any(g in wanted and (res.fractional or g not in view.gpus) for g in r.gpus):
        return True
    short_cpus = res.cpus and view.cpus is not None and view.cpus < res.cpus
    short_mem = res.mem_bytes and view.mem_bytes is not None and view.mem_bytes < res.mem_bytes
    return bool((short_cpus and r.resources.cpus) or (short_mem and r.resources.mem_bytes))


def _release(view: NodeFree, r: RunningJob, reserved: frozenset[int]) -> None:
    gpus = tuple(g for g in r.gpus if g not in reserved)
    give_back(view, Release(0.0, r.node, gpus, r.resources, r.gpu_memory_bytes))


def _plan(
    res: Resources, placement: Placement, victims: tuple[RunningJob, ...], free: NodeFree
) -> Plan:
    """What to hold now: the placement's GPUs that are free (or shared) now, and the CPUs and
    memory the victims do not give back."""
    if res.fractional:
        held = tuple(g for g in placement.gpus if free.room(g) is not None)
    else:
        held = tuple(g for g in placement.gpus if g in free.gpus)
    cpus = res.cpus
    if cpus and free.cpus is not None:
        cpus = min(free.cpus, max(0, cpus - sum(v.resources.cpus or 0 for v in victims)))
    mem = res.mem_bytes
    if mem and free.mem_bytes is not None:
        mem = min(free.mem_bytes, max(0, mem - sum(v.resources.mem_bytes or 0 for v in victims)))
    held_res = replace(res, cpus=cpus, mem_bytes=mem)
    return Plan(placement, victims, Placement(placement.node, held), held_res)
