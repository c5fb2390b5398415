"""The engine's reaction table: `react(state, event) -> instructions`.

Every decision the engine makes about a job outside the scheduling policy is here: what an
exit means, when a preempted job is requeued, what is done about a lost supervisor or GPUs
gone from the inventory, which cancel or preemption to deliver, which notes and reason
codes a pass leaves, when a pass is due. No I/O, no clock (the time comes in the event), no
randomness: given the same state and event it returns the same instructions and leaves the
same state, so it is tested without processes or a database
(tests/unit/test_engine_react.py). The engine's loop (engine/loop.py) feeds it events and
carries the instructions out, and each result comes back as an event.

As in Dask's worker state machine (`handle_stimulus`), `state` is changed in place rather
than copied: it holds every active job, and an event touches one or a few of them.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping

from gpupool.core.cgroup_usage import ended_run_usage
from gpupool.core.execution import ExitReason, ExitRecord, Observation, RunState, StopKind
from gpupool.core.job import EndReason, HeldReason, Job, JobState
from gpupool.core.units import format_duration
from gpupool.engine import backend_react, log_lines
from gpupool.engine.admission import backend_nodes
from gpupool.engine.events import (
    CapacityRead,
    CommitRefused,
    CommitStarts,
    DrainsRead,
    Event,
    Finish,
    ForeignMemory,
    Instruction,
    JobsStored,
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
    RunPass,
    SetReasons,
    SettleLost,
    Signal,
    Signalled,
    StartsCommitted,
    Tick,
)
from gpupool.engine.faults import (
    FIRST_KILL_WAIT_S,
    end_time_of,
    gpus_outside,
    held_cause,
    lost_cause,
    outside_cause,
)
from gpupool.engine.gating import Gating
from gpupool.engine.outcome import outcome_of, output_lost_text, retry_of
from gpupool.engine.quota_notes import quota_note
from gpupool.engine.state import EngineState, Tracked, handle_of
from gpupool.policy import Code, Decision, Status
from gpupool.policy.render import preemption_text

_WARN = logging.WARNING
_NEVER = Code.QUOTA_NEVER_FITS


def react(state: EngineState, event: Event) -> list[Instruction]:
    """What to do about `event` (module docstring); `state` is brought up to date."""
    match event:
        case JobsStored(jobs):
            return _stored(state, jobs)
        case ProjectsRead(projects):
            state.set_projects(projects)
            return []
        case ForeignMemory(by_gpu):
            state.set_foreign_memory(by_gpu)
            return []
        case DrainsRead(drains):
            state.set_drains(drains)
            return []
        case CapacityRead(backend, capacity):
            if state.capacity.get(backend) != capacity:
                state.capacity[backend] = capacity
                state.dirty = True  # its waiting jobs may be admitted now
                state.generation += 1
                state.backend_view = backend_nodes(state)
            return []
        case PreemptAsked(job_id, why, hold_s):
            tracked = state.jobs.get(job_id)
            if tracked is None or tracked.job.state is not JobState.RUNNING:
                return []
            if tracked.stop_why is not None or tracked.job.cancel_requested:
                return []  # already being stopped
            tracked.requeue_hold_s = hold_s
            log_line = LogLine(f"job {job_id}: preempting it ({why})")
            return [Signal(handle_of(tracked.job), StopKind.PREEMPT, why, log_line)]
        case Resynced(jobs, projects):
            state.replace_all(jobs, projects)
            return []
        case Recovered():
            state.replace_all(event.jobs, event.projects)
            return _recovered(state, event)
        case Polled(observations, now):
            out: list[Instruction] = []
            for job_id, obs in sorted(observations.items()):
                tracked = state.jobs.get(job_id)
                if tracked is None:
                    continue
                if tracked.job.spec.backend is not None:
                    out += backend_react.observed(state, tracked, obs, now)
                elif tracked.job.state is JobState.RUNNING:
                    out += _observed(state, tracked, obs, now)
            return out
        case Tick(now):
            return [RunPass(now)] if state.wants_pass(now) else []
        case PassDecided(decision, snapshot, now, gating):
            decision = gating.merged_into(decision)
            decision, handed = backend_react.after_pass(state, decision, gating, now, snapshot)
            own = decision.pending
            decision, fresh = state.with_begin_held(decision)
            checks = {**fresh, **own} if fresh else own
            state.decision, state.decided_at = decision, now
            state.dirty = state.pass_now = False
            state.generation += 1
            doomed = [*_never_satisfied(state, gating, now), *handed]
            if decision.starts:
                state.committing, state.committing_checks = decision, checks
                return [*doomed, CommitStarts(decision.starts, snapshot.version, now)]
            return [*doomed, *_after_pass(state, decision, checks, now)]
        case StartsCommitted(jobs, now):
            return _started(state, jobs, now)
        case CommitRefused(_, now):
            # Another writer changed what the pass decided on (a cancel, a project): read
            # the store again and decide afresh; the refused pass's starts never happened.
            state.committing, state.committing_checks = None, {}
            state.dirty = state.pass_now = True
            return [Resync(now)]
        case Signalled(job_id, kind, delivered, why):
            tracked = state.jobs.get(job_id)
            if tracked is not None and delivered:
                if kind is StopKind.CANCEL:
                    tracked.cancel_delivered = True
                else:
                    tracked.stop_why = why
            return []
        case Released(job_id, released, now):
            return _released(state, job_id, released, now)
        case RequeueRefused(job_id, now):
            log_line = LogLine(f"job {job_id} CANCELLED while it was being preempted")
            cause, reason = "cancelled while preempted", EndReason.CANCELLED
            refused = state.jobs.get(job_id)
            used = None if refused is None else refused.ended_run_usage  # its run's, kept
            ended = JobState.CANCELLED
            return [Finish(job_id, ended, None, cause, reason, now, log_line=log_line, usage=used)]
        case LostSettled(job_id, leftovers, now):
            tracked = state.jobs.get(job_id)
            if tracked is None or tracked.job.state is not JobState.RUNNING:
                return []
            if leftovers.gone:
                cause = lost_cause(leftovers)
                log_line = LogLine(f"job {job_id} failed: {cause}", _WARN)
                reason = EndReason.NODE_FAIL
                return [
                    Finish(job_id, JobState.FAILED, None, cause, reason, now, log_line=log_line)
                ]
            if tracked.survivors_reported:
                return []
            tracked.survivors_reported = True
            cause = held_cause(leftovers)
            log_line = LogLine(f"job {job_id}: {cause}", _WARN)
            return [Note(job_id, cause, now, reason=HeldReason.SUPERVISOR_LOST, log_line=log_line)]
    raise TypeError(f"not an engine event: {event!r}")


def _stored(state: EngineState, jobs: tuple[Job, ...]) -> list[Instruction]:
    out: list[Instruction] = []
    for job in jobs:
        before, after = state.upsert(job)
        if after is not None and after is not before:
            out += _deliver_cancel(after)
            if job.spec.backend is not None:
                out += backend_react.deliver_cancel(after, None)
    return out


def running_observed(
    state: EngineState, tracked: Tracked, obs: Observation, now: float
) -> list[Instruction]:
    """What to do about a RUNNING job given what its executor or backend says (`_observed`)."""
    return _observed(state, tracked, obs, now)


def _deliver_cancel(tracked: Tracked) -> list[Instruction]:
    """A running job whose cancel was asked for and not yet delivered: deliver it (again
    at every poll until the executor says it was)."""
    job = tracked.job
    if job.state is not JobState.RUNNING or not job.cancel_requested or tracked.cancel_delivered:
        return []
    log_line = LogLine(f"job {job.id}: stopping it (cancelled; {job.spec.grace_s:g}s grace)")
    return [Signal(handle_of(job), StopKind.CANCEL, "cancelled", log_line)]


def _observed(
    state: EngineState, tracked: Tracked, obs: Observation, now: float
) -> list[Instruction]:
    """What to do about a RUNNING job given what its executor says of its run."""
    job = tracked.job
    match obs.state:
        case RunState.EXITED if obs.exit is not None:
            lost = output_lost_text(obs.exit)  # told first, whatever comes of the run
            log_line = LogLine(f"job {job.id}: {lost}", _WARN)
            told: list[Instruction] = (
                [] if lost is None else [Note(job.id, lost, now, log_line=log_line)]
            )
            return told + _exited(state, tracked, obs.exit, now)
        case RunState.LOST:
            # Its processes may still run on its GPUs: killed before they are freed.
            wait_s = 0.0 if tracked.survivors_reported else FIRST_KILL_WAIT_S
            return [SettleLost(handle_of(job), wait_s, now)]
        case RunState.UNLAUNCHED:
            return [Launch(job.id, state.limit_of(job).seconds)]
        case RunState.RELEASED:  # archived, and the daemon died before the requeue
            return [Requeue(job.id, tracked.retry_cause or "preempted; requeued", now)]
        case RunState.RUNNING:
            return _deliver_cancel(tracked)
    return []  # UNKNOWN: ask again at the next poll


def _exited(
    state: EngineState, tracked: Tracked, record: ExitRecord, now: float
) -> list[Instruction]:
    """A RUNNING job whose run ended as `record` says: released (preempted, or retried) or
    finished."""
    job = tracked.job
    used = ended_run_usage(record)
    tracked.ended_gpu_utilization = record.gpu_utilization  # stored with the requeue
    if record.reason is ExitReason.PREEMPTED:
        tracked.ended_run_usage = used  # stored with the requeue
        return [Release(handle_of(job), now)]  # then requeued (`_released`)
    result = outcome_of(record, state.limit_of(job).seconds)
    if job.spec.backend is not None and record.message and result.state is JobState.FAILED:
        # A backend's words about a failure (Ray: "the head no longer knows this
        # run") go into the history: only it knows what happened there.
        said_there = f"{result.cause}; backend {job.spec.backend}: {record.message}"
        result = dataclasses.replace(result, cause=said_there)
    retry = None if job.cancel_requested else retry_of(job, result)
    if retry is not None:  # archived, then requeued with the same id (`_released`)
        tracked.retry_cause, tracked.ended_run_usage = retry, used
        return [Release(handle_of(job), now)]
    end = end_time_of(record, job, now)
    log_line = LogLine(log_lines.job_ended(job, result.state, result.exit_code, end, result.cause))
    return [
        Finish(
            job.id,
            result.state,
            result.exit_code,
            result.cause,
            result.reason,
            now,
            end_time=end,
            log_line=log_line,
            usage=used,
            gpu_utilization=record.gpu_utilization,
        )
    ]


def _recovered(state: EngineState, event: Recovered) -> list[Instruction]:
    """After a restart, each job the store says is RUNNING: re-adopted, launched (it was
    committed but never launched), finished, settled as lost, requeued, or taken off GPUs
    the inventory no longer has (docs/ARCHITECTURE.md, crash safety). A backend's jobs,
    PENDING ones too, are what its backend's `adopt` found (engine/backend_react.py)."""
    out: list[Instruction] = []
    now = event.now
    for job_id, obs in sorted(event.observations.items()):
        tracked = state.jobs.get(job_id)
        if tracked is not None and tracked.job.spec.backend is not None:
            out += backend_react.observed(state, tracked, obs, now, adopted=True)
            continue
        if tracked is None or tracked.job.state is not JobState.RUNNING:
            continue
        job = tracked.job
        missing = gpus_outside(job, state.inventory)
        if missing and obs.state in (RunState.UNLAUNCHED, RunState.LOST, RunState.RUNNING):
            why = outside_cause(job, state.inventory, missing)
            out += _off_gone_gpus(state, tracked, obs, why, now)
        elif obs.state is RunState.UNLAUNCHED:
            log_line = LogLine(f"job {job.id} was scheduled but never launched: launching it now")
            out.append(Launch(job.id, state.limit_of(job).seconds, log_line))
        elif obs.state is RunState.RUNNING:
            out.append(
                Log(LogLine(f"job {job.id} is still running under its supervisor: re-adopted"))
            )
            out += _deliver_cancel(tracked)
        else:
            out += _observed(state, tracked, obs, now)
    return out


