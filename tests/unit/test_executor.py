"""LocalExecutor and its supervisor, with real processes (Linux only)."""

from __future__ import annotations

import json
import os
import pwd
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from executor_helpers import cancel, caught_starting, launch, state_of, wait_exit, wait_for

from gpupool.core.execution import ExitRecord, Handle, RunState
from gpupool.executor import LocalExecutor
from gpupool.executor.files import proc_stat, read_json

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

PY = sys.executable
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
SRC = str(Path(__file__).resolve().parents[2] / "src")


def py(code: str) -> list[str]:
    return [PY, "-c", code]


def run_job(ex: LocalExecutor, job_id: int, command: list[str], **kw: Any) -> ExitRecord:
    kw.setdefault("env", ENV)
    kw.setdefault("workdir", "/")
    kw.setdefault("time_limit_s", None)
    kw.setdefault("grace_s", 1.0)
    launch(ex, job_id, command, **kw)
    return wait_exit(ex, job_id)


def claim_of(ex: LocalExecutor, job_id: int) -> dict[str, Any]:
    claim = wait_for(lambda: read_json(ex.job_dir(job_id) / "claim.json"), what="claim.json")
    assert isinstance(claim, dict)
    return claim


def child_of(ex: LocalExecutor, job_id: int) -> dict[str, Any]:
    child = wait_for(lambda: read_json(ex.job_dir(job_id) / "child.json"), what="child.json")
    assert isinstance(child, dict)
    return child


