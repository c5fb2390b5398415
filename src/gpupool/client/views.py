"""What the API answers, as typed objects: parsed in one place from the daemon's JSON.

Each view is a frozen record (core/values.py: a frozen slotted dataclass without the
`dataclasses` module's import cost) whose fields are the wire's, read from an answer checked
against its shape (core/wire_shapes.py, the one definition the server answers with and the
OpenAPI document is made from; client/wire_json.py's `conform`): a value of another shape
raises `WireShapeError` naming it, which the client turns into `UnexpectedAnswer`. A view
reads the checked, typed dict, so mypy holds it to the shape's keys. States are `JobState`;
a pending job's wait code is `WaitCode`.

The GPU and pool views are in client/pool_views.py, the project views in
client/project_views.py: each is imported by the client methods that read it (`gpupool
queue` reads only jobs).

A view that a command prints as JSON (`show --json`, `why --json`, `gpus --json`,
`project list --json`) keeps the object it was read from in `wire`: JSON output is a wire
format scripts read, so it is the daemon's answer as it came, fields this client does not
know included, never a re-rendering.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from gpupool.client.wire_json import JsonObject, JsonValue, WireShapeError, conform, json_of
from gpupool.core.job_enums import JobState
from gpupool.core.values import record, unlisted
from gpupool.core.wire_shapes import (
    CgroupUsageWire,
    JobEventWire,
    JobPageWire,
    JobWire,
    PriorityFactorsWire,
    ReservationWire,
    ResourcesWire,
    WaitReservationWire,
    WaitWire,
)


class WaitCode(StrEnum):
    """A pending job's code (the REASON column): policy.status.Code's values, mirrored so
    the client need not import the policy (tests/unit/test_client_views.py checks them)."""

    RESOURCES = "Resources"
    PRIORITY = "Priority"
    BEGIN_TIME = "BeginTime"
    QUOTA = "Quota"
    RECLAIM = "Reclaim"
    UNSATISFIABLE = "Unsatisfiable"
    DRAINED = "Drained"
    QUOTA_NEVER_FITS = "QuotaNeverFits"
    DEPENDENCY = "Dependency"
    ARRAY_LIMIT = "ArrayLimit"
    HELD_USER = "JobHeldUser"
    HELD_ADMIN = "JobHeldAdmin"
    QUEUED_IN_BACKEND = "QueuedInBackend"
    NO_BACKEND = "NoBackend"
    CAPACITY_UNKNOWN = "CapacityUnknown"


_WAIT_CODES = frozenset(c.value for c in WaitCode)


def _state(text: str, where: str, key: str) -> JobState:
    try:
        return JobState(text)
    except ValueError:
        at = f"{where}.{key}" if where else key
        raise WireShapeError(at, f"not a job state: {text!r}") from None


@record
class ResourcesView:
    """What a job asks for (`resources`)."""

    gpus: int
    gpu_type: str | None
    cpus: int | None
    mem_bytes: int | None
    gpu_memory_bytes: int | None
    gpu_fraction: float | None

    @classmethod
    def read(cls, w: ResourcesWire) -> ResourcesView:
        return cls(
            w["gpus"], w["gpu_type"], w["cpus"], w["mem_bytes"], w["gpu_memory_bytes"],
            w["gpu_fraction"],
        )  # fmt: skip


@record
class Reservation:
    """GPUs held back for a job from `time` on (EASY backfill's reservation)."""

    node: str
    gpus: tuple[int, ...]
    gpu_memory_bytes: int | None
    time: float

    @classmethod
    def read(cls, w: ReservationWire) -> Reservation:
        return cls(w["node"], tuple(w["gpus"]), w["gpu_memory_bytes"], w["time"])


@record
class WaitReservation:
    """The reservation a wait names: the job's own, or the one it would delay."""

    job_id: int
    node: str
    gpus: tuple[int, ...]
    gpu_memory_bytes: int | None
    time: float
    gpus_total: int  # every GPU it reserves (a wide job's over `nodes` nodes)
    nodes: int

    @classmethod
    def read(cls, w: WaitReservationWire) -> WaitReservation:
        return cls(
            w["job_id"], w["node"], tuple(w["gpus"]), w["gpu_memory_bytes"], w["time"],
            w["gpus_total"], w["nodes"],
        )  # fmt: skip


@record
class Wait:
    """Why a pending job waits, as data: its code, the rule that said it, the binding
    dimension and its figures (None when none binds), where (`node`; `project` for a quota
    or limit), the reservation and the jobs it waits for."""

    code: WaitCode
    rule: str
    dimension: str | None
    requested: float | None
    free: float | None
    capacity: float | None
    node: str | None
    reservation: WaitReservation | None
    jobs: tuple[int, ...]
    project: str | None
    backend: str | None = None  # QueuedInBackend, NoBackend: the backend's name
    detail: str = ""  # QueuedInBackend: why, in the backend's words

    @classmethod
    def read(cls, w: WaitWire, where: str) -> Wait:
        code = w["code"]
        if code not in _WAIT_CODES:
            raise WireShapeError(f"{where}.code" if where else "code", f"not a wait code: {code!r}")
        reserved = w["reservation"]
        return cls(
            code=WaitCode(code),
            rule=w["rule"],
            dimension=w["dimension"],
            requested=w["requested"],
            free=w["free"],
            capacity=w["capacity"],
            node=w["node"],
            reservation=None if reserved is None else WaitReservation.read(reserved),
            jobs=tuple(w["jobs"]),
            project=w["project"],
            backend=w.get("backend"),
            detail=w.get("detail", ""),
        )


@record
class PriorityFactors:
    """A pending job's place in the queue as the last pass ranked it (policy/ordering.py)."""

    klass: int  # the wire's "class"
    fairshare: float
    age: float
    size: float
    score: float
    service: float = 0.0  # less expected GPU-service: higher (0 from a daemon without it)

    @classmethod
    def read(cls, w: PriorityFactorsWire) -> PriorityFactors:
        service = w.get("service", 0.0)
        return cls(w["class"], w["fairshare"], w["age"], w["size"], w["score"], service)


@record
class JobEvent:
    """One event of a job's history; `frm` is None for its submission."""

    time: float
    frm: JobState | None
    to: JobState
    cause: str

    @classmethod
    def read(cls, w: JobEventWire, where: str) -> JobEvent:
        frm = w["from"]
        return cls(
            w["time"],
            None if frm is None else _state(frm, where, "from"),
            _state(w["to"], where, "to"),
            w["cause"],
        )


@record
class CgroupUsageView:
    """A job's CPU time and memory as its runs' cgroups counted them: its last ended run's,
    or (`live`) its run under way's so far; None where nothing counted a figure."""

    cpu_seconds: float | None
    cpu_seconds_all_runs: float | None
    memory_peak_bytes: int | None
    memory_mean_bytes: int | None
    memory_current_bytes: int | None
    memory_limit_bytes: int | None
    live: bool

    @classmethod
    def read(cls, w: CgroupUsageWire) -> CgroupUsageView:
        return cls(
            w["cpu_seconds"],
            w["cpu_seconds_all_runs"],
            w["memory_peak_bytes"],
            w["memory_mean_bytes"],
            w["memory_current_bytes"],
            w["memory_limit_bytes"],
            w["live"],
        )


@record
class JobView:
    """A job as the API gives it (api/wire.py's job_to_wire)."""

    id: int
    name: str
    user: str
    project: str
    state: JobState
    priority: int
    priority_name: str
    command: tuple[str, ...]
    resources: ResourcesView
    preemptible: bool
    time_limit_s: float | None
    grace_s: float
    workdir: str
    env: Mapping[str, str]
    node: str | None
    gpus: tuple[int, ...]
    gpu_count: float  # the GPUs it holds or asks for; a fraction for a shared GPU
    gpu_memory_bytes: int | None  # a shared GPU's memory granted to it
    submit_time: float
    start_time: float | None
    end_time: float | None
    exit_code: int | None
    reason: str  # the REASON column's code ("" for none)
    why: str  # the last pass's status in words ("" for none)
    wait: Wait | None
    estimated_start: float | None
    reservation: Reservation | None
    priority_factors: PriorityFactors | None
    begin_time: float | None
    restart_count: int
    failed_attempts: int  # runs that failed and were retried (--retry); 0 from an older daemon
    cancel_requested: bool
    log_path: str
    after: tuple[str, ...]  # "ID:ok" / "ID:any" (--after)
    array_id: int | None  # the array it is a task of: its first task's id
    array_index: int | None
    array_limit: int | None  # the array's %K
    image: str | None  # --image: the container image it runs in (None: on the host)
    container_engine: str | None  # the engine that runs it (podman, docker, apptainer)
    events: tuple[JobEvent, ...]
    # True when the caller may not see the job's spec: command, env, workdir, log path empty.
    hidden: bool
    wire: JsonObject = unlisted()  # as received (module docstring)
    hold: str | None = None  # "user" or "admin" while held (gpupool hold); None: not held
    separate_stderr: bool = False  # its stderr is kept apart (logs --stderr)
    backend: str | None = None  # the backend it is handed to; None: the local pool
    nodes: int = 1
    backend_ref: str | None = None  # the backend's name for its run (slurm://c/1234)
    cgroup_usage: CgroupUsageView | None = None  # None: nothing counted (or an older daemon)
    signal: str | None = None  # --signal as written ("USR1@120", "none"); None: none named

    @property
    def wait_code(self) -> WaitCode | None:
        """`reason` as a pending job's wait code, None when it is another (or none)."""
        return WaitCode(self.reason) if self.reason in _WAIT_CODES else None

    @classmethod
    def read(cls, w: JobWire, where: str = "") -> JobView:
        """The view of a job checked against JobWire (`conform`); `where`: its place in the
        answer, for a value the shape cannot say is wrong (a state, a wait code)."""
        wait, reservation, factors = w["wait"], w["reservation"], w["priority_factors"]
        at = f"{where}.events" if where else "events"
        events = [JobEvent.read(e, f"{at}[{i}]") for i, e in enumerate(w.get("events", []))]
        array_task = w.get("array_index"), w.get("array_limit")
        cgroup_usage = w.get("cgroup_usage")
        return cls(
            id=w["id"],
            name=w["name"],
            user=w["user"],
            project=w["project"],
            state=_state(w["state"], where, "state"),
            priority=w["priority"],
            priority_name=w["priority_name"],
            command=tuple(w["command"]),
            resources=ResourcesView.read(w["resources"]),
            preemptible=w["preemptible"],
            time_limit_s=w["time_limit_s"],
            grace_s=w["grace_s"],
            workdir=w["workdir"],
            env=w["env"],
            node=w["node"],
            gpus=tuple(w["gpus"]),
            gpu_count=w["gpu_count"],
            gpu_memory_bytes=w["gpu_memory_bytes"],
            submit_time=w["submit_time"],
            start_time=w["start_time"],
            end_time=w["end_time"],
            exit_code=w["exit_code"],
            reason=w["reason"],
            why=w["why"],
            wait=None if wait is None else Wait.read(wait, f"{where}.wait" if where else "wait"),
            estimated_start=w["estimated_start"],
            reservation=None if reservation is None else Reservation.read(reservation),
            priority_factors=None if factors is None else PriorityFactors.read(factors),
            begin_time=w["begin_time"],
            restart_count=w["restart_count"],
            # The Added keys (core/wire_shapes.py): absent from an older daemon's answer.
            failed_attempts=w.get("failed_attempts", 0),
            cancel_requested=w["cancel_requested"],
            log_path=w["log_path"],
            after=tuple(w.get("after", ())),
            array_id=w.get("array_id"),
            array_index=array_task[0],
            array_limit=array_task[1],
            image=w.get("image"),
            container_engine=w.get("container_engine"),
            events=tuple(events),
            hidden=w.get("hidden", False),
            wire=json_of(w),
            hold=w.get("hold"),
            separate_stderr=w.get("separate_stderr", False),
            backend=w.get("backend"),
            nodes=w.get("nodes", 1),
            backend_ref=w.get("backend_ref"),
            cgroup_usage=None if cgroup_usage is None else CgroupUsageView.read(cgroup_usage),
            signal=w.get("signal"),
        )


def read_job(value: JsonValue) -> JobView:
    return JobView.read(conform(JobWire, value))


@record
class JobPage:
    """A page of jobs (GET /v1/jobs): `total` and `counts` (by state) count every match."""

    jobs: tuple[JobView, ...]
    total: int
    counts: Mapping[str, int]
    offset: int
    limit: int | None


def read_job_page(value: JsonValue) -> JobPage:
    w = conform(JobPageWire, value)
    return JobPage(
        jobs=tuple(JobView.read(j, f"jobs[{i}]") for i, j in enumerate(w["jobs"])),
        total=w["total"],
        counts=w["counts"],
        offset=w["offset"],
        limit=w["limit"],
    )


@record
class LogChunk:
    """Output of a job from `offset` on: `data`, the offset after it, the job's state."""

    data: bytes
    offset: int
    state: JobState | None  # None: the daemon did not say
