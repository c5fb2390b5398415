"""The Slurm backend (backend.py): `[backends.NAME]` tables of kind "slurm"."""

from __future__ import annotations

from collections.abc import Mapping

from gpupool.backends.slurm.backend import SlurmBackend
from gpupool.backends.slurm.settings import parse_settings
from gpupool.core.backends import Backend, BackendContext


def open_backend(name: str, settings: Mapping[str, object], context: BackendContext) -> Backend:
    """Settings checked (BackendConfigError names a bad key); nothing contacted yet."""
    return SlurmBackend(name, parse_settings(settings), context)
