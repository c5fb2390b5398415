"""The executor contract: what the engine asks of whatever runs its jobs.

The local executor (executor/local.py: a supervisor process per job on this machine) is its
first implementation; the Slurm, Ray and Kubernetes backends are to implement the same
contract, so it is written for them too (after dstack's `core/backends/base/compute.py`:
capabilities declared, not discovered by trying; stopping idempotent):

- **The engine names each run.** A `Handle` is (job id, attempt): attempt n is the job's
  run after n requeues (`Job.restart_count`). A backend derives its own names from it
  (a Slurm job name, a pod name), so a `launch` repeated after a crash finds the run it
  already started instead of starting a second one, and `adopt` can find runs the engine
  never learnt the backend's id of.
- **Nothing blocks the engine.** Every call returns at once: `launch` hands the job over
  and returns, `signal` asks and returns, `release` answers False while the run still
  holds on. A backend that cannot be reached answers `RunState.UNKNOWN` for the runs it
  was asked about, and the engine asks again at its next poll; calls do not raise for it.
- **Everything is idempotent.** Launching, signalling, releasing and polling twice is the
  same as once; a signal to a run that is over is a no-op (False).
- **Status of many runs in one call** (`poll`): one `squeue`, one pod list per poll, never
  one call per job.
- **The grace period is the run's** (`LaunchRequest.grace_s`), fixed at launch, as Slurm's
  KillWait and Kubernetes' terminationGracePeriodSeconds are: a stop is SIGTERM, the
  grace, SIGKILL, whoever asks for it.

Standard library only: a backend imports this module and `core.job`, nothing of the engine.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from gpupool.core.containers import ContainerEngine
from gpupool.core.warning_signal import CHECKPOINT_WARNING, WarningSignal


@dataclass(frozen=True, order=True)
class Handle:
    """One run of a job: its `attempt` is the job's restart count when it was launched."""

    job_id: int
    attempt: int = 0


class RunState(StrEnum):
    """What an executor knows about one run."""

    QUEUED = "queued"  # handed to a backend, waiting in its own queue (backends only)
    RUNNING = "running"  # started (or starting) and not over
    EXITED = "exited"  # over; the Observation carries its ExitRecord
    LOST = "lost"  # started, but whatever watched it died without recording an end
    UNLAUNCHED = "unlaunched"  # never started: launching it (again) is safe
    RELEASED = "released"  # over, and released: its files were archived for the next run
    UNKNOWN = "unknown"  # the executor cannot tell now (a backend that is down): ask later


class ExitReason(StrEnum):
    """Why a run ended, as its executor recorded it (the supervisor writes these values)."""

    EXITED = "exited"  # the command ended by itself
    TIMEOUT = "timeout"  # stopped at its time limit
    CANCELLED = "cancelled"  # stopped by a cancel
    PREEMPTED = "preempted"  # stopped to give its GPUs back: the job is requeued
    SPAWN_FAILED = "spawn_failed"  # the command could not be started
    OUT_OF_MEMORY = "out_of_memory"  # the kernel killed it at its memory limit (--mem)

    @classmethod
    def parse(cls, text: str) -> ExitReason:
        """The reason `text` names; one this version does not know (a newer supervisor's)
        counts as EXITED, so the exit code decides the outcome."""
        try:
            return cls(text)
        except ValueError:
            return cls.EXITED


class StopKind(StrEnum):
    """How a run is asked to stop. Both are SIGTERM, grace, SIGKILL; they differ in what
    is recorded, and a cancel wins over a preemption that is under way."""

    CANCEL = "cancel"
    PREEMPT = "preempt"

    @property
    def exit_reason(self) -> ExitReason:
        """How a run this stop ended reads, whatever ended it (its command in the grace, the
        final kill): a preempted run is requeued, a cancelled one is over."""
        return ExitReason.PREEMPTED if self is StopKind.PREEMPT else ExitReason.CANCELLED


