"""The backends' nodes as GET /v1/gpus gives them (`backends`): what the engine publishes of
each backend (core/backends.py `BackendNodes`) in the one shape the CLI, the dashboard and scripts
read (core/wire_shapes.py's BackendCapacityWire). /metrics reads the same rows
(`backend_node_rows`), so the two never count a node differently.

A node is named as the pool names it everywhere a user sees it, `BACKEND/node`
(core/backends.py's `node_name`). A node the pool's jobs are admitted to but that the
engine's last report does not list (the report failed, or the node left) is still shown,
with state "unknown" and no GPUs: the pool's jobs there are not hidden by a failed read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpupool.core.backends import BackendNodes, EngineNode, node_name
from gpupool.core.wire_shapes import BackendCapacityWire, BackendNodeWire

NOT_READ = "not read yet"  # a backend's `problem` before its engine's first report
UNKNOWN_STATE = "unknown"  # a node the pool's jobs hold that the last report does not list
NOT_REPORTED = "not in the engine's last report"


@dataclass(frozen=True)
class BackendNodeRow:
    """One node of a backend with the pool's jobs on it (job id, GPUs)."""

    backend: str
    node: EngineNode | None  # None: not in the engine's last report (UNKNOWN_STATE)
    engine_name: str
    jobs: tuple[tuple[int, float], ...]

    @property
    def name(self) -> str:
        return node_name(self.backend, self.engine_name)

    @property
    def state(self) -> str:
        return UNKNOWN_STATE if self.node is None else self.node.state.value

    @property
    def gpus_pool(self) -> float:
        return sum(gpus for _, gpus in self.jobs)


def problem_of(backend: BackendNodes) -> str:
    """Why the backend's nodes are not known ("" when they are)."""
    return NOT_READ if backend.capacity is None else backend.capacity.problem


def backend_node_rows(backend: BackendNodes) -> list[BackendNodeRow]:
    """The backend's reported nodes in the engine's order, then any node only the pool's
    jobs name (by name)."""
    reported = () if backend.capacity is None else backend.capacity.nodes
    rows = [BackendNodeRow(backend.name, n, n.name, backend.jobs.get(n.name, ())) for n in reported]
    listed = {n.name for n in reported}
    for engine_name in sorted(set(backend.jobs) - listed):
        rows.append(BackendNodeRow(backend.name, None, engine_name, backend.jobs[engine_name]))
    return rows


def _node_to_wire(row: BackendNodeRow) -> BackendNodeWire:
    n = row.node
    return {
        "name": row.name,
        "backend": row.backend,
        "state": row.state,
        "detail": NOT_REPORTED if n is None else n.detail,
        "gpus": 0 if n is None else n.gpus,
        "gpus_used": 0 if n is None else n.gpus_used,
        "gpus_pool": row.gpus_pool,
        "jobs": [{"id": job_id, "gpus": gpus} for job_id, gpus in row.jobs],
        "gpu_model": "" if n is None else n.gpu_model,
        "gpu_memory_bytes": 0 if n is None else n.gpu_memory_bytes,
        "cpus": 0 if n is None else n.cpus,
        "memory_bytes": 0 if n is None else n.memory_bytes,
    }


def backends_to_wire(backends: Sequence[BackendNodes]) -> list[BackendCapacityWire]:
    return [
        {
            "name": b.name,
            "admission": b.admission.mode.value,
            "problem": problem_of(b),
            "quotas": {project: float(gpus) for project, gpus in b.admission.quotas.items()},
            "nodes": [_node_to_wire(row) for row in backend_node_rows(b)],
        }
        for b in backends
    ]
