"""Graceful preemption and per-attempt job directories, with real processes (Linux only)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from executor_helpers import (
    cancel,
    caught_starting,
    launch,
    preempt,
    state_of,
    wait_exit,
    wait_for,
)

from gpupool.core.execution import RunState
from gpupool.executor import JobBusyError, LocalExecutor, attempts
from gpupool.executor.files import atomic_write_json, process_alive, read_json
from gpupool.executor.local import SUPERVISOR

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

PY = sys.executable
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def log_of(ex: LocalExecutor, job_id: int) -> str:
    return ex.log_path(job_id).read_text()


def trapping_job(ready: Path, *, on_term: str = "sys.exit(3)", ignore: bool = False) -> list[str]:
    """A job that reports readiness (and its GPUPOOL_RESTART_COUNT), then sleeps; on SIGTERM
    it writes ``ready``.term and runs ``on_term``, or it ignores SIGTERM altogether."""
    handler = "signal.SIG_IGN" if ignore else "on_term"
    code = f"""
import os, pathlib, signal, sys, time
def on_term(*_):
    pathlib.Path({str(ready)!r} + ".term").write_text("got SIGTERM")
    {on_term}
signal.signal(signal.SIGTERM, {handler})
print("restart=" + os.environ.get("GPUPOOL_RESTART_COUNT", "?"), flush=True)
pathlib.Path({str(ready)!r}).touch()
while True:
    time.sleep(60)
