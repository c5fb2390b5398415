"""The reaction table's rows for backends' jobs (docs/backends.md); pure, as react.py.

A backend's job is never given to a scheduling pass: its backend's scheduler places it.
Each pass (`after_pass`), every such job that is PENDING and free to go (not held, its
`--after` met, within its array's `%K`, its `--begin` come, no cancel asked) is handed
over at once (`HandOver`); the others keep the status that says why. Then what its
backend's poll says (`observed`, one poll per backend per round):

    the pool's job   the backend says   what happens
    PENDING          QUEUED             stays PENDING: QueuedInBackend, with the backend's
                                        words (`Observation.detail`)
    PENDING          RUNNING            RUNNING from now (`StartInBackend`)
    PENDING          EXITED             cancelled there (or here): CANCELLED; else started
                                        now, and its end is read at the next poll
    PENDING          UNLAUNCHED         handed over again (launch is idempotent), or
                                        CANCELLED when a cancel was asked
    RUNNING          EXITED             ends as a local run's exit does (react._observed)
    RUNNING          UNLAUNCHED/LOST    FAILED: the backend no longer knows the run
    any              UNKNOWN            nothing changes; its history says once that the
                                        backend cannot be reached

A cancel of a handed-over PENDING job is delivered to its backend as for a running one
(`StopKind.CANCEL`); one not handed over yet is cancelled at once.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from gpupool.core.backends import Admission
from gpupool.core.execution import ExitReason, Observation, RunState, StopKind
from gpupool.core.job import EndReason, JobState
from gpupool.engine.admission import admit, backend_nodes
from gpupool.engine.events import (
    Finish,
    HandOver,
    Instruction,
    KeepRef,
    Log,
    LogLine,
    Note,
    Route,
    SetReasons,
    Signal,
    StartInBackend,
)
from gpupool.engine.gating import Gating
from gpupool.engine.state import EngineState, Tracked, handle_of
from gpupool.policy import Code, Decision, Snapshot, Status
from gpupool.policy.render import status_text
from gpupool.policy.status import Rule

_WARN = logging.WARNING


def queued_status(backend: str, detail: str = "") -> Status:
    return Status(Code.QUEUED_IN_BACKEND, Rule.QUEUED_IN_BACKEND, backend=backend, detail=detail)


def _begin_status() -> Status:
    return Status(Code.BEGIN_TIME, Rule.BEGIN_TIME)


def after_pass(
    state: EngineState, decision: Decision, gating: Gating, now: float, decided: Snapshot
) -> tuple[Decision, list[Instruction]]:
    """`decision` with every waiting backend job's status, and the hand-overs of those free
    to go (module docstring): at once for a backend whose engine admits, else those the
    backend's own pass admits (engine/admission.py; `decided`: the pool's pass's snapshot)."""
    statuses: dict[int, Status] = {}
    out: list[Instruction] = []
    to_admit: dict[str, list[Tracked]] = {}
    for tracked in state.in_backends():
        job = tracked.job
        if job.state is not JobState.PENDING or job.id in gating.left_out:
            continue  # gating's status is in the decision already
        if job.cancel_requested:
            out += deliver_cancel(tracked, now)  # one not handed over ends now
            continue
        backend = job.spec.backend
        assert backend is not None
        if tracked.handed_over:
            statuses[job.id] = queued_status(backend, tracked.backend_detail)
        elif backend not in state.backends:
            statuses[job.id] = Status(Code.NO_BACKEND, Rule.NO_BACKEND, backend=backend)
        elif job.spec.begin_time is not None and job.spec.begin_time > now:
            statuses[job.id] = _begin_status()
        elif state.admission[backend].mode is Admission.POOL:
            to_admit.setdefault(backend, []).append(tracked)
        else:
            out += hand_over(state, tracked, now)
            statuses[job.id] = queued_status(backend)
    routes = _routes(state, decision, gating, now)
    passes: list[Decision] = []
    routed: set[int] = set()
    for backend in sorted(to_admit.keys() | routes.keys()):
        candidates = [t for t in routes.get(backend, ()) if t.job.id not in routed]
        waiting = to_admit.get(backend, []) + candidates
        if not waiting:
            continue
        admitted = admit(state, backend, state.admission[backend], waiting, decided, now)
        mine = {t.job.id for t in candidates}
        taken = {t.job.id for t, _ in admitted.handovers}
        passes.append(_without(admitted.decision, mine - taken))
        for tracked, pinned in admitted.handovers:
            if tracked.job.id in mine:  # `--backend any`: it starts here first
                routed.add(tracked.job.id)
                out.append(_route(tracked, backend, decision.pending.get(tracked.job.id), now))
            out += hand_over(state, tracked, now, pinned, backend)
            statuses[tracked.job.id] = queued_status(backend)
    if state.backends:
        state.backend_view = backend_nodes(state)
    if not statuses and not passes:
        return decision, out
    return _merged(decision, passes, statuses), out


