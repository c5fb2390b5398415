"""Running a job's command in a container (`--image`; docs/containers.md).

The command lines are pure functions of a `ContainerRun` (tested per engine, with GPUs and
without): `run_command` is what the supervisor starts in place of the job's command, and
`cleanup_command` what it runs when the run ends or must be killed, so that no container
outlives its job. The rest is the host's side: which engines are installed
(`installed_engines`), the engine program's own environment (`engine_environment`), and the
environment file the job's variables travel in (`write_env_file`).

Decisions (docs/containers.md has the reasons):
- podman and docker get `--rm`, a name (`container_name`), `--init` (so the SIGTERM the
  engine's client forwards reaches the command, never a PID 1 without a handler), the
  host's network and IPC (as a job on the host has), all capabilities dropped and
  no-new-privileges, the working directory and the checkpoint directory bind-mounted at
  their own paths, and the job's variables in a 0600 file (`--env-file`), never on the
  command line (which every user can read in /proc).
- GPUs: with an NVIDIA driver (`gpu_devices`), podman gets one CDI device per GPU, docker
  `--gpus "device=..."`, apptainer `--nv`; inside podman and docker only those GPUs exist,
  numbered from 0, so CUDA_VISIBLE_DEVICES is renumbered. Declared GPUs (no driver): no
  device at all, and the variables as a job on the host has them.
- Who the command is: a rootful engine (the daemon is root: shared mode) and docker run it
  as `--user UID:GID` with the owner's groups; rootless podman (personal mode) with
  `--userns=keep-id`, so files written in the working directory are the user's.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpupool.core.containers import ENGINE_PREFERENCE, ContainerEngine
from gpupool.core.paths import FILE_MODE

ENV_FILE = "container.env"  # in the job's directory: the daemon's, 0600

# The engine program's own environment comes from the daemon's, never from the job's: a
# root engine must not take LD_PRELOAD or CONTAINERS_CONF from a user. Only what configures
# the engines (and finds them) is kept.
_ENGINE_ENV_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TMPDIR",
        "XDG_RUNTIME_DIR",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "DBUS_SESSION_BUS_ADDRESS",
        "REGISTRY_AUTH_FILE",
    }
)
_ENGINE_ENV_PREFIXES = ("CONTAINERS_", "CONTAINER_", "DOCKER_", "APPTAINER_", "SINGULARITY_")
APPTAINER_ENV_PREFIX = "APPTAINERENV_"  # apptainer sets NAME inside from APPTAINERENV_NAME


@dataclass(frozen=True)
class UserIds:
    """Who the command is inside a container run by a rootful engine or docker."""

    uid: int
    gid: int
    groups: tuple[int, ...] = ()  # supplementary groups, besides gid


@dataclass(frozen=True)
class ContainerRun:
    """Everything the command line of one run depends on."""

    engine: ContainerEngine
    executable: str  # the engine program, absolute
    name: str  # the container's name (podman, docker): cleanup finds it by this
    image: str
    command: tuple[str, ...]
    gpus: tuple[int, ...]  # the host's indices of the job's GPUs
    gpu_devices: bool  # an NVIDIA driver is here: pass the GPUs as devices
    workdir: str
    binds: tuple[str, ...]  # host directories mounted at the same path inside
    env_file: str  # podman, docker: the job's variables (`write_env_file`)
    user: UserIds | None  # podman (rootful), docker: --user; None: rootless podman keep-id


def installed_engines(path: str | None = None) -> dict[ContainerEngine, str]:
    """The engines on `path` (the daemon's PATH), in ENGINE_PREFERENCE order, each with its
    executable. Installed means the program is there: whether it can run containers
    (docker's daemon up, podman's storage working) shows when a job runs."""
    found: dict[ContainerEngine, str] = {}
    for engine in ENGINE_PREFERENCE:
        where = shutil.which(engine.value, path=path)
        if where is not None:
            found[engine] = os.path.abspath(where)
    return found


def container_name(state_dir: Path, job_id: int, attempt: int) -> str:
    """`gpupool-<pool>-<job>-<attempt>`: the pool's tag (from its state dir) keeps two pools
    on one machine apart, and the attempt a requeued job's run apart from its last one."""
    tag = hashlib.sha256(str(state_dir).encode()).hexdigest()[:8]
    return f"gpupool-{tag}-{int(job_id)}-{int(attempt)}"


def container_environment(
    env: Mapping[str, str], engine: ContainerEngine, gpus: Sequence[int], gpu_devices: bool
) -> dict[str, str]:
    """The variables the command sees inside. Where podman and docker give the container
    only the job's GPUs they are numbered 0..n-1 there, so CUDA_VISIBLE_DEVICES must say
    so; NVIDIA_VISIBLE_DEVICES keeps the host's indices (the NVIDIA runtime reads it on
    the host side). apptainer --nv binds every GPU: the host's indices select them."""
    inside = dict(env)
    renumbered = gpu_devices and gpus and engine is not ContainerEngine.APPTAINER
    if renumbered:
        inside["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(len(gpus)))
    return inside


def engine_environment(daemon_env: Mapping[str, str]) -> dict[str, str]:
    """The engine program's own environment: the daemon's settings for it, and nothing of
    the job's (module docstring)."""
    return {
        k: v
        for k, v in daemon_env.items()
        if k in _ENGINE_ENV_NAMES
        or (k.startswith(_ENGINE_ENV_PREFIXES) and not k.startswith(APPTAINER_ENV_PREFIX))
    }


def env_file_lines(env: Mapping[str, str]) -> tuple[str, list[str]]:
    """The text of an --env-file (NAME=VALUE lines, read verbatim by podman and docker)
    and the names left out: a value with a newline cannot be written in one."""
    lines, left_out = [], []
    for name, value in sorted(env.items()):
        if "\n" in value or "\r" in value:
            left_out.append(name)
        else:
            lines.append(f"{name}={value}\n")
    return "".join(lines), left_out


def write_env_file(path: Path, env: Mapping[str, str]) -> list[str]:
    """Write the job's variables to `path` (0600, replaced atomically); the names left out."""
    text, left_out = env_file_lines(env)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return left_out


def apptainer_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The job's variables as apptainer takes them with --cleanenv: APPTAINERENV_NAME."""
    return {f"{APPTAINER_ENV_PREFIX}{k}": v for k, v in env.items()}


def run_command(run: ContainerRun) -> list[str]:
    """The engine's command line that runs the job's command in its image."""
    if run.engine is ContainerEngine.APPTAINER:
        return _apptainer(run)
    return _podman_or_docker(run)


def _podman_or_docker(run: ContainerRun) -> list[str]:
    argv = [run.executable, "run", "--rm", "--name", run.name, "--init"]
    argv += ["--network=host", "--ipc=host", "--cap-drop=all"]
    argv += ["--security-opt=no-new-privileges"]
    if run.user is None:
        argv.append("--userns=keep-id")  # rootless podman: the user is themselves inside
    else:
        argv += ["--user", f"{run.user.uid}:{run.user.gid}"]
        for group in run.user.groups:
            if group != run.user.gid:
                argv += ["--group-add", str(group)]
    argv += ["--env-file", run.env_file]
    for path in run.binds:
        argv += ["-v", f"{path}:{path}"]
    argv += ["--workdir", run.workdir]
    argv += _gpu_arguments(run)
    return [*argv, "--", run.image, *run.command]


def _gpu_arguments(run: ContainerRun) -> list[str]:
    if not run.gpu_devices or not run.gpus:
        return []  # declared GPUs: nothing to pass but the variables
    if run.engine is ContainerEngine.PODMAN:  # CDI (`nvidia-ctk cdi generate`)
        return [a for g in run.gpus for a in ("--device", f"nvidia.com/gpu={g}")]
    # docker reads --gpus as CSV: the quotes keep "device=0,1" one field.
    return ["--gpus", '"device=' + ",".join(str(g) for g in run.gpus) + '"']


def _apptainer(run: ContainerRun) -> list[str]:
    # Run as the job's owner, like any job command; the variables come from the
    # APPTAINERENV_ ones of its environment (apptainer_environment) under --cleanenv.
    argv = [run.executable, "exec", "--cleanenv"]
    if run.gpu_devices and run.gpus:
        argv.append("--nv")
    for path in run.binds:
        argv += ["--bind", f"{path}:{path}"]
    argv += ["--pwd", run.workdir]
    return [*argv, run.image, *run.command]


def cleanup_command(run: ContainerRun) -> list[str] | None:
    """What removes the run's container whatever state it is in (kills it if it runs);
    idempotent. None for apptainer: its processes are the job's own, stopped with it."""
    if run.engine is ContainerEngine.PODMAN:
        return [run.executable, "rm", "--force", "--ignore", "--time", "0", run.name]
    if run.engine is ContainerEngine.DOCKER:
        return [run.executable, "rm", "--force", run.name]
    return None
