"""What the engine says about faults: a supervisor that died under its job, an exit
recorded while the daemon was down, a job left on GPUs the inventory no longer has.

The rule for all of them: a GPU is given again only once nothing of its job runs on it,
and what happened is told in the daemon's log and in the job's history. What the engine does
about each is in its reaction table (engine/react.py); here are the facts it reads and the
words it writes.
"""

from __future__ import annotations

from gpupool.core.execution import ExitRecord, Leftovers
from gpupool.core.hardware import Inventory
from gpupool.core.job import Job

# How long the first attempt to kill a lost job's processes waits for them to die (they
# usually take milliseconds); later attempts, one per poll, do not wait.
FIRST_KILL_WAIT_S = 1.0


def end_time_of(record: ExitRecord, job: Job, now: float) -> float:
    """When the job ended, from its exit record: not when the daemon read it (it may have
    been down). Kept within [start, now], in case the clock stepped, and no sooner after
    the start than the run lasted as the record times it: a backend's record is on its
    engine's clock, in whole seconds (Slurm's), while the start is when the pool first saw
    the run; the GPU-hours counted are the engine's duration, not what is left of it."""
    if job.start_time is None:
        return min(record.end_time, now)
    lasted = max(record.end_time - record.start_time, 0.0)
    return min(max(record.end_time, job.start_time + lasted), now)


def _pids(pids: tuple[int, ...]) -> str:
    return ", ".join(map(str, pids))


def lost_cause(left: Leftovers) -> str:
    """The job's history for a lost job that is finished: what became of its processes."""
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
        group = "cgroup" if left.in_cgroup else "session"
        what.append(f"{n} other process{'es' if n > 1 else ''} of its {group} ({_pids(others)})")
    return f"{head}; {' and '.join(what)} before freeing its GPUs"


def held_cause(left: Leftovers) -> str:
    """The job's history for a lost job whose processes could not be killed (yet)."""
    why = f"its processes {_pids(left.alive)} still run"
    if left.denied:
        why += f" and may not be killed by the pool's user ({_pids(left.denied)})"
    return (
        f"its supervisor died without recording an exit; {why}: its GPUs stay held until "
        "they are gone (tried again at every poll)"
    )


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