def _merged(decision: Decision, passes: list[Decision], statuses: dict[int, Status]) -> Decision:
    """The pool's pass with the backends' passes (their jobs are disjoint) and `statuses`."""
    pending = dict(decision.pending)
    estimated = dict(decision.estimated_start)
    priorities = dict(decision.priorities)
    reservations, preemptions = list(decision.reservations), list(decision.preemptions)
    for made in passes:
        pending.update(made.pending)
        estimated.update(made.estimated_start)
        priorities.update(made.priorities)
        reservations += made.reservations
        preemptions += made.preemptions
    pending.update(statuses)
    for job_id in statuses:
        estimated.pop(job_id, None)
    return replace(
        decision,
        pending=pending,
        estimated_start=estimated,
        priorities=priorities,
        reservations=tuple(reservations),
        preemptions=tuple(preemptions),
    )


def hand_over(
    state: EngineState,
    tracked: Tracked,
    now: float,
    pinned: tuple[str, ...] = (),
    backend: str | None = None,
) -> list[Instruction]:
    """Launch `tracked` in its backend (`backend`: the one a `--backend any` job is routed
    to, before its spec says so); `pinned`: the engine nodes the pool admitted it to."""
    job = tracked.job
    backend = backend or job.spec.backend
    assert backend is not None
    tracked.handed_over = True
    if tracked.admitted:
        where = ", ".join(
            f"{n} ({len(g)} GPU{'s' if len(g) != 1 else ''})" for n, g in tracked.admitted
        )
        text = f"admitted to backend {backend} on {where}"
    else:
        text = f"handed over to backend {backend}"
    log_line = LogLine(f"job {job.id} {text}")
    return [
        HandOver(job.id, backend, state.limit_of(job).seconds, log_line, pinned),
        Note(job.id, text, now, reason=Code.QUEUED_IN_BACKEND.value, only_if=JobState.PENDING),
    ]


def deliver_cancel(tracked: Tracked, now: float | None) -> list[Instruction]:
    """A backend's PENDING job whose cancel was asked: cancelled in its backend if it was
    handed over (again at every poll until delivered), else ended CANCELLED at `now` (at
    the next pass when None: a stored job's event carries no clock; the cancel made it
    one due)."""
    job = tracked.job
    if job.state is not JobState.PENDING or not job.cancel_requested or tracked.cancel_delivered:
        return []
    if tracked.handed_over:
        log_line = LogLine(f"job {job.id}: cancelling it in backend {job.spec.backend}")
        return [Signal(handle_of(job), StopKind.CANCEL, "cancelled", log_line)]
    if now is None:
        return []
    log_line = LogLine(f"job {job.id} CANCELLED before it was handed over")
    cause = "cancelled before it was handed over to its backend"
    return [
        Finish(job.id, JobState.CANCELLED, None, cause, EndReason.CANCELLED, now, log_line=log_line)
    ]


def observed(
    state: EngineState, tracked: Tracked, obs: Observation, now: float, adopted: bool = False
) -> list[Instruction]:
    """What to do about a backend's job given what its backend says (module docstring);
    `adopted`: said by `adopt` after a restart (a run found there was handed over)."""
    from gpupool.engine.react import running_observed  # react imports this module

    job = tracked.job
    backend = job.spec.backend
    assert backend is not None
    if obs.state is RunState.UNKNOWN:
        if tracked.unreachable_told:
            return []
        tracked.unreachable_told = True
        cause = f"backend {backend} cannot be reached: its state is kept until it answers"
        return [Note(job.id, cause, now, log_line=LogLine(f"job {job.id}: {cause}", _WARN))]
    tracked.unreachable_told = False
    out: list[Instruction] = []
    starts = job.state is JobState.PENDING and obs.state is RunState.RUNNING  # writes the ref
    if obs.ref is not None and obs.ref != job.backend_ref and not starts:
        out.append(KeepRef(job.id, obs.ref))
    if job.state is JobState.RUNNING:
        if obs.state in (RunState.UNLAUNCHED, RunState.LOST):
            cause = f"backend {backend} no longer knows its run"
            log_line = LogLine(f"job {job.id} failed: {cause}", _WARN)
            reason = EndReason.NODE_FAIL
            return [
                *out,
                Finish(job.id, JobState.FAILED, None, cause, reason, now, log_line=log_line),
            ]
        if adopted and obs.state is RunState.RUNNING:
            out.append(
                Log(LogLine(f"job {job.id} is still running in backend {backend}: re-adopted"))
            )
        return out + running_observed(state, tracked, obs, now)
    if job.state is not JobState.PENDING:
        return out
    if adopted and obs.state is not RunState.UNLAUNCHED:
        tracked.handed_over = True
    match obs.state:
        case RunState.QUEUED:
            tracked.handed_over = True
            out += _set_status(state, job.id, queued_status(backend, obs.detail))
            tracked.backend_detail = obs.detail
            return out + deliver_cancel(tracked, now)
        case RunState.RUNNING:
            log_line = LogLine(f"job {job.id} started in backend {backend}")
            node, gpus = where_it_runs(tracked)
            return [*out, StartInBackend(job.id, backend, now, obs.ref, log_line, node, gpus)]
        case RunState.EXITED:
            record = obs.exit
            cancelled = record is not None and record.reason is ExitReason.CANCELLED
            if job.cancel_requested or cancelled:
                log_line = LogLine(f"job {job.id} CANCELLED in backend {backend} before it started")
                cause = f"cancelled in backend {backend} before it started"
                reason = EndReason.CANCELLED
                return [
                    *out,
                    Finish(job.id, JobState.CANCELLED, None, cause, reason, now, log_line=log_line),
                ]
            start = now if record is None else min(record.start_time, now)
            state.poll_soon = True  # its end is read at the next poll, as a running job's
            node, gpus = where_it_runs(tracked)
            return [*out, StartInBackend(job.id, backend, start, obs.ref, None, node, gpus)]
        case RunState.UNLAUNCHED:
            if job.cancel_requested:
                tracked.handed_over = False
                return out + deliver_cancel(tracked, now)
            if tracked.handed_over and backend in state.backends:
                log_line = LogLine(f"job {job.id}: backend {backend} does not have its run: again")
                out.append(Log(log_line))
                out += hand_over(state, tracked, now, _pins(state, tracked))[:1]
            return out
    return out


