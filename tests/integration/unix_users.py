"""Real, distinct Unix users for tests of a shared pool (a daemon run by root).

Tests create the users (`useradd --system --no-create-home`, idempotent) and act as one by
forking this test process and dropping to that user in the child (`as_user`): the venv's
python lives under /root (0700), so another user cannot exec it. The child may only use what
the parent has imported already (it cannot read the venv either): build requests in the
parent, send them in the child.

A pool other users reach lives under a directory they can pass through (`public_dir`), not
under pytest's tmp_path, which is root's alone.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ALICE = "gpupool-alice"
BOB = "gpupool-bob"


def need_root() -> None:
    """Fail in CI (CI=1), skip elsewhere, unless we are root: only root creates users."""
    if os.geteuid() == 0:
        return
    why = "needs root: creates Unix users and runs a shared-mode daemon"
    if os.environ.get("CI"):
        pytest.fail(f"{why}; CI must run the suite as root")
    pytest.skip(why)


def ensure_user(name: str) -> pwd.struct_passwd:
    """The passwd entry of `name`, creating the (system, home-less) user if missing."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    # Another test run may create it at the same moment: its failure is fine if it exists.
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/bin/sh", name],
        capture_output=True,
        check=False,
    )
    return pwd.getpwnam(name)


def free_uid(start: int = 59000) -> int:
    """A uid with no passwd entry."""
    uid = start
    while True:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
        uid += 1


def as_user(uid: int, gid: int, action: Callable[[], str]) -> str:
    """`action()`'s result, run in a forked child with only `uid`/`gid` (no supplementary
    groups). An exception in the child is raised here as an AssertionError with its
    traceback."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        code = 1
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            out = "ok\n" + action()
            code = 0
        except BaseException:
            out = "error\n" + traceback.format_exc()
        finally:
            try:
                with os.fdopen(w, "w") as f:
                    f.write(out)
            finally:
                os._exit(code)
    os.close(w)
    with os.fdopen(r) as f:
        got = f.read()
    os.waitpid(pid, 0)
    status, _, rest = got.partition("\n")
    if status != "ok":
        raise AssertionError(f"as uid {uid}: {rest or 'the child died'}")
    return rest


@contextmanager
def public_dir(prefix: str) -> Iterator[Path]:
    """A fresh directory under /tmp every user may pass through (0711), removed after."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        path.chmod(0o711)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def owned_dir(path: Path, user: pwd.struct_passwd, mode: int = 0o700) -> Path:
    """`path` made a directory of `user`'s with `mode`."""
    path.mkdir(exist_ok=True)
    os.chown(path, user.pw_uid, user.pw_gid)
    path.chmod(mode)
    return path
