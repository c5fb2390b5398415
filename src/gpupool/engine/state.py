"""The engine's view of the pool: every active job with what the engine has done about it,
and the projects. One owner: only the reaction table (engine/react.py) changes it, on the
engine's thread; API threads read the `JobsView`s it publishes (engine/view.py).

It is kept up to date by the events the engine already handles (a submission, a cancel, an
exit, a pass's starts, the engine's own writes), so a pass reads nothing from the store but
the allocation version: the store is read in full only to recover after a restart, or after
a commit the store refused (a race with a cancel). What a pass is given is built from it
and kept between passes (`snapshot`): a job's `PendingJob` is rebuilt only when the job
changed.

A pass that cannot change anything is left out (`wants_pass`): one runs when something
changed since the last (`dirty`), when a job's `--begin` time comes, every `refresh_s`
(start estimates and fair share move with time), and, every `quiet_s`, when some waiting
job could start or preempt by the count of free GPUs alone (`Outlook`, the simulator's test
in sim/engine.py: when it says no, a pass starts and preempts nothing). Passes are paced
(`paced_until`): a budget of pass time, engine/pacing.py.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from gpupool.core.backends import BackendAdmission, BackendNodes, Capacity
from gpupool.core.cgroup_usage import CgroupUsage
from gpupool.core.copies import copy_with
from gpupool.core.drain import DrainedGpu
from gpupool.core.execution import Handle
from gpupool.core.hardware import Inventory
from gpupool.core.job import Job, JobState
from gpupool.core.project import Project
from gpupool.engine.begin_held import BeginHeld
from gpupool.engine.gating import EndedJobs, Gating, controls, gate
from gpupool.engine.gpu_counts import GpuCounter
from gpupool.engine.limits import TimeLimit, effective_time_limit
from gpupool.engine.named_jobs import NamedJobs
from gpupool.engine.policy_inputs import PolicyInputs
from gpupool.policy import Decision, PendingJob, Snapshot, Status
from gpupool.policy.snapshot import PolicyConfig, Usage

# Removed jobs remembered (by the version they left at), so that a stale copy arriving late
# (a submission's event behind a resync) does not bring one back. A late copy is an event
# at most seconds behind, so a tombstone is kept for _TOMBSTONE_S of the passes' clock
# (flat memory at a steady rate of jobs: issue 35's soak), and never more than _TOMBSTONES.
_TOMBSTONE_S = 120.0
_TOMBSTONES = 4096


_NO_TOMBSTONE = (-1, -math.inf)

Seat = tuple[tuple[str, tuple[int, ...]], ...]  # (engine node, GPU indices) per node


@dataclass
class Tracked:
    """An active job and what the engine has done about it (in place of the sets and dicts
    the loop, the preemption driver and the fault handler each kept before)."""

    job: Job  # as last stored, without its history and submitter environment (`slim`)
    cancel_delivered: bool = False  # its run was told to stop for a cancel
    stop_why: str | None = None  # its run was told to stop to be requeued, and why
    survivors_reported: bool = False  # lost, processes still alive: the history says so (once)
    requeue_hold_s: float | None = None  # once requeued, held this long (idle-GPU policy)
    retry_cause: str | None = None  # its run failed and is retried (--retry): the history's words
    # What its run that ended used (its exit record's), kept from the exit to the requeue
    # (or the finish) that stores it: a release comes between.
    ended_run_usage: CgroupUsage | None = None
    ended_gpu_utilization: float | None = None  # and its GPUs', as its engine measured it
    # A backend's job (docs/backends.md): handed over to its backend (a PENDING job's run
    # launched there, or found there after a restart), why its backend says it waits, and
    # whether its history says the backend could not be reached (once).
    handed_over: bool = False
    backend_detail: str = ""
    unreachable_told: bool = False
    # Admitted by the pool's policy (engine/admission.py): the engine nodes and the GPUs
    # (the pool's indices) on each it was admitted to; () when not admitted, or not seated
    # again yet after a restart (engine/backend_seats.py).
    admitted: Seat = ()


def handle_of(job: Job) -> Handle:
    """A job's current run: attempt n after n requeues."""
    return Handle(job.id, job.restart_count)


def slim(job: Job) -> Job:
    """`job` without what the engine's view never reads: its history (events) and the
    submitter's environment (read from the store again at launch)."""
    if job.events or job.spec.base_env:
        return copy_with(job, spec=copy_with(job.spec, base_env=()), events=())
    return job


