"""`gpupool server install-service`: the unit runs the pool as root with the flags given,
keeps jobs alive across a daemon restart, and is a unit systemd accepts."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpupool.cli.main import main


def _unit(capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    assert main(["server", "install-service", "--output", "-", *flags]) == 0
    return capsys.readouterr().out


def _exec_start(unit: str) -> str:
    return next(line for line in unit.splitlines() if line.startswith("ExecStart="))


def test_the_unit_runs_this_python_as_root_with_the_flags_given(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    unit = _unit(
        capsys,
        "--listen",
        "127.0.0.1:8765",
        "--db",
        "postgresql://gp@db/gp",
        "--server-name",
        "pool.example",
        "--server-name",
        "100%",
        "--gpus",
        "4xA100-80GB",
    )
    start = _exec_start(unit)
    assert start.startswith(
        f"ExecStart={sys.executable} -m gpupool server --state-dir /var/lib/gpupool "
    )
    for words in (
        "--listen 127.0.0.1:8765",
        "--gpus 4xA100-80GB",
        '--server-name pool.example --server-name "100%%"',  # systemd's specifier escaped
        "--db postgresql://gp@db/gp",
    ):
        assert words in start, start
    assert "--output" not in start and "install-service" not in start
    assert "User=root" in unit
    assert "KillMode=process" in unit  # the jobs' supervisors outlive a daemon restart
    assert "Delegate=yes" in unit  # its cgroup subtree is the daemon's: a cgroup per job
    assert "postgresql.service" in unit


def test_file_flags_are_written_absolute_and_the_state_dir_as_given(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nodes.yaml").write_text("nodes: []\n")
    start = _exec_start(_unit(capsys, "--state-dir", "state", "--inventory", "nodes.yaml"))
    assert f"--state-dir {tmp_path / 'state'}" in start
    assert f"--inventory {tmp_path / 'nodes.yaml'}" in start


def test_what_the_daemon_would_refuse_is_refused_before_a_unit_is_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "gpupool.service"
    code = main(["server", "install-service", "--output", str(target), "--listen", "0.0.0.0:9"])
    assert code == 2
    assert "not a loopback address" in capsys.readouterr().err
    assert not target.exists()
    code = main(["server", "install-service", "--output", str(target), "--db", "mysql://x/y"])
    assert code == 2
    assert not target.exists()


def test_systemd_accepts_the_unit(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (`make test` installs systemd as root)")
    target = tmp_path / "gpupool.service"
    assert (
        main(["server", "install-service", "--output", str(target), "--listen", "127.0.0.1:9"]) == 0
    )
    assert f"wrote {target}" in capsys.readouterr().out
    verified = subprocess.run(
        [analyze, "verify", str(target)], capture_output=True, text=True, timeout=60
    )
    problems = [
        line
        for line in (verified.stdout + verified.stderr).splitlines()
        if str(target) in line  # other units' complaints (this container's) are not ours
    ]
    assert verified.returncode == 0 or not problems, verified.stderr
    assert not problems, problems