def _off_gone_gpus(
    state: EngineState, tracked: Tracked, obs: Observation, why: str, now: float
) -> list[Instruction]:
    """A RUNNING job whose GPUs (or node) left the inventory, as Slurm does with the jobs
    of a node removed from its configuration: stopped (SIGTERM, grace, SIGKILL, as a
    preemption) and requeued with the same id; one never launched is requeued at once; one
    whose supervisor is gone is settled as any lost job. Its GPUs that remain stay held
    until it has stopped."""
    job = tracked.job
    if obs.state is RunState.UNLAUNCHED:
        log_line = LogLine(
            f"job {job.id} was scheduled but never launched, and {why}: requeued", _WARN
        )
        return [Requeue(job.id, f"{why}; requeued before it was launched", now, log_line)]
    if obs.state is RunState.LOST:
        log_line = LogLine(f"job {job.id}: {why}, and its supervisor is gone", _WARN)
        return [Note(job.id, why, now, log_line=log_line), *_observed(state, tracked, obs, now)]
    log_line = LogLine(f"job {job.id}: {why}: stopping it to requeue it", _WARN)
    cause = f"{why}: stopping it to requeue it"
    return [
        Note(job.id, cause, now, reason=HeldReason.GPUS_GONE, log_line=log_line),
        Signal(handle_of(job), StopKind.PREEMPT, why),
    ]


