"""A job whose supervisor died: what it left running is killed, and nothing else (Linux only)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from executor_helpers import cancel, launch, state_of, wait_for

from gpupool.core.execution import Handle, Leftovers, RunState
from gpupool.executor import JobBusyError, LocalExecutor
from gpupool.executor.files import boot_id, proc_stat, process_alive, read_json
from gpupool.executor.leftovers import kill_leftovers

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

PY = sys.executable
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def job_with_an_orphan(pidfile: Path) -> list[str]:
    """A job whose main process waits, with a child in another process group of its session
    (what `set -m` or a launcher makes): both must be found."""
    code = f"""
import os, pathlib, subprocess, time
p = subprocess.Popen(["sleep", "60"], process_group=0)
pathlib.Path({str(pidfile) + ".tmp"!r}).write_text(str(p.pid))
os.replace({str(pidfile) + ".tmp"!r}, {str(pidfile)!r})  # whole, or not there
while True:
    time.sleep(60)
"""
    return [PY, "-c", code]


def lose_supervisor(ex: LocalExecutor, job_id: int) -> None:
    claim = wait_for(lambda: read_json(ex.job_dir(job_id) / "claim.json"), what="claim.json")
    os.kill(claim["supervisor_pid"], signal.SIGKILL)
    wait_for(lambda: state_of(ex, job_id) is RunState.LOST, what="LOST")


def gone(pid: int) -> bool:
    st = proc_stat(pid)
    return st is None or not st.running


def test_a_lost_jobs_processes_are_all_killed(ex: LocalExecutor, tmp_path: Path) -> None:
    pidfile = tmp_path / "orphan.pid"
    launch(ex, 1, job_with_an_orphan(pidfile), ENV, "/", None, 1.0)
    wait_for(pidfile.exists, what="the job's child")
    # The supervisor records its child after the spawn returns: the child may have written
    # its pidfile first (CI run at 517475a, under load, read no child.json here).
    child = wait_for(lambda: read_json(ex.job_dir(1) / "child.json"), what="child.json")
    orphan = int(pidfile.read_text())
    lose_supervisor(ex, 1)
    assert not gone(child["pid"]) and not gone(orphan)  # what the pool must not ignore
    left = ex.settle_lost(Handle(1), wait_s=5.0)
    assert left == Leftovers(main_pid=child["pid"], killed=tuple(sorted((child["pid"], orphan))))
    assert left.gone and gone(child["pid"]) and gone(orphan)
    # Safe to repeat: nothing is left to kill.
    assert ex.settle_lost(Handle(1), wait_s=0.0) == Leftovers(main_pid=child["pid"])
    assert state_of(ex, 1) is RunState.LOST


def test_orphans_of_a_main_process_that_already_ended_are_killed(
    ex: LocalExecutor, tmp_path: Path
) -> None:
    pidfile, stop = tmp_path / "orphan.pid", tmp_path / "stop"
    code = f"""
import os, pathlib, subprocess, time
p = subprocess.Popen(["sleep", "60"])
pathlib.Path({str(pidfile) + ".tmp"!r}).write_text(str(p.pid))
os.replace({str(pidfile) + ".tmp"!r}, {str(pidfile)!r})  # whole, or not there
while not os.path.exists({str(stop)!r}):
    time.sleep(0.02)
