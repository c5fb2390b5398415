"""The engine's thread: it feeds the reaction table (engine/react.py) events and carries out
its instructions (store writes, launches, signals, scheduling passes).

One thread, woken by API threads (a submission, a cancel, a project change: each posts the
job or projects as the store now holds them, `post`), by a supervisor that recorded an exit
(through the API's wake call), or by its poll interval. Each round: take the posted events
into the view, publish the view (`view`: what `queue` reads), poll the executor for the
running jobs (one call for all), and run a scheduling pass if one is due (`wants_pass`).
Only this thread starts, finishes and signals jobs, so the store's compare-and-swap only
ever races with submissions and cancellations, and a lost race means reading the store
again and one more pass.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping

from gpupool.core.backends import Admission, Backend, BackendAdmission, BackendNodes
from gpupool.core.clock import Clock, SystemClock
from gpupool.core.drain import DrainedGpu
from gpupool.core.engine_observer import EngineObserver
from gpupool.core.execution import Executor, Observation
from gpupool.core.hardware import Inventory
from gpupool.core.job import Job, JobState
from gpupool.core.project import Project
from gpupool.core.space import storage_full
from gpupool.engine import backend_io, log_lines
from gpupool.engine.capacity_reader import CapacityReader
from gpupool.engine.contracts import EngineStore
from gpupool.engine.events import (
    CommitRefused,
    CommitStarts,
    DrainsRead,
    Event,
    Finish,
    ForeignMemory,
    HandOver,
    Instruction,
    JobsStored,
    KeepRef,
    Launch,
    Log,
    LogLine,
    LostSettled,
    Note,
    PassDecided,
    Polled,
    PreemptAsked,
    ProjectsRead,
    Recovered,
    Release,
    Released,
    Requeue,
    RequeueRefused,
    Resync,
    Resynced,
    Route,
    RunPass,
    SetReasons,
    SettleLost,
    Signal,
    Signalled,
    StartInBackend,
    StartsCommitted,
    Tick,
)
from gpupool.engine.gating_store import gating_read
from gpupool.engine.idle_waiting import IdleWaitingMeter
from gpupool.engine.launching import launch_request
from gpupool.engine.observer import NoObserver, first_starts
from gpupool.engine.pacing import DEFER_RECHECK_S, Arrivals, NoArrivals, PassBudget, PassDeferral
from gpupool.engine.react import react
from gpupool.engine.state import EngineState, Tracked, handle_of, slim
from gpupool.engine.usage_cache import UsageCache
from gpupool.engine.view import JobsView
from gpupool.policy import Decision, decide
from gpupool.policy.snapshot import PolicyConfig, Usage

log = logging.getLogger("gpupool.engine")
_DISK_FULL_SAID_EVERY_S = 60.0

# Passes one round may run: a refused commit is followed at once by a pass on fresh state.
_PASSES_PER_ROUND = 3
# How long a reader waits for the engine to take in what was posted before it asked.
_VIEW_WAIT_S = 2.0
# The wait between rounds while a run is being released (its supervisor is finishing).
_SOON_S = 0.02
_POLL_GAP_S = 0.05  # a round asks the executor about running jobs at most this often
# Under a stream of submissions, the passes' reason codes are stored at most this often.
_REASONS_EVERY_S = 1.0


class Engine:
    def __init__(
        self,
        store: EngineStore,
        executor: Executor,
        inventory: Inventory,
        clock: Clock | None = None,
        poll_interval: float = 0.5,
        config: PolicyConfig | None = None,
        usage_refresh_s: float = 10.0,
        quiet_pass_s: float = 2.0,
        refresh_pass_s: float = 60.0,
        backends: Mapping[str, Backend] | None = None,
        observer: EngineObserver | None = None,
        arrivals: Arrivals | None = None,
        admission: Mapping[str, BackendAdmission] | None = None,
    ) -> None:
        self.store = store
        self.executor = executor
        # Backends by name (docs/backends.md): a job naming one runs there, its run through it.
        self.backends: Mapping[str, Backend] = dict(backends or {})
        self.inventory = inventory
        self.clock = clock or SystemClock()
        self.poll_interval = poll_interval
        self.config = config or PolicyConfig()
        self.state = EngineState(
            inventory,
            self.config,
            quiet_s=quiet_pass_s,
            refresh_s=refresh_pass_s,
            backends=self.backends,
            admission=admission,
        )
        admitting = {
            b: backend
            for b, backend in self.backends.items()
            if self.state.admission[b].mode is Admission.POOL
        }  # their capacity is read in a thread of its own (engine/capacity_reader.py)
        self.capacity_reader = CapacityReader(admitting, self.post)
        self.passes = 0  # scheduling passes run
        # Told of each pass's duration and each job's first start (the daemon's /metrics).
        self.observer: EngineObserver = observer if observer is not None else NoObserver()
        self.polls = 0  # rounds that asked the executor about the running jobs
        self._polled_at = -float("inf")  # time.monotonic() of the last poll
        self.idle_waiting = IdleWaitingMeter()  # GPUs idle while jobs that could use them waited
        memory = {(n.name, g.index): g.memory_bytes for n in inventory.nodes for g in n.gpus}
        self._usage = UsageCache(store, self.config.fairshare_half_life_s, usage_refresh_s, memory)
        self._wake = threading.Event()
        self._pass_budget = PassBudget()  # how often passes may run (engine/pacing.py)
        self.deferral = PassDeferral()  # and whether one waits for submissions in flight
        # The API's load: a due pass waits while a burst of submissions is in flight.
        self.arrivals: Arrivals = arrivals if arrivals is not None else NoArrivals()
        self.passes_deferred = 0  # due passes that waited for submissions in flight
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # Events posted by other threads, and how many were ever posted and taken in.
        self._inbox: list[Event] = []
        self._inbox_lock = threading.Lock()
        self._posted = 0
        self._taken = 0
        self._published = threading.Condition()
        self._view = JobsView.empty()
        # Jobs just committed, with their environment (the view keeps none), until launched.
        self._full: dict[int, Job] = {}
        self._round_lock = threading.Lock()  # rounds run one at a time, in one thread or not
        self._reasons_due: dict[int, str] = {}  # reason codes given, not stored yet
        self._reasons_at = 0.0
        self._disk_full_logged: dict[str, float] = {}  # what failed on a full disk -> when log_line

    # -- what other threads call -----------------------------------------------------------

    def post(self, *events: Event) -> None:
        """Hand events to the engine's thread and wake it."""
        with self._inbox_lock:
            self._inbox.extend(events)
            self._posted += len(events)
        self._wake.set()

    def stored(self, *jobs: Job) -> None:
        """The store now holds these versions of these jobs (a submission, a cancel)."""
        self.post(JobsStored(tuple(jobs)))

    def projects_changed(self, projects: Iterable[Project]) -> None:
        self.post(ProjectsRead(tuple(projects)))

    def drains_changed(self, drains: Iterable[DrainedGpu]) -> None:
        self.post(DrainsRead(tuple(drains)))

    def preempt(self, job_id: int, why: str, hold_s: float | None = None) -> None:
        """Preempt and requeue a running job (SIGTERM, grace); `why`: into its history;
        `hold_s`: once requeued, held that long (as with --begin)."""
        self.post(PreemptAsked(job_id, why, hold_s))

    def time_limit_of(self, job: Job) -> float:
        """The time limit `job` runs under, in seconds (its own, its project's, the pool's)."""
        return self.state.limit_of(job).seconds

    def foreign_memory(self, by_gpu: Mapping[tuple[str, int], int]) -> None:
        """The GPU monitor saw this much memory held outside gpupool on these GPUs."""
        self.post(ForeignMemory(dict(by_gpu)))

    def idle_waiting_gpu_s(self) -> dict[str, float]:
        """GPU-seconds idle while jobs that could use them waited, by cause, until now."""
        return self.idle_waiting.gpu_s(self.clock.now())

    def wake(self) -> None:
        self._wake.set()

    def backend_nodes(self) -> tuple[BackendNodes, ...]:
        """Each backend's nodes with the pool's jobs on each (engine/admission.py), as of the
        engine's last pass or capacity read."""
        return self.state.backend_view

    def view(self, fresh: bool = True) -> JobsView:
        """The published view. `fresh`: once it includes what was posted before this call
        (a reader sees its own submission), waiting up to a few seconds for the engine."""
        if fresh:
            with self._inbox_lock:
                target = self._posted
            if self._thread is None or not self._thread.is_alive():
                self._round(act=False)  # no engine thread (tests, offline): take it in here
            else:
                with self._published:
                    self._published.wait_for(lambda: self._taken >= target, _VIEW_WAIT_S)
        return self._view

    @property
    def last_decision(self) -> Decision:
        return self._view.decision

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        self.recover()
        self.idle_waiting.resume(self.store)  # the counter goes on from the stored total
        self._thread = threading.Thread(target=self._run, name="gpupool-engine", daemon=True)
        self._thread.start()
        self.capacity_reader.start()

    def stop(self) -> None:
        self.capacity_reader.stop()
        self._stop.set()
        self._wake.set()
        if self._thread:
            self._thread.join(timeout=10)
        with self._round_lock:
            self._write_reasons(force=True)
            self._write_idle_waiting(force=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._wait_s())
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self._round(poll=self._poll_due())
            except Exception as exc:  # the pool goes on; the next round retries
                self._failed("engine round failed", exc)
                self.state.resync_needed = True

    def _wait_s(self) -> float:
        """How long to sleep before the next round if nothing wakes the engine: the poll
        interval, less when a run is being released or a paced pass is due sooner."""
        state = self.state
        wait = _SOON_S if state.poll_soon else self.poll_interval
        if state.dirty:
            wait = min(wait, max(state.paced_until - self.clock.now(), 0.0))
        return wait

    def _poll_due(self) -> bool:
        """Whether a round asks about the running jobs: each round (a job's end seen by the
        pass a submission wakes, not by a pass of its own: with 10,000 jobs waiting for GPUs
        that extra pass spent the budget the submission's waited for, 86 -> 586 ms), but at
        most once in `_POLL_GAP_S`: under a storm of submissions, a round each, the calls to
        the executor and to each backend were ~4% of the daemon's time (issue 35 goal 4)."""
        return self.state.poll_soon or time.monotonic() - self._polled_at >= _POLL_GAP_S

    def may_act(self) -> bool:
        """Whether this daemon may start, stop and finish jobs now (LeasedEngine says no
        while it is not sure it holds the database lease)."""
        return True

    # -- recovery after a restart ----------------------------------------------------------

    def recover(self) -> None:
        """Read every active job from the store and ask the executor about the running
        ones: each is re-adopted, finished, settled as lost, launched (committed but never
        launched: the daemon died in between), requeued, or taken off GPUs the inventory no
        longer has (engine/react.py, `_recovered`)."""
        with self._round_lock:
            jobs = self.store.active_jobs(environment=False)
            projects = self.store.projects()
            self.state.set_drains(self.store.drained_gpus())
            handles = {
                handle_of(j): j.id
                for j in jobs
                if j.state is JobState.RUNNING and j.spec.backend is None
            }
            found = self.executor.adopt(list(handles)) if handles else {}
            observations = {handles[h]: obs for h, obs in found.items() if h in handles}
            # Every active job of a backend: what `adopt` finds there was handed over.
            in_backends = backend_io.tracked_runs((Tracked(slim(j)) for j in jobs), True)
            observations.update(backend_io.ask(self.backends, in_backends, adopt=True))
            now = self.clock.now()
            self._carry_out(
                react(self.state, Recovered(tuple(jobs), tuple(projects), observations, now))
            )
            self._publish(self._taken)

    # -- one round -------------------------------------------------------------------------

    def run_pass(self) -> Decision:
        """One round with a pass whether or not one is due; the decision it left."""
        self.state.pass_now = True
        self._round()
        return self.state.decision

    def _round(self, act: bool = True, poll: bool = True) -> None:
        with self._round_lock:
            with self._inbox_lock:
                events, self._inbox = self._inbox, []
                taken = self._taken + len(events)
            instructions: list[Instruction] = []
            for event in events:
                instructions += react(self.state, event)
            self._publish(taken)
            if not act or not self.may_act():
                return  # what the instructions were for is found again by the next poll
            if self.state.resync_needed:
                self.state.resync_needed = False
                instructions.append(Resync(self.clock.now()))
            self._carry_out(instructions)
            if poll:
                self._poll()
            for _ in range(_PASSES_PER_ROUND):
                if self._pass_waits(self.clock.now()):
                    break
                due = react(self.state, Tick(self.clock.now()))
                if not due:
                    break
                self._carry_out(due)
                if not self.state.pass_now:  # set again: the commit was refused
                    break
            # Published first: `show` reads a reason from the store and its explanation from
            # the view, so a reason stored before its pass's view is out reads as no why.
            self._publish(taken)
            self._write_reasons(force=not self.state.dirty)
            self._write_idle_waiting()

    def _pass_waits(self, now: float) -> bool:
        """Whether a pass due now waits for the submissions in flight (engine/pacing.py);
        the engine then looks again in DEFER_RECHECK_S. A pass asked for (`run_pass`, a
        refused commit) never waits."""
        state = self.state
        if state.pass_now or not state.wants_pass(now):
            return False
        waiting = self.deferral.since is not None  # this pass waited already
        if not self.deferral.defer(now, self.arrivals.submissions_in_flight()):
            return False
        if not waiting:
            self.passes_deferred += 1
            self._tell_observer(deferred=True)
        state.paced_until = max(state.paced_until, now + DEFER_RECHECK_S)
        return True

    def _write_reasons(self, force: bool = False) -> None:
        """Store the reason codes passes gave (the view has them at once; `show` reads them
        from it): at the end of a quiet round, else at most every _REASONS_EVERY_S, so that
        under a stream of submissions the passes' writes do not queue with theirs for the
        database's write lock. A crash before they are written loses nothing: the next
        pass gives them again."""
        now = time.monotonic()
        if not self._reasons_due or not (force or now - self._reasons_at >= _REASONS_EVERY_S):
            return
        due, self._reasons_due = self._reasons_due, {}
        self._reasons_at = now
        try:
            self.store.set_reasons(due)
        except Exception as exc:
            self._failed("engine: could not store the pending jobs' reasons", exc)
            self.state.resync_needed = True

    def _write_idle_waiting(self, force: bool = False) -> None:
        """Store the GPU-seconds idle while jobs waited: about once a minute, and at stop."""
        try:
            self.idle_waiting.write(self.store, self.clock.now(), force=force)
        except Exception as exc:
            self._failed("engine: could not store the GPU-seconds idle while jobs waited", exc)

    def _failed(self, what: str, exc: Exception) -> None:
        """Log a failure the pool goes on after: with its traceback, but a full disk in one
        warning line, at most once a minute for each `what` (it fails again at every round
        until space is freed; the next pass does it again then)."""
        full = storage_full(exc, self.store.data_dir) or storage_full(exc, self.executor.data_dir)
        if full is None:
            log.exception("%s", what)
            return
        now = time.monotonic()
        if now - self._disk_full_logged.get(what, -_DISK_FULL_SAID_EVERY_S) >= (
            _DISK_FULL_SAID_EVERY_S
        ):
            self._disk_full_logged[what] = now
            log.warning("%s", log_lines.not_done_disk_full(what, full))

    def _poll(self) -> None:
        """Ask the local executor about its running jobs, and each backend about the runs
        it holds: one call each for all of them."""
        self.state.poll_soon = False
        self._polled_at = time.monotonic()
        handles = {handle_of(t.job): t.job.id for t in self.state.running()}
        runs = backend_io.tracked_runs(self.state.in_backends())
        if not handles and not runs:
            return
        self.polls += 1
        observations: dict[int, Observation] = {}
        if handles:
            found = self.executor.poll(list(handles))
            observations = {handles[h]: obs for h, obs in found.items() if h in handles}
        observations.update(backend_io.ask(self.backends, runs, adopt=False))
        self._carry_out(react(self.state, Polled(observations, self.clock.now())))

    def executor_of(self, job_id: int) -> Executor | None:
        """Where a job of the view runs: its backend, else the local executor (None: its
        backend is not configured here)."""
        tracked = self.state.jobs.get(job_id)
        name = None if tracked is None else tracked.job.spec.backend
        return self.executor if name is None else self.backends.get(name)

    def _publish(self, taken: int) -> None:
        state = self.state
        if state.generation != self._view.generation:
            self._view = JobsView(state.public.copy(), state.decision, state.generation)
        with self._published:
            self._taken = taken
            self._published.notify_all()

    # -- carrying out instructions ---------------------------------------------------------

    def _carry_out(self, instructions: Iterable[Instruction]) -> None:
        """Carry out each instruction, and react to each result before the next one (a
        start's launch before the next pass's instructions)."""
        todo = deque(instructions)
        while todo:
            ins = todo.popleft()
            try:
                events, took_effect = self._do(ins)
            except Exception as exc:  # the view may now be behind the store: read it again
                self._failed(f"engine: could not carry out {type(ins).__name__}", exc)
                self.state.resync_needed = True
                continue
            log_line = _log_line_of(ins)
            if log_line is not None and took_effect:
                log.log(log_line.level, "%s", log_line.text)
            follow: list[Instruction] = []
            for event in events:
                follow += react(self.state, event)
            todo.extendleft(reversed(follow))

    def _do(self, ins: Instruction) -> tuple[list[Event], bool]:
        """Carry out one instruction: (the events it produced, whether it took effect)."""
        from gpupool.store import LeaseLost, StaleState

        store, executor = self.store, self.executor
        match ins:
            case RunPass(now):
                self.passes += 1
                began = time.perf_counter()
                gating = gating_read(self.state, store)
                snapshot = self.state.snapshot(
                    store.allocation_version(), self.usage(), gating, now=now
                )
                decision = decide(snapshot, now)
                self.idle_waiting.passed(snapshot, decision, now)
                took = time.perf_counter() - began
                self.state.paced_until = self._pass_budget.spend(now + took, took)
                self._tell_observer(pass_took=took)
                return [PassDecided(decision, snapshot, now, gating)], True
            case CommitStarts(starts, version, now):
                plan = [(s.job_id, s.node, s.gpus, s.gpu_memory_bytes) for s in starts]
                try:
                    started = store.commit_starts(plan, version, now)
                except StaleState as exc:
                    # LeaseLost: another daemon schedules now; the keeper's next renewal
                    # learns it and stops this one (daemon/lease_keeper.py).
                    lost = isinstance(exc, LeaseLost)
                    log.log(logging.WARNING if lost else logging.DEBUG,
                            "decision refused as stale (%s)%s", exc,
                            "" if lost else "; deciding again")  # fmt: skip
                    return [CommitRefused(str(exc), now)], False
                self._full.update((job.id, job) for job in started)
                self._tell_observer(started=started)
                return [StartsCommitted(tuple(started), now)], True
            case Launch(job_id, time_limit_s):
                job = self._full.pop(job_id, None) or store.get(job_id)
                if job.state is not JobState.RUNNING or job.node is None:
                    return [], False
                executor.launch(launch_request(job, time_limit_s))
                return [], True
            case Finish():
                job = store.finish(
                    ins.job_id,
                    ins.state,
                    ins.exit_code,
                    ins.now,
                    ins.cause,
                    ins.reason,
                    end_time=ins.end_time,
                    usage=ins.usage,
                    gpu_utilization=ins.gpu_utilization,
                )
                return [JobsStored((job,))], True
            case Requeue(job_id, cause, now, _, hold_until, retry, usage, gpu_use):
                try:
                    job = store.requeue(
                        job_id, now, cause, hold_until, retry=retry, usage=usage,
                        gpu_utilization=gpu_use,
                    )  # fmt: skip
                except StaleState:  # cancelled meanwhile: cancel wins
                    return [RequeueRefused(job_id, now)], False
                return [JobsStored((job,))], True
            case Release(handle, now):
                where = self.executor_of(handle.job_id)
                released = where is not None and where.release(handle)
                return [Released(handle.job_id, released, now)], released
            case Signal(handle, kind, why):
                where = self.executor_of(handle.job_id)
                delivered = where is not None and where.signal(handle, kind)
                return [Signalled(handle.job_id, kind, delivered, why)], delivered
            case HandOver(job_id, name, time_limit_s, _, pinned):
                job = store.get(job_id)  # with its environment
                if job.state is not JobState.PENDING or job.cancel_requested:
                    return [], False
                checkpoints = self.state.admission[name].checkpoint_dir
                request = backend_io.launch_request(job, time_limit_s, pinned, checkpoints)
                self.backends[name].launch(request)
                return [], True
            case Route(job_id, name, now, cause):
                routed = store.route_to_backend(job_id, name, now, cause)
                return ([JobsStored((routed,))] if routed else []), routed is not None
            case StartInBackend(job_id, name, start_time, ref, _, node, gpus):
                begun = store.start_in_backend(job_id, start_time, name, ref, node, gpus)
                return ([JobsStored((begun,))] if begun else []), begun is not None
            case KeepRef(job_id, ref):
                kept = store.set_backend_ref(job_id, ref)
                return ([JobsStored((kept,))] if kept else []), kept is not None
            case SettleLost(handle, wait_s, now):
                left = executor.settle_lost(handle, wait_s)
                return [LostSettled(handle.job_id, left, now)], True
            case Note():
                noted = store.note(ins.job_id, ins.now, ins.cause, ins.reason, only_if=ins.only_if)
                return ([JobsStored((noted,))] if noted is not None else []), noted is not None
            case SetReasons(reasons):
                self._reasons_due.update(reasons)  # written by `_write_reasons`
                return [], True
            case Resync(now):
                jobs, projects = store.active_jobs(environment=False), store.projects()
                drains = DrainsRead(tuple(store.drained_gpus()))
                return [Resynced(tuple(jobs), tuple(projects)), drains], True
            case Log():
                return [], True
        raise TypeError(f"not an engine instruction: {ins!r}")

    def _tell_observer(
        self, pass_took: float | None = None, started: Iterable[Job] = (), deferred: bool = False
    ) -> None:
        """Tell the observer a pass's duration, the jobs just started or a pass deferred,
        never failing the instruction for it: what it raises is logged (raised here, it
        would lose a commit's events, and with them the launches, until the next resync)."""
        try:
            if pass_took is not None:
                self.observer.pass_ran(pass_took)
            if deferred:
                self.observer.pass_deferred()
            for start in first_starts(started):
                self.observer.job_started(start)
        except Exception:
            log.exception("engine: the observer failed (nothing is lost but a measurement)")

    # -- fair share ------------------------------------------------------------------------

    def usage(self) -> Usage:
        """Decayed GPU-seconds per project and user (engine/usage_cache.py)."""
        return self._usage.at(self.clock.now())


def _log_line_of(ins: Instruction) -> LogLine | None:
    match ins:
        case (
            Launch()
            | Finish()
            | Requeue()
            | Signal()
            | Note()
            | HandOver()
            | StartInBackend()
            | Route()
        ):
            return ins.log_line
        case Log(log_line):
            return log_line
    return None