def _has_uid(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return False
    return True


def gone(pid: int) -> bool:
    st = proc_stat(pid)
    return st is None or st.state in ("Z", "X")


# -- what the job sees -------------------------------------------------------------------


def test_env_reaches_the_child_exactly(ex: LocalExecutor, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPOOL_LEAK_FROM_DAEMON", "1")  # must not reach the job
    env = {**ENV, "CUDA_VISIBLE_DEVICES": "1,3", "GPUPOOL_TEST_VAR": "a b=c"}
    rec = run_job(ex, 1, ["/usr/bin/env"], env=env)
    assert rec.exit_code == 0 and rec.reason == "exited" and rec.signal is None
    lines = ex.log_path(1).read_text().splitlines()
    assert sorted(lines) == sorted(f"{k}={v}" for k, v in env.items())


@pytest.mark.parametrize("code", [0, 3])
def test_exit_code_is_recorded(ex: LocalExecutor, code: int) -> None:
    t0 = time.time()
    rec = run_job(ex, 1, py(f"print('hello'); raise SystemExit({code})"))
    assert (rec.exit_code, rec.signal, rec.reason) == (code, None, "exited")
    assert t0 <= rec.start_time <= rec.end_time <= time.time()
    assert ex.log_path(1).read_text() == "hello\n"
    assert state_of(ex, 1) == RunState.EXITED


def test_stdout_and_stderr_both_go_to_the_log(ex: LocalExecutor) -> None:
    run_job(ex, 1, py("import sys; print('out', flush=True); print('err', file=sys.stderr)"))
    assert ex.log_path(1).read_text() == "out\nerr\n"


def test_a_log_read_says_the_log_s_size_wherever_it_starts(ex: LocalExecutor) -> None:
    # The dashboard starts a tail near the end: it asks past the end for the size.
    run_job(ex, 1, py("print('x' * 99)"))
    handle = Handle(1, 0)
    middle, past_the_end = ex.logs(handle, 90, 5), ex.logs(handle, 2**62, 5)
    assert (middle.data, middle.offset, middle.size) == (b"xxxxx", 95, 100)
    assert (past_the_end.data, past_the_end.offset, past_the_end.size) == (b"", 2**62, 100)
    assert ex.logs(Handle(2, 0), 0, 5).size == 0  # no log yet


def test_killed_by_signal_is_128_plus_n(ex: LocalExecutor) -> None:
    rec = run_job(ex, 1, py("import os, signal; os.kill(os.getpid(), signal.SIGUSR1)"))
    assert (rec.exit_code, rec.signal, rec.reason) == (
        128 + signal.SIGUSR1,
        signal.SIGUSR1,
        "exited",
    )


def test_command_not_found_is_127(ex: LocalExecutor) -> None:
    rec = run_job(ex, 1, ["gpupool-no-such-command", "x"])
    assert (rec.exit_code, rec.reason) == (127, "spawn_failed")
    assert "gpupool: command not found: gpupool-no-such-command\n" in ex.log_path(1).read_text()
    assert not (ex.job_dir(1) / "child.json").exists()


def test_not_executable_is_126(ex: LocalExecutor, tmp_path: Path) -> None:
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho ran\n")
    script.chmod(stat.S_IRUSR | stat.S_IWUSR)  # no x bit: even root cannot exec it
    rec = run_job(ex, 1, [str(script)])
    assert (rec.exit_code, rec.reason) == (126, "spawn_failed")
    assert f"gpupool: cannot execute {script}" in ex.log_path(1).read_text()


def test_missing_workdir_fails_the_spawn(ex: LocalExecutor, tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    rec = run_job(ex, 1, ["/bin/true"], workdir=str(missing))
    assert (rec.exit_code, rec.signal, rec.reason) == (1, None, "spawn_failed")
    log = ex.log_path(1).read_text()
    assert f"gpupool: working directory does not exist: {missing}\n" in log


def test_workdir_is_used(ex: LocalExecutor, tmp_path: Path) -> None:
    run_job(ex, 1, py("import os; print(os.getcwd())"), workdir=str(tmp_path))
    assert ex.log_path(1).read_text().strip() == str(tmp_path)


@pytest.mark.skipif(os.geteuid() != 0 or not _has_uid(65534), reason="needs root and uid 65534")
def test_runs_as_the_given_user(ex: LocalExecutor) -> None:
    name = pwd.getpwuid(65534).pw_name
    rec = run_job(ex, 1, ["sh", "-c", "id -u; id -g; id -G"], user=name)
    assert rec.exit_code == 0, ex.log_path(1).read_text()
    uid, gid, groups = ex.log_path(1).read_text().splitlines()
    assert int(uid) == 65534
    assert int(gid) != 0 and "0" not in groups.split()  # root's groups were dropped


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: only root may run as another user")
def test_a_user_without_a_passwd_entry_never_runs(ex: LocalExecutor, tmp_path: Path) -> None:
    name = "gpupool-nobody-has-this-name"
    with pytest.raises(KeyError):
        pwd.getpwnam(name)
    marker = tmp_path / "ran"
    rec = run_job(ex, 1, ["touch", str(marker)], user=name)
    assert (rec.exit_code, rec.reason) == (1, "spawn_failed")
    assert rec.message == f"not started: user {name} has no passwd entry on this machine"
    assert f"gpupool: {rec.message}\n" in ex.log_path(1).read_text()
    assert not marker.exists() and read_json(ex.job_dir(1) / "child.json") is None


def test_child_runs_in_its_own_session(ex: LocalExecutor) -> None:
    rec = run_job(ex, 1, py("import os; print(os.getpid(), os.getsid(0), os.getpgid(0))"))
    assert rec.exit_code == 0
    pid, sid, pgid = map(int, ex.log_path(1).read_text().split())
    assert sid == pid == pgid
    assert sid != os.getsid(0)
    child = read_json(ex.job_dir(1) / "child.json")
    assert child is not None and child["pid"] == pid and child["pgid"] == pid


def test_supervisor_is_detached_from_the_daemon(ex: LocalExecutor) -> None:
    launch(ex, 1, ["sleep", "infinity"], ENV, "/", None, 0.5)
    pid = claim_of(ex, 1)["supervisor_pid"]
    assert os.getsid(pid) == pid != os.getsid(0)
    for fd in (0, 1, 2):
        assert os.readlink(f"/proc/{pid}/fd/{fd}") == "/dev/null"
    assert cancel(ex, 1)
    assert wait_exit(ex, 1).reason == "cancelled"


# -- time limit and cancel -----------------------------------------------------------------


def test_time_limit_ends_the_job(ex: LocalExecutor) -> None:
    t0 = time.monotonic()
    launch(ex, 1, ["sleep", "infinity"], ENV, "/", 1.0, 1.0)  # only the limit can end it
    rec = wait_exit(ex, 1)
    assert time.monotonic() - t0 >= 0.9  # not before the limit (how soon after: benchmarks)
    assert (rec.reason, rec.exit_code, rec.signal) == ("timeout", 128 + 15, 15)
    assert "gpupool: time limit of 1 s reached, sending SIGTERM\n" in ex.log_path(1).read_text()


def test_cancel_lets_the_job_run_its_sigterm_handler(ex: LocalExecutor, tmp_path: Path) -> None:
    ready, out = tmp_path / "ready", tmp_path / "out"
    code = f"""
import signal, sys, time, pathlib
def on_term(*_):
    time.sleep(0.3)  # cleanup that takes a while, inside the grace period
    pathlib.Path({str(out)!r}).write_text("got SIGTERM")
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
pathlib.Path({str(ready)!r}).touch()
while True:
    time.sleep(60)
"""
    launch(ex, 1, py(code), ENV, "/", None, 5.0)
    wait_for(ready.exists, what="job ready")
    assert state_of(ex, 1) == RunState.RUNNING
    assert cancel(ex, 1) and cancel(ex, 1)  # idempotent: a second SIGTERM changes nothing
    rec = wait_exit(ex, 1)
    assert (rec.reason, rec.exit_code, rec.signal) == ("cancelled", 0, None)
    assert out.read_text() == "got SIGTERM"
    assert "gpupool: cancelled, sending SIGTERM\n" in ex.log_path(1).read_text()
    assert "SIGKILL" not in ex.log_path(1).read_text()


def test_job_ignoring_sigterm_is_killed_after_grace(ex: LocalExecutor, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    code = f"""
import signal, time, pathlib
signal.signal(signal.SIGTERM, signal.SIG_IGN)
pathlib.Path({str(ready)!r}).touch()
while True:
    time.sleep(60)
"""
    launch(ex, 1, py(code), ENV, "/", None, 0.5)
    wait_for(ready.exists, what="job ready")
    t0 = time.monotonic()
    assert cancel(ex, 1)
    rec = wait_exit(ex, 1)
    assert time.monotonic() - t0 >= 0.45  # not before the grace period is over
    assert (rec.reason, rec.exit_code, rec.signal) == ("cancelled", 128 + 9, 9)
    assert "gpupool: grace period of 0.5 s over, sending SIGKILL\n" in ex.log_path(1).read_text()


def test_orphans_in_the_group_are_killed(ex: LocalExecutor, tmp_path: Path) -> None:
    pidfile = tmp_path / "orphan.pid"
    rec = run_job(ex, 1, ["sh", "-c", f"sleep 60 & echo $! > {pidfile}; exit 0"])
    assert rec.exit_code == 0
    # Dead before exit.json is written: whatever it held (a GPU) is free by then.
    assert gone(int(pidfile.read_text()))


def test_orphans_in_another_group_of_the_session_are_killed(
    ex: LocalExecutor, tmp_path: Path
) -> None:
    pidfile = tmp_path / "orphan.pid"
    code = f"""
import os, subprocess
p = subprocess.Popen(["sleep", "60"], process_group=0)  # leaves the job's group
open({str(pidfile)!r}, "w").write(str(p.pid))
"""
    rec = run_job(ex, 1, py(code))
    assert rec.exit_code == 0
    orphan = int(pidfile.read_text())
    assert gone(orphan)


def test_cancel_with_nothing_alive_is_false(ex: LocalExecutor) -> None:
    assert cancel(ex, 99) is False
    run_job(ex, 1, ["/bin/true"])
    assert cancel(ex, 1) is False


def test_cancel_while_starting_never_runs_the_command(ex: LocalExecutor, tmp_path: Path) -> None:
    job_id, marker, rec = caught_starting(ex, tmp_path, lambda j: cancel(ex, j), "cancelled")
    assert state_of(ex, job_id) == RunState.EXITED
    assert cancel(ex, job_id) is False  # nothing left to stop
    wait_for(lambda: not ex._starting(job_id), what="supervisor stepped aside")
    assert not marker.exists()
    assert ex.read_exit(job_id) == rec


# -- exactly once, and surviving the daemon ------------------------------------------------


def test_double_launch_starts_the_command_once(ex: LocalExecutor, tmp_path: Path) -> None:
    counter = tmp_path / "count"
    cmd = ["sh", "-c", f"echo started >> {counter}; sleep 0.5; exit 4"]
    other = LocalExecutor(ex.state_dir)  # as a restarted daemon would
    for executor in (ex, ex, other, ex):
        launch(executor, 1, cmd, ENV, "/", None, 1.0)
    rec = wait_exit(ex, 1)
    assert rec.exit_code == 4
    wait_for(lambda: not ex._starting(1) and not other._starting(1), what="supervisors gone")
    assert counter.read_text() == "started\n"
    # A launch after the exit changes nothing either.
    launch(ex, 1, cmd, ENV, "/", None, 1.0)
    wait_for(lambda: not ex._starting(1), what="late supervisor gone")
    assert counter.read_text() == "started\n"
    assert ex.read_exit(1) == rec


def test_supervisor_outlives_a_sigkilled_launcher(tmp_path: Path) -> None:
    state, go = tmp_path / "state", tmp_path / "go"
    job = ["sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done; exit 7"]
    helper = f"""
import os, signal
from pathlib import Path
from gpupool.core.execution import Allocation, Handle, LaunchRequest
from gpupool.executor import LocalExecutor
ex = LocalExecutor(Path({str(state)!r}))
ex.launch(LaunchRequest(Handle(7), tuple({job!r}), {ENV!r}, "/", None, 1.0, Allocation("local", ())))
os.kill(os.getpid(), signal.SIGKILL)
"""
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.run(py(helper), env=env, timeout=60, check=False)
    assert proc.returncode == -signal.SIGKILL
    fresh = LocalExecutor(state)
    wait_for(lambda: (state / "jobs" / "7" / "claim.json").exists(), what="claim")
    assert state_of(fresh, 7) == RunState.RUNNING
    go.touch()
    rec = wait_exit(fresh, 7)
    assert (rec.exit_code, rec.reason) == (7, "exited")
    assert state_of(fresh, 7) == RunState.EXITED


def test_sigkilled_supervisor_leaves_the_job_lost(ex: LocalExecutor) -> None:
    launch(ex, 1, ["sleep", "infinity"], ENV, "/", None, 1.0)
    child = child_of(ex, 1)
    pid = claim_of(ex, 1)["supervisor_pid"]
    assert state_of(ex, 1) == RunState.RUNNING
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: state_of(ex, 1) == RunState.LOST, what="LOST")
    assert ex.read_exit(1) is None
    assert cancel(ex, 1) is False
    assert state_of(LocalExecutor(ex.state_dir), 1) == RunState.LOST
    os.killpg(child["pgid"], signal.SIGKILL)  # the job itself lives on without it


def test_relative_state_dir_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the supervisor runs with cwd "/": paths must be absolute
    ex = LocalExecutor(Path("state"))
    assert run_job(ex, 1, ["/bin/true"]).exit_code == 0
    assert (tmp_path / "state" / "jobs" / "1" / "exit.json").exists()
    wait_for(lambda: not ex._starting(1), what="supervisor gone")


def test_unknown_job_is_unlaunched(ex: LocalExecutor) -> None:
    assert state_of(ex, 5) == RunState.UNLAUNCHED
    assert state_of(ex, 5) == RunState.UNLAUNCHED
    assert ex.read_exit(5) is None


def test_reap_leaves_no_zombie_supervisors(ex: LocalExecutor) -> None:
    run_job(ex, 1, ["/bin/true"])
    pid = claim_of(ex, 1)["supervisor_pid"]
    wait_for(lambda: getattr(proc_stat(pid), "state", None) == "Z", what="supervisor zombie")
    ex.reap()
    assert proc_stat(pid) is None
    assert state_of(ex, 1) == RunState.EXITED


# -- notify and latency --------------------------------------------------------------------


def test_notify_socket_is_woken_after_the_exit(tmp_path: Path) -> None:
    path = tmp_path / "d.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    server.settimeout(10)
    ex = LocalExecutor(tmp_path / "state", notify_socket=path)
    got: dict[str, Any] = {}

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            got["exit_seen"] = ex.read_exit(3) is not None
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(1024)
                if not chunk:
                    break
                data += chunk
            got["request"] = data
            conn.sendall(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")

    t = threading.Thread(target=serve)
    t.start()
    launch(ex, 3, ["/bin/true"], ENV, "/", None, 1.0)
    t.join(15)
    server.close()
    assert got.get("exit_seen") is True
    assert got["request"] == (
        b"POST /v1/internal/wake HTTP/1.1\r\nHost: gpupool\r\n"
        b"Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    wait_for(lambda: not ex._starting(3), what="supervisor gone")


def test_dead_notify_socket_is_ignored(tmp_path: Path) -> None:
    ex = LocalExecutor(tmp_path / "state", notify_socket=tmp_path / "nobody.sock")
    assert run_job(ex, 1, ["/bin/true"]).exit_code == 0
    wait_for(lambda: not ex._starting(1), what="supervisor gone")
    assert not (ex.job_dir(1) / "supervisor.log").exists()


def test_start_latency_is_loosely_bounded(ex: LocalExecutor) -> None:
    # Timing belongs to benchmarks; this only catches something badly wrong.
    t0 = time.time()
    launch(ex, 1, ["/bin/true"], ENV, "/", None, 1.0)
    spawned = child_of(ex, 1)["start_time"]
    assert spawned - t0 < 10.0  # loose, for a busy machine: the figures are in benchmarks
    wait_exit(ex, 1)


def test_launch_json_matches_the_contract(ex: LocalExecutor) -> None:
    run_job(ex, 4, ["/bin/true"], time_limit_s=5, grace_s=2)
    spec = json.loads((ex.job_dir(4) / "launch.json").read_text())
    assert spec == {
        "job_id": 4,
        "command": ["/bin/true"],
        "env": ENV,
        "workdir": "/",
        "time_limit_s": 5.0,
        "grace_s": 2.0,
        "notify_socket": None,
        "user": None,
        "umask": 0o022,  # DEFAULT_UMASK: none was given
        # The checkpoint default (LaunchRequest.warning, none named): USR1 120 s before the
        # limit, if the job's checkpoint directory holds something by then.
        "warning": {
            "signal": int(signal.SIGUSR1),
            "before_s": 120.0,
            "if_checkpointed": str(ex.state_dir / "checkpoints" / "4"),
        },
    }
    claim = read_json(ex.job_dir(4) / "claim.json")
    assert claim is not None and set(claim) >= {"supervisor_pid", "supervisor_start_ticks", "time"}
    assert sorted(p.name for p in ex.job_dir(4).iterdir()) == [
        "child.json",
        "claim.json",
        "exit.json",
        "launch.json",
        "output.log",
    ]
