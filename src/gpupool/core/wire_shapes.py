"""Every JSON answer of the daemon's HTTP API, defined once: the shapes the server builds, the
OpenAPI document describes and the client reads (issue 31).

Decision. Each shape is a TypedDict here, in core (standard library only), because the three
users of a shape live in layers that share nothing else:
- the server (api/, service/) annotates what it answers with these (`-> JobWire`), so mypy
  holds every answer it builds to its shape: a key left out, misspelt or of another type is
  a type error;
- the OpenAPI document's response schemas are generated from these at the server side
  (api/openapi.py: JSON Schema per shape, `$ref`s between them), so the document cannot
  drift from what the server is typed to answer;
- the client checks each answer against the same shape (client/wire_json.py's `conform`:
  every required key there, every value of its declared type, or WireShapeError naming the
  place), then its views read the typed dict, so mypy holds them to the shape's keys too.
The client is the CLI, which must start fast and never import pydantic, fastapi or even
`typing` (about 3 ms): so the shapes are written with core/wire_types.py's names, typing's
under mypy and stand-ins at run time, which keep each key's type as an object that
`fields_of` reads. Defining them costs the CLI under a millisecond (bench/cli_speed.py).

Rules of the vocabulary (what `fields_of`, the checker and the schema generator know):
`int` (a whole number; never a bool), `float` (any number), `str`, `bool`, `None`, `object`
(any JSON value), `list[X]`, `dict[str, X]`, unions with `|`, and other shapes. A shape
refers only to shapes defined above it (annotations are evaluated at definition).
- a plain key is always sent;
- `NotRequired[X]`: sent only in some answers (a submission's `warnings`, a job's `events`);
- `Added[X]`: always sent by this daemon, but added after clients were in use: a client
  reads its absence (an older daemon's answer) as the field's default. The OpenAPI document
  lists it as required; the client's check lets it be absent.
Keys a shape does not declare are allowed in an answer and ignored by the client, so a newer
daemon may add fields. The shapes of API tokens and the audit log are in
core/access_shapes.py, written the same way (api/openapi.py reads both modules: `SHAPE_MODULES`).
"""

# No `from __future__ import annotations`: a shape's annotations must be objects at run time.
from gpupool.core import ops_shapes  # a GPU's `drained` (the module: its shapes stay its own)
from gpupool.core.wire_types import Added, NotRequired, TypedDict

# -- errors -------------------------------------------------------------------------------


class FieldErrorWire(TypedDict):
    field: str  # the field as the request named it: `spec.gpus`, `specs[2].command`, `id`
    message: str


class ErrorWire(TypedDict):
    """Every refusal (4xx, 5xx): a code a program can test, words for a person, and for a
    bad request the fields at fault. A full disk (507) adds where and how much."""

    error: str
    message: str
    errors: NotRequired[list[FieldErrorWire]]
    path: NotRequired[str | None]
    available_bytes: NotRequired[int | None]
    needed_bytes: NotRequired[int | None]


# -- the daemon ---------------------------------------------------------------------------


class OkWire(TypedDict):
    ok: bool


class DaemonFacts(TypedDict):
    """What the daemon knows of itself when it starts (daemon/run.py)."""

    state_dir: str
    socket: str
    url: str | None  # its TCP address, when it listens on one
    pid: int
    started: float
    inventory_source: str
    inventory_note: str
    gpus: int


class InfoWire(DaemonFacts):
    """GET /v1/info."""

    version: str
    passes: int
    polls: int
    mode: str  # "shared" or "personal"
    daemon_user: str


class WhoamiWire(TypedDict):
    user: str
    via: str  # "unix uid 1001", "token 7"
    pool_admin: bool
    mode: str


# -- jobs -----------------------------------------------------------------------------------


class ResourcesWire(TypedDict):
    gpus: int
    gpu_type: str | None
    cpus: int | None
    mem_bytes: int | None
    gpu_memory_bytes: int | None
    gpu_fraction: float | None


class WaitReservationWire(TypedDict):
    """The reservation a wait names: the job's own, or the one it would delay."""

    job_id: int
    node: str
    gpus: list[int]
    gpu_memory_bytes: int | None
    time: float
    gpus_total: int  # every GPU it reserves (a wide job's over `nodes` nodes)
    nodes: int


