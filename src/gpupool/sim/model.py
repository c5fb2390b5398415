"""What the simulator reads (a trace, a cluster) and what it hands back (per-job records and
a timeline). Plain data: loaders fill the first, the event loop the second, metrics and
reports read both."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpupool.core.hardware import Node
from gpupool.core.project import Project
from gpupool.policy.node_facts import NodeFacts


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace. Times are seconds from the trace's first submission."""

    id: int
    submit_s: float
    duration_s: float  # run time on its GPUs, without queueing or restarts
    gpus: int
    user: str = ""
    project: str = "default"
    time_limit_s: float | None = None  # as the user asked (--time); None: not given
    gpu_memory_bytes: int | None = None  # fractional: GPU memory instead of whole GPUs
    # Where it runs: None, the pool's own machine (`SimCluster.nodes`); else the backend
    # of `SimCluster.backends` it names (docs/backends.md, admission by the pool's policy).
    backend: str | None = None


@dataclass(frozen=True)
class Trace:
    jobs: tuple[TraceJob, ...]  # sorted by submit_s, then id
    name: str = ""
    # Rows left out, by reason ("no GPUs", "zero duration", ...): said in the report.
    skipped: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class SimBackend:
    """A backend whose jobs the pool admits (engine/admission.py): its engine's nodes, named
    `BACKEND/node` as the daemon names them, and each project's quota there (none where not
    named: it only borrows)."""

    nodes: tuple[Node, ...]
    quotas: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class SimCluster:
    name: str
    nodes: tuple[Node, ...]  # the pool's own machine(s)
    projects: Mapping[str, Project] = field(default_factory=dict)  # quotas (philly-vcs)
    # Backends beside them, by name: each decided by a pass of its own, as the daemon does.
    backends: Mapping[str, SimBackend] = field(default_factory=dict)

    @property
    def gpus(self) -> int:
        """The pool's own GPUs (a backend's are `all_gpus`'s)."""
        return NodeFacts.of(self.nodes).total_gpus  # asked every pass: cached per nodes tuple

    @property
    def all_gpus(self) -> int:
        return self.gpus + sum(NodeFacts.of(b.nodes).total_gpus for b in self.backends.values())


@dataclass
class JobRecord:
    """What happened to one trace job in one replay."""

    id: int
    submit_s: float
    duration_s: float
    gpus: int
    project: str
    user: str
    first_start_s: float | None = None
    end_s: float | None = None  # None: still unfinished when the replay stopped
    queue_s: float = 0.0  # all time spent waiting: before the first start and after requeues
    preemptions: int = 0
    lost_gpu_s: float = 0.0  # GPU-seconds of work redone or spent restarting after preemptions
    run_gpu_s: float = 0.0  # GPU-seconds allocated to it in all attempts (work + lost)

    @property
    def jct_s(self) -> float | None:
        return None if self.end_s is None else self.end_s - self.submit_s


@dataclass(frozen=True)
class Sample:
    """The cluster at one moment (the report's time series)."""

    time_s: float
    queued_jobs: int
    busy_gpus: float
    gpus_by_project: Mapping[str, float]


@dataclass
class SimResult:
    policy: str
    records: list[JobRecord]
    samples: list[Sample]
    capacity_gpus: int
    load: float  # offered load actually replayed (GPU-seconds asked per second / capacity)
    quotas: Mapping[str, float]  # project -> guaranteed GPUs (empty: no quotas)
    wall_s: float = 0.0  # how long the replay took
    decide_calls: int = 0
    refused: int = 0  # trace jobs that could never run on this cluster (not replayed)
    # GPU-seconds idle while a job that could use them waited, by cause (IdleCause's values;
    # policy/idle_waiting.py says the rule).
    idle_waiting_gpu_s: Mapping[str, float] = field(default_factory=dict)
