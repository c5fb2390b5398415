"""The Ray backend (docs/backends.md, "Ray"): runs as Ray jobs on an existing Ray cluster.

`open_backend` checks the `[backends.NAME]` settings and contacts nothing; backend.py
imports Ray's client, so it is imported here only when a Ray backend is opened.

This package is `gpupool.backends.ray`: its modules import Ray itself absolutely
(`import ray`), and none of them is named `ray.py`.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpupool.backends.ray.settings import parse_settings
from gpupool.core.backends import Backend, BackendContext


def open_backend(name: str, settings: Mapping[str, object], context: BackendContext) -> Backend:
    """A Ray backend from its checked settings (BackendConfigError for a bad one)."""
    checked = parse_settings(settings)
    from gpupool.backends.ray.backend import RayBackend

    return RayBackend(name, checked, context)