class WaitWire(TypedDict):
    """Why a pending job waits, as data (api/wire.py's status_to_wire)."""

    code: str  # policy.status.Code's value (the REASON column)
    rule: str
    dimension: str | None
    requested: float | None
    free: float | None
    capacity: float | None
    node: str | None
    reservation: WaitReservationWire | None
    jobs: list[int]
    project: str | None
    limit: NotRequired[int]  # ArrayLimit: the array's %K
    backend: NotRequired[str]  # QueuedInBackend, NoBackend, CapacityUnknown
    detail: NotRequired[str]  # the backend's own words
    user: NotRequired[str]  # whose per-user cap holds it (user_gpus, user_jobs, ...)


class ReservationWire(TypedDict):
    """GPUs held back for a job from `time` on (EASY backfill's reservation)."""

    node: str
    gpus: list[int]
    gpu_memory_bytes: int | None
    time: float


# "class" is a keyword: the functional form.
PriorityFactorsWire = TypedDict(
    "PriorityFactorsWire",
    {
        "class": int,
        "fairshare": float,
        "age": float,
        "size": float,
        "score": float,
        "service": float,
    },
)
# One event of a job's history; "from" is null for its submission.
JobEventWire = TypedDict(
    "JobEventWire", {"time": float, "from": str | None, "to": str, "cause": str}
)


class SubmitWarningWire(TypedDict):
    """What a submission is told besides its job: its backend cannot be reached now."""

    code: str
    backend: str
    summary: str
    message: str


class CgroupUsageWire(TypedDict):
    """A job's CPU time and memory, as its runs' cgroups counted them (core/cgroup_usage.py):
    its last ended run's, or with `live` its run under way's, read now. A figure nothing
    counted is null."""

    cpu_seconds: float | None
    cpu_seconds_all_runs: float | None  # every run's (a requeued job ran more than once)
    memory_peak_bytes: int | None
    memory_mean_bytes: int | None  # null while it runs
    memory_current_bytes: int | None  # a running job's, now
    memory_limit_bytes: int | None  # the limit it ran under (--mem), when one was enforced
    live: bool


class PassWire(TypedDict):
    """What the last scheduling pass said of a job: the keys of JobWire a pass fills
    (api/wire.py's pass_to_wire)."""

    why: str  # the last pass's status in words ("" for none)
    wait: WaitWire | None
    estimated_start: float | None
    reservation: ReservationWire | None
    priority_factors: PriorityFactorsWire | None


class JobWire(TypedDict):
    """A job (api/wire.py's job_to_wire). For a reader who may not see its spec, `hidden` is
    true and its command, env, workdir, log_path and image are empty."""

    id: int
    name: str
    user: str
    project: str
    state: str  # a JobState's value
    priority: int
    priority_name: str
    command: list[str]
    resources: ResourcesWire
    preemptible: bool
    time_limit_s: float | None
    grace_s: float
    workdir: str
    env: dict[str, str]
    node: str | None
    gpus: list[int]
    gpu_count: float  # the GPUs it holds or asks for; a fraction for a shared GPU
    gpu_memory_bytes: int | None
    submit_time: float
    start_time: float | None
    end_time: float | None
    exit_code: int | None
    reason: str  # the REASON column's code ("" for none)
    why: str  # the last pass's status in words ("" for none)
    wait: WaitWire | None
    estimated_start: float | None
    reservation: ReservationWire | None
    priority_factors: PriorityFactorsWire | None
    begin_time: float | None
    restart_count: int
    failed_attempts: Added[int]
    after: Added[list[str]]  # "ID:ok" / "ID:any" (--after)
    array_id: Added[int | None]
    array_index: Added[int | None]
    array_limit: Added[int | None]
    cancel_requested: bool
    hold: Added[str | None]  # "user" or "admin" while held
    separate_stderr: Added[bool]
    signal: Added[str | None]  # --signal as written ("USR1@120", "none"); null: none named
    backend: Added[str | None]
    nodes: Added[int]
    backend_ref: Added[str | None]
    image: Added[str | None]
    container_engine: Added[str | None]
    cgroup_usage: Added[CgroupUsageWire | None]  # null: nothing counted (a backend's job)
    log_path: str
    hidden: Added[bool]
    events: NotRequired[list[JobEventWire]]  # absent when it has none
    warnings: NotRequired[list[SubmitWarningWire]]  # a submission's answer
    array_tasks: NotRequired[list[int]]  # a submitted array's: every task's id


class JobPageWire(TypedDict):
    """GET /v1/jobs: a page of jobs; `total` and `counts` (by state) count every match."""

    jobs: list[JobWire]
    total: int
    counts: dict[str, int]
    offset: int
    limit: int | None


# GET /v1/jobs?format=lines: the page's figures (JobPageWire without `jobs`) on the first
# line, then one JobWire per line (api/job_lines.py writes them, client/job_lines.py reads).
JOB_LINES_MEDIA_TYPE = "application/x-ndjson"


