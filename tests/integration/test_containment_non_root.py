"""Per-job cgroups under a daemon that is not root (personal mode): in a v1 subtree root
delegated to its user (`cgroup_plan.delegate_v1`, what systemd's Delegate=yes does on v2),
and without one, where jobs still run and the daemon says what it cannot enforce.

The daemon runs as a real other user (setpriv), from an interpreter that user may execute:
the venv's own when others can reach it, else the system's of the same version (the venv's
packages then come by PYTHONPATH).
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.integration.pool_harness import Pool, wait_for
from tests.integration.real_users import ensure_user, public_dir, require_root
from tests.integration.test_containment import ESCAPER, _recorded

import gpupool
from gpupool.executor.cgroup_plan import CgroupMounts
from gpupool.executor.files import process_alive

USER = "gpupool-cgroup"
PY_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"


def _reachable(path: Path, need: int) -> bool:
    """Whether a user who is neither owner nor in the group may use `path` (every directory
    above it passable, the file itself with permission bits `need` for others)."""
    path = path.resolve()
    for parent in path.parents:
        if not parent.stat().st_mode & stat.S_IXOTH:
            return False
    return bool(path.stat().st_mode & need)


def _runtime() -> tuple[str, list[str]]:
    """(an interpreter other users may run, what it needs on PYTHONPATH)."""
    source = Path(gpupool.__file__).resolve().parents[1]
    packages = Path(sysconfig.get_paths()["purelib"])
    for path in (source, packages):
        if not _reachable(path, stat.S_IROTH):
            pytest.fail(
                f"the non-root daemon cannot read {path}: clone the repository where "
                "other users can read it (not under a 0700 home)"
            )
    for python in (Path(sys.executable), Path(f"/usr/bin/python{PY_VERSION}")):
        if python.exists() and _reachable(python, stat.S_IXOTH):
            return str(python.resolve()), [str(source), str(packages)]
    pytest.fail(f"no Python {PY_VERSION} other users may run (apt-get install python{PY_VERSION})")


class UserPool(Pool):
    """A pool whose daemon runs as `USER`; its jobs (as that user) run `python`."""

    def __init__(self, root: Path, uid: int, gid: int, **kwargs: object) -> None:
        super().__init__(root, **kwargs)  # type: ignore[arg-type]
        self.uid, self.gid = uid, gid
        self.python, self.path = _runtime()

    def wrap(self, cmd: list[str]) -> list[str]:
        ids = ["--reuid", str(self.uid), "--regid", str(self.gid), "--clear-groups"]
        return ["setpriv", *ids, self.python, *cmd[1:]]

    def daemon_env(self) -> dict[str, str]:
        return {**self.env, "PYTHONPATH": os.pathsep.join(self.path), "HOME": "/"}


@pytest.fixture
def user_pool_root() -> Iterator[tuple[Path, int, int]]:
    require_root()
    pw = ensure_user(USER)
    with public_dir("gpupool-cg-") as root:
        shutil.chown(root, pw.pw_uid, pw.pw_gid)
        yield root, pw.pw_uid, pw.pw_gid


def _undelegate(uid: int) -> None:
    mounts = CgroupMounts.parse(Path("/proc/mounts").read_text())
    for mount in [*mounts.v1.values(), *([mounts.unified] if mounts.unified else [])]:
        delegated = Path(mount, "gpupool", f"user-{uid}")
        for pool in delegated.glob("pool-*") if delegated.is_dir() else []:
            pool.rmdir()
        if delegated.is_dir():
            delegated.rmdir()


def test_a_delegated_non_root_daemon_contains_its_jobs_and_enforces_their_limits(
    user_pool_root: tuple[Path, int, int],
) -> None:
    root, uid, gid = user_pool_root
    pool = UserPool(root, uid, gid, gpus="1xA100-80GB")
    # As an admin would: root hands the user's daemon a subtree.
    delegated = pool.cli("server", "delegate-cgroups", "--user", USER)
    assert delegated.returncode == 0, delegated.stderr
    assert f"delegated to {USER}" in delegated.stdout and f"user-{uid}" in delegated.stdout
    pool.start()
    try:
        log = pool.daemon_log()
        assert "personal mode" in log and "each job runs in a cgroup of its own" in log, log
        escaper, pids, beats = (root / n for n in ("e.py", "pids", "beats"))
        escaper.write_text(ESCAPER)
        job = pool.submit("--gpus", "1", "--", pool.python, str(escaper), str(pids), str(beats))
        wait_for(lambda: len(_recorded(pids)) >= 5, 60, "the escaper's processes")
        pool.cancel(job)
        assert pool.wait(job).state == "CANCELLED"
        assert [p for p, t in _recorded(pids) if process_alive(p, t)] == []
        hog = pool.submit("--mem", "64M", "--", pool.python, "-c", "b = bytearray(300 << 20)")
        done = pool.wait(hog)
        assert (done.state, done.reason) == ("FAILED", "OutOfMemory")
    finally:
        pool.cleanup()
        _undelegate(uid)


def test_a_non_root_daemon_without_a_delegated_cgroup_says_what_it_cannot_enforce(
    user_pool_root: tuple[Path, int, int],
) -> None:
    root, uid, gid = user_pool_root
    _undelegate(uid)
    pool = UserPool(root, uid, gid, gpus="1xA100-80GB").start()
    try:
        log = pool.daemon_log()
        assert "jobs run WITHOUT cgroups" in log and "--mem and --cpus are not enforced" in log
        job = pool.submit("--mem", "64M", "--", pool.python, "-c", "print('ran')")
        assert pool.wait(job).state == "SUCCEEDED"  # it still runs
        assert "ran" in pool.log(job)
    finally:
        pool.cleanup()
