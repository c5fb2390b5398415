"""GPUs idle while a job that could use them waits, and why: the rule the trace replay
(sim/engine.py) and the daemon (engine/idle_waiting.py) both count by, so their figures mean
the same.

A waiting job **could use** the free GPUs when it asks for no more GPUs than are free in the
whole pool (`core.job.gpu_count`: a fraction counts as its fraction) and it waits to run: a
job held by `--begin`, by its owner or an admin, by a dependency, by its array's limit, or one
that can never run, does not (`hold_of` gives None). Its **cause**, the first that applies:

1. **quota**: its project's quota or limit holds it (`Quota`, `QuotaNeverFits`);
2. **fragmentation**: a whole-GPU job for which enough GPUs are free in the pool, but no single
   node has as many free (a job wider than any node counts here too: the free GPUs lie on
   nodes it cannot combine now);
3. **reservation**: it would fit, but waits for a job ahead of it: behind a backfill
   reservation, or behind the first job of a queue without backfill;
4. **other**: anything else: a CPU, memory or GPU-type shortfall, a reclaim under way, a job
   not yet seen by a pass (the next pass will look at it).

Over an interval in which nothing changes, with `free` GPUs free and the jobs that could use
them asking for `asked` GPUs in all (`asked[c]` of them for cause c), the GPUs idle while
jobs waited are `min(free, asked)`, each cause's part in proportion to what its jobs ask:
`min(free, asked) x asked[c] / asked`. GPU-seconds are that rate times the interval's length.
A pool whose waiting jobs all ask for more than is free counts nothing: no waiting job could
have used those GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum, StrEnum

from gpupool.core.job import gpu_count
from gpupool.policy.node_facts import NodeFacts
from gpupool.policy.snapshot import Decision, Snapshot
from gpupool.policy.status import Code, Rule, Status


class IdleCause(StrEnum):
    """Why GPUs a waiting job could use stayed idle (module docstring)."""

    FRAGMENTATION = "fragmentation"
    RESERVATION = "reservation"
    QUOTA = "quota"
    OTHER = "other"


class Hold(Enum):
    """What a pending job's status says about its wait, before the free GPUs are looked at."""

    QUOTA = "quota"  # its project's quota or limit
    QUEUE = "queue"  # a job ahead of it: a reservation, or the head of a strict queue
    OTHER = "other"  # anything else that may clear by itself (resources, a reclaim)


_QUOTA_CODES = frozenset({Code.QUOTA, Code.QUOTA_NEVER_FITS})
_QUEUE_RULES = frozenset({Rule.BEHIND_RESERVATION, Rule.BEHIND_HEAD})
# The codes of jobs that wait to run now; every other code (BeginTime, held, dependency,
# array limit, unsatisfiable, a backend's) is a job that would not take a free GPU.
_WAITING_CODES = frozenset(
    {Code.RESOURCES, Code.PRIORITY, Code.QUOTA, Code.RECLAIM, Code.QUOTA_NEVER_FITS}
)


def hold_of(status: Status | None) -> Hold | None:
    """The hold a status says (None: a job that does not wait to run now). A job no pass has
    looked at yet (`status` None) holds as OTHER."""
    if status is None:
        return Hold.OTHER
    if status.code not in _WAITING_CODES:
        return None
    if status.code in _QUOTA_CODES:
        return Hold.QUOTA
    if status.rule in _QUEUE_RULES:
        return Hold.QUEUE
    return Hold.OTHER


def idle_cause(
    hold: Hold, gpus: float, whole: bool, free_gpus: float, most_free_on_a_node: float
) -> IdleCause | None:
    """The cause a waiting job asking `gpus` GPUs (`whole`: whole GPUs, not a fraction) gives
    the free GPUs (module docstring); None when it could not use them (it asks for more)."""
    if gpus <= 0 or gpus > free_gpus:
        return None
    if hold is Hold.QUOTA:
        return IdleCause.QUOTA
    if whole and gpus > most_free_on_a_node:
        return IdleCause.FRAGMENTATION
    if hold is Hold.QUEUE:
        return IdleCause.RESERVATION
    return IdleCause.OTHER


def idle_rate(asks: Iterable[tuple[IdleCause, float]], free_gpus: float) -> dict[IdleCause, float]:
    """GPUs idle while jobs waited, by cause, from `(cause, GPUs asked)` of each waiting job
    that could use the free GPUs: `min(free, asked)` split in proportion to each cause's asks
    (module docstring). Causes with nothing idle are left out."""
    asked: dict[IdleCause, float] = {}
    for cause, gpus in asks:
        asked[cause] = asked.get(cause, 0.0) + gpus
    total = sum(asked.values())
    if total <= 0 or free_gpus <= 0:
        return {}
    idle = min(free_gpus, total)
    return {cause: idle * part / total for cause, part in asked.items() if part > 0}


def add_rate(
    totals: dict[IdleCause, float], rate: Mapping[IdleCause, float], seconds: float
) -> None:
    """Add `rate` GPUs held idle for `seconds` to `totals` (GPU-seconds by cause)."""
    if seconds <= 0:
        return
    for cause, gpus in rate.items():
        totals[cause] = totals.get(cause, 0.0) + gpus * seconds


def rate_after_pass(snapshot: Snapshot, decision: Decision) -> dict[IdleCause, float]:
    """The idle-while-waiting rate the pool holds from a pass until the next one: the GPUs
    its running jobs and its starts leave free (a GPU shared by fractional jobs counts as
    used; a preempted job holds its GPUs until it exits), and the jobs it left waiting, with
    the statuses it gave them (`idle_rate`)."""
    used = snapshot.used_gpus()
    for start in decision.starts:
        for node, taken in ((start.node, start.gpus), *start.more):
            used.setdefault(node, set()).update(taken)
    free_on = [len(n.gpus) - len(used.get(n.name, ())) for n in snapshot.nodes]
    free, most = float(sum(free_on)), float(max(free_on, default=0))
    if free <= 0:
        return {}
    largest = NodeFacts.of(snapshot.nodes).largest_gpu_memory
    asks: list[tuple[IdleCause, float]] = []
    for job in snapshot.pending:
        res = job.resources
        whole = res.gpu_memory_bytes is None and res.gpu_fraction is None
        if whole and res.gpus > free:
            continue  # it could not use them (`idle_cause`): said before its status is read
        status = decision.pending.get(job.id)
        if status is None:
            continue  # started now
        hold = hold_of(status)
        if hold is None:
            continue
        gpus = float(res.gpus) if whole else gpu_count(res, gpu_memory_bytes=largest)
        cause = idle_cause(hold, gpus, whole, free, most)
        if cause is not None:
            asks.append((cause, gpus))
    return idle_rate(asks, free)
