"""The shapes of the files in a job's directory (JOBDIR), for mypy: the supervisor writes
and reads them as plain JSON (it imports nothing typed at run time), the daemon's side
(local.py, files.py, container_launch.py) names the same shapes, so both ends agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NotRequired, TypedDict

if TYPE_CHECKING:  # both are defined for mypy only (their modules import no typing)
    from gpupool.executor.job_cgroup import CgroupFile
    from gpupool.executor.rank_launcher import RanksFile

__all__ = [
    "ChildFile",
    "ClaimFile",
    "ContainerFile",
    "ControlFile",
    "ExitFile",
    "ExitReasonName",
    "LaunchFile",
    "RanksFile",
    "StopReason",
    "UsageFile",
    "WarningFile",
]


class ContainerFile(TypedDict):
    """launch.json's `container` (executor/container_launch.py): `command` is the
    engine's, which runs the job's command in `image`."""

    engine: str  # podman, docker, apptainer
    name: str  # the container's name (podman, docker)
    image: str
    cleanup: list[str] | None  # removes the container, killing it if it runs
    as_daemon: bool  # run the engine as we are (it runs the command as the owner)
    left_out: list[str]  # the job's variables an env file cannot hold (newlines)


class LaunchFile(TypedDict, total=False):
    """launch.json, written by the daemon before it starts the supervisor. Read with
    .get(): a missing key means its default (no limit, no grace, run as we are)."""

    job_id: int
    command: list[str]
    env: dict[str, str]
    workdir: str
    time_limit_s: float | None
    grace_s: float
    notify_socket: str | None  # the daemon's socket, poked once exit.json is written
    user: str | None  # run as this Unix user (shared mode); None: as we are
    umask: int | None  # the command's umask; None: DEFAULT_UMASK
    ranks: RanksFile | None  # a distributed run: the gang rank_launcher.py starts
    container: ContainerFile | None  # `command` runs the job in a container
    stderr_log: str  # the command's stderr to JOBDIR/this, apart (absent: to output.log)
    cgroup: CgroupFile | None  # the run's own cgroup (job_cgroup.py); None: none
    warning: WarningFile  # a signal before the time limit (job_warning.py); absent: none


class WarningFile(TypedDict):
    """launch.json's `warning` (job_warning.py): `signal` to every process of the job,
    `before_s` seconds before its time limit; only if the directory `if_checkpointed` names
    holds something by then (the checkpoint default), or always (None)."""

    signal: int
    before_s: float
    if_checkpointed: str | None


class ClaimFile(TypedDict):
    """claim.json: who owns the job (this supervisor, or the daemon standing in)."""

    supervisor_pid: int
    supervisor_start_ticks: int
    boot_id: str
    time: float
    preempt_signal: NotRequired[int]  # only a supervisor takes a preemption signal
    control_signal: NotRequired[int]  # it reads control.json on this signal (below)


class ControlFile(TypedDict, total=False):
    """control.json: orders for a running job, written by the daemon (executor/
    control.py), read on `CONTROL_SIGNAL`: its time limit from the run's start (when
    present), and signals for the job's processes, each once, in `seq` order."""

    time_limit_s: float
    signals: list[list[int]]  # [seq, signal number]


class ChildFile(TypedDict):
    """child.json: the job's main process, for a daemon that must kill it if we die."""

    pid: int
    pgid: int
    start_time: float
    start_ticks: int | None


# Why a run stopped as exit.json says it (core.execution.ExitReason parses these).
StopReason = Literal["cancelled", "preempted", "timeout"]
ExitReasonName = Literal["exited", "spawn_failed", "out_of_memory", StopReason]


class UsageFile(TypedDict):
    """exit.json's `usage`: what the run's cgroup counted (None: not on this host)."""

    cpu_seconds: float | None
    memory_peak_bytes: int | None
    memory_mean_bytes: int | None
    oom_kills: int


class ExitFile(TypedDict):
    """exit.json: how the run ended, durable before the daemon is told."""

    exit_code: int
    signal: int | None
    reason: ExitReasonName
    message: str
    start_time: float
    end_time: float
    output_lost: list[list[float]]  # [from, to]: its log's disk was full (log_space.py)
    usage: NotRequired[UsageFile]  # only a run in a cgroup of its own
    memory_limit_bytes: NotRequired[int]  # its --mem, where its cgroup enforced it