@dataclass(frozen=True)
class RunUsage:
    """A run's CPU time and memory, from its cgroup (executor/job_cgroup.py); a figure this
    host does not count is None."""

    cpu_seconds: float | None
    memory_peak_bytes: int | None
    memory_mean_bytes: int | None
    oom_kills: int = 0  # processes the kernel killed at its memory limit
    memory_current_bytes: int | None = None  # a running run's use now (ended runs: None)


@dataclass(frozen=True)
class ExitRecord:
    exit_code: int  # 128+N when killed by signal N, as shells report it
    signal: int | None
    reason: ExitReason
    start_time: float
    end_time: float
    message: str
    # Stretches (from, to; wall-clock) in which the disk under the run's log was full, so
    # that what it wrote then is not in its log (executor/log_space.py); told in its history.
    output_lost: tuple[tuple[float, float], ...] = ()
    # What the run used, as its cgroup counted it (None: it had none, or a backend's run).
    usage: RunUsage | None = None
    memory_limit_bytes: int | None = None  # the limit it ran under (its --mem), when enforced
    # The mean utilization of its GPUs (0..1) as its engine measured it: a backend's run
    # where the engine keeps it (Slurm's gres/gpuutil: backends/slurm/gpu_use.py). None:
    # not measured there (the pool's own runs: the pool samples their GPUs itself).
    gpu_utilization: float | None = None


@dataclass(frozen=True)
class Observation:
    """A run's state as its executor reports it; `exit` when it has EXITED (and, for a
    RELEASED run, when its archived record could be read)."""

    state: RunState
    exit: ExitRecord | None = None
    # A backend's own name for the run (`slurm://cluster/1234`, `ray://host:8265/raysubmit_x`,
    # `kubernetes://context/namespace/job`), once it has one; the engine keeps it in the job
    # row. None for the local executor.
    ref: str | None = None
    # Why a QUEUED run waits, in the backend's words (Slurm's reason `Priority`,
    # `Resources`); shown as they are, never parsed.
    detail: str = ""


@dataclass(frozen=True)
class Allocation:
    """Where a run goes: a node and GPU indices on it; a fractional job's GPU memory on its
    one GPU (None: the GPUs are held whole)."""

    node: str
    gpus: tuple[int, ...]
    gpu_memory_bytes: int | None = None


@dataclass(frozen=True)
class RankLayout:
    """A distributed run's gang on one node (`JobSpec.distributed`): the executor starts
    `nproc_per_node` ranks of the command, ranks node_rank * nproc_per_node onwards.

    One launcher per node: a backend running several nodes (Slurm: one per node, node_rank
    from SLURM_NODEID, master_addr its first host) gives each its own layout. The rendezvous
    port is not here: the executor chooses a free one when it launches.
    """

    nproc_per_node: int
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"


@dataclass(frozen=True)
class ContainerLaunch:
    """A run in a container (`JobSpec.image`; docs/containers.md): the image, the engine
    chosen at submit, and the environment the command sees inside: the job's own (`--env`)
    and the pool's variables, not the submitter's shell environment (`LaunchRequest.env`
    describes the host: its PATH, its virtualenv). The executor adds the checkpoint dir."""

    image: str
    engine: ContainerEngine | None  # None: the executor's first installed (never from submit)
    env: Mapping[str, str]