def _not_newer(job: Job, known: Job, reason_bumps: int = 0) -> bool:
    """Whether the store's `job` is no news to a view that holds `known`. Versions order
    the store's writes. `reason_bumps`: the versions `set_reason` counted on `known` since
    it was read from the store; the store counts fewer (its writes of reasons are batched:
    a reason that changed twice between two writes is one write, or none), so news is
    whatever is newer than the copy last read, not than the count. Without that, a start
    committed after a few such reasons read as old, and the view lost the job's run."""
    stored = known.version - reason_bumps  # the version of the store's copy last read
    # A copy in the same state is news only past the view's own count: the store's copy of
    # a waiting job may hold a reason older than the view's (written before the last ones).
    return job.version < stored or (job.version <= known.version and job.state is known.state)


def _matters(old: Job, new: Job) -> bool:
    """Whether a pass could decide differently after `old` became `new` (a new reason or a
    note in the history does not)."""
    return (
        old.state is not new.state
        or old.cancel_requested != new.cancel_requested
        or old.node != new.node
        or old.gpus != new.gpus
        or old.gpu_memory_bytes != new.gpu_memory_bytes
        or old.start_time != new.start_time
        or old.spec != new.spec
    )


@dataclass(frozen=True)
class Outlook:
    """What may change without any event, from the view alone (the skip test)."""

    may_start_or_preempt: bool
    next_begin: float  # the earliest --begin still ahead (inf: none)


