"""Where a pool keeps its state, and how every command finds it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from gpupool.core.state_location import SOCKET_NAME, state_dir_text

DATABASE_NAME = "state.db"

# The state directory's modes (docs/security.md, "State files"). Its top level can be
# passed through by anyone, to reach the socket by its name, and listed by nobody else;
# the socket takes every local user (the API decides who may do what); everything else in
# it (the database and its WAL, launch.json with the submitter's environment, job logs) is
# its owner's alone.
TOP_MODE = 0o711
SOCKET_MODE = 0o666
DIR_MODE = 0o700
FILE_MODE = 0o600
PARENT_MODE = 0o755  # parents the daemon makes for a new state directory
PRIVATE_UMASK = 0o077  # the daemon's: whatever it or SQLite creates is FILE_MODE/DIR_MODE
# Directories below the top that are TOP_MODE too: passable, so that a job reaches its own
# entry by name (its GPUPOOL_CHECKPOINT_DIR, executor/checkpoints.py) and lists no other's.
CHECKPOINTS_DIR = "checkpoints"
MPS_DIR = "mps"  # the MPS control daemons' pipes, which a sharing job's CUDA must reach
PASSABLE_DIRS = (CHECKPOINTS_DIR, MPS_DIR)


def state_dir(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """--state-dir, else $GPUPOOL_STATE_DIR, else $XDG_DATA_HOME/gpupool (~/.local/share)."""
    return Path(state_dir_text(explicit, environ))


def socket_path(state: Path) -> Path:
    return state / SOCKET_NAME


def database_url(state: Path) -> str:
    return f"sqlite:///{state / DATABASE_NAME}"
