"""Each job's checkpoint directory: `<state dir>/checkpoints/<job id>`, the same for every
attempt of the job (a retry, a preemption's requeue), given to the job as
`GPUPOOL_CHECKPOINT_DIR`.

Modes (docs/security.md): `checkpoints/` is `0711` and the daemon's, so a job can reach its
own directory by name but nobody can list the others; `checkpoints/<id>/` is `0700` and the
job's owner's (in shared mode the daemon runs as root and gives it to the owner), so only the
job's user reads or writes it. Nothing is ever deleted here by the pool.
"""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path

from gpupool.core.paths import CHECKPOINTS_DIR, DIR_MODE, TOP_MODE

CHECKPOINT_ENV = "GPUPOOL_CHECKPOINT_DIR"


def checkpoint_dir(state_dir: Path, job_id: int) -> Path:
    return state_dir / CHECKPOINTS_DIR / str(int(job_id))


def ensure_checkpoint_dir(state_dir: Path, job_id: int, owner: str | None) -> Path:
    """Make the job's directory if it is not there (at its first launch) and return it.
    `owner`: the user the job runs as when that is not the daemon's (shared mode): the
    directory is theirs. A directory already there is left as it is, but for its owner and
    mode, set again (a state dir secured at start loses the parent's 0711: preflight.py)."""
    parent = state_dir / CHECKPOINTS_DIR
    parent.mkdir(mode=TOP_MODE, exist_ok=True)
    if stat.S_IMODE(os.lstat(parent).st_mode) != TOP_MODE:
        os.chmod(parent, TOP_MODE)
    path = checkpoint_dir(state_dir, job_id)
    path.mkdir(mode=DIR_MODE, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):  # only the daemon writes in `parent`: never expected
        raise OSError(f"{path} is not a directory")
    if owner is not None:
        entry = pwd.getpwnam(owner)
        if (info.st_uid, info.st_gid) != (entry.pw_uid, entry.pw_gid):
            os.chown(path, entry.pw_uid, entry.pw_gid, follow_symlinks=False)
    if stat.S_IMODE(info.st_mode) != DIR_MODE:
        os.chmod(path, DIR_MODE)
    return path
