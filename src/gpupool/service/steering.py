"""Steering queued and running jobs: hold, release, update (time, priority, GPUs), signal.

Slurm's `scontrol hold/release/update` and `scancel --signal` (docs/jobs.md). Every change
is written to the store first (one transaction, computed from the job as stored then:
store/steering.py), then handed to the engine as the job the store now holds
(`Engine.stored`), so the next scheduling pass decides on it. The API (api/steering.py)
decides who may ask; what is asked is checked here, with the rules a submission is checked
by: a GPU count no node could ever run, or its project's quota never let start, is refused
as `submit` refuses it, naming the field.

The rules:
- hold: a PENDING job only; `Hold.ADMIN` (an admin holding another user's job) is never
  weakened to `Hold.USER`. An array's id holds each of its pending tasks.
- release: a held job; an admin's hold only with `admin` (the caller is an admin of the
  job). An array's id releases each held task the caller may release.
- update: a PENDING job's time limit, priority and GPU count; a RUNNING job's time limit
  only, shortened by anyone allowed, lengthened only with `admin` (its supervisor is told:
  the new limit counts from the run's start, and one already passed ends it as TIMEOUT).
- signal: a RUNNING job's processes get the signal; the job is not stopped for it.
"""

from __future__ import annotations

import dataclasses
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpupool.core.execution import Handle
from gpupool.core.job import Hold, Job, JobSpec, JobState, priority_name
from gpupool.core.units import format_duration
from gpupool.policy import Code, check_quota, check_satisfiable
from gpupool.policy.render import status_text
from gpupool.service.refusal import RequestRefused
from gpupool.spec.changes import JobChanges

if TYPE_CHECKING:
    from gpupool.service.pool_service import PoolService


class NotNow(RequestRefused):
    """The job is not in a state the request applies to (HTTP 409)."""


class AdminOnly(RequestRefused):
    """What only an admin of the job may do, asked by someone who is not (HTTP 403)."""


@dataclass(frozen=True)
class Steered:
    """What a hold or release of a job or an array did: the jobs it changed, and the ones
    it left as they were, each with why."""

    changed: tuple[Job, ...]
    left: tuple[tuple[int, str], ...] = ()


_HELD_CODES = {Hold.USER: Code.HELD_USER.value, Hold.ADMIN: Code.HELD_ADMIN.value}


def targets(service: PoolService, job: Job) -> list[Job]:
    """`job`, or when its id is an array's, every active task of the array (by id)."""
    if job.array_id != job.id:
        return [job]
    view = service.engine.view().jobs
    tasks = sorted((j for j in view.values() if j.array_id == job.id), key=lambda j: j.id)
    return tasks or [job]


# How a hold or release changes one job's spec (store/steering.py's `edit_spec`): the edit
# (None: nothing to change), the history's cause, and the reason code it leaves.
SpecEdit = tuple[Callable[[Job], "JobSpec | None"], Callable[[Job, JobSpec], str], str]


def _edit_each(
    service: PoolService,
    jobs: list[Job],
    spec_edit: SpecEdit,
    now: float,
    refusal: type[RequestRefused],
    unchanged: str,
) -> tuple[list[Job], list[tuple[int, str]]]:
    """`spec_edit` on each of `jobs` in the store (several: one transaction), the changed
    jobs handed to the engine: (changed, left with why, by id). A `refusal` is raised for a
    lone job and noted per task among several; a job the edit leaves as it is is noted as
    `job N {unchanged}`."""
    edit, cause, reason = spec_edit
    if len(jobs) == 1:  # a lone job: its refusal is the answer
        done = service.store.edit_spec(jobs[0].id, edit, now, cause, reason)
        if done is None:
            return [], [(jobs[0].id, f"job {jobs[0].id} {unchanged}")]
        service.engine.stored(done)
        return [done], []
    edits = service.store.edit_specs((j.id for j in jobs), edit, now, cause, reason, refusal)
    if edits.changed:
        service.engine.stored(*edits.changed)
    left = [(i, exc.message) for i, exc in edits.refused]
    left += [(i, f"job {i} {unchanged}") for i in edits.unchanged]
    return list(edits.changed), sorted(left)


