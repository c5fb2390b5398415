"""A job's identity, its request, and its life as an explicit state machine.

Every state change goes through `check_transition`, and every stored transition carries a
cause, so `gpupool show` can tell a job's whole history (as Dask's worker state machine does).
Its states, hold kinds, gang launchers and priority classes are defined in job_enums.py
(without dataclasses, for the CLI) and re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from gpupool.core.containers import ContainerEngine

# The enums and constants the CLI needs without this module's dataclasses (job_enums.py).
from gpupool.core.job_enums import DEFAULT_PRIORITY as DEFAULT_PRIORITY
from gpupool.core.job_enums import PRIORITY_CLASSES as PRIORITY_CLASSES
from gpupool.core.job_enums import TERMINAL_STATES as TERMINAL_STATES
from gpupool.core.job_enums import Distributed as Distributed
from gpupool.core.job_enums import Hold as Hold
from gpupool.core.job_enums import JobState as JobState

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:  # job_control imports JobState from here
    from gpupool.core.cgroup_usage import CgroupUsage
    from gpupool.core.job_control import ArrayRequest, ArrayTask, Dependency
    from gpupool.core.warning_signal import WarningSignal


# (from, to) -> what this edge means. Anything not listed is a bug and is refused.
TRANSITIONS: dict[tuple[JobState, JobState], str] = {
    (JobState.PENDING, JobState.RUNNING): "scheduled and started",
    (JobState.PENDING, JobState.CANCELLED): "cancelled before it started",
    (JobState.PENDING, JobState.FAILED): "could not be started",
    (JobState.RUNNING, JobState.SUCCEEDED): "exited with code 0",
    (JobState.RUNNING, JobState.FAILED): "exited with a non-zero code, a signal, or was lost",
    (JobState.RUNNING, JobState.CANCELLED): "cancelled while running",
    (JobState.RUNNING, JobState.TIMEOUT): "ran past its time limit",
    (JobState.RUNNING, JobState.PREEMPTED): "preempted to give its GPUs back",
    (JobState.RUNNING, JobState.PENDING): "requeued",
    (JobState.PREEMPTED, JobState.PENDING): "requeued after preemption",
    (JobState.PREEMPTED, JobState.CANCELLED): "cancelled while preempted",
}


class InvalidTransition(ValueError):
    pass


class EndReason(StrEnum):
    """Why a job ended, the short code of the REASON column (`Job.reason` of a finished
    job; "" for a success). Its cause in words goes into the job's history."""

    NONE = ""  # exited with code 0
    NON_ZERO_EXIT = "NonZeroExit"
    SIGNAL = "Signal"  # killed by a signal it did not ask for
    TIME_LIMIT = "TimeLimit"
    CANCELLED = "Cancelled"
    SPAWN_FAILED = "SpawnFailed"  # its command could not be started
    OUT_OF_MEMORY = "OutOfMemory"  # killed at its --mem limit (Slurm's OUT_OF_MEMORY)
    NODE_FAIL = "NodeFail"  # its supervisor died without recording an exit
    DEPENDENCY = "DependencyNeverSatisfied"  # cancelled: an --after job ended not as asked


class HeldReason(StrEnum):
    """Reasons of RUNNING jobs the pool is dealing with (`Job.reason` while it runs)."""

    SUPERVISOR_LOST = "SupervisorLost"  # supervisor dead, processes still alive: GPUs held
    GPUS_GONE = "GpusGone"  # its GPUs left the inventory: being stopped to requeue


def check_transition(frm: JobState, to: JobState) -> str:
    """Return the meaning of the edge, or raise InvalidTransition if there is none."""
    try:
        return TRANSITIONS[(frm, to)]
    except KeyError:
        raise InvalidTransition(f"a job cannot go from {frm.value} to {to.value}") from None


