"""One scheduling pass: EASY backfill in queue order, whole job on one node, best-fit GPUs.

Jobs are taken in `rank` order:

- A job no node could ever run is `Unsatisfiable`; a job whose --begin time is still to come
  is `BeginTime`. Neither holds anything back for the others.
- Jobs that fit start now (best-fit node, best-linked GPUs: `placement.place`).
- The first job that does not fit gets the pass's one reservation (`backfill.reserve`): the
  earliest time enough will be free for it on one node, with the node and GPUs it will get
  then. It waits with `Resources`, and the message names both what is missing now and the
  reservation.
- Every later job starts now only if it fits now and cannot delay that reservation (it ends
  by then, or keeps off what is reserved). Otherwise it waits: `Resources` when it does not
  fit now at all, `Priority` when it fits now but would delay the reserved job.

With project quotas or limits (`Snapshot.projects`), `QuotaBook.admitted` feeds this loop: a
job its project holds back waits with `Quota`; the jobs within their project's quota go first,
in queue order, and one that does not fit may reclaim borrowed GPUs (`Reclaim`, with
`Decision.preemptions`); then the borrowers (`policy/quota.py`, `policy/preemption.py`).
Neither a `Quota` nor a `Reclaim` job takes the reservation.

Named profiles (`policy/profiles.py`) switch parts of this off or on, so the baselines a trace
replay compares run through this same pass: another queue order (`rank`, `policy/orders.py`),
no quotas, no backfill (after the first job that cannot start, every later one waits with
`Priority`), and preemption by order after the pass (`policy/priority_preemption.py`).

`Decision.estimated_start` is given for the reserved job (its reservation time, an upper bound
while the queue order holds) and for jobs held by --begin (their begin time, a lower bound).
Other waiting jobs get no estimate: that would need a reservation each (conservative backfill),
quadratic in the queue.

Cost: O(pending + (starts + distinct requests) x nodes), not quadratic in the queue. What the
pass learns about a request holds for the rest of it, because what is free only shrinks: a
request that fits nowhere now (or would delay the reservation) is answered from a memo for every
later job asking the same, and a GPU job asking for more GPUs than any node has free is refused
at once. Placement looks first at the nodes with the fewest free GPUs (best fit), so a start
usually checks a few nodes. A reused status may state free counts from when it was first
computed: upper bounds of what is free by the job's turn.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

from gpupool.core.gpu_catalog import display_name
from gpupool.core.job import Resources
from gpupool.policy.backfill import FreeIndex, Release, Shadow, reserve, reserve_by_count
from gpupool.policy.feasibility import check_satisfiable
from gpupool.policy.free_view import free_view
from gpupool.policy.ordering import rank
from gpupool.policy.placement import Placement, place, why_not
from gpupool.policy.preemption import Reclaimer
from gpupool.policy.priority_preemption import preempt_for_order
from gpupool.policy.quota import QuotaBook
from gpupool.policy.snapshot import (
    Decision,
    PendingJob,
    Reservation,
    RunningJob,
    Snapshot,
    Start,
)
from gpupool.policy.status import Code, Status
from gpupool.policy.wide import WideShadow, is_wide, piece, place_wide, reserve_wide, shortfall


def _gpu_words(res: Resources) -> str:
    kind = "GPU" if res.gpus == 1 else "GPUs"
    what = f"{display_name(res.gpu_type)} {kind}" if res.gpu_type else kind
    return f"{res.gpus} {what}"


class _Request:
    """What the pass has learned about one distinct request. It stays true for the rest of
    the pass, because what is free only shrinks during it."""

    __slots__ = ("behind", "behind_at", "impossible", "no_fit", "no_spare")

    def __init__(self, impossible: Status | None) -> None:
        self.impossible = impossible  # Unsatisfiable, or None
        self.no_fit: Status | None = None  # fits nowhere now: its Resources status
        self.no_spare = False  # does not fit what a job outlasting the reservation may use
        # For a job outlasting the reservation: its Priority status, valid while no other job
        # starts (_Pass.version), since it relies on the request fitting the reserved node now.
        self.behind: Status | None = None
        self.behind_at = -1


# Up to this many nodes, a job that fits nowhere is told each node's reason; beyond, a summary.
_NAMED_NODES = 8
_HELD = Status(Code.BEGIN_TIME, "held until its --begin time", "begin")
# Statuses of jobs that do not block the line when backfill is off: they are not waiting
# for resources (QUOTA: a project's limit; a job it holds back is not yielded anyway).
_NOT_IN_LINE = (Code.UNSATISFIABLE, Code.BEGIN_TIME, Code.QUOTA, Code.QUOTA_NEVER_FITS)


class _Pass:
    """The state of one pass: what is free now, what started, the reservation, the verdicts."""

    def __init__(self, snapshot: Snapshot, now: float) -> None:
        self.snapshot, self.now, self.config = snapshot, now, snapshot.config
        running = snapshot.running_view
        self.view = running if running is not None and running.serves(snapshot) else None
        if self.view is not None:  # kept up to date by the caller: nothing to count
            self.free, self.shared = FreeIndex.from_view(self.view), False
            whole_in_use, partial = self.view.whole_in_use, []
        else:
            view = free_view(snapshot)
            self.free, self.shared = FreeIndex(view.frees), view.shared
            whole_in_use, partial = view.whole_in_use, view.partial
        self.starts: list[Start] = []
        self.started: list[Release] = []  # this pass's starts, for the reservation timeline
        self.version = 0  # one more at each start
        self.pending: dict[int, Status] = {}
        self.estimated: dict[int, float] = {}
        self.shadow: Shadow | None = None
        self.behind: Status | None = None  # the Priority status of jobs that would delay it
        self.requests: dict[tuple[object, ...], _Request] = {}
        # None: no project has a quota or a limit, or the profile ignores them
        self.book = (
            QuotaBook.of(snapshot, whole_in_use, partial) if snapshot.config.use_quotas else None
        )
        self.reclaimer = None if self.book is None else Reclaimer(snapshot, self.book, now)

    def run(self, ordered: Iterable[PendingJob]) -> None:
        """Every job in queue order. Most of a long queue is settled by what the pass already
        knows about the same request, so that comes first, in line (this loop is the hot path
        on 10,000 pending jobs)."""
        if not self.config.backfill:
            ordered = self._strict(ordered)
        now, pending, estimated = self.now, self.pending, self.estimated
        default_limit = self.config.default_time_limit_s
        requests = self.requests
        for job in ordered:
            res = job.resources
            # A tuple key: hashing the frozen dataclass runs Python code, a tuple's does not.
            key = (
                res.gpus,
                res.gpu_type,
                res.cpus,
                res.mem_bytes,
                res.gpu_memory_bytes,
                res.gpu_fraction,
            )
            req = requests.get(key)
            if req is None:
                spread = self.config.spread_wide_jobs
                req = requests[key] = _Request(check_satisfiable(res, self.snapshot.nodes, spread))
            if req.impossible is not None:
                # Refused at submit normally; the inventory may have shrunk since.
                pending[job.id] = req.impossible
            elif job.begin_time is not None and job.begin_time > now:
                pending[job.id] = _HELD
                estimated[job.id] = job.begin_time
            elif req.no_fit is not None:
                pending[job.id] = req.no_fit
            else:
                limit = default_limit if job.time_limit_s is None else job.time_limit_s
                if (
                    req.behind is not None
                    and req.behind_at == self.version
                    and self.shadow is not None
                    and self.shadow.outlasts(now + limit)
                ):
                    pending[job.id] = req.behind
                    continue
                status = self._try_start(job, req, now + limit)
                if status is not None:
                    pending[job.id] = status

    def _strict(self, ordered: Iterable[PendingJob]) -> Iterator[PendingJob]:
        """Without backfill (`PolicyConfig.backfill` off): the jobs up to the first that cannot
        start, which keeps its reservation and estimate; every later one waits behind it (a
        job that never could run, or is held by --begin, still says so)."""
        pending = self.pending
        jobs = iter(ordered)
        for job in jobs:
            yield job
            status = pending.get(job.id)
            if status is not None and status.code not in _NOT_IN_LINE:
                break
        else:
            return
        text = f"waiting behind job {job.id}, the first in line (this profile does not backfill)"
        behind = Status(Code.PRIORITY, text, "order")
        for later in jobs:
            if later.begin_time is not None and later.begin_time > self.now:
                pending[later.id], self.estimated[later.id] = _HELD, later.begin_time
            else:
                pending[later.id] = self._request(later.resources).impossible or behind

    def _request(self, res: Resources) -> _Request:
        key = (res.gpus, res.gpu_type, res.cpus, res.mem_bytes, res.gpu_memory_bytes,
               res.gpu_fraction)  # fmt: skip
        req = self.requests.get(key)
        if req is None:
            spread = self.config.spread_wide_jobs
            req = self.requests[key] = _Request(check_satisfiable(res, self.snapshot.nodes, spread))
        return req

    def exhausted(self) -> bool:
        """No job that needs a GPU can start any more in this pass: the reservation is made
        and no GPU is free, whole or shared (what is free only shrinks during a pass)."""
        return self.shadow is not None and self.free.most() == 0

    def settle(self, jobs: list[PendingJob]) -> None:
        """The status `run` would give each of these jobs, which need a GPU, once
        `exhausted()`, without trying them: their request's, worked out once per request
        (a tight loop: on a full cluster this is most of the queue, every pass)."""
        pending, requests = self.pending, self.requests
        for job in jobs:
            res = job.resources
            key = (res.gpus, res.gpu_type, res.cpus, res.mem_bytes, res.gpu_memory_bytes,
                   res.gpu_fraction)  # fmt: skip
            req = requests.get(key)
            status = None if req is None else (req.impossible or req.no_fit)
            pending[job.id] = status if status is not None else self._settle_one(job)

    def _settle_one(self, job: PendingJob) -> Status:
        req = self._request(job.resources)
        if req.impossible is not None:
            return req.impossible
        if req.no_fit is not None:
            return req.no_fit
        if self.config.spread_wide_jobs and self._is_wide(job.resources):
            return self._wide_no_fit(job, req)
        # As `_try_start` says it with a reservation made and no GPU free.
        words = _gpu_words(job.resources)
        msg = f"needs {words} on one node; no node has more than 0 free now"
        req.no_fit = Status(Code.RESOURCES, msg, "placement")
        return req.no_fit

    def _claim(self, job: PendingJob, status: Status) -> Status:
        """A job within its quota that does not fit (`status`): reclaim for it, or else it
        waits, with the reservation if there is none yet."""
        assert self.reclaimer is not None
        limit = self.config.default_time_limit_s if job.time_limit_s is None else job.time_limit_s
        claimed = None
        wait = self.config.reclaim_after_s
        if wait <= 0 or self.now - job.submit_time >= wait:
            claimed = self.reclaimer.claim(job, self.free, self.shadow, self.now + limit)
        if claimed is None:
            return self._reserve(job, status) if self.shadow is None else status
        if self.shadow is None:  # the memo means "fits nowhere, and reserved": not so here
            self._request(job.resources).no_fit = None
        self.version += 1
        self.started.append(claimed[1])
        return claimed[0]

    def _try_start(self, job: PendingJob, req: _Request, end: float) -> Status | None:
        res, shadow = job.resources, self.shadow
        if self.config.spread_wide_jobs and self._is_wide(res):
            return self._try_start_wide(job, req, end)
        if shadow is None:
            placement = self.free.place(res)
            if placement is None:
                no_fit = self._no_fit(req, res)
                if self.book is not None and self.book.claiming:
                    return no_fit  # reclaim first (_claim)
                return self._reserve(job, no_fit)
            self._start(job, placement, end, outlasts=False)
            return None
        most_now = self.free.most()
        if res.gpus > most_now:
            msg = f"needs {_gpu_words(res)} on one node; no node has more than {most_now} free now"
            req.no_fit = Status(Code.RESOURCES, msg, "placement")
            return req.no_fit
        if not shadow.outlasts(end):
            # It ends by the time the reservation begins: anything free now will do.
            placement = self.free.place(res)
            if placement is None:
                return self._no_fit(req, res)
            self._start(job, placement, end, outlasts=False)
            return None
        if isinstance(shadow, WideShadow):
            # Conservative (policy/wide.py): nothing that outlasts a wide reservation starts.
            if self.free.place(res) is None:
                return self._no_fit(req, res)
            req.behind, req.behind_at = self._behind_wide(shadow), self.version
            return req.behind
        reserved_node = self.free.by_name[shadow.node]
        spare = shadow.spare(reserved_node)
        if not req.no_spare and res.gpus <= max(len(spare.gpus), self.free.most(shadow.node)):
            placement = self.free.place(res, swap=spare)
            if placement is not None:
                self._start(job, placement, end, outlasts=True)
                return None
            req.no_spare = True
        # The spare view differs from what is free now only on the reserved node.
        if why_not(reserved_node, res) is None:
            req.behind, req.behind_at = self._behind(shadow), self.version
            return req.behind
        return self._no_fit(req, res)

    def _no_fit(self, req: _Request, res: Resources) -> Status:
        """Resources, naming each node's binding constraint (once per request: O(nodes))."""
        frees = self.free.frees
        if len(frees) > _NAMED_NODES and not (res.gpu_type or res.cpus or res.mem_bytes):
            # On a big cluster one reason per node is a wall of text: say what binds.
            most = self.free.most()
            text = (
                f"needs {_gpu_words(res)} on one node; no node has more than {most} free now"
                if not res.fractional
                else "; ".join(place(frees, res)[1][:_NAMED_NODES]) + "; ..."
            )
            req.no_fit = Status(Code.RESOURCES, text, "placement")
            return req.no_fit
        req.no_fit = Status(Code.RESOURCES, "; ".join(place(frees, res)[1]), "placement")
        return req.no_fit

    def _behind(self, shadow: Shadow) -> Status:
        if self.behind is None:
            self.behind = Status(
                Code.PRIORITY,
                f"waiting for job {shadow.reservation.job_id}, which holds a reservation "
                f"({shadow.describe()}): this job fits now only on what is reserved, and would "
                "still be running then (a shorter --time may let it start now)",
                "backfill",
            )
        return self.behind

    def _reserve(self, job: PendingJob, status: Status) -> Status:
        res = job.resources
        if self.config.spread_wide_jobs and self._is_wide(res):
            shadow: Shadow | None = reserve_wide(
                job.id, res, self.free.frees, self._releases(), self.now, self.config.wide_placement
            )
        elif (res.gpu_type or res.cpus or res.mem_bytes or res.fractional) or (
            self.shared or self.free.sharing
        ):
            shadow = reserve(job.id, res, self.free.frees, self._releases(), self.now)
        else:  # counts only, nothing shared: the common case on a big cluster, and the cheap one
            shadow = reserve_by_count(
                job.id, res, self.free.frees, self._ends(), self._releases, self.now
            )
        if shadow is None:  # only for an unsatisfiable job, ruled out above
            return status
        self.shadow = shadow
        if not math.isinf(shadow.time):  # only if some running job has no end at all
            self.estimated[job.id] = shadow.time
        return Status(Code.RESOURCES, f"{status.message}; {shadow.describe()}", "placement")

    def _releases(self, nodes: set[str] | None = None, by: float = math.inf) -> list[Release]:
        """What each running job (less reclaim victims) and each start of this pass gives
        back, and when (backfill.expected_end inline: this runs in every pass that reserves);
        only on `nodes` and by `by` when given."""
        now, default_limit = self.now, self.config.default_time_limit_s
        taken = () if self.reclaimer is None else self.reclaimer.taken
        out = []
        running: Iterable[RunningJob] = self.snapshot.running
        if nodes is not None and self.view is not None:  # only the pieces on those nodes
            on_node = self.view.on_node
            running = [r for name in nodes for r in on_node.get(name, {}).values()]
        for r in running:
            if (nodes is None or r.node in nodes) and r.id not in taken:
                end = r.start_time + (default_limit if r.time_limit_s is None else r.time_limit_s)
                if end <= by:
                    out.append(Release(now if end < now else end, r.node, r.gpus, r.resources))
        out += [s for s in self.started if (nodes is None or s.node in nodes) and s.end <= by]
        return out

    def _ends(self) -> list[tuple[float, str, int]]:
        """(end, node, GPU count) of every release, as `_releases` but as plain tuples; an
        end already past stays as it is (reserve_by_count counts it as now)."""
        default_limit = self.config.default_time_limit_s
        taken = () if self.reclaimer is None else self.reclaimer.taken
        if self.view is not None:  # the view keeps them, with the same default limit
            if taken:
                ends = [e for (job_id, _), e in self.view.ends.items() if job_id not in taken]
            else:
                ends = list(self.view.ends.values())
            ends += [(s.end, s.node, len(s.gpus)) for s in self.started]
            return ends
        ends = [
            (
                r.start_time + (default_limit if r.time_limit_s is None else r.time_limit_s),
                r.node,
                len(r.gpus),
            )
            for r in self.snapshot.running
            if r.id not in taken
        ]
        ends += [(s.end, s.node, len(s.gpus)) for s in self.started]
        return ends

    # --- wide jobs (PolicyConfig.spread_wide_jobs; policy/wide.py) ---------------------------

    def _is_wide(self, res: Resources) -> bool:
        return is_wide(res, self.snapshot.nodes)

    def _try_start_wide(self, job: PendingJob, req: _Request, end: float) -> Status | None:
        """`_try_start` for a wide job. Without a reservation it starts if it fits now, else
        takes the reservation. With one, it starts only if it cannot delay it: it ends by
        then, or the reservation is a one-node `Shadow` and it keeps to the spare view of the
        reserved node (a `WideShadow` lets nothing outlast it). A wide claim that does not fit
        reserves at once, even while quotas say "reclaim first": reclaim plans fit one node,
        so no reclaim could start it (the Reclaimer finds no plan and the status stays)."""
        res, shadow, frees = job.resources, self.shadow, self.free.frees
        if not (res.gpu_type or res.cpus or res.mem_bytes) and self.free.total() < res.gpus:
            # It counts GPUs only and the pool has too few free: what every branch below
            # finds, from the index's counts (on a busy cluster most wide jobs stop here).
            return self._wide_no_fit(job, req)
        if shadow is None or not shadow.outlasts(end):
            placements = place_wide(frees, res, self.config.wide_placement)
            if placements is None:
                return self._wide_no_fit(job, req)
            self._start_wide(job, placements, end, None)
            return None
        if not req.no_spare and not isinstance(shadow, WideShadow):
            spare = shadow.spare(self.free.by_name[shadow.node])
            placements = place_wide(
                [spare if f.node is spare.node else f for f in frees],
                res,
                self.config.wide_placement,
            )
            if placements is not None:
                self._start_wide(job, placements, end, shadow)
                return None
            req.no_spare = True
        if place_wide(frees, res, self.config.wide_placement) is None:
            return self._wide_no_fit(job, req)
        if isinstance(shadow, WideShadow):
            req.behind = self._behind_wide(shadow)
        else:
            req.behind = self._behind(shadow)
        req.behind_at = self.version
        return req.behind

    def _wide_no_fit(self, job: PendingJob, req: _Request) -> Status:
        """Resources for a wide job that fits nowhere now (a memo, as `_no_fit`), with the
        reservation if there is none yet."""
        req.no_fit = Status(
            Code.RESOURCES,
            shortfall(
                self.free.frees,
                job.resources,
                self.snapshot.nodes,
                self.free.total(),
                self.config.wide_placement,
            ),
            "placement",
        )
        return req.no_fit if self.shadow is not None else self._reserve(job, req.no_fit)

    def _behind_wide(self, shadow: WideShadow) -> Status:
        if self.behind is None:
            self.behind = Status(Code.PRIORITY, shadow.holds_back(), "backfill")
        return self.behind

    def _start_wide(
        self, job: PendingJob, placements: list[Placement], end: float, shadow: Shadow | None
    ) -> None:
        """One Start (its first node; `more`: the others), one Release per node. `shadow`:
        the one-node reservation it outlasts, whose spare it used on the reserved node."""
        for p in placements:
            part = piece(job.resources, p.gpus)
            self.free.take(p, part)
            if shadow is not None and p.node == shadow.node:
                shadow.took(part)
            self.started.append(Release(end, p.node, p.gpus, part))
        self.version += 1
        first, more = placements[0], tuple((p.node, p.gpus) for p in placements[1:])
        self.starts.append(Start(job.id, first.node, first.gpus, more=more))

    def _start(self, job: PendingJob, placement: Placement, end: float, outlasts: bool) -> None:
        self.free.take(placement, job.resources)
        if outlasts and self.shadow is not None and placement.node == self.shadow.node:
            self.shadow.took(job.resources, placement.gpus, placement.gpu_memory_bytes)
        self.version += 1
        self.starts.append(
            Start(job.id, placement.node, placement.gpus, placement.gpu_memory_bytes)
        )
        self.started.append(Release(end, placement.node, placement.gpus, job.resources))


def decide(snapshot: Snapshot, now: float) -> Decision:
    """Which pending jobs start now and where, why each other one waits, the reservation of
    the first job that cannot start, and start estimates (module docstring)."""
    state = _Pass(snapshot, now)
    ordered, priorities = rank(snapshot, now)
    book = state.book
    if book is None:
        state.run(ordered)
    else:
        state.run(
            book.admitted(
                ordered,
                state.pending,
                now,
                lambda job: state._request(job.resources).impossible is not None,
                state._claim,
                state.exhausted,
                state.settle,
            )
        )
    reservations: tuple[Reservation, ...] = ()
    if state.shadow is not None:
        reservations = (state.shadow.reservation,)
    preemptions = () if state.reclaimer is None else tuple(state.reclaimer.preemptions)
    if snapshot.config.preempt_for_order:  # srtf, las: policy/priority_preemption.py
        found, waits = preempt_for_order(snapshot, now, ordered, state.free, state.pending)
        state.pending.update(waits)
        preemptions += tuple(found)
    return Decision(
        starts=tuple(state.starts),
        pending=state.pending,
        reservations=reservations,
        estimated_start=state.estimated,
        priorities=priorities,
        preemptions=preemptions,
    )
