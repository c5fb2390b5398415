"""The pool's backends and their health, as `GET /v1/backends` (`gpupool backends`) lists
them, and what a submission to an unreachable backend is told. Each health call runs in a
thread of its own with a deadline: a backend that hangs never holds up a listing."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable, Mapping

from gpupool.core.backends import Backend, BackendHealth, summary_line
from gpupool.core.execution import Capabilities
from gpupool.core.wire_shapes import BackendRowWire, BackendsWire, SubmitWarningWire
from gpupool.service.pool_service import PoolService

# How long `GET /v1/backends` waits for all the backends' health together.
HEALTH_DEADLINE_S = 5.0
# A submission to a backend is told when the backend cannot be reached now: its health as
# last asked (by `gpupool backends` or a submission) within SUBMIT_HEALTH_FRESH_S, else asked
# then, waiting at most SUBMIT_HEALTH_DEADLINE_S (a burst of submissions asks once).
SUBMIT_HEALTH_FRESH_S = 30.0
SUBMIT_HEALTH_DEADLINE_S = 2.0


def capability_names(caps: Capabilities) -> list[str]:
    """What an executor declares it can do, by name (`multi_node`, `containers`, ...)."""
    return [name for name, value in vars(caps).items() if value is True]


def _health(
    backends: Mapping[str, Backend], deadline_s: float = HEALTH_DEADLINE_S
) -> dict[str, BackendHealth]:
    """Every backend's health at once, each in a thread of its own, waiting at most
    `deadline_s` in all: one that has not answered by then is shown unreachable."""
    if not backends:
        return {}
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=len(backends))
    try:
        futures = {name: pool.submit(b.health) for name, b in backends.items()}
        concurrent.futures.wait(futures.values(), timeout=deadline_s)
        out: dict[str, BackendHealth] = {}
        for name, future in futures.items():
            if not future.done():
                out[name] = BackendHealth(False, f"no answer within {deadline_s:g}s")
            elif future.exception() is not None:
                out[name] = BackendHealth(False, f"health check failed: {future.exception()}")
            else:
                out[name] = future.result()
        return out
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


class RecentHealth:
    """Each backend's health as last asked, and when (monotonic seconds): what a submission
    to it is told (`submit_warnings`)."""

    def __init__(self, service: PoolService, clock: Callable[[], float] = time.monotonic) -> None:
        self.service = service
        self.clock = clock
        self._said: dict[str, tuple[BackendHealth, float]] = {}
        self._lock = threading.Lock()

    def record(self, found: Mapping[str, BackendHealth]) -> None:
        now = self.clock()
        with self._lock:
            self._said.update((name, (health, now)) for name, health in found.items())

    def of(self, name: str) -> BackendHealth | None:
        """Backend `name`'s health, as last asked if that is recent, else asked now (at most
        SUBMIT_HEALTH_DEADLINE_S); None for a backend that is not configured."""
        backend = self.service.backends.get(name)
        if backend is None:
            return None
        with self._lock:
            said = self._said.get(name)
        if said is not None and self.clock() - said[1] < SUBMIT_HEALTH_FRESH_S:
            return said[0]
        found = _health({name: backend}, SUBMIT_HEALTH_DEADLINE_S)
        self.record(found)
        return found[name]


def submit_warnings(recent: RecentHealth, job_id: int, backend: str) -> list[SubmitWarningWire]:
    """What a submission of job `job_id` to `backend` is told besides its id: that the
    backend cannot be reached now (the job is queued all the same), as data with its words."""
    health = recent.of(backend)
    if health is None or health.reachable:
        return []
    summary = summary_line(health.summary)
    return [
        {
            "code": "backend_unreachable",
            "backend": backend,
            "summary": summary,
            "message": f"job {job_id} is queued, but backend {backend} cannot be reached now "
            f"({summary}); `gpupool backends` shows its health",
        }
    ]


def backends_to_wire(service: PoolService, recent: RecentHealth | None = None) -> BackendsWire:
    """The local pool first (kind local), then each backend: name, kind, reachable,
    capabilities, its active jobs, and what its health says (kept in `recent`)."""
    active: dict[str | None, int] = {}
    active.update(service.active_jobs_by_backend())
    inventory = service.inventory
    rows: list[BackendRowWire] = [
        {
            "name": "local",
            "kind": "local",
            "reachable": True,
            "capabilities": capability_names(service.executor.capabilities),
            "jobs": active.get(None, 0),
            "summary": f"{len(inventory.nodes)} node(s), {inventory.total_gpus} GPUs "
            f"({inventory.source})",
        }
    ]
    health = _health(service.backends)
    if recent is not None:
        recent.record(health)
    for name, backend in sorted(service.backends.items()):
        said = health[name]
        rows.append(
            {
                "name": name,
                "kind": backend.kind.value,
                "reachable": said.reachable,
                "capabilities": capability_names(backend.capabilities),
                "jobs": active.get(name, 0),
                "summary": said.summary,
            }
        )
    return {"backends": rows}
