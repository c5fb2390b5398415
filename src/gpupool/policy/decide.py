"""`decide(snapshot, now) -> Decision`: one scheduling pass, as a pipeline of small stages
(the shape of Nomad's feasibility/rank stack and the Kubernetes scheduling framework):

1. **order** the queue (`ordering.rank`: class, fair share, age, size; or a baseline's order,
   `orders.py`);
2. **admit**: the quota book gives each job a verdict (`quota.QuotaBook.verdict`: guaranteed,
   borrow, free, or held back with `Quota`); the pass owns the queue and takes the borrowers
   last, in `borrowers.BorrowerQueue` order;
3. **filter**: one check per dimension on each node (policy/filters/: GPU type, GPU count,
   GPU memory, CPUs, memory; topology across nodes), each failing with an `Insufficient`;
4. **place or reserve**: best-fit node and best-linked GPUs (`placement.py`) on the node index
   (`node_index.py`), or the pass's one EASY reservation (`backfill.py`) that later jobs may
   not delay;
5. **choose victims** (`victims.py`, one selector with one fill-back step): quota reclaim for
   a guaranteed job that does not fit (`reclaim.py`), and, in the preemptive baselines,
   preemption by queue order after the pass (`order_preemption.py`); then a higher priority
   class's preemption of lower classes and preemption where it pays (`class_preemption.py`);
   then defragmentation
   for the head of the line (`defrag.py`): jobs of one node requeued onto the others.

Every waiting job's status is data (`status.Status`: code, rule, the binding dimension and its
figures, the reservation); words are rendered at the edges (`words.py`).

What each stage is, is chosen here and only here, from the snapshot and its config: the node
index (counted, or kept by the caller: `node_index.node_index`), the quota book (none without
quotas), the preemption by order (srtf, las) and jobs spread over nodes (`SchedulingPass`,
policy/wide_jobs.py). The daemon runs the default profile: no order preemption, no spread jobs,
no run-time hints; docs/ARCHITECTURE.md says which parts are the simulator's.

`Decision.estimated_start` is given for the reserved job (its reservation time, an upper bound
while the queue order holds) and for jobs held by --begin (their begin time, a lower bound).
Other waiting jobs get no estimate: that would need a reservation each (conservative backfill),
quadratic in the queue.
"""

from __future__ import annotations

from gpupool.policy.class_preemption import preempt_after_pass
from gpupool.policy.defrag import defragment
from gpupool.policy.drains import DrainCheck, with_drains
from gpupool.policy.node_index import node_index
from gpupool.policy.ordering import rank
from gpupool.policy.quota import QuotaBook
from gpupool.policy.scheduling_pass import SchedulingPass
from gpupool.policy.snapshot import Decision, Preemption, Reservation, Snapshot
from gpupool.policy.status import Status


def decide(snapshot: Snapshot, now: float) -> Decision:
    """Which pending jobs start now and where, why each other one waits, the reservation of
    the first job that cannot start, and start estimates (module docstring)."""
    snapshot = with_drains(snapshot, now)  # each drained GPU held for good (drains.py)
    config = snapshot.config
    index = node_index(snapshot, now)
    ordered, priorities = rank(snapshot, now)
    book = QuotaBook.of(snapshot, index.whole_in_use, index.partial) if config.use_quotas else None
    state = SchedulingPass(snapshot, now, index, book)
    state.run(ordered)
    reservations: tuple[Reservation, ...] = ()
    if state.shadow is not None:
        reservations = (state.shadow.reservation,)
    preemptions: tuple[Preemption, ...] = ()
    if state.reclaims is not None:
        preemptions = tuple(state.reclaims.preemptions)
    if config.preempt_for_order:  # srtf, las (the simulator's baselines)
        from gpupool.policy.order_preemption import preempt_for_order

        found, waits = preempt_for_order(snapshot, now, ordered, index, state.pending)
        state.pending.update(waits)
        preemptions += tuple(found)
    if config.preempt_lower_classes or config.preempt_where_it_pays:
        gone = state.reclaims.gone if state.reclaims is not None else None
        found, waits = preempt_after_pass(
            snapshot, now, ordered, index, state.pending, book, state.shadow, gone,
            {p.job_id for p in preemptions},
        )  # fmt: skip
        state.pending.update(waits)
        for job_id in waits:  # it starts once its victims stop, not at its reservation
            state.estimated.pop(job_id, None)
        preemptions += tuple(found)
    if config.defragment:  # the head of the line, fitting in the pool but on no node
        preemptions += defragment(state, preemptions)
    if snapshot.drained:  # a job only drained GPUs could run waits for a resume
        _say_drained(snapshot, state.pending)
    return Decision(
        starts=tuple(state.starts),
        pending=state.pending,
        reservations=reservations,
        estimated_start=state.estimated,
        priorities=priorities,
        preemptions=preemptions,
        order=tuple(job.id for job in ordered),
    )


def _say_drained(snapshot: Snapshot, pending: dict[int, Status]) -> None:
    """The waiting jobs that only drained GPUs could run get `Drained` (policy/drains.py)."""
    check = DrainCheck(snapshot)
    for job in snapshot.pending:
        waiting = pending.get(job.id)
        if waiting is not None:
            drained = check.status(job, waiting)
            if drained is not None:
                pending[job.id] = drained