def hold(service: PoolService, job: Job, kind: Hold, by: str, now: float) -> Steered:
    """Hold `job` (an array's id: its pending tasks) with `kind` (module docstring)."""
    jobs = targets(service, job)
    many = len(jobs) > 1

    def edit(current: Job) -> JobSpec | None:
        if current.state is not JobState.PENDING:
            what = "held" if not many else "held (the array's pending tasks are)"
            raise NotNow(
                "not_pending",
                f"job {current.id} is {current.state.value}: only a pending job can be {what}",
            )
        if current.spec.hold is Hold.ADMIN or current.spec.hold is kind:
            return None
        return dataclasses.replace(current.spec, hold=kind)

    def cause(_: Job, spec: JobSpec) -> str:
        if spec.hold is Hold.ADMIN:
            return f"held by {by}, an admin: only an admin releases it"
        return f"held by {by}"

    changed, left = _edit_each(
        service, jobs, (edit, cause, _HELD_CODES[kind]), now, NotNow, "is already held"
    )
    if many and not changed and not left:
        raise NotNow("not_pending", f"array {job.id} has no pending task to hold")
    return Steered(tuple(changed), tuple(left))


def release(service: PoolService, job: Job, admin: bool, by: str, now: float) -> Steered:
    """Release `job` (an array's id: its held tasks); an admin's hold only with `admin`."""
    jobs = targets(service, job)
    many = len(jobs) > 1

    def edit(current: Job) -> JobSpec | None:
        if current.spec.hold is None or current.state is not JobState.PENDING:
            return None
        if current.spec.hold is Hold.ADMIN and not admin:
            raise AdminOnly(
                "admin_hold",
                f"job {current.id} was held by an admin: only an admin of project "
                f"{current.spec.project} or a pool admin may release it",
            )
        return dataclasses.replace(current.spec, hold=None)

    def cause(_: Job, __: JobSpec) -> str:
        return f"released by {by}"

    changed, left = _edit_each(service, jobs, (edit, cause, ""), now, AdminOnly, "is not held")
    if not many and not changed:
        state = jobs[0].state
        held = "is not held" if state is JobState.PENDING else f"is {state.value}, not held"
        raise NotNow("not_held", f"job {job.id} {held}")
    return Steered(tuple(changed), tuple(left))


def update(
    service: PoolService, job: Job, changes: JobChanges, admin: bool, by: str, now: float
) -> Job:
    """Apply `changes` to `job` (module docstring); the job as stored after."""
    edit = _editor(service, changes, admin)
    edit(job)  # refused here, before a running job's supervisor is told anything
    if job.state is JobState.RUNNING and changes.time_limit_s is not None:
        handle = Handle(job.id, job.restart_count)
        if not service.executor.set_time_limit(handle, changes.time_limit_s):
            raise NotNow(
                "not_steerable",
                f"job {job.id}'s run takes no new time limit (it is ending, or its "
                "supervisor is older than this daemon)",
            )

    def cause(before: Job, spec: JobSpec) -> str:
        return f"changed by {by}: {', '.join(_differences(before.spec, spec))}"

    done = service.store.edit_spec(job.id, edit, now, cause)
    if done is None:
        return service.get(job.id)
    service.engine.stored(done)
    return done


def _editor(
    service: PoolService, changes: JobChanges, admin: bool
) -> Callable[[Job], JobSpec | None]:
    def edit(job: Job) -> JobSpec | None:
        spec = job.spec
        if job.state is JobState.RUNNING:
            if changes.priority is not None or changes.gpus is not None:
                raise NotNow(
                    "running",
                    f"job {job.id} is RUNNING: only its time limit can change "
                    "(--priority and --gpus change a pending job)",
                )
            if changes.time_limit_s is not None and not admin:
                old = spec.time_limit_s
                if old is not None and changes.time_limit_s > old:
                    raise AdminOnly(
                        "admin_only",
                        f"time: job {job.id} is running: its owner may only shorten its time "
                        f"limit ({format_duration(old)} now); only an admin of project "
                        f"{spec.project} or a pool admin may lengthen it",
                    )
        elif job.state is not JobState.PENDING:
            raise NotNow(
                "not_active", f"job {job.id} is {job.state.value}: it can no longer change"
            )
        if changes.time_limit_s is not None:
            spec = dataclasses.replace(spec, time_limit_s=changes.time_limit_s)
        if changes.priority is not None:
            spec = dataclasses.replace(spec, priority=changes.priority)
        if changes.gpus is not None:
            spec = _with_gpus(service, job, spec, changes.gpus)
        return None if spec == job.spec else spec

    return edit


