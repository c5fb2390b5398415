"""The engine's jobs as `policy.decide` takes them, kept in step one job at a time.

A pass is given every waiting job as a `PendingJob` and every running one as a `RunningJob`,
in id order (as the store lists them). Rebuilding those from 10,000 waiting jobs cost more
than the policy's pass itself; here each is made when its job changes, kept in id order
(a new job has the highest id: an append), and the snapshot's tuples are copies of lists.
Each is made by the builder the simulator uses too (policy/inputs.py), so a replay and the
daemon tell `decide` the same facts about the same job.

A job held by `--begin` is not a pass's until its time comes (as Slurm's scheduler builds
its queue of the jobs that may start: a future begin time keeps a job out). Until then it
waits here apart, by begin time: a pass takes the jobs that may start, so 10,000 jobs held
for tonight cost a pass nothing (issue 35's goal 1), and the engine gives them their status
(engine/begin_held.py). `pending(now)` first lets in every job whose time has come.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping

from gpupool.core.job import Job, JobState
from gpupool.policy import PendingJob, RunningJob
from gpupool.policy.inputs import pending_job, running_pieces


def pending_of(job: Job, limit_s: float) -> PendingJob:
    """A stored job as a pass reads it while it waits: the builder the simulator uses too
    (policy/inputs.py), given the limit the engine enforces. Its requeues so far (not its
    retries after a failure) bound how often a preemption the quotas do not require may
    stop it (policy/victim_cost.py). The engine does not tell which jobs checkpoint (it would read each job's checkpoint
    directory every pass), nor the seconds run in earlier attempts: both stay at their
    defaults, so a daemon's job counts as losing its whole attempt."""
    restarts = job.restart_count - job.failed_attempts  # its preemptions, as the replay counts
    return pending_job(job.id, job.spec, job.user, job.submit_time, limit_s, restarts=restarts)


def running_of(job: Job, limit_s: float) -> RunningJob:
    """A stored RUNNING job as a pass reads it: on its one node (the local pool spreads no
    job over nodes), with the GPU memory it was granted."""
    assert job.node is not None
    start = job.start_time or 0.0
    (piece,) = running_pieces(
        pending_of(job, limit_s), start, ((job.node, job.gpus),), job.gpu_memory_bytes
    )
    return piece