@dataclass(frozen=True)
class Resources:
    """What one job asks for, on one node."""

    gpus: int = 0
    gpu_type: str | None = None  # a GPU model name, matched case-insensitively
    cpus: int | None = None  # None: not constrained
    mem_bytes: int | None = None  # None: not constrained
    # Fractional GPUs (gpus must be 1): share one GPU by memory. Either an amount of GPU
    # memory, or a fraction of the chosen GPU's memory (--gpus 0.5).
    gpu_memory_bytes: int | None = None
    gpu_fraction: float | None = None

    @property
    def fractional(self) -> bool:
        return self.gpu_memory_bytes is not None or self.gpu_fraction is not None


def gpu_count(
    res: Resources,
    held: int | None = None,
    granted_bytes: int | None = None,
    gpu_memory_bytes: int | None = None,
) -> float:
    """The GPUs a job counts for, in every view and sum (quota and limit, `project list`,
    fair-share usage, accounting, `show`, the API): the one rule.

    A whole-GPU job counts its GPUs: `held` (the GPUs it holds or held, for a job that ran)
    or else those it asks for. A fractional job counts the part of one GPU it shares: its
    fraction (`--gpus 0.5`), else its GPU memory (`granted_bytes` once placed, else what it
    asks for) over `gpu_memory_bytes`, the memory of its GPU (of a job not placed yet: the
    largest GPU in the pool), at most 1; 1 GPU when that memory is not known."""
    count = res.gpus if held is None else held
    if res.gpu_fraction is not None:
        return res.gpu_fraction * max(1, count)
    nbytes = granted_bytes if granted_bytes is not None else res.gpu_memory_bytes
    if nbytes is not None and count and gpu_memory_bytes is not None and gpu_memory_bytes > 0:
        return min(1.0, nbytes / gpu_memory_bytes)
    return float(count)


def priority_name(value: int) -> str:
    for name, v in PRIORITY_CLASSES.items():
        if v == value:
            return name
    return str(value)


@dataclass(frozen=True)
class JobSpec:
    """A validated request to run a command (what the spec layer produces)."""

    command: tuple[str, ...]
    resources: Resources = Resources()
    name: str = ""
    project: str = "default"
    priority: int = DEFAULT_PRIORITY
    time_limit_s: float | None = None
    env: tuple[tuple[str, str], ...] = ()  # what the user asked for explicitly (--env, env:)
    base_env: tuple[tuple[str, str], ...] = ()  # the submitter's environment (sbatch --export=ALL)
    workdir: str = ""
    # The submitter's umask, which the job's command gets (as sbatch's jobs do); None: the
    # submission carried none (an older client), the command gets DEFAULT_UMASK (022).
    umask: int | None = None
    grace_s: float = 30.0  # SIGTERM -> SIGKILL delay on cancel and time limit
    begin_time: float | None = None  # held until then (epoch seconds), as sbatch --begin
    # May it be stopped and requeued to give GPUs back (and so borrow above its project's
    # quota)? None: the default of its class (interactive: no; everything else: yes).
    preemptible: bool | None = None
    # Run again after a failed attempt, up to `retries` times, when its exit code is one of
    # `retry_on_exit` (empty: any non-zero code); requeued as a preemption is.
    retries: int = 0
    retry_on_exit: tuple[int, ...] = ()
    # Not started before these jobs ended as asked (`--after`); see core/job_control.py.
    after: tuple[Dependency, ...] = ()
    # A submission of an array (`--array`): expanded into one job per index at submit.
    array: ArrayRequest | None = None
    # One task of an array, as stored (its index and the array's throttle).
    array_task: ArrayTask | None = None
    # None: one process, the command; else one process per GPU as `Distributed` says.
    distributed: Distributed | None = None
    # Held (`gpupool hold`, `submit --hold`): never started until released. Kept with the
    # request, as `begin_time` is, so it survives a restart with the job.
    hold: Hold | None = None
    # Run the command in a container of this image (`--image`; docs/containers.md), with
    # this engine: the one named, else the one the pool chose at submit (stored so).
    image: str | None = None
    container_engine: ContainerEngine | None = None
    # Its stderr in a log of its own (`--separate-stderr`, as sbatch -e), read with
    # `gpupool logs --stderr`; by default both streams go to one log, in order.
    separate_stderr: bool = False
    # Where it runs (docs/backends.md): None: the pool's own machine (the local executor);
    # else the `[backends.NAME]` engine it is handed to (Slurm, Ray, Kubernetes). A
    # submission's None means its project's default backend, if it has one: the daemon
    # settles it at submit, so a stored job's None is always the local pool.
    backend: str | None = None
    # Where else it may go (`--backend any`; docs/backends.md "Where a job goes"): backends
    # the pool may route it to when it would start there first, while it waits; it runs
    # where `backend` says until then. Empty: it stays where `backend` says.
    route_to: tuple[str, ...] = ()
    # Nodes it spans (`--nodes`, a backend's job only: the local pool is one machine); its
    # `resources` are per node.
    nodes: int = 1
    # A signal before its time limit (`--signal USR1@120`, sbatch's --signal; `none`: not
    # even the checkpoint default). None: it named none, the default applies (core/
    # warning_signal.py says which).
    warning_signal: WarningSignal | None = None

    @property
    def is_preemptible(self) -> bool:
        if self.preemptible is not None:
            return self.preemptible
        return self.priority < PRIORITY_CLASSES["interactive"]


