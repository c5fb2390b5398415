"""The engine's jobs as `policy.decide` takes them, kept in step one job at a time.

A pass is given every waiting job as a `PendingJob` and every running one as a `RunningJob`,
in id order (as the store lists them). Rebuilding those from 10,000 waiting jobs cost more
than the policy's pass itself; here each is made when its job changes, kept in id order
(a new job has the highest id: an append), and the snapshot's tuples are copies of lists.
Each is made by the builder the simulator uses too (policy/inputs.py), so a replay and the
daemon tell `decide` the same facts about the same job.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable

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
        self._ids: list[int] = []  # the waiting jobs' ids, ascending
        self._pending: list[PendingJob] = []  # theirs, in the same order
        self._running: dict[int, RunningJob] = {}
        self._pending_tuple: tuple[PendingJob, ...] | None = ()
        self._running_tuple: tuple[RunningJob, ...] | None = ()

    def update(self, job_id: int, job: Job | None) -> None:
        """`job` (None: it left the view) as it now is. A backend's job is never a
        pass's: its backend schedules it (docs/backends.md)."""
        if job is not None and job.spec.backend is not None:
            job = None
        waiting = job is not None and job.state is JobState.PENDING and not job.cancel_requested
        i = bisect_left(self._ids, job_id)
        present = i < len(self._ids) and self._ids[i] == job_id
        if waiting:
            assert job is not None
            made = pending_of(job, self._limit_of(job))
            if present:
                if self._pending[i] != made:
                    self._pending[i] = made
                    self._pending_tuple = None
            else:
                self._ids.insert(i, job_id)
                self._pending.insert(i, made)
                self._pending_tuple = None
        elif present:
            del self._ids[i], self._pending[i]
            self._pending_tuple = None
        if job is not None and job.state is JobState.RUNNING and job.node is not None:
            self._running[job_id] = running_of(job, self._limit_of(job))
            self._running_tuple = None
        elif self._running.pop(job_id, None) is not None:
            self._running_tuple = None

    def rebuild(self, jobs: Iterable[Job]) -> None:
        """Every job afresh (the projects changed: their default limits feed every one)."""
        self._ids, self._pending, self._running = [], [], {}
        for job in sorted(jobs, key=lambda j: j.id):
            self.update(job.id, job)
        self._pending_tuple = self._running_tuple = None

    def pending(self) -> tuple[PendingJob, ...]:
        if self._pending_tuple is None:
            self._pending_tuple = tuple(self._pending)
        return self._pending_tuple

    def running(self) -> tuple[RunningJob, ...]:
        if self._running_tuple is None:
            self._running_tuple = tuple(self._running[i] for i in sorted(self._running))
        return self._running_tuple

    def running_ids(self) -> Iterable[int]:
        return self._running.keys()
