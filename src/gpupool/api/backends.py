"""The daemon's backends (docs/backends.md): opened from gpupool.toml's `[backends.NAME]`
tables at start, and listed with their health by `GET /v1/backends` (`gpupool backends`).

Opening a backend checks its settings and contacts nothing: a backend that is down never
keeps the daemon from starting (its runs are UNKNOWN until it answers). The engine gets the
opened backends as a mapping of name -> Backend and never imports gpupool.backends.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Mapping, Sequence
from pathlib import Path

from fastapi import APIRouter

from gpupool.core.backends import Backend, BackendConfigError, BackendContext, BackendHealth
from gpupool.core.execution import Capabilities
from gpupool.engine import PoolService
from gpupool.engine.projects import BackendTable, ConfigError, key_path

# How long `GET /v1/backends` waits for all the backends' health together.
HEALTH_DEADLINE_S = 5.0


def open_backends(
    tables: Sequence[BackendTable], pool_id: str, state_dir: Path, source: str
) -> dict[str, Backend]:
    """Every configured backend, opened (settings checked, nothing contacted); ConfigError
    naming each bad setting as `backends.NAME.KEY: problem`."""
    from gpupool.backends.registry import open_backend

    opened: dict[str, Backend] = {}
    problems: list[str] = []
    for table in tables:
        context = BackendContext(pool_id, state_dir / "backends" / table.name)
        try:
            opened[table.name] = open_backend(table.kind, table.name, table.settings, context)
        except BackendConfigError as exc:
            problems.append(
                f"{key_path('backends', table.name, *exc.key.split('.'))}: {exc.problem}"
            )
        except ImportError as exc:  # its package, or what it needs (ray, kubernetes), is absent
            problems.append(
                f"{key_path('backends', table.name, 'kind')}: the {table.kind.value} backend "
                f"cannot be loaded here: {exc}"
            )
    if problems:
        raise ConfigError(source, problems)
    return opened


def capability_names(caps: Capabilities) -> list[str]:
    """What an executor declares it can do, by name (`multi_node`, `containers`, ...)."""
    return [name for name, value in vars(caps).items() if value is True]


def _health(backends: Mapping[str, Backend]) -> dict[str, BackendHealth]:
    """Every backend's health at once, each in a thread of its own, waiting at most
    HEALTH_DEADLINE_S in all: one that has not answered by then is shown unreachable."""
    if not backends:
        return {}
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=len(backends))
    try:
        futures = {name: pool.submit(b.health) for name, b in backends.items()}
        concurrent.futures.wait(futures.values(), timeout=HEALTH_DEADLINE_S)
        out: dict[str, BackendHealth] = {}
        for name, future in futures.items():
            if not future.done():
                out[name] = BackendHealth(False, f"no answer within {HEALTH_DEADLINE_S:g}s")
            elif future.exception() is not None:
                out[name] = BackendHealth(False, f"health check failed: {future.exception()}")
            else:
                out[name] = future.result()
        return out
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def backends_to_wire(service: PoolService) -> dict[str, object]:
    """The local pool first (kind local), then each backend: name, kind, reachable,
    capabilities, its active jobs, and what its health says."""
    active: dict[str | None, int] = {}
    for job in service.engine.view(fresh=False).jobs.values():
        if not job.state.terminal:
            active[job.spec.backend] = active.get(job.spec.backend, 0) + 1
    inventory = service.inventory
    rows: list[dict[str, object]] = [
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


def add_backend_routes(api: APIRouter, service: PoolService) -> None:
    @api.get("/v1/backends")
    def backends() -> dict[str, object]:
        """The pool's backends with their health (a sync route: run in a worker thread,
        never on the engine's; each health call has its own deadline). Everyone may list
        them: names, kinds and a summary, no job's command or environment."""
        return backends_to_wire(service)
