"""The daemon's backends (docs/backends.md), opened from gpupool.toml's `[backends.NAME]`
tables at start. Opening a backend checks its settings and contacts nothing: a backend that
is down never keeps the daemon from starting (its runs are UNKNOWN until it answers). The
engine and the service get the opened backends as a mapping of name -> Backend and never
import gpupool.backends.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from gpupool.core.backends import Backend, BackendConfigError, BackendContext
from gpupool.spec.pool_config import BackendTable, ConfigError, key_path

# The extra that installs what the Ray and Kubernetes backends import (pyproject.toml).
BACKENDS_EXTRA = "pip install 'gpupool[backends]'"
# The pool id of backends opened only to check their settings (`backend_problems`).
_CHECK_POOL_ID = "check"


def _open_each(
    tables: Sequence[BackendTable], pool_id: str, state_dir: Path
) -> tuple[dict[str, Backend], list[str]]:
    """Every backend that opens, and the problems of those that do not, each named
    `backends.NAME.KEY: problem`."""
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
                f"needs packages that are not installed here: {BACKENDS_EXTRA} ({exc})"
            )
    return opened, problems


def open_backends(
    tables: Sequence[BackendTable], pool_id: str, state_dir: Path, source: str
) -> dict[str, Backend]:
    """Every configured backend, opened (settings checked, nothing contacted); ConfigError
    naming each bad setting as `backends.NAME.KEY: problem`."""
    opened, problems = _open_each(tables, pool_id, state_dir)
    if problems:
        for backend in opened.values():
            backend.close()
        raise ConfigError(source, problems)
    return opened


def backend_problems(tables: Sequence[BackendTable]) -> list[str]:
    """What `open_backends` would refuse in `tables`, found before the daemon writes
    anything: each is opened (a backend may make its directories as it opens: in a scratch
    directory here, removed after) and closed again."""
    with tempfile.TemporaryDirectory(prefix="gpupool-backend-check-") as scratch:
        opened, problems = _open_each(tables, _CHECK_POOL_ID, Path(scratch))
        for backend in opened.values():
            backend.close()
    return problems