class BatchIdsWire(TypedDict):
    ids: list[int]  # in the specs' order


class CancelledJobWire(TypedDict):
    id: int
    user: str
    state: str
    stopping: bool  # asked to stop: SIGTERM, its grace, then SIGKILL


class SkippedJobWire(TypedDict):
    id: int
    why: str  # service.bulk_cancel.Skip's value
    message: str


class BulkCancelWire(TypedDict):
    cancelled: list[CancelledJobWire]
    skipped: list[SkippedJobWire]


class LeftJobWire(TypedDict):
    id: int
    why: str


class SteeredWire(TypedDict):
    """A hold or release: the jobs it changed, and those it left as they were."""

    jobs: list[JobWire]
    left: Added[list[LeftJobWire]]


# -- GPUs and backends -------------------------------------------------------------------


class GpuHolderWire(TypedDict):
    id: int
    name: str
    user: str
    gpu_memory_bytes: int | None


class GpuProcessWire(TypedDict):
    pid: int
    job: int | None  # None: not a gpupool job's
    used_memory_bytes: int | None


class GpuUsageWire(TypedDict):
    """A GPU's latest sample; `simulated`: made up from what jobs declare (no NVML)."""

    time: Added[float]
    simulated: bool
    utilization_pct: float | None
    memory_used_bytes: int | None
    memory_total_bytes: int
    power_w: float | None
    temperature_c: float | None
    foreign_memory_bytes: int
    processes: Added[list[GpuProcessWire]]


class GpuWire(TypedDict):
    index: int
    model: str
    memory_bytes: int
    uuid: Added[str]
    pci_bus_id: Added[str]
    numa_node: Added[int | None]
    cpu_affinity: Added[list[int]]
    nvlink_peers: list[int]
    job: int | None  # the (first) job holding it
    job_name: str | None
    user: str | None
    shared: bool
    jobs: list[GpuHolderWire]
    unmanaged_memory_bytes: Added[int]
    usage: Added[GpuUsageWire | None]  # None: not sampled (yet, or sampling is off)
    drained: Added[ops_shapes.DrainWire | None]  # None: not drained


class LinkWire(TypedDict):
    a: int
    b: int
    type: str  # core.hardware.LinkKind's name, lower case
    nvlinks: int


class NodeWire(TypedDict):
    name: str
    cpus: Added[int]
    memory_bytes: Added[int]
    simulated: Added[bool]
    gpus: list[GpuWire]
    links: Added[list[LinkWire]]
    # Whole GPUs no job holds, and the largest job (by GPU count) that could start here now
    # (service/fragmentation.py).
    free_gpus: Added[int]
    largest_startable_gpus: Added[int]


class BackendNodeJobWire(TypedDict):
    id: int
    gpus: float  # a fraction for a job that shares a GPU (Ray's `--gpus 0.5`)


class BackendNodeWire(TypedDict):
    """A backend's node as its engine last reported it (core.backends.EngineNode)."""

    name: str  # as the pool names it: BACKEND/node
    backend: str
    # "up", "drained" or "down" (core.backends.EngineNodeState); "unknown": the pool's jobs
    # are there but the engine's last report does not list it (api/backend_wire.py)
    state: str
    detail: str  # the engine's words for a state other than up ("" for none)
    gpus: int
    gpus_used: int  # allocated by anyone, as the engine counts them
    gpus_pool: float  # held or admitted for the pool's jobs (`jobs`; fractions add up)
    jobs: list[BackendNodeJobWire]  # the pool's jobs admitted or running there
    gpu_model: str  # "" where the engine does not say
    gpu_memory_bytes: int  # per GPU; 0 where the engine does not say
    cpus: int
    memory_bytes: int


class BackendCapacityWire(TypedDict):
    """A backend's nodes as GET /v1/gpus gives them (core/backends.py `BackendNodes`)."""

    name: str
    admission: str  # "pool" or "engine" (core.backends.Admission)
    problem: str  # "" when read; why not otherwise ("not read yet" before the first read)
    quotas: dict[str, float]  # project -> GPUs guaranteed on this backend
    nodes: list[BackendNodeWire]


class GpusWire(TypedDict):
    """GET /v1/gpus."""

    source: str  # "nvml", "declared" or "demo"
    note: str
    nodes: list[NodeWire]
    # The pool's free whole GPUs and the largest job that could start now (the most on one
    # node): fewer than free means the free GPUs are fragmented (service/fragmentation.py).
    free_gpus: Added[int]
    largest_startable_gpus: Added[int]
    backends: Added[list[BackendCapacityWire]]  # by name; [] without backends


