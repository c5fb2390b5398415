"""The engine loop's dealings with backends (docs/backends.md): the LaunchRequest of a
backend's job, and one poll per backend per round for all the runs it holds.

The engine never imports a backend's package (gpupool.backends): the daemon opens them and
gives the engine a mapping of name -> Backend (core.backends), used here and by the loop to
send a job's signals, releases and log reads where its run is.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from gpupool.core.backends import Backend
from gpupool.core.execution import (
    Allocation,
    BackendRequest,
    ContainerLaunch,
    Handle,
    LaunchRequest,
    Observation,
    RankLayout,
    RunState,
)
from gpupool.core.job import Job, JobState
from gpupool.core.warning_signal import run_warning
from gpupool.engine.environment import backend_full_environment, backend_job_environment
from gpupool.engine.state import Tracked, handle_of
from gpupool.executor.checkpoints import CHECKPOINT_ENV

log = logging.getLogger("gpupool.engine")


def launch_request(
    job: Job,
    time_limit_s: float,
    pinned: tuple[str, ...] = (),
    checkpoints: str | None = None,
) -> LaunchRequest:
    """What a backend is given for `job`'s current run: its resources per node and node
    count (`BackendRequest`), the engine nodes the pool admitted it to (`pinned`), its
    whole request as for a local run, and for a distributed job the whole gang
    (`RankLayout(nproc_per_node=gpus, nnodes=nodes)`). `checkpoints`: the backend's
    `checkpoint_dir`, under which the job's GPUPOOL_CHECKPOINT_DIR is (core.backends)."""
    spec = job.spec
    assert spec.backend is not None
    res = spec.resources
    job_env = backend_job_environment(job)
    env = backend_full_environment(job)
    if checkpoints is not None:
        job_env[CHECKPOINT_ENV] = env[CHECKPOINT_ENV] = f"{checkpoints.rstrip('/')}/{job.id}"
    request = BackendRequest(
        name=spec.name,
        project=spec.project,
        gpus_per_node=res.gpus,
        nodes=spec.nodes,
        cpus_per_node=res.cpus,
        mem_bytes_per_node=res.mem_bytes,
        gpu_type=res.gpu_type,
        priority=spec.priority,
        preemptible=spec.is_preemptible,
        job_env=job_env,
        pinned=pinned,
        gpu_fraction=res.gpu_fraction,
    )
    container = None
    if spec.image is not None:  # the backend runs it with its own engine
        container = ContainerLaunch(spec.image, spec.container_engine, request.job_env)
    ranks = None
    if spec.distributed is not None:
        ranks = RankLayout(nproc_per_node=res.gpus, nnodes=spec.nodes)
    return LaunchRequest(
        handle=handle_of(job),
        command=spec.command,
        env=env,
        workdir=spec.workdir,
        time_limit_s=time_limit_s,
        grace_s=spec.grace_s,
        allocation=Allocation(spec.backend, ()),
        user=job.user,
        umask=spec.umask,
        ranks=ranks,
        container=container,
        separate_stderr=spec.separate_stderr,
        backend=request,
        warning=run_warning(spec.warning_signal),  # its --signal, or the checkpoint default
    )


def tracked_runs(jobs: Iterable[Tracked], everything: bool = False) -> dict[str, dict[Handle, int]]:
    """Per backend, the handles to ask about (handle -> job id): its RUNNING jobs and the
    PENDING ones handed over; `everything`: every active one (after a restart, when what
    was handed over is what `adopt` finds)."""
    runs: dict[str, dict[Handle, int]] = {}
    for t in jobs:
        job = t.job
        name = job.spec.backend
        if name is None:
            continue
        if everything or job.state is JobState.RUNNING or t.handed_over:
            runs.setdefault(name, {})[handle_of(job)] = job.id
    return runs


def ask(
    backends: Mapping[str, Backend], runs: Mapping[str, Mapping[Handle, int]], adopt: bool
) -> dict[int, Observation]:
    """One `poll` (or `adopt`) per backend with all its handles; by job id. A backend that
    is not configured, or that raises against its contract, answers UNKNOWN for its runs."""
    found: dict[int, Observation] = {}
    for name, handles in sorted(runs.items()):
        backend = backends.get(name)
        said: Mapping[Handle, Observation] = {}
        if backend is not None:
            try:
                said = backend.adopt(list(handles)) if adopt else backend.poll(list(handles))
            except Exception:  # a backend must not raise; if it does, the pool goes on
                log.exception("backend %s raised on %s", name, "adopt" if adopt else "poll")
        unknown = Observation(RunState.UNKNOWN)
        for handle, job_id in handles.items():
            found[job_id] = said.get(handle, unknown)
    return found
