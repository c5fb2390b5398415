"""What goes into the engine's reaction table and what comes out of it (engine/react.py).

Events say what happened: a job as the store now holds it, what the executor reports, the
clock, the result of a scheduling pass or of an instruction carried out. Instructions say
what to do: write to the store, launch, signal, run a pass. Both are plain frozen data, so
the table is tested without a store, an executor or a clock (tests/unit/test_engine_react.py),
as Dask's worker state machine is (`handle_stimulus`: stimuli in, instructions out).

An instruction may carry a `log_line` line for the daemon's log, written once it has been
carried out (a finish that failed to be written is not logged as done).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from gpupool.core.backends import Capacity
from gpupool.core.cgroup_usage import CgroupUsage
from gpupool.core.drain import DrainedGpu
from gpupool.core.execution import Handle, Leftovers, Observation, StopKind
from gpupool.core.job import Job, JobState
from gpupool.core.project import Project
from gpupool.engine.gating import NO_GATING, Gating
from gpupool.policy import Decision, Snapshot, Start


@dataclass(frozen=True)
class LogLine:
    """A line for the daemon's log, written once its instruction took effect."""

    text: str
    level: int = logging.INFO


# -- events -------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobsStored:
    """The store now holds these versions of these jobs (after a submit, a cancel, or any
    write of the engine's own); finished ones leave the engine's view."""

    jobs: tuple[Job, ...]


@dataclass(frozen=True)
class ProjectsRead:
    """The projects as they now are (a project created, changed or deleted)."""

    projects: tuple[Project, ...]


@dataclass(frozen=True)
class Resynced:
    """Every active job and project, read afresh from the store (after a refused commit)."""

    jobs: tuple[Job, ...]
    projects: tuple[Project, ...]


@dataclass(frozen=True)
class Recovered:
    """The daemon started: the store's active jobs, and what the executor says of each of
    those the store says are RUNNING (by job id)."""

    jobs: tuple[Job, ...]
    projects: tuple[Project, ...]
    observations: Mapping[int, Observation]
    now: float


@dataclass(frozen=True)
class Polled:
    """What the executor says of the running jobs (by job id)."""

    observations: Mapping[int, Observation]
    now: float


@dataclass(frozen=True)
class Tick:
    """Time passes: a pass may be due."""

    now: float


@dataclass(frozen=True)
class PassDecided:
    """A scheduling pass over `snapshot` decided `decision`; `gating`: the waiting jobs it
    left out (engine/gating.py), whose status the engine adds to the decision."""

    decision: Decision
    snapshot: Snapshot
    now: float
    gating: Gating = NO_GATING


@dataclass(frozen=True)
class StartsCommitted:
    jobs: tuple[Job, ...]  # as started, in the order of the decision's starts
    now: float


@dataclass(frozen=True)
class CommitRefused:
    """The store refused the starts: the state they were decided on has changed."""

    why: str
    now: float


@dataclass(frozen=True)
class Signalled:
    job_id: int
    kind: StopKind
    delivered: bool  # False: there was nothing to stop (not started, or over)
    why: str


@dataclass(frozen=True)
class Released:
    job_id: int
    released: bool  # False: something of the run still holds on; ask again soon
    now: float


@dataclass(frozen=True)
class RequeueRefused:
    """A requeue refused because the job has a cancel request: cancel wins."""

    job_id: int
    now: float


@dataclass(frozen=True)
class LostSettled:
    job_id: int
    leftovers: Leftovers
    now: float


@dataclass(frozen=True)
class PreemptAsked:
    """Preempt this running job and requeue it (the idle-GPU policy's requeue): as quota
    reclaim does, SIGTERM, grace, then back to the queue; `why` goes into its history."""

    job_id: int
    why: str
    hold_s: float | None = None  # once requeued, held this long so that waiting jobs start


@dataclass(frozen=True)
class ForeignMemory:
    """GPU memory held by processes that are not gpupool jobs', per GPU, as the latest
    samples saw it (the GPU monitor posts it when it changes): occupied for fractional
    placement, as memory the inventory declares unmanaged is."""

    by_gpu: Mapping[tuple[str, int], int]


@dataclass(frozen=True)
class DrainsRead:
    """The drained GPUs as the store now keeps them (an admin's drain or resume, a resync):
    no job starts on them (policy/drains.py)."""

    drains: tuple[DrainedGpu, ...]


@dataclass(frozen=True)
class CapacityRead:
    """A backend's capacity as its engine just reported it (engine/capacity_reader.py)."""

    backend: str
    capacity: Capacity


