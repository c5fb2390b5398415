"""The daemon's log, read as an admin reads it: timestamped lines that say what happened."""

from __future__ import annotations

import getpass
import re
import socket
import subprocess
import sys
from pathlib import Path

from integration.pool_harness import Pool, until_file

ME = getpass.getuser()
HOST = socket.gethostname()
STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ")


def test_the_log_tells_start_jobs_changes_and_stop_with_timestamps(tmp_path: Path) -> None:
    pool = Pool(tmp_path / "pool", gpus="1xA100-80GB")
    pool.state_dir.mkdir(parents=True)
    (pool.state_dir / "gpupool.toml").write_text("[projects.vision]\nquota = 4\n")
    flag = tmp_path / "go"
    try:
        pool.start()
        done = pool.submit("--gpus", "1", "--", "true")
        assert pool.wait(done).state == "SUCCEEDED"
        failed = pool.submit("--gpus", "1", "--", "sh", "-c", "exit 3")
        assert pool.wait(failed).state == "FAILED"
        pool.cli("project", "set", "vision", "--quota", "1", "--limit", "1", check=True)
        running = pool.submit("--gpus", "1", "--", *until_file(flag))
        pool.wait_state(running, "RUNNING")
        pool.stop()
        assert pool.proc is not None and pool.proc.returncode == 0
        log = pool.daemon_log()
    finally:
        flag.touch()
        pool.cleanup()

    lines = log.splitlines()
    assert lines and all(STAMP.match(line) for line in lines), log
    text = "\n".join(line[20:] for line in lines)  # without the timestamps
    for expected in (
        f"started (pid {pool.proc.pid}) on 1 GPU (1x A100-80GB, 1 node {HOST}, declared",
        "gpupool.toml: applied 0 departments, 1 project, 0 user defaults",
        "warning: project vision's quota of 4 GPUs exceeds the pool's 1 GPU",
        f"job {done} submitted by {ME} to project default: 1 GPU",
        f"job {done} started on {HOST}:0",
        f"job {done} SUCCEEDED (exit 0) after ",
        f"job {failed} FAILED (exit 3) after ",
        f"project vision changed by {ME}: quota 4 -> 1, limit none -> 1",
        f"job {running} started on {HOST}:0",
        "stopping: 1 job keeps running under its supervisor",
        "stopped",
    ):
        assert expected in text, (expected, log)
    # No Python reprs, no "(s)" plurals, no "1 GPUs".
    for wrong in ("Project(", "Job(", "(s)", " 1 GPUs", "JobState."):
        assert wrong not in text, (wrong, log)


def test_listen_help_says_what_is_served() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gpupool", "server", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0
    help_text = " ".join(proc.stdout.split())
    assert "JSON API" in help_text
    # The dashboard is served (api/dashboard.py), at the root of the TCP listener.
    assert "web dashboard at http://HOST:PORT/" in help_text
