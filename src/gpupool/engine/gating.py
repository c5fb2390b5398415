"""Which waiting jobs a pass may consider: those not held (`gpupool hold`), whose `--after`
dependencies have ended as asked, and, of an array throttled with `%K`, no more than K
running at once.

The policy never sees the others: each pass, `gate` works out which waiting jobs are held
(with the status `why` and `queue` show: `JobHeldUser`, `JobHeldAdmin`, `Dependency`,
`ArrayLimit`) and which can never
start (an `:ok` dependency that ended otherwise: cancelled with `DependencyNeverSatisfied`);
the engine leaves both out of the pass's pending set and adds their status to its decision
(engine/react.py). The policy stays pure and unchanged; an array's tasks beyond its limit
are simply not candidates, so no pass can start more than K of them.

Pure: the ended states of dependencies that left the engine's view come from `EndedJobs`,
which the engine fills from the jobs it sees end and, for the others (ended before a
restart), from the store (`unknown`: the loop looks them up before the pass).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from gpupool.core.job import Hold, Job, JobState
from gpupool.core.job_control import AfterKind
from gpupool.policy import Code, Decision, Status
from gpupool.policy.status import Rule

# Ended jobs whose final state is remembered; a miss is read from the store again.
_ENDED_KEPT = 65536


class EndedJobs:
    """The final state of jobs that ended, most recent kept (a bounded cache)."""

    def __init__(self, kept: int = _ENDED_KEPT) -> None:
        self._states: OrderedDict[int, JobState] = OrderedDict()
        self._kept = kept

    def record(self, job_id: int, state: JobState) -> None:
        assert state.terminal, state
        self._states[job_id] = state
        self._states.move_to_end(job_id)
        if len(self._states) > self._kept:
            self._states.popitem(last=False)

    def get(self, job_id: int) -> JobState | None:
        return self._states.get(job_id)


@dataclass(frozen=True)
class Gating:
    """What a pass is not to consider: `held` wait (their status), `doomed` never will
    start (the cause for their story), `unknown`: dependencies neither active nor known
    to have ended (their jobs are held meanwhile)."""

    held: Mapping[int, Status] = field(default_factory=dict)
    doomed: Mapping[int, str] = field(default_factory=dict)
    unknown: frozenset[int] = frozenset()

    @property
    def left_out(self) -> frozenset[int]:
        return frozenset(self.held) | frozenset(self.doomed)

    def merged_into(self, decision: Decision) -> Decision:
        """`decision` with the held jobs' status added (what `why` and `queue` read)."""
        if not self.held:
            return decision
        return replace(decision, pending={**decision.pending, **self.held})


NO_GATING = Gating()

_HELD = {
    Hold.USER: Status(Code.HELD_USER, Rule.HELD_USER),
    Hold.ADMIN: Status(Code.HELD_ADMIN, Rule.HELD_ADMIN),
}


def _dependency_status(
    job: Job, active: Mapping[int, Job], ended: EndedJobs, unknown: set[int]
) -> Status | str | None:
    """Why `job` cannot start yet (a Status), or never will (the cause), or None (its
    dependencies are met)."""
    waiting: list[int] = []
    for dep in job.spec.after:
        if dep.job_id in active:
            waiting.append(dep.job_id)
            continue
        state = ended.get(dep.job_id)
        if state is None:
            unknown.add(dep.job_id)
            waiting.append(dep.job_id)
        elif not dep.met_by(state):
            assert dep.kind is AfterKind.OK
            return f"dependency job {dep.job_id} ended {state.value}, not SUCCEEDED (--after {dep})"
    if waiting:
        return Status(Code.DEPENDENCY, Rule.DEPENDENCY, jobs=tuple(sorted(waiting)))
    return None


def gate(
    controlled: Iterable[Job],
    active: Mapping[int, Job],
    running: Iterable[Job],
    ended: EndedJobs,
) -> Gating:
    """The gating of a pass. `controlled`: the waiting jobs with dependencies or a throttled
    array (the others are never held); `active`: every job in the engine's view by id;
    `running`: those of them RUNNING."""
    held: dict[int, Status] = {}
    doomed: dict[int, str] = {}
    unknown: set[int] = set()
    throttled: dict[int, tuple[int, list[Job]]] = {}  # array -> (its %K, tasks let through)
    for job in sorted(controlled, key=lambda j: j.id):
        if job.spec.hold is not None:  # first: a held job waits whatever else holds it
            held[job.id] = _HELD[job.spec.hold]
            continue
        if job.spec.after:
            said = _dependency_status(job, active, ended, unknown)
            if isinstance(said, str):
                doomed[job.id] = said
                continue
            if said is not None:
                held[job.id] = said
                continue
        task = job.spec.array_task
        if task is not None and task.limit is not None and job.array_id is not None:
            throttled.setdefault(job.array_id, (task.limit, []))[1].append(job)
    if throttled:
        by_array = _running_by_array(running, throttled.keys())
        for array_id, (limit, tasks) in throttled.items():
            ids = by_array.get(array_id, [])
            room = max(limit - len(ids), 0)
            if room >= len(tasks):
                continue
            status = Status(Code.ARRAY_LIMIT, Rule.ARRAY_LIMIT, jobs=tuple(ids), limit=limit)
            for job in tasks[room:]:  # the first `room` by id may start; the rest wait
                held[job.id] = status
    return Gating(held, doomed, frozenset(unknown))


def _running_by_array(jobs: Iterable[Job], arrays: Iterable[int]) -> dict[int, list[int]]:
    """The running tasks of each of `arrays`, by id."""
    wanted = set(arrays)
    running: dict[int, list[int]] = {}
    for job in jobs:
        if job.array_id is not None and job.array_id in wanted:
            running.setdefault(job.array_id, []).append(job.id)
    return {k: sorted(v) for k, v in running.items()}


def controls(job: Job) -> bool:
    """Whether `job`, while it waits, may be held by `gate`."""
    task = job.spec.array_task
    return (
        job.spec.hold is not None
        or bool(job.spec.after)
        or (task is not None and task.limit is not None)
    )
