"""Where a pool keeps its state, and how every command finds it."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

SOCKET_NAME = "gpupool.sock"
DATABASE_NAME = "state.db"


def state_dir(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """--state-dir, else $GPUPOOL_STATE_DIR, else $XDG_DATA_HOME/gpupool (~/.local/share)."""
    env = os.environ if environ is None else environ
    if explicit:
        return Path(explicit).expanduser().absolute()
    if env.get("GPUPOOL_STATE_DIR"):
        return Path(env["GPUPOOL_STATE_DIR"]).expanduser().absolute()
    base = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME", "~")) / ".local" / "share")
    return (Path(base).expanduser() / "gpupool").absolute()


def socket_path(state: Path) -> Path:
    return state / SOCKET_NAME


def database_url(state: Path) -> str:
    return f"sqlite:///{state / DATABASE_NAME}"