class EngineState:
    def __init__(
        self,
        inventory: Inventory,
        config: PolicyConfig,
        *,
        quiet_s: float = 2.0,
        refresh_s: float = 60.0,
        backends: Iterable[str] = (),
        admission: Mapping[str, BackendAdmission] | None = None,
    ) -> None:
        self.inventory = inventory
        # The names of the backends this daemon opened (gpupool.toml): a job naming another
        # waits (NoBackend) until a daemon starts with it.
        self.backends = frozenset(backends)
        # How each backend's jobs are admitted (core.backends.Admission; the pool's policy
        # where gpupool.toml says nothing), and each one's capacity as last read.
        admission = admission or {}
        self.admission = {b: admission.get(b, BackendAdmission()) for b in self.backends}
        self.capacity: dict[str, Capacity] = {}
        # What `gpupool gpus` shows of them (engine/admission.py: `backend_nodes`).
        self.backend_view: tuple[BackendNodes, ...] = ()
        self.config = config
        self.quiet_s = quiet_s
        self.refresh_s = refresh_s
        self.jobs: dict[int, Tracked] = {}
        # The same jobs as `jobs`, by id, for readers: a copy is what the view publishes.
        self.public: dict[int, Job] = {}
        self.projects: dict[str, Project] = {}
        self.decision = Decision()  # of the last pass: what `why` and `queue` tell
        self.decided_at = -math.inf
        self.committing: Decision | None = None  # a pass whose starts are being committed
        # Its statuses to compare with the reasons stored: all of its own, and those of the
        # jobs held by --begin that are new (the others were compared before).
        self.committing_checks: Mapping[int, Status] = {}
        self.dirty = True  # something changed that a pass could decide differently on
        self.pass_now = False  # a pass at once, paced or not (a refused commit, run_pass)
        # No pass before this time unless `pass_now`: under a stream of submissions passes
        # take at most a share of the engine's time and the API's threads keep the rest
        # (engine/pacing.py; engine/loop.py sets it).
        self.paced_until = -math.inf
        self.poll_soon = False  # a run is being released: look again soon, not in a tick
        self.resync_needed = False  # an instruction failed: the view may be behind the store
        self.generation = 0  # bumped by every change a reader of the view could see
        # Memory held outside gpupool, per GPU: what the inventory declares, or more where
        # the GPU monitor saw more (`set_foreign_memory`).
        self._declared_unmanaged = {
            (n.name, g.index): g.unmanaged_memory_bytes
            for n in inventory.nodes
            for g in n.gpus
            if g.unmanaged_memory_bytes
        }
        self.unmanaged = dict(self._declared_unmanaged)
        self.drains: dict[tuple[str, int], DrainedGpu] = {}  # no job starts on these
        # job -> (the version it left at, the pass clock then), oldest first
        self._removed: OrderedDict[int, tuple[int, float]] = OrderedDict()
        self._reason_bumps: dict[int, int] = {}  # job -> versions `set_reason` counted
        self._running_ids: set[int] = set()  # of `jobs`, those RUNNING (local ones)
        self._backend_ids: set[int] = set()  # of `jobs`, backends' jobs (never a pass's)
        self._routable_ids: set[int] = set()  # of `jobs`, the pool's that may go elsewhere
        self._inputs = PolicyInputs(lambda job: self.limit_of(job).seconds)
        self._begin_held = BeginHeld()
        self._outlook: tuple[int, float, Outlook] | None = None  # (generation, at, outlook)
        self._widest = max((len(n.gpus) for n in inventory.nodes), default=0)
        self._counter = GpuCounter(inventory)
        # --after and --array %K (engine/gating.py): the waiting jobs a pass may hold, the
        # final states of jobs that ended, and the jobs the last gating left out of a pass.
        self._controlled: set[int] = set()
        self._array_tasks: dict[int, set[int]] = {}  # each array's active tasks, by its id
        # The ids the --after of `_controlled` jobs name: what of `ended` is kept (an
        # array's with active tasks too).
        self._named = NamedJobs()
        self.ended = EndedJobs(self._ended_needed)
        self._left_out: frozenset[int] = frozenset()

    # -- changes ----------------------------------------------------------------------------

    def upsert(self, job: Job) -> tuple[Tracked | None, Tracked | None]:
        """Take the store's `job`: (before, after), None where it was or is not in the view
        (after is None for a finished job). A copy older than the view's is ignored
        (before is after)."""
        old = self.jobs.get(job.id)
        if old is not None and _not_newer(job, old.job, self._reason_bumps.get(job.id, 0)):
            return old, old
        if old is None and job.version <= self._removed.get(job.id, _NO_TOMBSTONE)[0]:
            return None, None
        self._reason_bumps.pop(job.id, None)  # the store's copy: it counts every write
        if job.state.terminal:
            self.ended.record_job(job)
            if old is not None:
                self._remove(job.id, job.version)
            else:
                self._tombstone(job.id, job.version)
            return old, None
        new = slim(job)
        self.public[job.id] = new
        if old is None or old.job.state is not new.state:  # new, or a new run: start afresh
            tracked = Tracked(new)
        else:
            tracked = copy_with(old, job=new)
        self.jobs[job.id] = tracked
        self._track_running(new)
        self._track_controlled(new)
        self._track_task(new)
        matters = old is None or _matters(old.job, new)
        if matters:
            self._inputs.update(job.id, new)
        self._changed(matters)
        return old, tracked

    def set_reason(self, job_id: int, reason: str) -> None:
        """The engine is writing a pending job's new reason (store.set_reasons, which bumps
        its version once when the reason changes): no pass depends on it."""
        tracked = self.jobs.get(job_id)
        if tracked is not None and tracked.job.reason != reason:
            job = tracked.job
            tracked.job = self.public[job_id] = copy_with(
                job, reason=reason, version=job.version + 1
            )
            self._reason_bumps[job_id] = self._reason_bumps.get(job_id, 0) + 1
            self.generation += 1

    def replace_all(self, jobs: Iterable[Job], projects: Iterable[Project]) -> None:
        """The store's active jobs and projects, read afresh; what the engine did about each
        job still active is kept."""
        before = self.jobs
        self.jobs = {}
        self.public = {}
        self._reason_bumps = {}
        self._running_ids = set()
        self._backend_ids = set()
        self._routable_ids = set()
        self._controlled = set()
        self._named = NamedJobs()
        self._array_tasks = {}
        for job in jobs:
            if job.state.terminal:
                self.ended.record_job(job)
                continue
            old = before.get(job.id)
            new = self.public[job.id] = slim(job)
            if old is not None and old.job.state is new.state:
                self.jobs[job.id] = copy_with(old, job=new)
            else:
                self.jobs[job.id] = Tracked(new)
            self._track_running(new)
            self._track_controlled(new)
            self._track_task(new)
        self.set_projects(projects)

    def set_foreign_memory(self, by_gpu: Mapping[tuple[str, int], int]) -> None:
        """Foreign processes' memory per GPU as last sampled: each GPU's unmanaged memory is
        the larger of that and what the inventory declares; a pass follows a change."""
        keys = self._declared_unmanaged.keys() | by_gpu.keys()
        seen = {k: max(self._declared_unmanaged.get(k, 0), by_gpu.get(k, 0)) for k in keys}
        unmanaged = {k: v for k, v in seen.items() if v}
        if unmanaged != self.unmanaged:
            self.unmanaged = unmanaged
            self._changed(True)

    def set_drains(self, drains: Iterable[DrainedGpu]) -> None:
        """The drained GPUs as the store keeps them; a pass follows a change."""
        by_key = {d.key: d for d in drains}
        if by_key != self.drains:
            self.drains = by_key
            self._changed(True)

    def set_projects(self, projects: Iterable[Project]) -> None:
        self.projects = {p.name: p for p in projects}
        self._inputs.rebuild(self.public.values())  # default limits feed every PendingJob
        self._changed(True)

    def _remove(self, job_id: int, version: int) -> None:
        array_id = self.jobs[job_id].job.array_id
        if array_id is not None:
            tasks = self._array_tasks.get(array_id, set())
            tasks.discard(job_id)
            if not tasks:
                self._array_tasks.pop(array_id, None)
        del self.jobs[job_id]
        del self.public[job_id]
        self._running_ids.discard(job_id)
        self._backend_ids.discard(job_id)
        self._routable_ids.discard(job_id)
        self._controlled.discard(job_id)
        self._named.name(job_id, ())
        self._inputs.update(job_id, None)
        self._tombstone(job_id, version)
        self._changed(True)

    def _track_running(self, job: Job) -> None:
        if job.spec.backend is not None:
            self._backend_ids.add(job.id)  # active: PENDING or RUNNING in its backend
        elif job.state is JobState.RUNNING:
            self._running_ids.add(job.id)
        else:
            self._running_ids.discard(job.id)
        if job.spec.route_to and job.spec.backend is None and job.state is JobState.PENDING:
            self._routable_ids.add(job.id)
        else:
            self._routable_ids.discard(job.id)

    def routable(self) -> Iterator[Tracked]:
        """The pool's own waiting jobs that may be routed to a backend (`--backend any`),
        in id order."""
        return (self.jobs[i] for i in sorted(self._routable_ids))

    def _track_controlled(self, job: Job) -> None:
        if job.state is JobState.PENDING and controls(job):
            self._controlled.add(job.id)
            self._named.name(job.id, tuple(dep.job_id for dep in job.spec.after))
        else:
            self._controlled.discard(job.id)
            self._named.name(job.id, ())

    def _ended_needed(self, job_id: int) -> bool:
        """Whether the ended state (or an array's failure) under `job_id` may still be asked
        for: a waiting job names it, or it is an array with tasks active."""
        return job_id in self._named or job_id in self._array_tasks

    def _track_task(self, job: Job) -> None:
        if job.array_id is not None:
            self._array_tasks.setdefault(job.array_id, set()).add(job.id)

    def _tombstone(self, job_id: int, version: int) -> None:
        removed = self._removed
        removed[job_id] = (version, self.decided_at)
        removed.move_to_end(job_id)
        expired = self.decided_at - _TOMBSTONE_S
        while removed and next(iter(removed.values()))[1] < expired:
            removed.popitem(last=False)
        if len(removed) > _TOMBSTONES:
            removed.popitem(last=False)

    def removals_remembered(self) -> int:
        """How many removed jobs' tombstones are kept (flat at a steady rate of jobs)."""
        return len(self._removed)

    def _changed(self, matters: bool) -> None:
        self.generation += 1
        if matters:
            self.dirty = True

    # -- reading ----------------------------------------------------------------------------

    def running(self) -> Iterator[Tracked]:
        """The RUNNING jobs of the pool's own machine, in id order."""
        return (self.jobs[i] for i in sorted(self._running_ids))

    def in_backends(self) -> Iterator[Tracked]:
        """The backends' active jobs (PENDING or RUNNING), in id order: never a pass's."""
        return (self.jobs[i] for i in sorted(self._backend_ids))

    def _backend_runs(self) -> Iterator[Job]:
        """The backends' jobs that hold a run there: RUNNING, or handed over (an array's
        %K counts these, as its running tasks)."""
        for t in self.in_backends():
            if t.job.state is JobState.RUNNING or t.handed_over:
                yield t.job

    def limit_of(self, job: Job) -> TimeLimit:
        return effective_time_limit(job.spec, self.projects, self.config.default_time_limit_s)

    def gating(self) -> Gating:
        """Which waiting jobs the next pass leaves out, and why (engine/gating.py); the
        skip test (`outlook`) leaves them out too from then on."""
        if not self._controlled:
            made = Gating()
        else:
            made = gate(
                (self.jobs[i].job for i in self._controlled),
                self.public,
                [*(t.job for t in self.running()), *self._backend_runs()],
                self.ended,
                self._array_tasks,
            )
        if made.left_out != self._left_out:
            self._left_out = made.left_out
            self._outlook = None
        return made

    def snapshot(
        self,
        version: int,
        usage: Usage,
        gating: Gating | None = None,
        *,
        now: float = -math.inf,
    ) -> Snapshot:
        """What a pass at `now` decides on: the view's pending and running jobs in id order
        (as the store lists them), each with the time limit it runs under
        (engine/policy_inputs.py keeps them), less the jobs `gating` leaves out and those
        a --begin time after `now` holds (`with_begin_held` adds their status; without
        `now`, those held at the last pass's)."""
        pending = self._inputs.pending(now)
        left_out = frozenset() if gating is None else gating.left_out
        if left_out:
            pending = tuple(p for p in pending if p.id not in left_out)
        return Snapshot(
            self.inventory.nodes,
            pending,
            self._inputs.running(),
            version,
            config=self.config,
            usage=usage,
            projects=self.projects,
            unmanaged_memory=self.unmanaged,
            drained=frozenset(self.drains),
        )

    def held_by_begin(self) -> Mapping[int, PendingJob]:
        """The waiting jobs a --begin time after the last pass's `now` keeps out of it."""
        return self._inputs.later()

    def with_begin_held(self, decision: Decision) -> tuple[Decision, dict[int, Status]]:
        """`decision` with the status of the jobs a --begin time kept out of its pass, and
        those of their statuses that are new since the last pass (engine/begin_held.py)."""
        inputs = self._inputs
        return self._begin_held.merged_into(
            decision,
            inputs.later(),
            inputs.later_changes(),
            self.inventory.nodes,
            self.config.spread_wide_jobs,
        )

    # -- when a pass is worth running -------------------------------------------------------

    def wants_pass(self, now: float) -> bool:
        """Whether a pass now could decide anything the last one did not (module docstring)."""
        if self.pass_now:
            return True
        if now < self.paced_until:
            return False
        if self.dirty:
            return True
        since = now - self.decided_at
        if since >= self.refresh_s:
            return True
        outlook = self.outlook(now)
        if now >= outlook.next_begin:
            return True
        return since >= self.quiet_s and outlook.may_start_or_preempt

    def outlook(self, now: float) -> Outlook:
        """The skip test's figures, worked out once per change of the view (a --begin time
        passing is a change: it is `next_begin`)."""
        cached = self._outlook
        if cached is not None and cached[0] == self.generation and now < cached[2].next_begin:
            return cached[2]
        made = self._compute_outlook(now)
        self._outlook = (self.generation, now, made)
        return made

    def _compute_outlook(self, now: float) -> Outlook:
        config = self.config
        next_begin = math.inf
        sizes: dict[str, int] = {}  # project -> fewest GPUs a startable job of it asks for
        fractional = False
        left_out = self._left_out
        for t in self.in_backends():  # a backend's job is handed over once its --begin comes
            begin = t.job.spec.begin_time
            if t.job.state is JobState.PENDING and begin is not None and now < begin < next_begin:
                next_begin = begin
        candidates = self._inputs.pending(now)  # first: lets in the jobs whose time came
        next_begin = min(next_begin, self._inputs.next_begin())
        for waiting in candidates:
            if waiting.id in left_out:
                continue
            begin = waiting.begin_time
            if begin is not None and begin > now:
                if begin < next_begin:
                    next_begin = begin
                continue
            res = waiting.resources
            fractional = fractional or res.fractional
            gpus = sizes.get(waiting.project)
            if gpus is None or res.gpus < gpus:
                sizes[waiting.project] = res.gpus
        if config.preempt_for_order or fractional:
            return Outlook(bool(sizes) or fractional, next_begin)
        free = {n.name: len(n.gpus) for n in self.inventory.nodes}
        used: dict[str, float] = {}
        held: set[tuple[str, int]] = set()
        for t in self.running():
            job = t.job
            if job.node is None:
                continue
            for g in job.gpus:
                if (job.node, g) not in held:
                    held.add((job.node, g))
                    free[job.node] = free.get(job.node, 0) - 1
            used[job.spec.project] = used.get(job.spec.project, 0.0) + self._counter.of(job)
        most = max(free.values(), default=0)
        total = sum(free.values())
        for gpus in sizes.values():
            if gpus <= most or (config.spread_wide_jobs and self._widest < gpus <= total):
                return Outlook(True, next_begin)
        if config.use_quotas:
            for name, gpus in sizes.items():
                p = self.projects.get(name)
                if p is not None and p.quota > 0 and used.get(name, 0.0) + gpus <= p.quota:
                    return Outlook(True, next_begin)  # within its quota: it may reclaim
        return Outlook(False, next_begin)