class BackendRowWire(TypedDict):
    name: str
    kind: str  # "local" for the pool itself
    reachable: bool
    capabilities: list[str]
    jobs: int  # its active jobs
    summary: str


class BackendsWire(TypedDict):
    backends: list[BackendRowWire]


# -- accounting ---------------------------------------------------------------------------


class GroupUsageWire(TypedDict):
    group: str
    jobs: int
    allocated_gpu_hours: float
    used_gpu_hours: float
    sampled_gpu_hours: float
    efficiency: float | None  # used over sampled, 0-1; None: nothing sampled
    mean_wait_s: float | None
    preempted_gpu_hours: float
    idle_reclaimed_gpu_hours: float
    energy_kwh: float
    cpu_hours: Added[float | None]  # null: none of its jobs' CPU time was counted
    # Of allocated_gpu_hours, those on backends' GPUs, which the pool does not sample; and
    # whether used_gpu_hours measures anything (false: all its allocated hours were there).
    backend_gpu_hours: Added[float]
    used_gpu_hours_measured: Added[bool]
    # Of backend_gpu_hours, those whose engine measured their use (Slurm's gres/gpuutil).
    backend_measured_gpu_hours: Added[float]


class UsageReportWire(TypedDict):
    by: str
    since: float
    until: float
    simulated: bool
    rows: list[GroupUsageWire]
    total: GroupUsageWire
    # The pool's GPU-hours idle while a job that could use them waited, by cause (quota,
    # fragmentation, reservation, other; policy/idle_waiting.py), in the window's hours.
    idle_waiting_gpu_hours: Added[dict[str, float]]


class GpuSeriesWire(TypedDict):
    node: str
    index: int
    memory_total_bytes: int
    points: list[list[float | None]]  # [time, utilization %, memory used bytes]


class HistoryWire(TypedDict):
    since: float
    until: float
    period_s: float
    simulated: bool
    gpus: list[GpuSeriesWire]


class JobUsageWire(TypedDict):
    samples: int
    mean_util_pct: float | None
    p95_util_pct: float | None
    peak_memory_bytes: int | None
    energy_j: float
    used_gpu_hours: float
    sampled_gpu_hours: float
    efficiency: float | None
    simulated: bool


class JobUsageAnswerWire(TypedDict):
    job: int
    usage: JobUsageWire | None  # None before its first sample


# -- benchmarks ---------------------------------------------------------------------------


class SavedBenchmarkWire(TypedDict):
    id: int
    user: str
    benchmark: str
    hostname: str
    device: str
    gpu_model: str | None
    gpu_count: int
    driver: str | None
    started_at: float
    saved_at: float
    passed: bool
    result: dict[str, object]  # the result's whole JSON (gpupool.hwbench.result)


class BenchmarkListWire(TypedDict):
    results: list[SavedBenchmarkWire]


# -- projects -----------------------------------------------------------------------------


class QuotaWarningWire(TypedDict):
    code: str
    projects: list[str]
    quota_gpus: float
    pool_gpus: float
    message: str


class ProjectWire(TypedDict):
    name: str
    quota: float
    limit: float | None
    weight: float
    department: str | None
    members: list[str]  # empty: open to every user
    open: bool
    default_time_limit_s: float | None
    idle_timeout_s: Added[float | None]
    idle_threshold_pct: Added[float]
    idle_action: Added[str | None]
    # None: the pool's default (its min_runtime_s for preemption; none for reclaim)
    preempt_min_runtime_s: Added[float | None]
    reclaim_min_runtime_s: Added[float | None]
    # One user's running jobs of the project: the most GPUs, the most jobs (None: the pool's
    # default, else no cap)
    max_gpus_per_user: Added[float | None]
    max_running_jobs_per_user: Added[int | None]
    # Its running jobs' --cpus and --mem together: the most CPUs, bytes (None: no cap)
    cpu_limit: Added[int | None]
    memory_limit_bytes: Added[int | None]
    in_use_gpus: float
    running_jobs: int
    pending_jobs: int
    pending_gpus: float
    warnings: NotRequired[list[QuotaWarningWire]]  # a create's or change's answer


class DepartmentWire(TypedDict):
    name: str
    quota: float | None


class ProjectListWire(TypedDict):
    projects: list[ProjectWire]
    departments: list[DepartmentWire]


class DeletedWire(TypedDict):
    deleted: str


class DefaultProjectWire(TypedDict):
    user: str
    project: str | None  # the chosen default; None: none chosen
    effective: str | None  # where jobs without --project go now; None: refused
    problem: str
