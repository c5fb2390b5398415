"""Steering jobs with a real daemon and the real CLI, as Slurm users do with scontrol and
scancel: hold/release (surviving a restart, arrays too), update of a pending and a running
job, logs --tail, cancel --signal and cancel by name/state, wait --timeout, and queue's TIME
LIMIT column and --since filter (docs/jobs.md, "Steering jobs").

Before this change none of these verbs or flags existed: every test here failed."""

from __future__ import annotations

import sys
import time
from datetime import datetime
from pathlib import Path

from integration.module_daemons import (  # noqa: F401
    own_pool_fixture,
    pool_fixture,
    pytest_generate_tests,
    shared_daemon_fixture,
)
from integration.pool_harness import FOREVER, Pool, until_file, wait_for

PY = sys.executable

# `pool`: one daemon per backend for the module (integration/module_daemons.py), idle again
# after each test: each test looks only at its own jobs (`queue` lists the active ones only),
# but for the one that restarts the daemon, which takes one of its own.

# Traps USR1 into its log line and runs until the file in argv[1] exists.
TRAPPER = """
import os, signal, sys, time
def said(signum, frame):
    print("got", signal.Signals(signum).name, flush=True)
signal.signal(signal.SIGUSR1, said)
for i in range(1, 31):
    print("line", i, flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
"""


def test_a_held_job_never_starts_until_released_even_across_a_restart(own_pool: Pool) -> None:
    pool = own_pool  # it stops and starts the daemon
    held = pool.cli_submit("--hold", "--", "true")
    told = pool.wait_reason(held, "JobHeldUser")
    assert "held by its owner" in told.why, told
    why = pool.cli("why", str(held), check=True).stdout
    assert "held by its owner: it starts only once released" in why
    pool.stop()
    pool.start()
    assert pool.wait_reason(held, "JobHeldUser").state == "PENDING"
    out = pool.cli("release", str(held), check=True).stdout
    assert out.strip() == f"job {held}: released"
    assert pool.wait(held).state == "SUCCEEDED"


