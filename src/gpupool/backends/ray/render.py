"""A LaunchRequest as a Ray job submission (pure: no Ray, no I/O).

One run is one Ray job whose `submission_id` is the run's name (`run_name`), so a launch
repeated after a crash is refused by the head as a duplicate and the run is not started
twice (backend.py). Two shapes (docs/backends.md, "Ray"):

- **One process** (one node, not distributed): the entrypoint is the command itself,
  shell-quoted, after `cd WORKDIR` (workdir policy `shared`) and under coreutils'
  `timeout` when the run has a time limit (SIGTERM at the limit, SIGKILL after the grace;
  exit 124). Its GPUs, CPUs and memory are the entrypoint's own resources
  (`entrypoint_num_gpus`...): Ray sets CUDA_VISIBLE_DEVICES to the GPUs it chose. A share
  of one GPU (`BackendRequest.gpu_fraction`, `--gpus 0.5`) is Ray's fractional
  `entrypoint_num_gpus` (0.5): Ray packs such runs onto one GPU, each seeing that GPU. A
  pinned run (`BackendRequest.pinned`) also asks a sliver of its node's `node:IP` resource
  (or selects the node's `ray.io/node-id` label: a pin by id, capacity.py).
- **A gang** (several nodes, or `--distributed torchrun`): the entrypoint is gang.py's
  driver, which reserves nothing itself and places the gang with a placement group (a
  pinned gang's bundle i goes to its i-th pin, as a single process's entrypoint does).

Either way the job's environment (`BackendRequest.job_env` over the settings' `env_vars`)
is the runtime_env's `env_vars`, with Ray's stop wait set to the run's grace (`stop_wait_s`),
and the metadata names the pool, job, attempt and project
(and the time limit, by which a run ended by it is told apart: backend.py; and a single
process's entrypoint resources, by which a poll says why it waits: capacity.py).
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass
from pathlib import Path

from gpupool.backends.ray.capacity import entrypoint_asks, pin_labels, pin_resources
from gpupool.backends.ray.gang import GANG_ENV, POLL_S, GangSpec
from gpupool.backends.ray.settings import RaySettings, WorkdirPolicy
from gpupool.core.backends import run_name
from gpupool.core.execution import BackendRequest, LaunchRequest

# The driver's source, shipped in the entrypoint: nothing of gpupool is installed there.
GANG_SOURCE = Path(__file__).with_name("gang.py").read_text(encoding="utf-8")
DEFAULT_GANG_CPUS = 1.0  # a gang bundle's CPUs when the job asks for none (an actor needs 1)

META_POOL = "gpupool_pool"
META_JOB = "gpupool_job"
META_ATTEMPT = "gpupool_attempt"
META_PROJECT = "gpupool_project"
META_NAME = "gpupool_name"
META_TIME_LIMIT = "gpupool_time_limit_s"
# How long Ray's job supervisor waits, after the SIGTERM of a `stop_job`, before it SIGKILLs
# the entrypoint and everything under it: whole seconds, read from the supervisor's
# environment, which is the job's runtime_env `env_vars` (3 s when not set).
STOP_WAIT_ENV = "RAY_JOB_STOP_WAIT_TIME_S"
# A gang's driver stops its ranks with the grace, then waits up to 5 s more for them
# (gang.py), seen at its next poll: Ray must not kill it, and with it the ranks, before.
GANG_STOP_SLACK_S = 5 + POLL_S
# The entrypoint's resources by Ray's names (JSON): Ray's job list does not return them, and
# a poll compares them with the live nodes to say why a run waits (capacity.py).
META_ASKS = "gpupool_entrypoint_asks"


@dataclass(frozen=True)
class RaySubmission:
    """What `JobSubmissionClient.submit_job` is given, field by field."""

    submission_id: str
    entrypoint: str
    runtime_env: dict[str, dict[str, str]]
    metadata: dict[str, str]
    entrypoint_num_gpus: float | None = None
    entrypoint_num_cpus: float | None = None
    entrypoint_memory: int | None = None
    # A pinned run's node (BackendRequest.pinned): a sliver of Ray's built-in `node:IP`
    # resource, or, for a node pinned by its id, a label selector (capacity.py).
    entrypoint_resources: dict[str, float] | None = None
    entrypoint_label_selector: dict[str, str] | None = None
    gang: GangSpec | None = None  # the gang's driver runs it (also in env_vars, as JSON)


def is_gang(request: LaunchRequest, backend: BackendRequest) -> bool:
    return backend.nodes > 1 or request.ranks is not None


def _workdir(request: LaunchRequest, settings: RaySettings) -> str | None:
    return request.workdir if settings.workdir is WorkdirPolicy.SHARED else None


def single_entrypoint(request: LaunchRequest, settings: RaySettings) -> str:
    """`cd WORKDIR && exec timeout -k GRACE LIMIT CMD...`, each part as present."""
    command = shlex.join(request.command)
    if request.time_limit_s is not None:
        limit, grace = f"{request.time_limit_s:.3f}s", f"{max(request.grace_s, 0.1):.3f}s"
        command = f"timeout --kill-after={grace} {limit} {command}"
    workdir = _workdir(request, settings)
    if workdir is None:
        return f"exec {command}"
    return f"cd {shlex.quote(workdir)} && exec {command}"


def stop_wait_s(request: LaunchRequest, gang: bool) -> int:
    """Ray's stop wait for the run (STOP_WAIT_ENV): a stop is SIGTERM, the run's own grace,
    SIGKILL, as the executor contract says, not Ray's 3 s."""
    grace = max(request.grace_s, 0.0) + (GANG_STOP_SLACK_S if gang else 0.0)
    return max(1, math.ceil(grace))


