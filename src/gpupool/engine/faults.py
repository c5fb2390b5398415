"""What the engine does about faults: a supervisor that died under its job, an exit
recorded while the daemon was down, a job left on GPUs the inventory no longer has.

The rule for all of them: a GPU is given again only once nothing of its job runs on it,
and what happened is told in the daemon's log and in the job's story.
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import Any

from gpupool.core.hardware import Inventory
from gpupool.core.job import Job, JobState
from gpupool.engine.preemption import Reclaimer
from gpupool.executor import ExitRecord, JobStatus, Leftovers

log = logging.getLogger("gpupool.engine")

# How long the first attempt to kill a lost job's processes waits for them to die (they
# usually take milliseconds); later attempts, one per pass, do not wait.
FIRST_KILL_WAIT_S = 1.0


class HeldReason(str, Enum):
    """Reason codes of RUNNING jobs the pool is dealing with (the REASON column)."""

    SUPERVISOR_LOST = "SupervisorLost"  # supervisor dead, processes still alive: GPUs held
    GPUS_GONE = "GpusGone"  # its GPUs left the inventory: being stopped to requeue


def end_time_of(record: ExitRecord, job: Job, now: float) -> float:
    """When the job ended, from its exit record: not when the daemon read it (it may have
    been down). Kept within [start, now], in case the clock stepped."""
    start = job.start_time if job.start_time is not None else record.end_time
    return min(max(record.end_time, start), now)


def _pids(pids: tuple[int, ...]) -> str:
    return ", ".join(map(str, pids))


def lost_cause(left: Leftovers) -> str:
    """The job's story for a lost job that is finished: what became of its processes."""
    head = "its supervisor died without recording an exit"
    if left.main_pid is None:
        return f"{head}, before it recorded its command's pid (nothing of it was found running)"
    if left.other_boot:
        return f"{head}; the machine has restarted since, so nothing of it runs"
    if not left.killed:
        return f"{head}; none of its processes was still running"
    main = left.main_pid if left.main_pid in left.killed else None
    others = tuple(p for p in left.killed if p != main)
    what = [f"killed its process {main}"] if main is not None else []
    if others:
        n = len(others)
        what.append(f"{n} other process{'es' if n > 1 else ''} of its session ({_pids(others)})")
    return f"{head}; {' and '.join(what)} before freeing its GPUs"


def held_cause(left: Leftovers) -> str:
    """The job's story for a lost job whose processes could not be killed (yet)."""
    why = f"its processes {_pids(left.alive)} still run"
    if left.denied:
        why += f" and may not be killed by the pool's user ({_pids(left.denied)})"
    return (
        f"its supervisor died without recording an exit; {why}: its GPUs stay held until "
        "they are gone (tried again every pass)"
    )


class LostJobs:
    """Jobs whose supervisor died without recording an exit: kill what they left running
    before freeing their GPUs, then fail them (NodeFail). While something of one still
    runs (not dead yet, or another user's), it stays RUNNING with its GPUs held and reason
    SupervisorLost, and the next pass tries again."""

    def __init__(self, store: Any, executor: Any) -> None:
        self.store = store
        self.executor = executor
        self._held: set[int] = set()  # lost jobs already told to be held (noted once)

    def settle(self, job: Job, now: float) -> bool:
        """One attempt for a job the executor reports LOST; True once it is finished."""
        first = job.id not in self._held
        left: Leftovers = self.executor.kill_leftovers(
            job.id, wait_s=FIRST_KILL_WAIT_S if first else 0.0
        )
        if left.gone:
            self._held.discard(job.id)
            cause = lost_cause(left)
            self.store.finish(job.id, JobState.FAILED, None, now, cause, "NodeFail")
            log.warning("job %s failed: %s", job.id, cause)
            return True
        if first:
            self._held.add(job.id)
            cause = held_cause(left)
            self.store.note(job.id, now, cause, reason=HeldReason.SUPERVISOR_LOST.value)
            log.warning("job %s: %s", job.id, cause)
        return False


def gpus_outside(job: Job, inventory: Inventory) -> tuple[int, ...]:
    """The GPUs of a running job that the inventory does not have (all of them when its
    node is gone); () when they are all there."""
    node = next((n for n in inventory.nodes if n.name == job.node), None)
    if node is None:
        return tuple(job.gpus)
    have = {g.index for g in node.gpus}
    return tuple(g for g in job.gpus if g not in have)


def outside_cause(job: Job, inventory: Inventory, missing: tuple[int, ...]) -> str:
    """Why a job is being taken off its GPUs: they are not in the inventory any more."""
    if not any(n.name == job.node for n in inventory.nodes):
        return f"its node {job.node} is not in the pool's inventory any more"
    gpus = f"GPU{'s' if len(missing) > 1 else ''} {','.join(map(str, missing))}"
    verb = "are" if len(missing) > 1 else "is"
    return f"its {gpus} on {job.node} {verb} not in the pool's inventory any more"


def take_off_gone_gpus(
    store: Any, reclaimer: Reclaimer, inventory: Inventory, job: Job, status: JobStatus, now: float
) -> None:
    """At recovery, a RUNNING job whose GPUs (or node) left the inventory, by the rule in
    docs/ARCHITECTURE.md (crash safety), as Slurm does with the jobs of a node removed from
    its configuration: it is stopped (SIGTERM, grace, SIGKILL, as a preemption) and
    requeued with the same id; one never launched is requeued at once; one whose
    supervisor is gone is handled as any lost job (the next pass). Its GPUs that remain
    stay held until it has stopped. One that already ended is not for here."""
    why = outside_cause(job, inventory, gpus_outside(job, inventory))
    if status is JobStatus.UNLAUNCHED:
        log.warning("job %s was scheduled but never launched, and %s: requeued", job.id, why)
        store.requeue(job.id, now, f"{why}; requeued before it was launched")
    elif status is JobStatus.LOST:
        log.warning("job %s: %s, and its supervisor is gone", job.id, why)
        store.note(job.id, now, why)
    elif status is JobStatus.RUNNING:
        log.warning("job %s: %s: stopping it to requeue it", job.id, why)
        store.note(job.id, now, f"{why}: stopping it to requeue it", HeldReason.GPUS_GONE.value)
        reclaimer.stop(job.id, why)