@dataclass(frozen=True)
class BackendRequest:
    """What a backend needs beyond the LaunchRequest to ask its own scheduler for the run
    (core/backends.py): the engine places nothing for a backend's job, the backend's
    scheduler does. Resources are per node; a run spans `nodes` nodes.

    `job_env` is the job's own environment (`--env`) and the pool's variables (GPUPOOL_JOB_ID
    and friends), without the submitter's shell: what a backend whose jobs do not start from
    the submitter's login shell (Ray, Kubernetes) sets. `LaunchRequest.env` is the whole
    environment, as `sbatch --export=ALL` passes it (Slurm).
    """

    name: str  # the job's name as the user gave it ("" for none): for display only
    project: str  # mapped by the backend's settings to an account, partition, qos or queue
    gpus_per_node: int
    nodes: int = 1
    cpus_per_node: int | None = None
    mem_bytes_per_node: int | None = None
    gpu_type: str | None = None
    priority: int = 0  # the job's gpupool priority (class), for a priority class mapping
    preemptible: bool = True  # may the backend requeue it (Slurm --requeue)
    job_env: Mapping[str, str] = field(default_factory=dict)
    # The engine's nodes the pool admitted the run to (`EngineNode.pin` of each, as many as
    # `nodes`): the backend pins the run there so its engine starts it now (Slurm
    # --nodelist, Ray a node's own resource, Kubernetes the node's hostname). Empty: the
    # engine chooses (a backend with `admission = "engine"`).
    pinned: tuple[str, ...] = ()
    # A share of one GPU (`--gpus 0.5`; then `gpus_per_node` is 1 and `nodes` 1), for a
    # backend whose capabilities say `fractional_gpus`. None: GPUs held whole.
    gpu_fraction: float | None = None


@dataclass(frozen=True)
class LaunchRequest:
    """Everything an executor needs to run a job: the engine builds it from the job and
    its allocation (`launch(job, allocation)` in DESIGN.md), environment included."""

    handle: Handle
    command: tuple[str, ...]
    env: Mapping[str, str]  # the whole environment of the job's command
    workdir: str
    time_limit_s: float | None  # enforced by the executor: stopped as TIMEOUT after it
    grace_s: float  # SIGTERM -> SIGKILL at a stop or the time limit
    allocation: Allocation
    # The job's owner (`Job.user`, a Unix user name). An executor that runs jobs as their
    # owners (`RunAs.OWNER`, the daemon's shared mode) runs the command as this user, with
    # that user's groups, HOME, USER, LOGNAME and SHELL; None: as the executor's own user.
    user: str | None = None
    umask: int | None = None  # the command's umask (None: DEFAULT_UMASK)
    ranks: RankLayout | None = None  # None: one process; else a gang of ranks (see RankLayout)
    container: ContainerLaunch | None = None  # None: on the host; else in this image
    separate_stderr: bool = False  # stderr to a log of its own, not with stdout
    # The job's --mem and --cpus (None: not asked): the local executor enforces them in the
    # run's cgroup (executor/cgroup_plan.py), a backend passes them to its scheduler.
    mem_bytes: int | None = None
    cpus: int | None = None
    # None: the local executor's run, placed by the pool on `allocation`. Else the run goes
    # to a backend (Slurm, Ray, Kubernetes) that schedules it itself; `allocation` then names
    # the backend (`Allocation(backend_name, ())`) and `ranks` the whole gang (nnodes).
    backend: BackendRequest | None = None
    # A signal for every process of the run before its time limit (core/warning_signal.py,
    # `run_warning`): the job's --signal, else (the default, as for a job that named none)
    # the checkpoint default; None: none (`--signal none`). The local executor sends it only
    # while the run has a limit, moving with it; Slurm renders it as sbatch's --signal.
    warning: WarningSignal | None = CHECKPOINT_WARNING


DEFAULT_UMASK = 0o022  # a job's umask when its submission carried none


class RunAs(StrEnum):
    """Whose identity a job's command takes: the decision of the daemon's mode."""

    DAEMON = "daemon"  # personal mode: every job runs as the daemon's own user
    OWNER = "owner"  # shared mode (the daemon is root): each job runs as its owner

    @classmethod
    def for_euid(cls, euid: int) -> RunAs:
        """Shared mode is a daemon whose effective uid is 0; anything else is personal."""
        return cls.OWNER if euid == 0 else cls.DAEMON


@dataclass(frozen=True)
class LogChunk:
    data: bytes
    offset: int  # where the next read starts
    size: int | None = None  # the whole log's length when read (None: not known)


