"""Which package opens a backend of each kind (core/backends.py: `BackendOpener`).

Imported lazily, by kind, so that a pool without a Ray backend never imports ray, and the
CLI never imports any backend.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from gpupool.core.backends import Backend, BackendContext, BackendKind, BackendOpener

_PACKAGES: dict[BackendKind, str] = {
    BackendKind.SLURM: "gpupool.backends.slurm",
    BackendKind.RAY: "gpupool.backends.ray",
    BackendKind.KUBERNETES: "gpupool.backends.kubernetes",
}


def opener_for(kind: BackendKind) -> BackendOpener:
    opener: BackendOpener = importlib.import_module(_PACKAGES[kind]).open_backend
    return opener


def open_backend(
    kind: BackendKind, name: str, settings: Mapping[str, object], context: BackendContext
) -> Backend:
    """A backend of `kind` from its `[backends.NAME]` settings (BackendConfigError when one
    is wrong); nothing is contacted yet."""
    return opener_for(kind)(name, settings, context)