def _released(state: EngineState, job_id: int, released: bool, now: float) -> list[Instruction]:
    tracked = state.jobs.get(job_id)
    if tracked is None or tracked.job.state is not JobState.RUNNING:
        return []
    if not released:  # its supervisor is finishing: look again soon, not at the next tick
        state.poll_soon = True
        return []
    used = tracked.ended_run_usage  # what the run that ended used, stored with the requeue
    gpu_use = tracked.ended_gpu_utilization
    if tracked.retry_cause is not None:
        log_line = LogLine(f"job {job_id}: {tracked.retry_cause}", _WARN)
        cause = tracked.retry_cause
        return [Requeue(job_id, cause, now, log_line, None, True, used, gpu_use)]
    why = tracked.stop_why or "to give its GPUs back"
    hold_s = tracked.requeue_hold_s
    if hold_s is None:
        log_line = LogLine(f"job {job_id} preempted and requeued")
        cause = f"preempted ({why}); requeued"
        return [Requeue(job_id, cause, now, log_line, usage=used, gpu_utilization=gpu_use)]
    held = f"requeued, held {format_duration(hold_s)} so that waiting jobs start first"
    log_line = LogLine(f"job {job_id} preempted and {held}")
    cause = f"preempted ({why}); {held}"
    return [Requeue(job_id, cause, now, log_line, now + hold_s, False, used, gpu_use)]


