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
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import TypeVar

from gpupool.core.job import Hold, Job, JobState
from gpupool.core.job_control import AfterKind, Dependency
from gpupool.policy import Code, Decision, Status
from gpupool.policy.status import Rule

# Ended jobs whose final state is remembered, at most; a miss is read from the store again.
_ENDED_KEPT = 65536
# The records not needed are dropped once there are this many more than were needed at the
# last drop (amortized: a drop walks the records).
_PRUNE_SLACK = 256
T = TypeVar("T")


@dataclass(frozen=True)
class TaskEnd:
    """A task of an array that ended other than SUCCEEDED: what `:ok` on the array cannot
    get past, in words."""

    job_id: int
    array_id: int
    index: int | None
    state: JobState

    def __str__(self) -> str:
        task = "" if self.index is None else f" ({self.array_id}_{self.index})"
        return f"job {self.job_id}{task} of array {self.array_id} ended {self.state.value}"


def first_failure(tasks: Iterable[Job]) -> TaskEnd | None:
    """The first task (by id) of an array's `tasks` that ended other than SUCCEEDED."""
    for task in sorted(tasks, key=lambda j: j.id):
        if task.state.terminal and task.state is not JobState.SUCCEEDED:
            assert task.array_id is not None
            index = None if task.spec.array_task is None else task.spec.array_task.index
            return TaskEnd(task.id, task.array_id, index, task.state)
    return None


def never_met(dep: Dependency, named: Job, tasks_of: Callable[[int], Iterable[Job]]) -> str | None:
    """Why `dep` can never be met, in words, now that the job its id names is `named` (as
    stored); None while it still can. An array's id: its tasks (`tasks_of(array id)`), any
    of which ended other than SUCCEEDED fails `:ok`."""
    if dep.kind is AfterKind.ANY:
        return None
    if named.array_id == named.id:
        failed = first_failure(tasks_of(named.id))
        return None if failed is None else str(failed)
    if named.state.terminal and not dep.met_by(named.state):
        return f"job {named.id} ended {named.state.value}"
    return None


class EndedJobs:
    """The final state of jobs that ended, most recent kept (a bounded cache).

    An array's id names the whole array (Slurm's rule): its first task's own end is not
    kept under it. The array's outcome is kept there once every task has ended, as the
    store has them (`record_array`: memory may have missed tasks that ended before a
    restart); the first task seen failing is kept meanwhile (`failure_in`), which is
    enough for `:ok` to know it can never be met.

    `needed(id)`: whether a record under `id` may still be asked for from memory (a waiting
    job names it, or an array has tasks active). The others are dropped now and then
    (`prune`), so what is kept follows what waits, not how many jobs ended (flat memory
    at a steady rate: issue 35's soak); asked for again, it is read from the store."""

    def __init__(
        self, needed: Callable[[int], bool] = lambda _id: True, kept: int = _ENDED_KEPT
    ) -> None:
        self._states: OrderedDict[int, JobState] = OrderedDict()
        self._failures: OrderedDict[int, TaskEnd] = OrderedDict()
        self._needed = needed
        self._kept = kept
        self._prune_above = _PRUNE_SLACK

    def __len__(self) -> int:
        return len(self._states) + len(self._failures)

    def record(self, job_id: int, state: JobState) -> None:
        assert state.terminal, state
        _keep(self._states, job_id, state, self._kept)
        self._prune_when_grown()

    def _prune_when_grown(self) -> None:
        if len(self) > self._prune_above:
            self.prune()

    def prune(self) -> None:
        """Drop the records no longer `needed`."""
        needed = self._needed
        for kept in (self._states, self._failures):
            for job_id in [k for k in kept if not needed(k)]:
                del kept[job_id]
        self._prune_above = 2 * len(self) + _PRUNE_SLACK

    def record_job(self, job: Job) -> None:
        """`job`, which has ended: a plain job or a task (module docstring)."""
        array_id = job.array_id
        if array_id is None:
            self.record(job.id, job.state)
            return
        if job.id != array_id:  # a task named by its own id is that task alone
            self.record(job.id, job.state)
        if job.state is not JobState.SUCCEEDED and array_id not in self._failures:
            task = job.spec.array_task
            end = TaskEnd(job.id, array_id, None if task is None else task.index, job.state)
            _keep(self._failures, array_id, end, self._kept)
            self._prune_when_grown()

    def record_array(self, array_id: int, tasks: Iterable[Job]) -> None:
        """Every task of the array `array_id`, all ended, as the store has them."""
        for task in sorted(tasks, key=lambda j: j.id):
            self.record_job(task)
        failed = self._failures.get(array_id)
        self.record(array_id, JobState.SUCCEEDED if failed is None else failed.state)

    def get(self, job_id: int) -> JobState | None:
        """A job's final state; an array's outcome (SUCCEEDED when every task did) once
        recorded; None when not known."""
        return self._states.get(job_id)

    def failure_in(self, array_id: int) -> TaskEnd | None:
        """The first task of the array seen ending other than SUCCEEDED, if any."""
        return self._failures.get(array_id)


def _keep(kept: OrderedDict[int, T], key: int, value: T, most: int) -> None:
    kept[key] = value
    kept.move_to_end(key)
    if len(kept) > most:
        kept.popitem(last=False)


@dataclass(frozen=True)
class Gating:
    """What a pass is not to consider: `held` wait (their status), `doomed` never will
    start (the cause for their history), `unknown`: dependencies neither active nor known
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
    job: Job,
    active: Mapping[int, Job],
    tasks: Mapping[int, AbstractSet[int]],
    ended: EndedJobs,
    unknown: set[int],
) -> Status | str | None:
    """Why `job` cannot start yet (a Status), or never will (the cause), or None (its
    dependencies are met). A dependency on an array's id waits for every task of it
    (`tasks`: the active tasks of each array) and, as `:ok`, fails with any of them."""
    waiting: list[int] = []
    for dep in job.spec.after:
        running = tasks.get(dep.job_id)
        if dep.kind is AfterKind.OK:
            failed = ended.failure_in(dep.job_id)
            if failed is not None:
                return f"{failed}, not SUCCEEDED (--after {dep})"
        if running:
            waiting.extend(running)
            continue
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
    array_tasks: Mapping[int, AbstractSet[int]] | None = None,
) -> Gating:
    """The gating of a pass. `controlled`: the waiting jobs with dependencies or a throttled
    array (the others are never held); `active`: every job in the engine's view by id;
    `running`: those of them RUNNING; `array_tasks`: each array's active tasks, by its id."""
    held: dict[int, Status] = {}
    doomed: dict[int, str] = {}
    unknown: set[int] = set()
    throttled: dict[int, tuple[int, list[Job]]] = {}  # array -> (its %K, tasks let through)
    for job in sorted(controlled, key=lambda j: j.id):
        if job.spec.hold is not None:  # first: a held job waits whatever else holds it
            held[job.id] = _HELD[job.spec.hold]
            continue
        if job.spec.after:
            said = _dependency_status(job, active, array_tasks or {}, ended, unknown)
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
