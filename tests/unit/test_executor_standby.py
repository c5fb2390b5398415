"""The standby supervisor: started ahead of time, handed the next job, gone with its daemon."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from gpupool.core.execution import RunState
from gpupool.executor import LocalExecutor


def _wait_exit(ex: LocalExecutor, job_id: int, timeout: float = 20.0):  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        rec = ex.read_exit(job_id)
        if rec is not None:
            return rec
        time.sleep(0.02)
    raise TimeoutError(job_id)


def test_a_launch_leaves_a_standby_that_runs_the_next_job(tmp_path: Path) -> None:
    ex = LocalExecutor(tmp_path / "state")
    try:
        ex.start(1, ["true"], {}, str(tmp_path), None, 1.0)
        standby = ex._standby
        assert standby is not None and standby.poll() is None
        ex.start(2, [sys.executable, "-c", "import sys; sys.exit(5)"], {}, str(tmp_path), None, 1.0)
        assert ex._standby is not standby  # taken for job 2, replaced by a fresh one
        assert _wait_exit(ex, 2).exit_code == 5
        assert standby.wait(10) == 0  # the standby became job 2's supervisor and finished
        assert _wait_exit(ex, 1).exit_code == 0
    finally:
        ex.close()


def test_time_limit_counts_from_the_handover_not_the_standby_start(tmp_path: Path) -> None:
    ex = LocalExecutor(tmp_path / "state")
    try:
        ex.warm()
        time.sleep(2.0)  # the standby idles longer than the job's limit
        ex.start(
            1, [sys.executable, "-c", "import time; time.sleep(0.5)"], {}, str(tmp_path), 1.5, 1.0
        )
        rec = _wait_exit(ex, 1)
        assert (rec.reason, rec.exit_code) == ("exited", 0)
    finally:
        ex.close()


def test_a_standby_exits_when_its_daemon_dies(tmp_path: Path) -> None:
    code = (
        "import os, signal, sys\n"
        "from pathlib import Path\n"
        "from gpupool.executor import LocalExecutor\n"
        f"ex = LocalExecutor(Path({str(tmp_path / 'state')!r}))\n"
        "ex.warm()\n"
        "print(ex._standby.pid, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    pid = int(out.stdout.split()[0])
    end = time.monotonic() + 10
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"standby {pid} outlived its daemon")
    assert not (tmp_path / "state" / "jobs").exists() or not any(
        (tmp_path / "state" / "jobs").iterdir()
    )


def test_status_of_a_job_handed_to_the_standby_is_running_until_it_ends(tmp_path: Path) -> None:
    ex = LocalExecutor(tmp_path / "state")
    try:
        ex.warm()
        ex.start(1, ["sleep", "1"], {}, str(tmp_path), None, 1.0)
        assert ex.status(1) == RunState.RUNNING
        _wait_exit(ex, 1)
        assert ex.status(1) == RunState.EXITED
    finally:
        ex.close()