os._exit(0)  # leaves its child behind, in the job's session
"""
    launch(ex, 1, [PY, "-c", code], ENV, "/", None, 1.0)
    wait_for(pidfile.exists, what="the job's child")
    # The supervisor records its child after the spawn returns: the child may have written
    # its pidfile first (CI run at 517475a, under load, read no child.json here).
    child = wait_for(lambda: read_json(ex.job_dir(1) / "child.json"), what="child.json")
    lose_supervisor(ex, 1)
    stop.touch()
    wait_for(lambda: not process_alive(child["pid"], child["start_ticks"]), what="main's end")
    orphan = int(pidfile.read_text())
    assert not gone(orphan)
    left = ex.settle_lost(Handle(1), wait_s=5.0)
    assert (left.killed, left.gone) == ((orphan,), True)
    assert gone(orphan)


def test_a_job_with_a_live_supervisor_is_never_killed(ex: LocalExecutor) -> None:
    launch(ex, 1, ["sleep", "infinity"], ENV, "/", None, 1.0)
    child = wait_for(lambda: read_json(ex.job_dir(1) / "child.json"), what="child.json")
    with pytest.raises(JobBusyError, match="not lost"):
        ex.settle_lost(Handle(1), 1.0)
    assert process_alive(child["pid"], child["start_ticks"])
    assert cancel(ex, 1)


def _lost_job_dir(root: Path, child: dict[str, object], boot: str | None = None) -> Path:
    """A job directory as a dead supervisor leaves it: claim.json and child.json."""
    d = root / "jobs" / "1"
    d.mkdir(parents=True)
    # A pid above pid_max's ceiling: a supervisor that is certainly dead.
    claim = {"supervisor_pid": 2**22 + 1, "supervisor_start_ticks": 1, "boot_id": boot or boot_id()}
    (d / "claim.json").write_text(json.dumps(claim))
    (d / "child.json").write_text(json.dumps(child))
    return d


def test_a_reused_pid_and_its_session_are_never_hit(tmp_path: Path) -> None:
    # The pid child.json names now belongs to a stranger, who leads a session of that id.
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        st = proc_stat(stranger.pid)
        assert st is not None and st.session == stranger.pid
        d = _lost_job_dir(tmp_path, {"pid": stranger.pid, "start_ticks": st.start_ticks - 1})
        ex = LocalExecutor(tmp_path)
        assert state_of(ex, 1) is RunState.LOST
        assert kill_leftovers(d, 0.5) == Leftovers(main_pid=stranger.pid)
        assert process_alive(stranger.pid, st.start_ticks)
        # Of another boot: no process of it can run now.
        d2 = _lost_job_dir(
            tmp_path / "other", {"pid": stranger.pid, "start_ticks": st.start_ticks}, "old-boot"
        )
        assert kill_leftovers(d2, 0.5) == Leftovers(main_pid=stranger.pid, other_boot=True)
        assert process_alive(stranger.pid, st.start_ticks)
    finally:
        stranger.kill()
        stranger.wait()


def test_a_supervisor_that_died_before_recording_its_command(tmp_path: Path) -> None:
    d = tmp_path / "jobs" / "1"
    d.mkdir(parents=True)
    (d / "claim.json").write_text(json.dumps({"supervisor_pid": 2**22 + 1}))
    assert kill_leftovers(d, 0.5) == Leftovers(main_pid=None)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the job runs as root, we as nobody")
def test_processes_we_may_not_kill_keep_the_job_unfinished(tmp_path: Path) -> None:
    # Not under tmp_path: nobody must be able to read the job directory.
    state = Path(tempfile.mkdtemp(prefix="gpupool-leftovers-"))
    state.chmod(0o755)
    ex = LocalExecutor(state)
    try:
        launch(ex, 1, ["sleep", "infinity"], ENV, "/", None, 1.0)
        child = wait_for(lambda: read_json(ex.job_dir(1) / "child.json"), what="child.json")
        lose_supervisor(ex, 1)
        # The job's files are private (0700/0600): let nobody read them, so that what
        # stops it is the signal's permission alone.
        for path in (ex.job_dir(1).parent, ex.job_dir(1), *ex.job_dir(1).iterdir()):
            path.chmod(0o755 if path.is_dir() else 0o644)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through the pipe
            try:
                os.setgid(65534)
                os.setuid(65534)
                left = kill_leftovers(ex.job_dir(1), 0.2)
                os.write(w, json.dumps([left.killed, left.alive, left.denied]).encode())
            finally:
                os._exit(0)
        os.close(w)
        with os.fdopen(r) as f:
            killed, alive, denied = json.loads(f.read())
        os.waitpid(pid, 0)
        assert (killed, alive, denied) == ([], [child["pid"]], [child["pid"]])
        assert process_alive(child["pid"], child["start_ticks"])
        # The daemon's own user can: then they are gone.
        assert ex.settle_lost(Handle(1), wait_s=5.0).gone
    finally:
        child_now = read_json(ex.job_dir(1) / "child.json") or {}
        if isinstance(child_now.get("pgid"), int):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child_now["pgid"], signal.SIGKILL)
        ex.close()
        subprocess.run(["rm", "-rf", str(state)], check=True)