def _set_status(state: EngineState, job_id: int, status: Status) -> list[Instruction]:
    """A waiting backend job's status changed between passes: into the decision `why` and
    `queue` read, and its code into the store when it changed."""
    decision = state.decision
    if decision.pending.get(job_id) == status:
        return []
    state.decision = replace(decision, pending={**decision.pending, job_id: status})
    state.generation += 1
    tracked = state.jobs.get(job_id)
    if tracked is None or tracked.job.reason == status.code.value:
        return []
    state.set_reason(job_id, status.code.value)
    return [SetReasons({job_id: status.code.value})]


def _pins(state: EngineState, tracked: Tracked) -> tuple[str, ...]:
    """The engine nodes a job admitted by the pool is pinned to again, when its run is
    launched anew (the same rule as at admission: as many as the nodes it spans)."""
    backend = tracked.job.spec.backend
    capacity = state.capacity.get(backend or "")
    if not tracked.admitted or capacity is None or len(tracked.admitted) != tracked.job.spec.nodes:
        return ()
    pins = {n.name: n.pinned_as for n in capacity.nodes}
    if not all(n in pins for n, _ in tracked.admitted):
        return ()
    return tuple(pins[n] for n, _ in tracked.admitted)


def where_it_runs(tracked: Tracked) -> tuple[str, tuple[int, ...]]:
    """Where a backend's job that starts runs, as the pool names it, and its GPUs: the
    nodes it was admitted to (`hpc/c1+c2`) and the GPUs the pass gave it there, in node
    order; else the backend alone and its GPU count as indices (its engine chose)."""
    job = tracked.job
    backend = job.spec.backend or ""
    if tracked.admitted:
        names = "+".join(n for n, _ in tracked.admitted)
        return f"{backend}/{names}", tuple(g for _, gpus in tracked.admitted for g in gpus)
    return backend, tuple(range(job.spec.resources.gpus * job.spec.nodes))


def _routes(
    state: EngineState, decision: Decision, gating: Gating, now: float
) -> dict[str, list[Tracked]]:
    """The pool's own waiting jobs of `--backend any` its pass did not start, as candidates
    of each admitting backend they may go to (docs/backends.md "Where a job goes")."""
    started = {s.job_id for s in decision.starts}
    out: dict[str, list[Tracked]] = {}
    for tracked in state.routable():
        job = tracked.job
        if job.id in started or job.id in gating.left_out or job.cancel_requested:
            continue
        if job.spec.begin_time is not None and job.spec.begin_time > now:
            continue
        for backend in job.spec.route_to:
            admission = state.admission.get(backend)
            if admission is not None and admission.mode is Admission.POOL:
                out.setdefault(backend, []).append(tracked)
    return out


def _without(decision: Decision, job_ids: set[int]) -> Decision:
    """A backend's pass less what it said of candidates it did not admit: they wait on the
    pool's machine with its status, and no job is preempted for them there (a job goes
    where it starts first, not where it could be made to start)."""
    if not job_ids:
        return decision
    return replace(
        decision,
        pending={k: v for k, v in decision.pending.items() if k not in job_ids},
        estimated_start={k: v for k, v in decision.estimated_start.items() if k not in job_ids},
        priorities={k: v for k, v in decision.priorities.items() if k not in job_ids},
        preemptions=tuple(p for p in decision.preemptions if p.for_job_id not in job_ids),
        reservations=tuple(r for r in decision.reservations if r.job_id not in job_ids),
    )


def _route(tracked: Tracked, backend: str, here: Status | None, now: float) -> Route:
    job = tracked.job
    why = "" if here is None else f" (on the pool's machine: {status_text(here)})"
    cause = f"routed to backend {backend}: it starts there first{why}"
    return Route(job.id, backend, now, cause, LogLine(f"job {job.id} {cause}"))
