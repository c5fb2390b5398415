"""The warning before the time limit (`submit --signal SIG@SECONDS`, docs/jobs.md), with real
processes: sent once, its seconds before the limit, moved with the limit; the checkpoint
default only to a job that has checkpointed; nothing for `--signal none` (Linux only)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest
from executor_helpers import current, wait_exit, wait_for

from gpupool.core.execution import Allocation, LaunchRequest
from gpupool.core.warning_signal import CHECKPOINT_WARNING, WarningSignal
from gpupool.executor import LocalExecutor

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

PY = sys.executable
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
USR1 = int(signal.SIGUSR1)


def catcher(record: Path, *, checkpoints: bool = False) -> list[str]:
    """A job that appends the wall-clock time of each SIGUSR1 it gets to `record`, one line
    each. Once its handler is set it writes `record`.started and, with `checkpoints`, a file
    in its GPUPOOL_CHECKPOINT_DIR (it has checkpointed); then it runs until it is stopped."""
    code = f"""
import os, pathlib, signal, time
def got(*_):
    with open({str(record)!r}, "a") as f:
        f.write(f"{{time.time()}}\\n")
signal.signal(signal.SIGUSR1, got)
if {checkpoints!r}:
    pathlib.Path(os.environ["GPUPOOL_CHECKPOINT_DIR"], "step-1.pt").write_bytes(b"")
pathlib.Path({str(record)!r} + ".started").touch()
while True:
    time.sleep(0.05)
"""
    return [PY, "-c", code]


def launch(
    ex: LocalExecutor,
    job_id: int,
    command: list[str],
    time_limit_s: float,
    warning: WarningSignal | None,
) -> None:
    ex.launch(
        LaunchRequest(
            handle=current(ex, job_id),
            command=tuple(command),
            env=ENV,
            workdir="/",
            time_limit_s=time_limit_s,
            grace_s=1.0,
            allocation=Allocation("local", ()),
            warning=warning,
        )
    )


def with_checkpoints(ex: LocalExecutor) -> LocalExecutor:
    """`ex` with its state directory made, as the daemon's is: where jobs' checkpoint
    directories are made (a launch without it gives the job none)."""
    ex.state_dir.mkdir(parents=True, exist_ok=True)
    return ex


def received(record: Path) -> list[float]:
    return [float(t) for t in record.read_text().split()] if record.exists() else []


def test_the_signal_comes_once_its_seconds_before_the_time_limit(
    ex: LocalExecutor, tmp_path: Path
) -> None:
    record = tmp_path / "usr1"
    launch(ex, 1, catcher(record), 4.0, WarningSignal(USR1, 2.0))
    rec = wait_exit(ex, 1)
    log = ex.log_path(1).read_text()
    assert rec.reason == "timeout", log  # the warning did not end it: the limit did
    got = received(record)
    assert len(got) == 1, log  # once
    # ~2 s before the limit; bounds generous for a busy machine.
    assert rec.start_time + 1.0 <= got[0] < rec.start_time + 4.0, (got, rec)
    assert "gpupool: sending SIGUSR1, 2 s before the time limit\n" in log
    assert log.index("sending SIGUSR1") < log.index("time limit of 4 s reached")


def test_a_new_time_limit_moves_the_warning(ex: LocalExecutor, tmp_path: Path) -> None:
    record = tmp_path / "usr1"
    launch(ex, 1, catcher(record), 600.0, WarningSignal(USR1, 2.0))
    wait_for(Path(f"{record}.started").exists, what="the job's handler set")
    assert received(record) == []  # 598 s away
    assert ex.set_time_limit(current(ex, 1), 5.0)  # `gpupool update --time`
    rec = wait_exit(ex, 1)
    log = ex.log_path(1).read_text()
    assert rec.reason == "timeout", log
    got = received(record)
    assert len(got) == 1 and got[0] < rec.end_time, (got, log)
    assert log.index("time limit set to 5 s") < log.index("sending SIGUSR1")


def test_the_checkpoint_default_reaches_a_job_that_has_checkpointed(
    ex: LocalExecutor, tmp_path: Path
) -> None:
    record = tmp_path / "usr1"
    # USR1@120 under a 4 s limit: due at once, sent once the job has checkpointed.
    launch(with_checkpoints(ex), 1, catcher(record, checkpoints=True), 4.0, CHECKPOINT_WARNING)
    rec = wait_exit(ex, 1)
    log = ex.log_path(1).read_text()
    assert rec.reason == "timeout", log
    got = received(record)
    assert len(got) == 1 and got[0] < rec.end_time, (got, log)
    assert "the job has checkpointed (its GPUPOOL_CHECKPOINT_DIR is not empty)" in log


def test_the_checkpoint_default_spares_a_job_that_has_not(
    ex: LocalExecutor, tmp_path: Path
) -> None:
    record = tmp_path / "usr1"
    launch(with_checkpoints(ex), 1, catcher(record), 2.0, CHECKPOINT_WARNING)
    rec = wait_exit(ex, 1)
    log = ex.log_path(1).read_text()
    assert rec.reason == "timeout" and received(record) == [], log
    assert "sending SIGUSR1" not in log


def test_signal_none_sends_nothing_even_to_a_job_that_checkpoints(
    ex: LocalExecutor, tmp_path: Path
) -> None:
    record = tmp_path / "usr1"
    launch(with_checkpoints(ex), 1, catcher(record, checkpoints=True), 2.0, None)  # none
    rec = wait_exit(ex, 1)
    log = ex.log_path(1).read_text()
    assert rec.reason == "timeout" and received(record) == [], log
    assert "sending SIGUSR1" not in log
