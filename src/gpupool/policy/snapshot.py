"""The read-only world the policy decides on, and the decision it hands back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpupool.core.hardware import Node
from gpupool.core.job import Resources
from gpupool.policy.status import Status


@dataclass(frozen=True)
class PendingJob:
    id: int
    resources: Resources
    priority: int
    submit_time: float
    user: str = ""
    project: str = "default"
    time_limit_s: float | None = None


@dataclass(frozen=True)
class RunningJob:
    id: int
    node: str
    gpus: tuple[int, ...]
    resources: Resources
    start_time: float
    priority: int = 0
    user: str = ""
    project: str = "default"
    time_limit_s: float | None = None


@dataclass(frozen=True)
class Snapshot:
    """Nodes, what runs where, and what waits. `version` is the store's allocation version
    the snapshot was read at: a decision is committed only if it is still current."""

    nodes: tuple[Node, ...]
    pending: tuple[PendingJob, ...] = ()
    running: tuple[RunningJob, ...] = ()
    version: int = 0

    def used_gpus(self) -> dict[str, set[int]]:
        used: dict[str, set[int]] = {n.name: set() for n in self.nodes}
        for r in self.running:
            used.setdefault(r.node, set()).update(r.gpus)
        return used


@dataclass(frozen=True)
class Start:
    job_id: int
    node: str
    gpus: tuple[int, ...]


@dataclass(frozen=True)
class Decision:
    starts: tuple[Start, ...] = ()
    pending: Mapping[int, Status] = field(default_factory=dict)  # why each non-started job waits
