"""The standby supervisor: started ahead of time, handed the next job, gone with its daemon."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from executor_helpers import launch, state_of, wait_exit, wait_for

from gpupool.core.execution import RunState
from gpupool.executor import LocalExecutor
from gpupool.executor.files import proc_stat


def _age_s(pid: int) -> float:
    """How long process `pid` has run, in seconds."""
    st = proc_stat(pid)
    assert st is not None
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return uptime - st.start_ticks / os.sysconf("SC_CLK_TCK")


def test_a_launch_leaves_a_standby_that_runs_the_next_job(tmp_path: Path) -> None:
    ex = LocalExecutor(tmp_path / "state")
    try:
        launch(ex, 1, ["true"], {}, str(tmp_path), None, 1.0)
        standby = ex._standby
        assert standby is not None and standby.poll() is None
        launch(
            ex, 2, [sys.executable, "-c", "import sys; sys.exit(5)"], {}, str(tmp_path), None, 1.0
        )
        assert ex._standby is not standby  # taken for job 2, replaced by a fresh one
        assert wait_exit(ex, 2).exit_code == 5
        assert standby.wait(60) == 0  # the standby became job 2's supervisor and finished
        assert wait_exit(ex, 1).exit_code == 0
    finally:
        ex.close()


def test_time_limit_counts_from_the_handover_not_the_standby_start(tmp_path: Path) -> None:
    ex = LocalExecutor(tmp_path / "state")
    try:
        ex.warm()
        assert ex._standby is not None
        limit_s = 2.0
        pid = ex._standby.pid
        wait_for(lambda: _age_s(pid) > limit_s + 0.5, what="the standby to idle past the limit")
        launch(ex, 1, ["sleep", "0.1"], {"PATH": os.defpath}, str(tmp_path), limit_s, 1.0)
        rec = wait_exit(ex, 1)
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
    wait_for(lambda: not getattr(proc_stat(pid), "running", False), what=f"standby {pid} to end")
    assert not (tmp_path / "state" / "jobs").exists() or not any(
        (tmp_path / "state" / "jobs").iterdir()
    )


def test_status_of_a_job_handed_to_the_standby_is_running_until_it_ends(tmp_path: Path) -> None:
    ex = LocalExecutor(tmp_path / "state")
    try:
        ex.warm()
        go = tmp_path / "go"
        launch(ex, 1, ["sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done"], {}, "/", None, 1)
        assert state_of(ex, 1) == RunState.RUNNING
        go.touch()
        wait_exit(ex, 1)
        assert state_of(ex, 1) == RunState.EXITED
    finally:
        ex.close()