@dataclass(frozen=True)
class Leftovers:
    """What cleaning up after a LOST run found and did (`Executor.settle_lost`); the
    engine renders it into the job's history."""

    main_pid: int | None  # the job's command; None: never recorded
    other_boot: bool = False  # the machine restarted since: nothing of the job can run
    killed: tuple[int, ...] = ()  # pids sent SIGKILL now
    alive: tuple[int, ...] = ()  # pids still running after the wait: dying, or not ours
    denied: tuple[int, ...] = ()  # of `alive`, those the pool may not signal (another user's)
    in_cgroup: bool = False  # found by the run's cgroup (else by its session, from /proc)

    @property
    def gone(self) -> bool:
        """Nothing of the job runs any more: its GPUs may be given again."""
        return not self.alive


@dataclass(frozen=True)
class Capabilities:
    """What an executor can do, declared: the engine never finds out by trying."""

    multi_node: bool = False  # one job over several nodes (MASTER_ADDR, WORLD_SIZE, ...)
    containers: bool = False  # runs a job in a container image
    preemption_signal: bool = False  # tells a job it is preempted apart from a cancel
    arrays: bool = False  # job arrays as one submission
    adopts_after_restart: bool = False  # runs outlive the daemon and are found again
    # A job may hold a fraction of one GPU (`--gpus 0.5`), the GPU shared with others (Ray's
    # fractional num_gpus); by fraction only: no backend shares a GPU by an amount of memory.
    fractional_gpus: bool = False


class Executor(Protocol):
    """What runs jobs (module docstring): the engine's only way to start, watch and stop
    them."""

    @property
    def capabilities(self) -> Capabilities: ...

    def container_engines(self) -> Sequence[ContainerEngine]:
        """The engines this executor can run an image with now (installed where it runs
        jobs); empty when it runs no containers. Asked at submit, for jobs with an image."""

    def launch(self, request: LaunchRequest) -> None:
        """Start the run and return at once; a run already started under the handle is
        left as it is."""

    def poll(self, handles: Collection[Handle]) -> dict[Handle, Observation]:
        """The state of each run, in one call; a handle never launched is UNLAUNCHED."""

    def adopt(self, handles: Collection[Handle]) -> dict[Handle, Observation]:
        """After a restart of the daemon: take back the runs an earlier daemon launched
        (watch them again) and report them as `poll` does."""

    def signal(self, handle: Handle, kind: StopKind) -> bool:
        """Ask the run to stop (SIGTERM, its grace, SIGKILL). False when there is nothing
        to stop (never started, or over): read the outcome with `poll`."""

    def set_time_limit(self, handle: Handle, seconds: float) -> bool:
        """A running run's time limit becomes `seconds` from its start (`gpupool update
        --time`); a limit already passed ends it as a time limit does. False when the run
        cannot take it (not running, or it runs under something that takes no orders)."""

    def send_signal(self, handle: Handle, signum: int) -> bool:
        """Send `signum` to the run's processes without stopping it (`cancel --signal`).
        False as for `set_time_limit`."""

    def release(self, handle: Handle) -> bool:
        """The run is over and the job goes back to the queue: free what the run keeps
        (the local executor archives its files) so that the next attempt can start. False
        while something of the run still holds on: ask again at a later poll."""

    def settle_lost(self, handle: Handle, wait_s: float) -> Leftovers:
        """For a LOST run: stop what it left running, waiting up to `wait_s` for it to go."""

    def logs(
        self,
        handle: Handle,
        offset: int,
        limit: int,
        rank: int | None = None,
        stderr: bool = False,
    ) -> LogChunk:
        """The job's output from byte `offset` (every attempt's, in order), at most
        `limit` bytes; with `rank`, only that rank's output of a distributed run; with
        `stderr`, its stderr kept apart (`separate_stderr`; its output is then its stdout).
        The caller checks that the job has such a rank or stream."""

    def log_location(self, job_id: int) -> str:
        """Where a user finds the job's output outside the pool (a path; "" when none)."""

    @property
    def data_dir(self) -> Path | None:
        """The directory whose disk holds what the executor records (None: not here)."""

    def close(self) -> None:
        """Let go of what the executor holds for itself; runs keep running."""