def _started(state: EngineState, jobs: tuple[Job, ...], now: float) -> list[Instruction]:
    out: list[Instruction] = []
    for job in jobs:
        state.upsert(job)
        log_line = LogLine(log_lines.job_started(job))
        out.append(Launch(job.id, state.limit_of(job).seconds, log_line))
    decision, state.committing = state.committing, None
    checks, state.committing_checks = state.committing_checks, {}
    if decision is not None:
        out += _after_pass(state, decision, checks, now)
    return out


def _never_satisfied(state: EngineState, gating: Gating, now: float) -> list[Instruction]:
    """Cancel the waiting jobs whose --after can never be met (an `:ok` dependency ended
    otherwise), as Slurm does with kill_invalid_depend: DependencyNeverSatisfied, the
    dependency named in the history."""
    out: list[Instruction] = []
    for job_id, cause in sorted(gating.doomed.items()):
        tracked = state.jobs.get(job_id)
        if tracked is None or tracked.job.state is not JobState.PENDING:
            continue
        log_line = LogLine(f"job {job_id} CANCELLED: {cause}")
        reason = EndReason.DEPENDENCY
        out.append(Finish(job_id, JobState.CANCELLED, None, cause, reason, now, log_line=log_line))
    return out


def _after_pass(
    state: EngineState, decision: Decision, checks: Mapping[int, Status], now: float
) -> list[Instruction]:
    """Once a pass's starts are committed: signal its new preemption victims, write the
    notes of jobs whose QuotaNeverFits came or went, then the reason codes that changed
    (notes first: quota_notes.py says why), of the statuses `checks` names: every one the
    pass gave, not those of jobs held by --begin it compared before (begin_held.py)."""
    out: list[Instruction] = []
    asked: set[int] = set()
    for p in decision.preemptions:
        tracked = state.jobs.get(p.job_id)
        if tracked is None or tracked.job.state is not JobState.RUNNING:
            continue
        if tracked.stop_why is not None or p.job_id in asked:
            continue  # the policy names the same victims every pass until they exit
        asked.add(p.job_id)
        why = preemption_text(p)
        log_line = LogLine(f"job {p.job_id}: preempting it for job {p.for_job_id} ({why})")
        out.append(Signal(handle_of(tracked.job), StopKind.PREEMPT, why, log_line))
    changed: dict[int, str] = {}
    jobs, pending = state.jobs, JobState.PENDING
    for job_id, status in checks.items():  # every waiting job a pass took: kept lean
        tracked = jobs.get(job_id)
        if tracked is None or tracked.job.state is not pending:
            continue
        stored, code = tracked.job.reason, status.code
        if code == stored:  # a str enum: the same code as the stored one
            if code is not _NEVER:
                continue
        else:
            changed[job_id] = code.value
        if code is _NEVER or stored == _NEVER:
            note = quota_note(status, stored)
            if note is not None:
                log_line = LogLine(f"job {job_id} {note}")
                out.append(Note(job_id, note, now, only_if=JobState.PENDING, log_line=log_line))
    if changed:
        out.append(SetReasons(changed))
        for job_id, reason in changed.items():
            state.set_reason(job_id, reason)
    return out