@dataclass(frozen=True)
class Job:
    """A job as the store knows it."""

    id: int
    spec: JobSpec
    user: str
    state: JobState
    submit_time: float
    start_time: float | None = None
    end_time: float | None = None
    exit_code: int | None = None
    reason: str = ""  # short pending/ending reason code, e.g. "Resources", "Priority"
    node: str | None = None
    gpus: tuple[int, ...] = ()
    gpu_memory_bytes: int | None = None  # fractional jobs: the memory granted on its GPU
    restart_count: int = 0  # its requeues: preemptions and retries (GPUPOOL_RESTART_COUNT)
    failed_attempts: int = 0  # its runs that failed and were retried (what --retry counts)
    cancel_requested: bool = False
    version: int = 0
    array_id: int | None = None  # the array it is a task of: its first task's id
    # A backend's own name for its current run (`slurm://cluster/1234`), once known; None
    # for the local pool's jobs (docs/backends.md).
    backend_ref: str | None = None
    # CPU time and memory as its runs' cgroups counted them (core/cgroup_usage.py): its last
    # ended run's, and all its runs' CPU time; None: nothing counted (yet).
    cgroup_usage: CgroupUsage | None = None
    events: tuple[Transition, ...] = field(default=(), compare=False)

    def gpu_count(self, gpu_memory_bytes: int | None = None) -> float:
        """The GPUs it holds (held, if it ran) or asks for (`gpu_count`), on all its nodes;
        `gpu_memory_bytes`: the memory of its GPU (of the largest GPU in the pool, if it has
        none yet)."""
        held = len(self.gpus) if self.gpus else None
        res = self.spec.resources
        if held is None and self.spec.nodes > 1:  # a backend's job: whole GPUs on each node
            return float(res.gpus * self.spec.nodes)
        return gpu_count(res, held, self.gpu_memory_bytes, gpu_memory_bytes)

    @property
    def name(self) -> str:
        return self.spec.name or (
            self.spec.command[0].rsplit("/", 1)[-1] if self.spec.command else ""
        )


@dataclass(frozen=True)
class Transition:
    """One event of a job's history: when, from where to where, and why. A state change, or,
    with `frm == to`, a note: something that happened to the job without changing its
    state (its supervisor died and its processes still run, its GPUs left the pool)."""

    time: float
    frm: JobState | None  # None for the creating event (submission)
    to: JobState
    cause: str