def gang_spec(request: LaunchRequest, backend: BackendRequest, settings: RaySettings) -> GangSpec:
    nproc = request.ranks.nproc_per_node if request.ranks is not None else 1
    return GangSpec(
        command=list(request.command),
        workdir=_workdir(request, settings),
        nodes=backend.nodes,
        gpus_per_node=backend.gpus_per_node,
        cpus_per_node=float(backend.cpus_per_node or DEFAULT_GANG_CPUS),
        mem_bytes_per_node=backend.mem_bytes_per_node,
        nproc_per_node=nproc,
        strategy="STRICT_SPREAD" if backend.nodes > 1 else "STRICT_PACK",
        time_limit_s=request.time_limit_s,
        grace_s=request.grace_s,
        pins=list(backend.pinned),
    )


def render(request: LaunchRequest, settings: RaySettings, pool_id: str) -> RaySubmission:
    """The submission of `request` (a backend's: `request.backend` is set)."""
    backend = request.backend
    if backend is None:
        raise ValueError("a Ray run needs the request's BackendRequest")
    env = {**settings.env_vars, **backend.job_env}
    metadata = {
        META_POOL: pool_id,
        META_JOB: str(request.handle.job_id),
        META_ATTEMPT: str(request.handle.attempt),
        META_PROJECT: backend.project,
        META_NAME: backend.name,
    }
    if request.time_limit_s is not None:
        metadata[META_TIME_LIMIT] = repr(float(request.time_limit_s))
    submission_id = run_name(pool_id, request.handle)
    gang = is_gang(request, backend)
    if gang and backend.gpu_fraction is not None:  # the spec refuses it at submit
        raise ValueError("a share of one GPU runs as one process on one node, not as a gang")
    env[STOP_WAIT_ENV] = str(stop_wait_s(request, gang))
    if gang:
        spec = gang_spec(request, backend, settings)
        env[GANG_ENV] = json.dumps(spec, sort_keys=True)
        return RaySubmission(
            submission_id=submission_id,
            entrypoint=f"{shlex.quote(settings.driver_python)} -c {shlex.quote(GANG_SOURCE)}",
            runtime_env={"env_vars": env},
            metadata=metadata,
            gang=spec,
        )
    gpus = float(backend.gpus_per_node) if backend.gpus_per_node else None
    if backend.gpu_fraction is not None:
        gpus = backend.gpu_fraction
    cpus = float(backend.cpus_per_node) if backend.cpus_per_node else None
    memory = backend.mem_bytes_per_node or None
    resources = pin_resources(backend.pinned[0]) if backend.pinned else {}
    labels = pin_labels(backend.pinned[0]) if backend.pinned else {}
    asks = entrypoint_asks(gpus, cpus, memory, resources)
    metadata[META_ASKS] = json.dumps(asks, sort_keys=True)
    return RaySubmission(
        submission_id=submission_id,
        entrypoint=single_entrypoint(request, settings),
        runtime_env={"env_vars": env},
        metadata=metadata,
        entrypoint_num_gpus=gpus,
        entrypoint_num_cpus=cpus,
        entrypoint_memory=memory,
        entrypoint_resources=resources or None,
        entrypoint_label_selector=labels or None,
    )
