"""What the API answers, as typed objects: parsed in one place from the daemon's JSON.

Each view is a frozen dataclass whose fields are the wire's (api/wire.py, api/projects.py),
read with a checked shape (client/wire_json.py): a value of another shape raises
`WireShapeError` naming it, which the client turns into `UnexpectedAnswer`. States are
`JobState`; a pending job's wait code is `WaitCode`.

The GPU and pool views are in client/pool_views.py, the project views in
client/project_views.py: each is imported by the client methods that read it (a frozen
dataclass costs about a millisecond to define, and `gpupool queue` reads only jobs).

A view that a command prints as JSON (`show --json`, `why --json`, `gpus --json`,
`project list --json`) keeps the object it was read from in `wire`: JSON output is a wire
format scripts read, so it is the daemon's answer as it came, fields this client does not
know included, never a re-rendering.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from gpupool.client.wire_json import Fields, JsonObject, JsonValue, WireShapeError
from gpupool.core.job_enums import JobState


class WaitCode(StrEnum):
    """A pending job's code (the REASON column): policy.status.Code's values, mirrored so
    the client need not import the policy (tests/unit/test_client_views.py checks them)."""

    RESOURCES = "Resources"
    PRIORITY = "Priority"
    BEGIN_TIME = "BeginTime"
    QUOTA = "Quota"
    RECLAIM = "Reclaim"
    UNSATISFIABLE = "Unsatisfiable"
    QUOTA_NEVER_FITS = "QuotaNeverFits"
    DEPENDENCY = "Dependency"
    ARRAY_LIMIT = "ArrayLimit"
    HELD_USER = "JobHeldUser"
    HELD_ADMIN = "JobHeldAdmin"
    QUEUED_IN_BACKEND = "QueuedInBackend"
    NO_BACKEND = "NoBackend"


_WAIT_CODES = frozenset(c.value for c in WaitCode)


def _state(fields: Fields, key: str) -> JobState:
    text = fields.text(key)
    try:
        return JobState(text)
    except ValueError:
        raise WireShapeError(fields.at(key), f"not a job state: {text!r}") from None


@dataclass(frozen=True, slots=True)
class ResourcesView:
    """What a job asks for (`resources`)."""

    gpus: int
    gpu_type: str | None
    cpus: int | None
    mem_bytes: int | None
    gpu_memory_bytes: int | None
    gpu_fraction: float | None

    @classmethod
    def read(cls, f: Fields) -> ResourcesView:
        return cls(
            gpus=f.whole("gpus"),
            gpu_type=f.opt_text("gpu_type"),
            cpus=f.opt_whole("cpus"),
            mem_bytes=f.opt_whole("mem_bytes"),
            gpu_memory_bytes=f.opt_whole("gpu_memory_bytes"),
            gpu_fraction=f.opt_number("gpu_fraction"),
        )


@dataclass(frozen=True, slots=True)
class Reservation:
    """GPUs held back for a job from `time` on (EASY backfill's reservation)."""

    node: str
    gpus: tuple[int, ...]
    gpu_memory_bytes: int | None
    time: float

    @classmethod
    def read(cls, f: Fields) -> Reservation:
        return cls(
            f.text("node"), f.wholes("gpus"), f.opt_whole("gpu_memory_bytes"), f.number("time")
        )


@dataclass(frozen=True, slots=True)
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
    def read(cls, f: Fields) -> WaitReservation:
        return cls(
            job_id=f.whole("job_id"),
            node=f.text("node"),
            gpus=f.wholes("gpus"),
            gpu_memory_bytes=f.opt_whole("gpu_memory_bytes"),
            time=f.number("time"),
            gpus_total=f.whole("gpus_total"),
            nodes=f.whole("nodes"),
        )


@dataclass(frozen=True, slots=True)
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
    def read(cls, f: Fields) -> Wait:
        code = f.text("code")
        if code not in _WAIT_CODES:
            raise WireShapeError(f.at("code"), f"not a wait code: {code!r}")
        reserved = f.opt_obj("reservation")
        return cls(
            code=WaitCode(code),
            rule=f.text("rule"),
            dimension=f.opt_text("dimension"),
            requested=f.opt_number("requested"),
            free=f.opt_number("free"),
            capacity=f.opt_number("capacity"),
            node=f.opt_text("node"),
            reservation=None if reserved is None else WaitReservation.read(reserved),
            jobs=f.wholes("jobs"),
            project=f.opt_text("project"),
            backend=f.opt_text("backend") if "backend" in f.data else None,
            detail=(f.opt_text("detail") or "") if "detail" in f.data else "",
        )


@dataclass(frozen=True, slots=True)
class PriorityFactors:
    """A pending job's place in the queue as the last pass ranked it (policy/ordering.py)."""

    klass: int  # the wire's "class"
    fairshare: float
    age: float
    size: float
    score: float

    @classmethod
    def read(cls, f: Fields) -> PriorityFactors:
        return cls(
            f.whole("class"), f.number("fairshare"), f.number("age"), f.number("size"),
            f.number("score"),
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class JobEvent:
    """One event of a job's story; `frm` is None for its submission."""

    time: float
    frm: JobState | None
    to: JobState
    cause: str

    @classmethod
    def read(cls, f: Fields) -> JobEvent:
        frm = None if f.raw("from") is None else _state(f, "from")
        return cls(f.number("time"), frm, _state(f, "to"), f.text("cause"))


@dataclass(frozen=True, slots=True)
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
    wire: JsonObject = field(repr=False, compare=False)  # as received (module docstring)
    hold: str | None = None  # "user" or "admin" while held (gpupool hold); None: not held
    separate_stderr: bool = False  # its stderr is kept apart (logs --stderr)
    backend: str | None = None  # the backend it is handed to; None: the local pool
    nodes: int = 1
    backend_ref: str | None = None  # the backend's name for its run (slurm://c/1234)

    @property
    def wait_code(self) -> WaitCode | None:
        """`reason` as a pending job's wait code, None when it is another (or none)."""
        return WaitCode(self.reason) if self.reason in _WAIT_CODES else None

    @classmethod
    def read(cls, f: Fields) -> JobView:
        wait = f.opt_obj("wait")
        reservation = f.opt_obj("reservation")
        factors = f.opt_obj("priority_factors")
        events = [JobEvent.read(Fields(v, at)) for at, v in f.items("events", default=[])]
        return cls(
            id=f.whole("id"),
            name=f.text("name"),
            user=f.text("user"),
            project=f.text("project"),
            state=_state(f, "state"),
            priority=f.whole("priority"),
            priority_name=f.text("priority_name"),
            command=f.texts("command"),
            resources=ResourcesView.read(f.obj("resources")),
            preemptible=f.flag("preemptible"),
            time_limit_s=f.opt_number("time_limit_s"),
            grace_s=f.number("grace_s"),
            workdir=f.text("workdir"),
            env=f.text_map("env"),
            node=f.opt_text("node"),
            gpus=f.wholes("gpus"),
            gpu_count=f.number("gpu_count"),
            gpu_memory_bytes=f.opt_whole("gpu_memory_bytes"),
            submit_time=f.number("submit_time"),
            start_time=f.opt_number("start_time"),
            end_time=f.opt_number("end_time"),
            exit_code=f.opt_whole("exit_code"),
            reason=f.opt_text("reason") or "",
            why=f.opt_text("why") or "",
            wait=None if wait is None else Wait.read(wait),
            estimated_start=f.opt_number("estimated_start"),
            reservation=None if reservation is None else Reservation.read(reservation),
            priority_factors=None if factors is None else PriorityFactors.read(factors),
            begin_time=f.opt_number("begin_time"),
            restart_count=f.whole("restart_count"),
            failed_attempts=f.whole("failed_attempts") if "failed_attempts" in f.data else 0,
            cancel_requested=f.flag("cancel_requested"),
            log_path=f.text("log_path"),
            # Absent from an older daemon's answer: a plain job.
            after=f.texts("after") if "after" in f.data else (),
            array_id=f.opt_whole("array_id") if "array_id" in f.data else None,
            array_index=f.opt_whole("array_index") if "array_index" in f.data else None,
            array_limit=f.opt_whole("array_limit") if "array_limit" in f.data else None,
            image=f.opt_text("image") if "image" in f.data else None,
            container_engine=(
                f.opt_text("container_engine") if "container_engine" in f.data else None
            ),
            events=tuple(events),
            hidden=f.flag("hidden") if "hidden" in f.data else False,
            wire=f.data,
            hold=f.opt_text("hold") if "hold" in f.data else None,
            separate_stderr=f.flag("separate_stderr") if "separate_stderr" in f.data else False,
            backend=f.opt_text("backend") if "backend" in f.data else None,
            nodes=f.whole("nodes") if "nodes" in f.data else 1,
            backend_ref=f.opt_text("backend_ref") if "backend_ref" in f.data else None,
        )


def read_job(value: JsonValue) -> JobView:
    return JobView.read(Fields(value))


@dataclass(frozen=True, slots=True)
class JobPage:
    """A page of jobs (GET /v1/jobs): `total` and `counts` (by state) count every match."""

    jobs: tuple[JobView, ...]
    total: int
    counts: Mapping[str, int]
    offset: int
    limit: int | None


def read_job_page(value: JsonValue) -> JobPage:
    f = Fields(value)
    return JobPage(
        jobs=tuple(JobView.read(Fields(v, at)) for at, v in f.items("jobs")),
        total=f.whole("total"),
        counts=f.whole_map("counts"),
        offset=f.whole("offset"),
        limit=f.opt_whole("limit"),
    )


@dataclass(frozen=True, slots=True)
class WireJobPage:
    """A page of jobs as the daemon's JSON objects, unparsed: for `queue --json`, which
    prints them as they came (a view per job would only be turned back into the same
    JSON, and cost time on a queue of 10,000). The page's figures are checked."""

    jobs: list[JsonValue]
    total: int


def read_wire_job_page(value: JsonValue) -> WireJobPage:
    f = Fields(value)
    return WireJobPage([v for _, v in f.items("jobs")], f.whole("total"))


@dataclass(frozen=True, slots=True)
class LogChunk:
    """Output of a job from `offset` on: `data`, the offset after it, the job's state."""

    data: bytes
    offset: int
    state: JobState | None  # None: the daemon did not say
