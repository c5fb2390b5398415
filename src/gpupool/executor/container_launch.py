"""Turning a LaunchRequest with an image into the run the supervisor starts: the engine's
command line, the engine program's own environment and launch.json's `container`
(the command lines themselves: container.py; docs/containers.md)."""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from gpupool.core.containers import ContainerEngine
from gpupool.core.execution import LaunchRequest
from gpupool.executor.checkpoints import CHECKPOINT_ENV
from gpupool.executor.container import (
    ENV_FILE,
    ContainerRun,
    UserIds,
    apptainer_environment,
    cleanup_command,
    container_environment,
    container_name,
    engine_environment,
    installed_engines,
    run_command,
    write_env_file,
)
from gpupool.executor.files import read_json

NOBODY = 65534

if TYPE_CHECKING:  # launch.json's shape; the supervisor script is run, never imported
    from gpupool.executor.launch_files import ContainerFile


def containerize(
    request: LaunchRequest,
    state_dir: Path,
    checkpoints: Path | None,
    user: str | None,
    gpu_devices: bool,
) -> tuple[list[str], dict[str, str], ContainerFile]:
    """(command, environment of that command, launch.json's `container`) for the run of
    `request` in its image. The job's variables go into JOBDIR/container.env (podman,
    docker: the engine reads them as the daemon's user) or, as APPTAINERENV_*, into the
    environment of apptainer, which runs as the job's owner like any job. `user`: the job's
    owner when jobs run as their owners (shared mode), else None. JOBDIR must exist."""
    spec = request.container
    assert spec is not None
    job_id = request.handle.job_id
    engines = installed_engines()
    engine = spec.engine or next(iter(engines), ContainerEngine.PODMAN)
    gpus = request.allocation.gpus
    inside = dict(spec.env)
    binds = [request.workdir]
    if checkpoints is not None:
        inside[CHECKPOINT_ENV] = str(checkpoints)
        binds.append(str(checkpoints))
    inside = container_environment(inside, engine, gpus, gpu_devices)
    env_file = state_dir / "jobs" / str(int(job_id)) / ENV_FILE
    left_out: list[str] = []
    engine_env = engine_environment(os.environ)
    if engine is ContainerEngine.APPTAINER:
        engine_env.update(apptainer_environment(inside))
    else:
        left_out = write_env_file(env_file, inside)
    run = ContainerRun(
        engine=engine,
        # Not installed (any more): the bare name, and the run fails "command not found".
        executable=engines.get(engine, engine.value),
        name=container_name(state_dir, job_id, request.handle.attempt),
        image=spec.image,
        command=tuple(request.command),
        gpus=gpus,
        gpu_devices=gpu_devices,
        workdir=request.workdir,
        binds=tuple(dict.fromkeys(binds)),
        env_file=str(env_file),
        user=container_user(engine, user),
    )
    file: ContainerFile = {
        "engine": engine.value,
        "name": run.name,
        "image": run.image,
        "cleanup": cleanup_command(run),
        # podman and docker run as the daemon's user (the owner by --user inside);
        # apptainer as the job's owner, like any command.
        "as_daemon": engine is not ContainerEngine.APPTAINER,
        "left_out": left_out,
    }
    return run_command(run), engine_env, file


def container_user(engine: ContainerEngine, user: str | None) -> UserIds | None:
    """Who the command is inside: the job's owner (shared mode) or the daemon's user, by
    ids; None for rootless podman, which maps its user to itself (--userns=keep-id)."""
    if engine is ContainerEngine.PODMAN and os.geteuid() != 0:
        return None
    if user is None:
        return UserIds(os.getuid(), os.getgid(), tuple(os.getgroups()))
    try:
        entry = pwd.getpwnam(user)
    except KeyError:  # the supervisor fails the job before anything runs; nobody regardless
        return UserIds(NOBODY, NOBODY)
    groups = os.getgrouplist(entry.pw_name, entry.pw_gid)
    return UserIds(entry.pw_uid, entry.pw_gid, tuple(groups))


def remove_lost_container(jobdir: Path) -> bool:
    """For a run whose supervisor died: remove its container, which is no process of the
    job's session (podman's conmon, docker's daemon run it), by launch.json's `cleanup`.
    True when there was one to remove and the engine said it is gone."""
    launch = read_json(jobdir / "launch.json") or {}
    container = launch.get("container")
    cleanup = container.get("cleanup") if isinstance(container, dict) else None
    if not isinstance(cleanup, list) or not cleanup:
        return False
    try:
        done = subprocess.run(
            [str(a) for a in cleanup],
            env=engine_environment(os.environ),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
