"""The state directory's modes as the daemon makes them (daemon/preflight.py)."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpupool.core.paths import PRIVATE_UMASK
from gpupool.daemon.preflight import DaemonError, make_state_dir, secure_state_dir


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def private_umask() -> Iterator[None]:
    old = os.umask(PRIVATE_UMASK)  # the daemon's
    try:
        yield
    finally:
        os.umask(old)


def test_new_parents_stay_passable_and_the_top_level_is_0711(
    tmp_path: Path, private_umask: None
) -> None:
    state = tmp_path / "a" / "b" / "state"
    make_state_dir(state)
    assert (mode(tmp_path / "a"), mode(tmp_path / "a" / "b")) == (0o755, 0o755)
    assert mode(state) == 0o700
    secure_state_dir(state)
    assert mode(state) == 0o711


def test_an_old_state_directory_loses_group_and_other_permissions(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "jobs" / "1").mkdir(parents=True)
    for path, m in [
        (state, 0o755),
        (state / "jobs", 0o755),
        (state / "jobs" / "1", 0o775),
    ]:
        path.chmod(m)
    files = {state / "state.db": 0o644, state / "jobs" / "1" / "launch.json": 0o664}
    for path, m in files.items():
        path.write_text("{}")
        path.chmod(m)
    (state / "link").symlink_to("/etc/passwd")
    secure_state_dir(state)
    assert mode(state) == 0o711
    assert (mode(state / "jobs"), mode(state / "jobs" / "1")) == (0o700, 0o700)
    assert [mode(p) for p in files] == [0o600, 0o600]
    assert mode(Path("/etc/passwd")) == 0o644  # a link is not followed


def test_a_secured_state_directory_is_not_walked_again(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o711)
    mine = state / "gpupool.toml"  # e.g. a config an admin chose to keep readable
    mine.write_text("")
    mine.chmod(0o644)
    secure_state_dir(state)
    assert mode(mine) == 0o644


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: makes a file of root's in nobody's dir")
def test_an_entry_that_cannot_be_made_private_stops_the_start() -> None:
    state = Path(tempfile.mkdtemp(prefix="gpupool-modes-", dir="/tmp"))
    try:
        theirs = state / "state.db"
        theirs.write_text("")
        theirs.chmod(0o644)  # root's: nobody, running the daemon, may not change it
        os.chown(state, 65534, 65534)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - reports through the pipe
            out = "no error"
            try:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                secure_state_dir(state)
            except DaemonError as exc:
                out = str(exc)
            finally:
                os.write(w, out.encode())
                os._exit(0)
        os.close(w)
        with os.fdopen(r) as f:
            said = f.read()
        os.waitpid(pid, 0)
        assert said == f"--state-dir {state}: cannot make {theirs} private: Operation not permitted"
        assert mode(theirs) == 0o644 and mode(state) != 0o711
    finally:
        shutil.rmtree(state)