Event = (
    JobsStored
    | ProjectsRead
    | Resynced
    | Recovered
    | Polled
    | Tick
    | PassDecided
    | StartsCommitted
    | CommitRefused
    | Signalled
    | Released
    | RequeueRefused
    | LostSettled
    | ForeignMemory
    | DrainsRead
    | PreemptAsked
    | CapacityRead
)

# -- instructions -------------------------------------------------------------------------


@dataclass(frozen=True)
class RunPass:
    """Read the allocation version, snapshot the engine's view, call `policy.decide`."""

    now: float


@dataclass(frozen=True)
class Resync:
    """Read every active job and project from the store again."""

    now: float


@dataclass(frozen=True)
class CommitStarts:
    starts: tuple[Start, ...]
    version: int  # the allocation version the pass read
    now: float


@dataclass(frozen=True)
class Launch:
    job_id: int
    time_limit_s: float  # the limit in force (engine/limits.py), enforced by the executor
    log_line: LogLine | None = None


@dataclass(frozen=True)
class HandOver:
    """Hand a backend's PENDING job to its backend (docs/backends.md): `launch` with the
    job's whole request; the job stays PENDING until the backend reports it running."""

    job_id: int
    backend: str
    time_limit_s: float  # the limit in force (engine/limits.py), enforced by the backend
    log_line: LogLine | None = None
    pinned: tuple[str, ...] = ()  # the engine nodes the pool admitted it to (admission.py)


@dataclass(frozen=True)
class Route:
    """A `--backend any` job goes to `backend`, which admits it (Store.route_to_backend);
    `cause` is its history's line. The HandOver that follows launches it there."""

    job_id: int
    backend: str
    now: float
    cause: str
    log_line: LogLine | None = None


@dataclass(frozen=True)
class StartInBackend:
    """A backend's PENDING job its backend reports started: RUNNING since `start_time`, on
    no GPU of the pool's own nodes (Store.start_in_backend)."""

    job_id: int
    backend: str
    start_time: float
    ref: str | None
    log_line: LogLine | None = None
    node: str | None = None  # where, as the pool names it (Store.start_in_backend)
    gpus: tuple[int, ...] = ()  # the GPUs it holds there, in node order


@dataclass(frozen=True)
class KeepRef:
    """Store the backend's own name for a job's run (`jobs.backend_ref`)."""

    job_id: int
    ref: str


@dataclass(frozen=True)
class Finish:
    job_id: int
    state: JobState  # terminal
    exit_code: int | None
    cause: str  # for the job's history
    reason: str  # EndReason's value, for the REASON column
    now: float
    end_time: float | None = None  # when it really ended, if not now
    log_line: LogLine | None = None
    usage: CgroupUsage | None = None  # what its last run used (None: nothing counted it)
    gpu_utilization: float | None = None  # its run's GPUs', as its engine measured it


@dataclass(frozen=True)
class Requeue:
    job_id: int
    cause: str
    now: float
    log_line: LogLine | None = None
    hold_until: float | None = None  # held (as with --begin) until then: others go first
    retry: bool = False  # its run failed and is run again (--retry): a failed attempt
    usage: CgroupUsage | None = None  # what the run that ended used (None: nothing counted it)
    gpu_utilization: float | None = None  # that run's GPUs', as its engine measured it


@dataclass(frozen=True)
class Release:
    handle: Handle
    now: float


@dataclass(frozen=True)
class Signal:
    handle: Handle
    kind: StopKind
    why: str
    log_line: LogLine | None = None  # logged when it was delivered


@dataclass(frozen=True)
class SettleLost:
    handle: Handle
    wait_s: float
    now: float


@dataclass(frozen=True)
class Note:
    job_id: int
    cause: str
    now: float
    reason: str | None = None  # the job's new REASON code, if it changes
    only_if: JobState | None = None  # dropped unless the job is still in this state
    log_line: LogLine | None = None


@dataclass(frozen=True)
class Log:
    """Only a line for the daemon's log."""

    log_line: LogLine


@dataclass(frozen=True)
class SetReasons:
    reasons: Mapping[int, str]  # pending job id -> reason code (only those that changed)


Instruction = (
    RunPass
    | Resync
    | CommitStarts
    | Launch
    | Finish
    | Requeue
    | Release
    | Signal
    | SettleLost
    | Note
    | SetReasons
    | Log
    | HandOver
    | Route
    | StartInBackend
    | KeepRef
)
