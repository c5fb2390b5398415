"""Backends: existing engines (Slurm, Ray, Kubernetes) that run a pool's jobs elsewhere.

gpupool never grows its own multi-node cluster engine: a job whose spec names a backend
(`--backend NAME`, or its project's default) is handed to that engine's scheduler as it is,
and tracked there. A backend is the executor contract (core/execution.py) implemented once
more, plus what only a backend has: a `name` (the `[backends.NAME]` table of gpupool.toml
that configured it), its `kind`, and `health()` for `gpupool backends`.

How a backend differs from the local executor, all within the contract:
- The pool places nothing: `LaunchRequest.backend` (a BackendRequest) carries the resources
  per node and the node count, `allocation` only names the backend.
- A run handed over but not started yet is `RunState.QUEUED` (its `Observation.detail` says
  why, in the backend's words); the job stays PENDING in the pool until it is RUNNING.
- Every Observation carries the backend's own name for the run (`ref`, e.g.
  `slurm://cluster/1234`), which the engine keeps in the job row; the backend still derives
  its run names from the Handle (`run_name`), so a launch repeated after a crash, or `adopt`
  after a restart, finds the run it started.
- A backend that cannot be reached answers UNKNOWN for every run it was asked about, and
  raises nothing (`health()` says why).

Each backend lives in `gpupool/backends/<kind>/`, whose `__init__.py` offers
`open_backend(name, settings, context) -> Backend` (backends/registry.py finds it by kind).
Standard library only, as the rest of core.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from gpupool.core.execution import Executor, Handle

LOCAL_BACKEND = "local"  # the pool's own executor on this machine; not a backend table's name
# `--backend any`: wherever the pool would start the job first, the pool's machine or a
# backend that admits by the pool's policy (JobSpec.route_to); not a backend table's name
ANY_BACKEND = "any"
BACKEND_NAME_RE = re.compile(r"[a-z][a-z0-9_-]{0,31}")  # a [backends.NAME] table's name


class BackendKind(StrEnum):
    """Which engine a backend drives (a `[backends.NAME]` table's `kind`)."""

    SLURM = "slurm"
    RAY = "ray"
    KUBERNETES = "kubernetes"


@dataclass(frozen=True)
class BackendHealth:
    """What `gpupool backends` shows for one backend: reachable or not, and in a sentence
    what was seen (`slurmctld 22.05.8 at localhost: 2 nodes, 8 GPUs idle`, or why not)."""

    reachable: bool
    summary: str


def summary_line(text: str) -> str:
    """A health summary in one line: an engine's error of several lines (sinfo's, when
    slurmctld is down) with its lines joined by '; ', blank ones left out."""
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


@dataclass(frozen=True)
class BackendContext:
    """What the daemon gives every backend it opens.

    `pool_id` is short, stable for one pool (one state directory or database) and made of
    [a-z0-9]: a backend puts it in its run names (`run_name`), so two pools sharing one Slurm
    cluster never take each other's runs for their own. `state_dir` is where a backend may keep
    files of its own (the daemon's state directory: `backends/NAME/` under it).
    """

    pool_id: str
    state_dir: Path


def run_name(pool_id: str, handle: Handle) -> str:
    """The name a backend gives a run (a Slurm job name, a Ray submission id's stem, a
    Kubernetes object's name): lower-case, DNS-1123 safe, unique per pool, job and attempt."""
    return f"gp-{pool_id}-{handle.job_id}-{handle.attempt}"


class EngineNodeState(StrEnum):
    """Whether an engine's node takes work, in the engine's own terms mapped to three."""

    UP = "up"  # takes new work (idle, mixed or fully allocated alike)
    DRAINED = "drained"  # the engine starts nothing new there (Slurm drain, a cordon)
    DOWN = "down"  # not reachable or not ready (Slurm down, Ray dead, Kubernetes NotReady)


@dataclass(frozen=True)
class EngineNode:
    """One node of a backend as its engine reports it (`Backend.capacity`).

    `gpus_used` is what the engine counts allocated there, by anyone (the pool's runs and
    other tenants' alike), in whole GPUs: a GPU partly held (Ray's fractional num_gpus)
    counts as used, rounded up. The pool subtracts its own to find what others hold. `pin` is
    what a launch names to run on this node (`BackendRequest.pinned`): Slurm's NodeName,
    Ray's node IP (its `node:IP` resource), or its node id where live nodes share an IP,
    Kubernetes' hostname label."""

    name: str  # the engine's own name for the node, shown as `BACKEND/name`
    gpus: int
    gpus_used: int = 0
    gpu_model: str = ""  # "" where the engine does not say (fake GPUs, no product label)
    gpu_memory_bytes: int = 0  # per GPU; 0 where the engine does not say
    cpus: int = 0
    memory_bytes: int = 0
    state: EngineNodeState = EngineNodeState.UP
    detail: str = ""  # the engine's words for a state other than UP (a drain's reason)
    pin: str = ""

    @property
    def pinned_as(self) -> str:
        """What a launch names to run on this node: its `pin`, else the engine's name."""
        return self.pin or self.name


@dataclass(frozen=True)
class Capacity:
    """A backend's nodes as its engine last reported them, or why they could not be read
    (`problem`, one line; then `nodes` is empty)."""

    nodes: tuple[EngineNode, ...] = ()
    problem: str = ""

    @property
    def known(self) -> bool:
        return not self.problem


class Admission(StrEnum):
    """Who decides when a backend's job runs (a `[backends.NAME]` table's `admission`)."""

    # The pool's policy (quotas, borrowing, fair share, priorities, backfill) admits it
    # against the backend's free capacity; the run is then pinned to the admitted nodes
    # (engine/admission.py). As Kueue admits workloads that kube-scheduler then places.
    POOL = "pool"
    ENGINE = "engine"  # handed over at once: the engine's scheduler decides (as before)


@dataclass(frozen=True)
class BackendAdmission:
    """What the pool's policy does with one backend's jobs: `mode`, and each project's
    guaranteed GPUs on that backend (`[backends.NAME.quotas]`; a project not named has none
    there and only borrows). Quotas are per backend: a project may have 8 GPUs on the box
    and 16 on the cluster; its limit, weight and minimum run times are its own everywhere."""

    mode: Admission = Admission.POOL
    quotas: Mapping[str, float] = field(default_factory=dict)
    # Where its jobs keep checkpoints (`checkpoint_dir`): storage both the pool and the
    # engine's nodes reach; a job's GPUPOOL_CHECKPOINT_DIR is `<it>/<job id>`, the same for
    # every attempt, made by the job (the pool may not reach it as the job's user). None:
    # its jobs get no GPUPOOL_CHECKPOINT_DIR.
    checkpoint_dir: str | None = None


def node_name(backend: str, engine_node: str) -> str:
    """A backend's node as the pool names it (`why`, `gpus`, /metrics, a job's node):
    `BACKEND/node`."""
    return f"{backend}/{engine_node}"


@dataclass(frozen=True)
class BackendNodes:
    """One backend's nodes as `gpupool gpus`, the dashboard and /metrics show them: how its
    jobs are admitted, its capacity as last read (None: not read yet), and the pool's jobs
    on each engine node (job id, GPUs: a fraction for a job sharing a GPU, core.job's
    `gpu_count`): admitted there, running or starting. Made by the
    engine (engine/admission.py `backend_nodes`), published whole for other threads."""

    name: str
    admission: BackendAdmission
    capacity: Capacity | None
    jobs: dict[str, tuple[tuple[int, float], ...]]


class BackendConfigError(ValueError):
    """A `[backends.NAME]` setting that cannot be used: `key` is its path under the table
    (`partition`, `accounts.vision`), `problem` says why in a sentence."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


class Backend(Executor, Protocol):
    """An executor that hands runs to another engine's scheduler (module docstring)."""

    @property
    def name(self) -> str:
        """The `[backends.NAME]` table that configured it."""

    @property
    def kind(self) -> BackendKind: ...

    def health(self) -> BackendHealth:
        """Reachable or not, in one call to the engine, with a deadline of a few seconds;
        never raises."""

    def capacity(self) -> Capacity:
        """The engine's nodes with GPUs (and their use), in one or two calls with a deadline
        of a few seconds; never raises (an engine that cannot be read: `Capacity.problem`)."""


class BackendOpener(Protocol):
    """`open_backend` of a backend's package: settings checked, nothing contacted yet (a
    backend that is down must not keep the daemon from starting). Raises BackendConfigError
    for a bad setting."""

    def __call__(
        self, name: str, settings: Mapping[str, object], context: BackendContext
    ) -> Backend: ...