def test_hold_a_pending_job_and_an_array_refuses_a_running_one(pool: Pool, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    blocker = pool.submit("--gpus", "4", "--", *until_file(gate))
    pool.wait_state(blocker, "RUNNING")
    array = pool.submit("--gpus", "1", "--array", "0-2", "--", "true")
    out = pool.cli("hold", str(array), check=True).stdout
    assert f"job {array}: held 3 tasks ({array}, {array + 1}, {array + 2})" in out
    for task in (array, array + 1, array + 2):
        assert pool.wait_reason(task, "JobHeldUser").state == "PENDING"
    running = pool.cli("hold", str(blocker))
    assert running.returncode == 2, running
    assert f"job {blocker} is RUNNING: only a pending job can be held" in running.stderr
    gate.touch()
    assert pool.wait(blocker).state == "SUCCEEDED"
    # The GPUs are free, and still none of the held tasks starts; released, all run.
    assert pool.wait_reason(array + 2, "JobHeldUser").state == "PENDING"
    pool.cli("release", str(array), check=True)
    for task in (array, array + 1, array + 2):
        assert pool.wait(task).state == "SUCCEEDED"


def test_update_a_pending_job_reaches_the_next_pass_and_bad_values_are_refused(
    pool: Pool, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    blocker = pool.submit("--gpus", "3", "--", *until_file(gate))
    pool.wait_state(blocker, "RUNNING")
    waiting = pool.submit("--gpus", "2", "--time", "1h", "--", "true")
    pool.wait_reason(waiting, "Resources")
    never = pool.cli("update", str(waiting), "--gpus", "9")
    assert never.returncode == 2, never
    assert "gpus: needs 9 GPUs on one node" in never.stderr
    bad = pool.cli("update", str(waiting), "--time", "soon", "--priority", "urgent")
    assert bad.returncode == 2, bad
    assert "time: not a duration: 'soon'" in bad.stderr
    assert "priority: must be one of low, normal, high" in bad.stderr
    # One GPU fits beside the blocker: the next pass starts it.
    out = pool.cli("update", str(waiting), "--gpus", "1", "--time", "30m", "--priority", "high")
    assert out.returncode == 0, out
    assert "time limit 1h00m -> 30m00s, priority normal -> high, GPUs 2 -> 1" in out.stdout
    done = pool.wait(waiting)
    assert done.state == "SUCCEEDED" and done.time_limit_s == 1800, done
    assert done.priority_name == "high" and done.resources.gpus == 1
    gate.touch()


def test_a_running_jobs_time_limit_shortened_ends_it_as_a_timeout(pool: Pool) -> None:
    job = pool.submit("--time", "1h", "--grace", "1s", "--", *FOREVER)
    pool.wait_state(job, "RUNNING")
    other = pool.cli("update", str(job), "--gpus", "2")
    assert other.returncode == 2, other
    assert "only its time limit can change" in other.stderr
    pool.cli("update", str(job), "--time", "1s", check=True)
    ended = pool.wait(job)
    assert ended.state == "TIMEOUT" and ended.reason == "TimeLimit", ended


def test_logs_tail_and_cancel_signal_leave_the_job_running(pool: Pool, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    job = pool.submit("--name", "trapper", "--", PY, "-c", TRAPPER, str(gate))
    wait_for(lambda: "line 30" in pool.log(job), what="its 30 lines")
    tail = pool.cli("logs", "--tail", "2", str(job), check=True).stdout
    assert tail == "line 29\nline 30\n"
    sent = pool.cli("cancel", "--signal", "USR1", str(job), check=True).stdout
    assert sent.strip() == f"job {job}: sent USR1"
    wait_for(lambda: "got SIGUSR1" in pool.log(job), what="the job to get USR1")
    assert pool.client.job(job).state == "RUNNING"
    history = pool.cli("show", str(job), check=True).stdout
    assert "signal USR1 sent by" in history
    # Selected by name and state: the running trapper, not the pending job of another name.
    pending = pool.submit("--begin", "now+1h", "--", "true")
    none = pool.cli("cancel", "--name", "nosuch", "--state", "running")
    assert none.returncode == 0 and "no active job matches" in none.stderr, none
    out = pool.cli("cancel", "--name", "trapper", "--state", "running", check=True).stdout
    assert out.strip() == f"job {job}: cancelling"
    assert pool.wait(job).state == "CANCELLED"
    assert pool.client.job(pending).state == "PENDING"
    bad = pool.cli("cancel", "--signal", "NOPE", str(pending))
    assert bad.returncode == 2 and "signal: no signal 'NOPE'" in bad.stderr, bad


def test_wait_timeout_exits_124_and_leaves_the_job(pool: Pool) -> None:
    job = pool.submit("--begin", "now+1h", "--", "true")
    started = time.monotonic()
    proc = pool.cli("wait", "--timeout", "1s", str(job))
    assert proc.returncode == 124, proc
    assert f"job {job} has not ended after 1s (it is PENDING; left as it is)" in proc.stderr
    assert time.monotonic() - started >= 1.0
    assert pool.client.job(job).state == "PENDING"


def test_queue_time_limit_column_and_since(pool: Pool) -> None:
    old = pool.submit("--begin", "now+1h", "--time", "90m", "--", "true")
    cutoff = time.time()
    wait_for(lambda: time.time() > cutoff + 0.01, what="the clock to move")
    new = pool.submit("--begin", "now+1h", "--time", "2d", "--", "true")
    table = pool.cli("queue", check=True).stdout.splitlines()
    assert "TIME LIMIT" in table[0]
    rows = {line.split()[0]: line for line in table[1:]}
    assert " 1:30:00 " in rows[str(old)] and " 2-00:00:00 " in rows[str(new)]
    since = datetime.fromtimestamp(cutoff).isoformat()  # local time, to the microsecond
    later = pool.cli("queue", "--since", since, check=True).stdout.splitlines()
    assert [line.split()[0] for line in later[1:]] == [str(new)]
    ahead = datetime.fromtimestamp(time.time() + 60).isoformat()
    assert "No jobs match." in pool.cli("queue", "--since", ahead, check=True).stdout
    recent = pool.cli("queue", "--since", "1h", check=True).stdout
    assert str(old) in recent and str(new) in recent


def test_queue_filters_keep_arrays_folded_and_count_what_matches(pool: Pool) -> None:
    running = pool.submit("--", *FOREVER)
    array = pool.submit("--begin", "now+1h", "--array", "0-4", "--", "true")
    pool.wait_state(running, "RUNNING")
    table = pool.cli("queue", "--state", "pending", check=True).stdout.splitlines()
    assert [line.split()[0] for line in table[1:]] == [f"{array}_[0-4]"]
    page = pool.cli("queue", "--state", "pending", "--limit", "2").stdout.splitlines()
    assert page[-1].startswith("... and 3 more (3 PENDING)"), page
    both = pool.cli("queue", "--project", "default", "--since", "1h", check=True).stdout
    assert str(running) in both and f"{array}_[0-4]" in both
    assert "No jobs match." in pool.cli("queue", "--project", "nosuch", check=True).stdout
    pool.cancel(running, array)
