"""What a submission takes from the process that submits: its umask and its directory.

Standard library only: the CLI (`gpupool submit`) and the Python SDK (gpupool.sdk) both
read the submitter's side of a spec here, so a job submitted either way gets the same files
and the same working directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def current_umask() -> int:
    """This process's umask, which the job gets. From /proc (Linux 4.7+): read without
    changing it; else by setting it and back (a brief window another thread could see)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def absolute_workdir(merged: Mapping[str, Any]) -> dict[str, Any]:
    """A relative workdir is taken from where the user submits, as sbatch --chdir does;
    `~` is left for the spec's check (it is not expanded)."""
    out = dict(merged)
    workdir = out.get("workdir")
    if isinstance(workdir, str) and workdir and not workdir.startswith("~"):
        if not os.path.isabs(workdir):
            out["workdir"] = os.path.abspath(workdir)
    return out


_environment_seen: list[tuple[dict[bytes, bytes], dict[str, str]]] = []


def submitter_environment() -> dict[str, str]:
    """This process's environment (`os.environ`) as a dict, for a spec's `base_env`. Not to
    be changed: while the environment is the same, the same dict is given again.

    Why: a sweep builds thousands of jobs in one environment, and decoding its ~40 variables
    for each was half of what building a job cost the SDK (docs/benchmarks.md, issue 16).
    The raw bytes os.environ keeps are copied and compared instead (C, no decoding); any
    change, through os.environ or putenv's mirror of it, shows there."""
    raw = getattr(os.environ, "_data", None)  # CPython's os._Environ; else decode each time
    if not isinstance(raw, dict):
        return dict(os.environ)
    snapshot = dict(raw)
    seen = _environment_seen[0] if _environment_seen else None
    if seen is not None and seen[0] == snapshot:
        return seen[1]
    decoded = dict(os.environ)
    _environment_seen[:] = [(snapshot, decoded)]
    return decoded
