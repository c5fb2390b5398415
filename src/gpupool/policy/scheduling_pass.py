"""One scheduling pass over the ordered queue: admit -> filter -> place or reserve -> reclaim.

The pass owns the queue and takes each job in turn (`take`):

- A job no node could ever run is `Unsatisfiable`; a job whose --begin time is still to come
  is `BeginTime`. Neither holds anything back for the others.
- Jobs that fit start now (best-fit node, best-linked GPUs: `placement.place` on the node
  index, policy/node_index.py).
- The first job that does not fit gets the pass's one reservation (`backfill.reserve_for`):
  the earliest time enough will be free for it on one node, with the node and GPUs it will
  get then. It waits with `Resources`, its status naming what binds now and the reservation.
- Every later job starts now only if it fits now and cannot delay that reservation (it ends
  by then, or keeps off what is reserved). Otherwise it waits: `Resources` when it does not
  fit now at all, `Priority` when it fits now but would delay the reserved job.

With project quotas or limits the quota book (policy/quota.py) gives each job a verdict: a
job its project holds back waits with `Quota`; the guaranteed jobs (within their project's
quota) and the jobs quotas do not concern go first, in queue order, and a guaranteed job that
does not fit may reclaim borrowed GPUs (`Reclaim`, policy/reclaim.py) before it may take the
reservation; then the borrowers, in the order they get idle GPUs (policy/borrowers.py). Once
nothing is free the borrowers left are settled without trying them (`settle`).

Without backfill (`PolicyConfig.backfill` off, the strict baselines), after the first job
that cannot start every later one waits behind it with `Priority` (a job that never could
run, or is held by --begin, still says so).

Cost: O(pending + (starts + distinct requests) x nodes), not quadratic in the queue. What the
pass learns about a request (`Learned`: it fits nowhere now, it would delay the reservation)
holds for the rest of it, because what is free only shrinks: every later job asking the same
is answered from it. A request that counts GPUs only is answered from the node index's counts
(the node with the most free GPUs), never by looking at every node.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from gpupool.core.job import Resources
from gpupool.policy.backfill import Shadow, reserve_for
from gpupool.policy.borrowers import BorrowerQueue
from gpupool.policy.feasibility import check_satisfiable
from gpupool.policy.filters import closest, fits
from gpupool.policy.learned import Learned
from gpupool.policy.node_facts import NodeFacts
from gpupool.policy.node_index import NodeIndex
from gpupool.policy.placement import Placement, why_none
from gpupool.policy.quota import QuotaBook, Verdict
from gpupool.policy.reasons import Dimension, Insufficient
from gpupool.policy.reclaim import ReclaimPlanner
from gpupool.policy.request import RequestKey, counts_only, expected_end, request_key
from gpupool.policy.snapshot import PendingJob, Snapshot, Start
from gpupool.policy.status import Code, Rule, Status
from gpupool.policy.timeline import Release

if TYPE_CHECKING:
    from gpupool.policy.wide_jobs import WideJobs

HELD = Status(Code.BEGIN_TIME, Rule.BEGIN_TIME)
# Statuses of jobs that do not block the line when backfill is off: they are not waiting
# for resources (QUOTA: a project's limit).
_NOT_IN_LINE = (Code.UNSATISFIABLE, Code.BEGIN_TIME, Code.QUOTA, Code.QUOTA_NEVER_FITS)


class SchedulingPass:
    """The state of one pass: what is free now, what started, the reservation, the verdicts."""

    def __init__(
        self, snapshot: Snapshot, now: float, index: NodeIndex, book: QuotaBook | None
    ) -> None:
        self.snapshot, self.now, self.config = snapshot, now, snapshot.config
        self.free = index
        self.book = book
        self.reclaims = None if book is None else ReclaimPlanner(snapshot, book, now)
        self.wide: WideJobs | None = None
        if snapshot.config.spread_wide_jobs:  # the simulator's (policy/wide_jobs.py)
            # Loaded only by the passes that take wide jobs; wide_jobs.py never imports this
            # module (it names the pass by a Protocol, `wide_jobs.PassState`).
            from gpupool.policy.wide_jobs import WideJobs

            self.wide = WideJobs(self)
        self.starts: list[Start] = []
        self.started: list[Release] = []  # this pass's starts, for the reservation timeline
        self.version = 0  # one more at each start
        self.pending: dict[int, Status] = {}
        self.estimated: dict[int, float] = {}
        self.shadow: Shadow | None = None
        self.behind: Status | None = None  # the Priority status of jobs that would delay it
        self.blocker: Status | None = None  # no backfill: the status of the jobs behind
        self.requests: dict[RequestKey, Learned] = {}

    # --- the queue ----------------------------------------------------------------------

    def run(self, ordered: Iterable[PendingJob]) -> None:
        """Every job in queue order; with a quota book, the guaranteed jobs and those quotas
        do not concern first, then the borrowers (module docstring)."""
        book = self.book
        if book is None:
            self._run_plain(ordered)
            return
        pending, now, admit = self.pending, self.now, book.admit
        # `book.verdict`, in line (the hot path: every pending job, every pass): a whole-GPU
        # preemptible job asking at least its project's floor borrows, else `admit` decides.
        floors, floor_of = book.borrow_floors(), book.borrow_floor
        deferred: list[PendingJob] = []  # the borrowers, in queue order
        for job in ordered:
            if job.begin_time is not None and job.begin_time > now:
                self.take(job)
                continue
            res = job.resources
            if (
                floors is not None
                and res.gpu_memory_bytes is None
                and res.gpu_fraction is None
                and job.preemptible
            ):
                floor = floors.get(job.project)
                if floor is None:
                    floor = floor_of(job.project)
                if res.gpus >= floor:
                    deferred.append(job)
                    continue
            verdict = admit(job)
            if verdict is Verdict.BORROW:
                deferred.append(job)
                continue
            if isinstance(verdict, Status) and not self._request(job.resources).impossible:
                pending[job.id] = verdict
                continue
            guaranteed = verdict is Verdict.GUARANTEED
            status = self.take(job, guaranteed)
            if status is None:
                book.add(job.project, book.ask(job.resources), job.user, job.resources)
            elif guaranteed and status.code is Code.RESOURCES:
                pending[job.id] = self._reclaim_for(job, status)
        queue = BorrowerQueue(book, deferred)
        borrowers = iter(queue)
        in_line = self.config.backfill
        # `exhausted()`, asked only when it may have changed: it stays false while no job
        # starts (what is free changes only at a start) and, once true, ends the loop.
        open_at = -1  # the pass's version when it was last found not exhausted
        while True:
            if self.shadow is not None and open_at != self.version:
                if self.free.most() == 0:  # exhausted: the rest, but those quotas hold back,
                    rest = queue.untaken()  # are settled
                    if book.limits or book.reclaiming:
                        rest = [j for j in rest if not self._held_back(j, book)]
                    self.settle(rest)
                    return
                open_at = self.version
            borrower = next(borrowers, None)
            if borrower is None:
                return
            if (book.limits or book.reclaiming) and self._held_back(borrower, book):
                continue
            answered = self._answered(borrower) if in_line else None
            if answered is not None:
                pending[borrower.id] = answered
            elif self.take(borrower) is None:
                book.add(
                    borrower.project,
                    book.ask(borrower.resources),
                    borrower.user,
                    borrower.resources,
                )

    def _answered(self, job: PendingJob) -> Status | None:
        """What `take` says of a job, when the pass already knows it from the job's request
        (it fits nowhere now, or it would delay the reservation); None: ask `take`. Only with
        backfill, where `take` sets no blocker (tests/unit/test_policy_pass.py checks it
        against `take`). Most borrowers of a long queue end here: it saves `take`'s call."""
        req = self.requests.get(request_key(job.resources))
        if req is None or req.impossible is not None:
            return None
        if job.begin_time is not None and job.begin_time > self.now:
            return None
        if req.no_fit is not None:
            return req.no_fit
        shadow = self.shadow
        if req.behind is None or req.behind_at != self.version or shadow is None:
            return None
        end = expected_end(self.now, job.time_limit_s, self.config.default_time_limit_s)
        return req.behind if end > shadow.time or math.isinf(end) else None

    def _run_plain(self, ordered: Iterable[PendingJob]) -> None:
        """`take` for each job of a queue without quotas, in line: the hot path on 10,000
        pending jobs, most of them answered by what the pass knows about their request
        (tests/unit/test_policy_pass.py checks it decides as `take` job by job)."""
        requests, pending, estimated = self.requests, self.pending, self.estimated
        now, default_limit = self.now, self.config.default_time_limit_s
        strict = not self.config.backfill
        for job in ordered:
            if self.blocker is not None:  # no backfill, and the line is blocked
                self.take(job)
                continue
            res = job.resources
            req = requests.get(request_key(res))
            if req is None:
                req = requests[request_key(res)] = self._learn(res)
            begin = job.begin_time
            status: Status | None
            if req.impossible is not None:
                status = req.impossible
            elif begin is not None and begin > now:
                estimated[job.id] = begin
                status = HELD
            elif req.no_fit is not None:
                status = req.no_fit
            else:
                end = expected_end(now, job.time_limit_s, default_limit)
                shadow = self.shadow
                if (
                    req.behind is not None
                    and req.behind_at == self.version
                    and shadow is not None
                    and (end > shadow.time or math.isinf(end))  # shadow.outlasts(end), in line
                ):
                    status = req.behind
                else:
                    status = self._try_start(job, req, end, False)
            if status is not None:
                pending[job.id] = status
                if strict and status.code not in _NOT_IN_LINE:
                    self.blocker = Status(Code.PRIORITY, Rule.BEHIND_HEAD, jobs=(job.id,))

    def _held_back(self, job: PendingJob, book: QuotaBook) -> bool:
        """A borrower its project holds back now gets its `Quota` status (True), unless the
        pass refuses it for another reason."""
        status = book.holds_back(job)
        if status is None or self._request(job.resources).impossible is not None:
            return False
        self.pending[job.id] = status
        return True

    def _request(self, res: Resources) -> Learned:
        key = request_key(res)
        req = self.requests.get(key)
        if req is None:
            req = self.requests[key] = self._learn(res)
        return req

    def _learn(self, res: Resources) -> Learned:
        spread = self.config.spread_wide_jobs
        nodes = self.snapshot.nodes
        impossible = check_satisfiable(res, nodes, spread)
        return Learned(impossible, spread and self.wide is not None and self.wide.is_wide(res))

    def take(self, job: PendingJob, guaranteed: bool = False) -> Status | None:
        """Filter, then place or reserve, one job; its status (None: it starts). Most of a
        long queue is settled by what the pass already knows about the same request, so that
        comes first, in line (this is the hot path on 10,000 pending jobs). `guaranteed`: a
        job within its project's quota, which reclaims before it may take the reservation."""
        res = job.resources
        key = request_key(res)
        req = self.requests.get(key)
        if req is None:
            req = self.requests[key] = self._learn(res)
        begin = job.begin_time
        if self.blocker is not None:  # no backfill, and the line is blocked
            if begin is not None and begin > self.now:
                self.pending[job.id], self.estimated[job.id] = HELD, begin
                return HELD
            status: Status | None = req.impossible or self.blocker
        elif req.impossible is not None:
            status = req.impossible  # refused at submit normally; the pool may have shrunk
        elif begin is not None and begin > self.now:
            self.estimated[job.id] = begin
            status = HELD
        elif req.no_fit is not None:
            status = req.no_fit
        else:
            end = expected_end(self.now, job.time_limit_s, self.config.default_time_limit_s)
            shadow = self.shadow
            if (
                req.behind is not None
                and req.behind_at == self.version
                and shadow is not None
                and (end > shadow.time or math.isinf(end))  # shadow.outlasts(end), in line
            ):
                status = req.behind
            else:
                status = self._try_start(job, req, end, guaranteed)
        if status is not None:
            self.pending[job.id] = status
            if (
                not self.config.backfill
                and self.blocker is None
                and status.code not in _NOT_IN_LINE
            ):
                self.blocker = Status(Code.PRIORITY, Rule.BEHIND_HEAD, jobs=(job.id,))
        return status

    def exhausted(self) -> bool:
        """No job that needs a GPU can start any more in this pass: the reservation is made
        and no GPU is free, whole or shared (what is free only shrinks during a pass)."""
        return self.shadow is not None and self.free.most() == 0

    def settle(self, jobs: list[PendingJob]) -> None:
        """The status `take` would give each of these jobs, which need a GPU, once
        `exhausted()`, without trying them: their request's, worked out once per request
        (a tight loop: on a full cluster this is most of the queue, every pass)."""
        pending, requests = self.pending, self.requests
        for job in jobs:
            res = job.resources
            req = requests.get(request_key(res))
            if req is None:
                req = requests[request_key(res)] = self._learn(res)
            status = req.impossible or req.no_fit
            if status is None:
                if req.wide and self.wide is not None:
                    status = self.wide.no_fit(job, req)
                else:  # as `_try_start` says it with a reservation made and no GPU free
                    status = req.no_fit = self._by_count(job.resources)
            pending[job.id] = status

    # --- filter, place, reserve -----------------------------------------------------------

    def _try_start(
        self, job: PendingJob, req: Learned, end: float, guaranteed: bool
    ) -> Status | None:
        if req.wide and self.wide is not None:
            return self.wide.try_start(job, req, end)
        res, shadow, index = job.resources, self.shadow, self.free
        if shadow is None:
            placement = index.place(res)
            if placement is None:
                no_fit = self._no_fit(req, res)
                if guaranteed:
                    return no_fit  # reclaim first (`_reclaim_for`)
                return self.reserve(job, req, no_fit)
            self._start(job, placement, end, outlasts=False)
            return None
        if res.gpus > index.most():  # from the counts: no node has that many free
            req.no_fit = self._by_count(res)
            return req.no_fit
        if not shadow.outlasts(end):
            # It ends by the time the reservation begins: anything free now will do.
            placement = index.place(res)
            if placement is None:
                return self._no_fit(req, res)
            self._start(job, placement, end, outlasts=False)
            return None
        if shadow.spread:
            # A wide job's reservation: the spare view of each node it holds (policy/wide.py).
            return self._beside_wide(job, req, end)
        reserved_node = index.by_name[shadow.node]
        spare = shadow.spare(reserved_node)
        if not req.no_spare and res.gpus <= max(len(spare.gpus), index.most(shadow.node)):
            placement = index.place(res, swap=spare)
            if placement is not None:
                self._start(job, placement, end, outlasts=True)
                return None
            req.no_spare = True
        # The spare view differs from what is free now only on the reserved node.
        if fits(reserved_node, res):
            req.behind, req.behind_at = self.behind_status(shadow), self.version
            return req.behind
        return self._no_fit(req, res)

    def _beside_wide(self, job: PendingJob, req: Learned, end: float) -> Status | None:
        """`_try_start` for a one-node job that outlasts a wide job's reservation: it starts
        where it keeps off what the reservation holds on each of its nodes."""
        res, shadow = job.resources, self.shadow
        assert shadow is not None
        placement = None if req.no_spare else shadow.place_beside(self.free, res)
        if placement is not None:
            self._start(job, placement, end, outlasts=True)
            return None
        req.no_spare = True
        if self.free.place(res) is None:
            return self._no_fit(req, res)
        req.behind, req.behind_at = self.behind_status(shadow), self.version
        return req.behind

    def _by_count(self, res: Resources) -> Status:
        """`Resources` from the index's counts: the node with the most free GPUs has fewer
        than `res` asks for (of any type: an upper bound for a typed request)."""
        node, most = self.free.fullest()
        widest = NodeFacts.of(self.snapshot.nodes).widest(res.gpu_type)
        short = Insufficient(node or None, Dimension.GPU_COUNT, res.gpus, most, widest)
        return Status(Code.RESOURCES, Rule.NO_FIT, short=short, request=res)

    def _no_fit(self, req: Learned, res: Resources) -> Status:
        """`Resources` for a request that fits on no node now: each node's binding check and
        the closest node's (once per request: O(nodes)); by the counts alone for a request
        that counts GPUs only."""
        if counts_only(res):
            req.no_fit = self._by_count(res)
            return req.no_fit
        found = why_none(self.free.frees, res)
        short = closest(found) if found else None
        req.no_fit = Status(
            Code.RESOURCES, Rule.NO_FIT, short=short, nodes=tuple(found), request=res
        )
        return req.no_fit

    def behind_status(self, shadow: Shadow) -> Status:
        """The `Priority` status of a job that fits now but would delay the reservation."""
        if self.behind is None:
            reserved = shadow.reserved()
            holder = reserved.reservation.job_id
            self.behind = Status(
                Code.PRIORITY, Rule.BEHIND_RESERVATION, reserved=reserved, jobs=(holder,)
            )
        return self.behind

    def reserve(self, job: PendingJob, req: Learned, status: Status) -> Status:
        """The pass's one reservation for `job`, which does not fit now (`status`)."""
        res = job.resources
        taken = () if self.reclaims is None else self.reclaims.taken
        shadow: Shadow | None
        if req.wide and self.wide is not None:
            shadow = self.wide.reserve(job)
        else:
            shadow = reserve_for(job.id, res, self.free, self.started, taken, self.now)
        if shadow is None:  # only for an unsatisfiable job, ruled out above
            return status
        self.shadow = shadow
        if not math.isinf(shadow.time):  # only if some running job has no end at all
            self.estimated[job.id] = shadow.time
        return replace(status, reserved=shadow.reserved())

    def _reclaim_for(self, job: PendingJob, status: Status) -> Status:
        """A guaranteed job that does not fit (`status`): reclaim for it, or else it waits,
        with the reservation if there is none yet."""
        assert self.reclaims is not None
        found = None
        wait = self.config.reclaim_after_s
        if wait <= 0 or self.now - job.submit_time >= wait:
            end = expected_end(self.now, job.time_limit_s, self.config.default_time_limit_s)
            found = self.reclaims.reclaim_for(job, self.free, self.shadow, end)
        req = self._request(job.resources)
        if found is None:
            return self.reserve(job, req, status) if self.shadow is None else status
        if self.shadow is None:  # `no_fit` means "fits nowhere, and reserved": not so here
            req.no_fit = None
        self.version += 1
        self.started.append(found[1])
        return found[0]

    def _start(self, job: PendingJob, placement: Placement, end: float, outlasts: bool) -> None:
        self.free.take(placement, job.resources)
        shadow = self.shadow
        if outlasts and shadow is not None:
            shadow.took_on(
                placement.node, job.resources, placement.gpus, placement.gpu_memory_bytes
            )
        self.version += 1
        self.starts.append(
            Start(job.id, placement.node, placement.gpus, placement.gpu_memory_bytes)
        )
        self.started.append(Release(end, placement.node, placement.gpus, job.resources))
