"""Carrying out the policy's preemptions: signal the victims, then requeue them.

The policy only chooses victims; here they get SIGTERM, their grace period and SIGKILL
(through their supervisors), and once a victim's exit is recorded as "preempted" its run is
archived and the job goes back to PENDING with the same id and one more restart.
"""

from __future__ import annotations

import logging
from typing import Any

from gpupool.core.job import Job, JobState
from gpupool.policy import Decision

log = logging.getLogger("gpupool.engine")


class Reclaimer:
    def __init__(self, store: Any, executor: Any) -> None:
        self.store = store
        self.executor = executor
        self._asked: dict[int, str] = {}  # victims already signalled, and why

    def apply(self, decision: Decision) -> None:
        """Signal every victim once. The policy recomputes the same victims each pass until
        they exit (it is deterministic), so repeats are expected and ignored."""
        for p in decision.preemptions:
            if p.job_id in self._asked:
                continue
            if self.executor.preempt(p.job_id):
                self._asked[p.job_id] = p.reason
                log.info("job %d: preempting it for job %d (%s)", p.job_id, p.for_job_id, p.reason)

    def stop(self, job_id: int, why: str) -> bool:
        """Stop a job to requeue it for a reason of the pool's own, not the policy's (its
        GPUs left the inventory): the same signal, grace and requeue as a preemption."""
        if not self.executor.preempt(job_id):
            return False
        self._asked[job_id] = why
        return True

    def requeue(self, job: Job, now: float) -> bool:
        """Requeue a victim whose exit was recorded as preempted. False: not yet (its
        supervisor is still finishing); the next pass tries again."""
        from gpupool.executor import JobBusyError
        from gpupool.store import StaleState

        try:
            self.executor.archive(job.id)
        except JobBusyError:
            return False
        why = self._asked.pop(job.id, "to give its GPUs back")
        try:
            self.store.requeue(job.id, now, f"preempted ({why}); requeued")
            log.info("job %d preempted and requeued", job.id)
        except StaleState:  # cancelled during its grace period: cancel wins
            self.store.finish(
                job.id, JobState.CANCELLED, None, now, "cancelled while preempted", "Cancelled"
            )
            log.info("job %d CANCELLED while it was being preempted", job.id)
        return True

    def archived_not_requeued(self, job: Job) -> bool:
        """The daemon died between archiving a preempted run and requeueing it: the executor
        holds more finished attempts than the job has restarts."""
        return bool(self.executor.attempt_count(job.id) > job.restart_count)