def _with_gpus(service: PoolService, job: Job, spec: JobSpec, gpus: int | float) -> JobSpec:
    """`spec` asking for `gpus`, refused as a submission with that count would be."""
    res = spec.resources
    if res.gpu_memory_bytes is not None:
        raise RequestRefused(
            "invalid_change",
            f"gpus: job {job.id} shares one GPU by its memory (--gpu-memory): its GPU "
            "count cannot change",
        )
    if isinstance(gpus, float):
        new = dataclasses.replace(res, gpus=1, gpu_fraction=gpus)
    else:
        new = dataclasses.replace(res, gpus=gpus, gpu_fraction=None)
    if spec.distributed is not None and (new.fractional or new.gpus < 1):
        raise RequestRefused(
            "invalid_change",
            f"gpus: job {job.id} is --distributed: it needs 1 or more whole GPUs (one rank "
            f"each), got {gpus:g}",
        )
    if new.gpu_type is not None and new.gpus == 0:
        raise RequestRefused(
            "invalid_change", f"gpus: job {job.id} asks for {new.gpu_type} GPUs: needs 1 or more"
        )
    impossible = check_satisfiable(new, service.inventory.nodes)
    if impossible is not None:
        raise RequestRefused("unsatisfiable", f"gpus: {status_text(impossible)}")
    if service.engine.config.use_quotas:
        never = check_quota(
            new,
            spec.is_preemptible,
            spec.priority,
            spec.project,
            service.projects_by_name(),
            service.inventory.nodes,
            service.engine.config,
        )
        if never is not None:
            raise RequestRefused("quota_never_fits", f"gpus: {status_text(never)}")
    return dataclasses.replace(spec, resources=new)


def _differences(old: JobSpec, new: JobSpec) -> list[str]:
    """'time limit 1h -> 30m', 'priority normal -> high', 'GPUs 2 -> 4': for the history."""
    said = []
    if old.time_limit_s != new.time_limit_s:
        said.append(
            f"time limit {format_duration(old.time_limit_s)} -> {format_duration(new.time_limit_s)}"
        )
    if old.priority != new.priority:
        said.append(f"priority {priority_name(old.priority)} -> {priority_name(new.priority)}")
    if old.resources != new.resources:
        said.append(f"GPUs {_gpus(old)} -> {_gpus(new)}")
    return said


def _gpus(spec: JobSpec) -> str:
    res = spec.resources
    return f"{res.gpu_fraction:g}" if res.gpu_fraction is not None else str(res.gpus)


def send_signal(service: PoolService, job: Job, signum: int, by: str, now: float) -> Job:
    """Send `signum` to a RUNNING job's processes; a line in its history says so."""
    name = signal_name(signum)
    if job.state is not JobState.RUNNING:
        raise NotNow(
            "not_running", f"job {job.id} is {job.state.value}: only a running job has processes"
        )
    if not service.executor.send_signal(Handle(job.id, job.restart_count), signum):
        raise NotNow(
            "not_steerable",
            f"job {job.id}'s processes could not be signalled (it is ending, or its "
            "supervisor is older than this daemon)",
        )
    noted = service.store.note(job.id, now, f"signal {name} sent by {by}")
    if noted is not None:
        service.engine.stored(noted)
    return noted or job


def signal_name(signum: int) -> str:
    """'USR1' for 10; the number for one without a name."""
    try:
        return signal.Signals(signum).name.removeprefix("SIG")
    except ValueError:
        return str(signum)


def parse_signal(text: str) -> int:
    """A signal by name (USR1, SIGUSR1, usr1) or number; ValueError naming the field."""
    word = text.strip().upper()
    if word.isdigit() and 0 < int(word) < signal.NSIG:
        return int(word)
    name = word if word.startswith("SIG") else f"SIG{word}"
    try:
        return int(signal.Signals[name])
    except KeyError:
        raise ValueError(
            f"signal: no signal {text!r} (a name such as USR1, USR2, INT, TERM, HUP, or a number)"
        ) from None