class PolicyInputs:
    def __init__(self, limit_of: Callable[[Job], float]) -> None:
        """`limit_of(job)`: the time limit it runs under (engine/limits.py)."""
        self._limit_of = limit_of
        self._ids: list[int] = []  # the waiting jobs a pass takes, ids ascending
        self._pending: list[PendingJob] = []  # theirs, in the same order
        # Jobs whose --begin time had not come when last asked, and a heap of (begin, id)
        # over them; an entry whose job left or changed its time is dropped when it surfaces.
        self._later: dict[int, PendingJob] = {}
        self._begins: list[tuple[float, int]] = []
        # The ids whose place in `later()` changed since `later_changes()` last told (all
        # of them after a rebuild: `_later_reset`).
        self._later_changed: set[int] = set()
        self._later_reset = True
        self._now = -math.inf  # the latest `now` asked: a job beginning by then is let in
        self._running: dict[int, RunningJob] = {}
        self._pending_tuple: tuple[PendingJob, ...] | None = ()
        self._running_tuple: tuple[RunningJob, ...] | None = ()

    def update(self, job_id: int, job: Job | None) -> None:
        """`job` (None: it left the view) as it now is. A backend's job is never a
        pass's: its backend schedules it (docs/backends.md)."""
        if job is not None and job.spec.backend is not None:
            job = None
        waiting = job is not None and job.state is JobState.PENDING and not job.cancel_requested
        made = None
        if waiting:
            assert job is not None
            made = pending_of(job, self._limit_of(job))
        if made is not None and made.begin_time is not None and made.begin_time > self._now:
            self._put(job_id, None)
            if self._later.get(job_id) != made:
                self._later[job_id] = made
                self._later_changed.add(job_id)
                heapq.heappush(self._begins, (made.begin_time, job_id))
        else:
            if self._later.pop(job_id, None) is not None:
                self._later_changed.add(job_id)
                self._compact()
            self._put(job_id, made)
        if job is not None and job.state is JobState.RUNNING and job.node is not None:
            self._running[job_id] = running_of(job, self._limit_of(job))
            self._running_tuple = None
        elif self._running.pop(job_id, None) is not None:
            self._running_tuple = None

    def _put(self, job_id: int, made: PendingJob | None) -> None:
        """Keep `made` among the jobs a pass takes (None: take the job out)."""
        i = bisect_left(self._ids, job_id)
        present = i < len(self._ids) and self._ids[i] == job_id
        if made is None:
            if present:
                del self._ids[i], self._pending[i]
                self._pending_tuple = None
        elif not present:
            self._ids.insert(i, job_id)
            self._pending.insert(i, made)
            self._pending_tuple = None
        elif self._pending[i] != made:
            self._pending[i] = made
            self._pending_tuple = None

    def _compact(self) -> None:
        """The heap made again from `later()` once most of its entries are stale (jobs
        cancelled, or moved to another time, long before their time comes), so it does not
        grow with every held job ever seen."""
        if len(self._begins) > 2 * len(self._later) + 64:
            self._begins = [(job.begin_time or 0.0, i) for i, job in self._later.items()]
            heapq.heapify(self._begins)

    def rebuild(self, jobs: Iterable[Job]) -> None:
        """Every job afresh (the projects changed: their default limits feed every one)."""
        self._ids, self._pending, self._running = [], [], {}
        self._later, self._begins = {}, []
        self._later_changed, self._later_reset = set(), True
        for job in sorted(jobs, key=lambda j: j.id):
            self.update(job.id, job)
        self._pending_tuple = self._running_tuple = None

    def pending(self, now: float) -> tuple[PendingJob, ...]:
        """The waiting jobs a pass takes at `now`, in id order: every job whose --begin
        time has come by `now` is let in first."""
        self._let_in(now)
        if self._pending_tuple is None:
            self._pending_tuple = tuple(self._pending)
        return self._pending_tuple

    def later(self) -> Mapping[int, PendingJob]:
        """The jobs held by a --begin time that had not come at the last `pending(now)`."""
        return self._later

    def later_changes(self) -> tuple[bool, set[int]]:
        """(whether `later()` was made afresh, the ids whose place in it changed) since the
        last call: what a keeper of their statuses (engine/begin_held.py) has to redo."""
        told = (self._later_reset, self._later_changed)
        self._later_changed, self._later_reset = set(), False
        return told

    def next_begin(self) -> float:
        """The earliest begin time of `later()` (inf: none)."""
        self._drop_stale()
        return self._begins[0][0] if self._begins else math.inf

    def _let_in(self, now: float) -> None:
        if now > self._now:
            self._now = now
        begins = self._begins
        while begins and begins[0][0] <= now:
            made = self._current(*heapq.heappop(begins))
            if made is not None:
                del self._later[made.id]
                self._later_changed.add(made.id)
                self._put(made.id, made)

    def _drop_stale(self) -> None:
        begins = self._begins
        while begins and self._current(*begins[0]) is None:
            heapq.heappop(begins)

    def _current(self, begin: float, job_id: int) -> PendingJob | None:
        """The held job a heap entry (`begin`, `job_id`) stands for; None when the entry is
        stale (the job left `later()`, or its begin time moved)."""
        made = self._later.get(job_id)
        return made if made is not None and made.begin_time == begin else None

    def running(self) -> tuple[RunningJob, ...]:
        if self._running_tuple is None:
            self._running_tuple = tuple(self._running[i] for i in sorted(self._running))
        return self._running_tuple

    def running_ids(self) -> Iterable[int]:
        return self._running.keys()
