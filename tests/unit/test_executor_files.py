"""The executor's file and /proc helpers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpupool.executor.files import (
    atomic_write_json,
    boot_id,
    create_json,
    proc_stat,
    process_alive,
    read_json,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


@pytest.mark.parametrize("durable", [False, True])
def test_atomic_write_then_read(tmp_path: Path, durable: bool) -> None:
    path = tmp_path / "x.json"
    atomic_write_json(path, {"a": 1, "b": [None, "é"]}, durable=durable)
    atomic_write_json(path, {"a": 2}, durable=durable)
    assert read_json(path) == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]  # no temporary left behind


def test_create_json_wins_once(tmp_path: Path) -> None:
    path = tmp_path / "claim.json"
    assert create_json(path, {"who": 1})
    assert not create_json(path, {"who": 2})
    assert read_json(path) == {"who": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["claim.json"]


def test_read_json_tolerates_missing_torn_and_non_objects(tmp_path: Path) -> None:
    assert read_json(tmp_path / "missing.json") is None
    (tmp_path / "torn.json").write_text('{"a": ')
    assert read_json(tmp_path / "torn.json") is None
    (tmp_path / "list.json").write_text("[1]")
    assert read_json(tmp_path / "list.json") is None


def test_proc_stat_of_self_and_of_nobody() -> None:
    st = proc_stat(os.getpid())
    assert st is not None and st.state in ("R", "S") and st.start_ticks > 0
    assert proc_stat(2**22 + 1) is None  # above pid_max's ceiling


def test_proc_stat_survives_odd_process_names(tmp_path: Path) -> None:
    # comm may contain spaces and ')': the parser must split after the last ')'.
    exe = tmp_path / "a) b ("
    exe.symlink_to("/bin/sleep")
    proc = subprocess.Popen([str(exe), "infinity"])
    try:
        st = proc_stat(proc.pid)
        # A live process's state: running, sleeping, or (a just-started process under load,
        # still paging in its binary) in uninterruptible disk sleep, as CI saw once.
        assert st is not None and st.state in ("R", "S", "D")
        assert process_alive(proc.pid, st.start_ticks)
    finally:
        proc.kill()
        proc.wait()


def test_process_alive_checks_start_ticks_zombies_and_boot() -> None:
    proc = subprocess.Popen(["sleep", "infinity"])
    st = proc_stat(proc.pid)
    assert st is not None
    assert process_alive(proc.pid, st.start_ticks)
    assert process_alive(proc.pid, st.start_ticks, boot_id())
    assert not process_alive(proc.pid, st.start_ticks + 1)  # pid reused by another process
    assert not process_alive(proc.pid, st.start_ticks, "another-boot")
    proc.kill()
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # dead but not reaped: a zombie
    assert not process_alive(proc.pid, st.start_ticks)
    proc.wait()
    assert not process_alive(proc.pid, st.start_ticks)