"""
    return [PY, "-c", code]


# -- preempt ---------------------------------------------------------------------------------


def test_preempt_runs_the_jobs_sigterm_handler(ex: LocalExecutor, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    launch(ex, 1, trapping_job(ready), ENV, "/", None, 5.0)
    wait_for(ready.exists, what="job ready")
    assert preempt(ex, 1) and preempt(ex, 1)  # idempotent: the second changes nothing
    rec = wait_exit(ex, 1)
    assert (rec.reason, rec.exit_code, rec.signal) == ("preempted", 3, None)  # the job's code
    assert Path(f"{ready}.term").read_text() == "got SIGTERM"
    log = log_of(ex, 1)
    assert "gpupool: preempted, sending SIGTERM (grace 5 s)\n" in log
    assert "SIGKILL" not in log
    assert state_of(ex, 1) == RunState.EXITED


def test_preempted_job_ignoring_sigterm_is_killed_after_grace(
    ex: LocalExecutor, tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    launch(ex, 1, trapping_job(ready, ignore=True), ENV, "/", None, 0.5)
    wait_for(ready.exists, what="job ready")
    t0 = time.monotonic()
    assert preempt(ex, 1)
    rec = wait_exit(ex, 1)
    assert time.monotonic() - t0 >= 0.45  # not before the grace period is over
    assert (rec.reason, rec.exit_code, rec.signal) == ("preempted", 128 + 9, 9)
    log = log_of(ex, 1)
    assert "gpupool: preempted, sending SIGTERM (grace 0.5 s)\n" in log
    assert "gpupool: grace period of 0.5 s over, sending SIGKILL\n" in log


def test_cancel_during_the_preemption_grace_wins(ex: LocalExecutor, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    launch(ex, 1, trapping_job(ready, ignore=True), ENV, "/", None, 1.0)
    wait_for(ready.exists, what="job ready")
    assert preempt(ex, 1)
    wait_for(lambda: "preempted, sending SIGTERM" in log_of(ex, 1), what="preemption begun")
    assert cancel(ex, 1)
    assert preempt(ex, 1)  # a preempt re-sent after the cancel does not undo it
    rec = wait_exit(ex, 1)
    assert (rec.reason, rec.exit_code, rec.signal) == ("cancelled", 128 + 9, 9)
    assert rec.message.startswith("cancelled during preemption")
    assert "gpupool: cancelled during preemption grace\n" in log_of(ex, 1)


def test_preempt_after_cancel_stays_cancelled(ex: LocalExecutor, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    launch(ex, 1, trapping_job(ready, on_term="time.sleep(0.3); sys.exit(0)"), ENV, "/", None, 5)
    wait_for(ready.exists, what="job ready")
    assert cancel(ex, 1) and preempt(ex, 1)
    assert wait_exit(ex, 1).reason == "cancelled"
    assert "preempted" not in log_of(ex, 1)


def test_preempt_with_nothing_running_is_false(ex: LocalExecutor) -> None:
    assert preempt(ex, 99) is False
    launch(ex, 1, ["/bin/true"], ENV, "/", None, 1.0)
    assert wait_exit(ex, 1).reason == "exited"
    assert preempt(ex, 1) is False


def test_preempt_while_starting_never_runs_the_command(ex: LocalExecutor, tmp_path: Path) -> None:
    job_id, marker, _ = caught_starting(ex, tmp_path, lambda j: preempt(ex, j), "preempted")
    assert preempt(ex, job_id) is False and cancel(ex, job_id) is False
    # The stepped-aside supervisor is waited for; then the job can run as attempt 1.
    assert ex.archive(job_id) == 0
    assert not marker.exists()  # the command never ran
    launch(ex, job_id, ["touch", str(marker)], ENV, "/", None, 1.0)
    assert wait_exit(ex, job_id).reason == "exited"
    assert marker.exists()


def test_a_restarted_executor_can_preempt(ex: LocalExecutor, tmp_path: Path) -> None:
    ready, done = tmp_path / "ready", tmp_path / "done"
    # It exits 3 on SIGTERM only once `done` exists: it is still running at the second ask.
    linger = f"[time.sleep(0.02) for _ in iter(lambda: os.path.exists({str(done)!r}), True)]"
    launch(ex, 1, trapping_job(ready, on_term=f"{linger}; sys.exit(3)"), ENV, "/", None, 30.0)
    wait_for(ready.exists, what="job ready")
    fresh = LocalExecutor(ex.state_dir)  # knows nothing but the job directory
    assert state_of(fresh, 1) == RunState.RUNNING
    assert preempt(fresh, 1)
    assert preempt(LocalExecutor(ex.state_dir), 1)  # and again, by yet another restart
    done.touch()
    rec = wait_exit(fresh, 1)
    assert (rec.reason, rec.exit_code) == ("preempted", 3)


def test_a_supervisor_without_preemption_is_cancelled_instead(
    ex: LocalExecutor, tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    launch(ex, 1, trapping_job(ready), ENV, "/", None, 5.0)
    wait_for(ready.exists, what="job ready")
    claim_path = ex.job_dir(1) / "claim.json"
    claim = read_json(claim_path)
    assert claim is not None and claim["preempt_signal"] == signal.SIGUSR1
    del claim["preempt_signal"]  # as an older supervisor, still running, wrote it
    atomic_write_json(claim_path, claim)
    assert preempt(ex, 1)  # SIGUSR1 would kill such a supervisor: it gets SIGTERM
    assert wait_exit(ex, 1).reason == "cancelled"


# -- attempts --------------------------------------------------------------------------------


def test_preempt_archive_and_run_again(ex: LocalExecutor, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    launch(ex, 1, trapping_job(ready), {**ENV, "GPUPOOL_RESTART_COUNT": "0"}, "/", None, 5.0)
    wait_for(ready.exists, what="first run ready")
    assert preempt(ex, 1)
    first = wait_exit(ex, 1)
    assert first.reason == "preempted"
    assert ex.archive(1) == 0
    jd = ex.job_dir(1)
    assert sorted(p.name for p in jd.iterdir()) == ["attempt-0", "output.log"]
    assert sorted(p.name for p in (jd / "attempt-0").iterdir()) == [
        "child.json",
        "claim.json",
        "exit.json",
        "launch.json",
    ]
    assert state_of(ex, 1) == RunState.UNLAUNCHED and ex.read_exit(1) is None
    assert ex.attempt_count(1) == 1

    ready.unlink()
    cmd = trapping_job(ready)
    launch(ex, 1, cmd, {**ENV, "GPUPOOL_RESTART_COUNT": "1"}, "/", None, 5.0)
    launch(ex, 1, cmd, {**ENV, "GPUPOOL_RESTART_COUNT": "1"}, "/", None, 5.0)  # a retry
    wait_for(ready.exists, what="second run ready")
    assert state_of(ex, 1) == RunState.RUNNING
    assert cancel(ex, 1)
    second = wait_exit(ex, 1)
    assert (second.reason, second.exit_code) == ("cancelled", 3)
    assert ex.read_exit(1, attempt=0) == first
    assert ex.read_exit(1, attempt=1) is None  # the current run is not archived yet
    lines = log_of(ex, 1).splitlines()
    separator = "gpupool: --- attempt 1 (restart) ---"
    assert lines.count(separator) == 1
    assert lines.index("restart=0") < lines.index(separator) < lines.index("restart=1")
    assert "gpupool: preempted, sending SIGTERM (grace 5 s)" in lines[: lines.index(separator)]
    assert ex.archive(1) == 1 and ex.read_exit(1, attempt=1) == second


def test_archive_refuses_while_the_job_runs(ex: LocalExecutor) -> None:
    launch(ex, 1, ["sleep", "infinity"], ENV, "/", None, 0.5)
    with pytest.raises(JobBusyError):
        ex.archive(1)  # still starting, or running: either way refused at once
    wait_for(lambda: (ex.job_dir(1) / "child.json").exists(), what="job started")
    t0 = time.monotonic()
    with pytest.raises(JobBusyError, match="still running"):
        ex.archive(1, wait_s=120.0)
    assert time.monotonic() - t0 < 60  # no exit recorded: it does not wait the 120 s
    assert (ex.job_dir(1) / "claim.json").exists() and not (ex.job_dir(1) / "attempt-0").exists()
    assert state_of(ex, 1) == RunState.RUNNING


def test_archive_refuses_a_lost_job_whose_process_lives(ex: LocalExecutor) -> None:
    launch(ex, 1, ["sleep", "infinity"], ENV, "/", None, 0.5)
    child = wait_for(lambda: read_json(ex.job_dir(1) / "child.json"), what="child.json")
    claim = read_json(ex.job_dir(1) / "claim.json")
    assert claim is not None
    os.kill(claim["supervisor_pid"], signal.SIGKILL)
    wait_for(lambda: state_of(ex, 1) == RunState.LOST, what="LOST")
    with pytest.raises(JobBusyError, match="its process"):
        ex.archive(1)  # a relaunch would run the job twice
    os.killpg(child["pgid"], signal.SIGKILL)
    wait_for(lambda: not process_alive(child["pid"], child["start_ticks"]), what="job gone")
    assert ex.archive(1) == 0  # a LOST run can be archived and requeued once it is gone
    assert state_of(ex, 1) == RunState.UNLAUNCHED


def test_archive_with_nothing_to_move(ex: LocalExecutor) -> None:
    assert ex.archive(5) == -1
    launch(ex, 1, ["/bin/true"], ENV, "/", None, 1.0)
    wait_exit(ex, 1)
    assert ex.archive(1) == 0
    assert ex.archive(1) == -1  # a retry, e.g. by a restarted daemon: nothing left to move
    assert ex.attempt_count(1) == 1


def test_an_interrupted_archive_is_finished_by_the_next_launch(
    ex: LocalExecutor, tmp_path: Path
) -> None:
    launch(ex, 1, ["sh", "-c", "echo run"], ENV, "/", None, 1.0)
    first = wait_exit(ex, 1)
    wait_for(lambda: not ex._starting(1), what="supervisor gone")
    jd = ex.job_dir(1)
    partial = jd / "attempt-0.partial"  # as a daemon killed half-way through archive()
    partial.mkdir()
    for name in ("launch.json", "child.json"):
        os.rename(jd / name, partial / name)
    launch(ex, 1, ["sh", "-c", "echo run"], ENV, "/", None, 1.0)
    assert ex.read_exit(1, attempt=0) == first
    assert sorted(p.name for p in (jd / "attempt-0").iterdir()) == [
        "child.json",
        "claim.json",
        "exit.json",
        "launch.json",
    ]
    assert wait_exit(ex, 1).reason == "exited"
    assert log_of(ex, 1) == "run\ngpupool: --- attempt 1 (restart) ---\nrun\n"
    assert attempts.count(jd) == 1


def test_a_stale_supervisor_finding_no_launch_json_starts_nothing(tmp_path: Path) -> None:
    jobdir = tmp_path / "jobs" / "1"
    jobdir.mkdir(parents=True)
    proc = subprocess.run(
        [PY, "-I", "-S", str(SUPERVISOR), str(jobdir)], timeout=30, capture_output=True
    )
    assert proc.returncode == 0, proc.stderr
    assert list(jobdir.iterdir()) == []  # claim given back, no exit recorded
