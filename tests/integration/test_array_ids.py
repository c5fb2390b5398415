"""An array's id stands for every task of it, as in Slurm, through the real CLI: `wait`,
`--after` (each kind) and `show` (docs/jobs.md, "Arrays"; issue 30, item 3). `cancel`,
`hold` and `release` of an array id are test_job_dependencies.py's and test_steering.py's.

Before the fix each of these followed the array's first task only: `wait ARRAY` returned
when task 0 ended, with its code, and `--after ARRAY` started once task 0 had ended."""

from __future__ import annotations

import sys
from pathlib import Path

from integration.module_daemons import (  # noqa: F401
    pool_fixture,
    pytest_generate_tests,
    shared_daemon_fixture,
)
from integration.pool_harness import Pool, wait_for

# `pool`: one daemon per backend for the module (integration/module_daemons.py), idle again
# after each test: each test looks only at its own jobs.

PY = sys.executable

# A task that runs until the file named by its index exists in argv[1], then exits with
# argv[3] if its index is argv[2], else 0.
GATED = """
import os, sys, time
index = os.environ["GPUPOOL_ARRAY_INDEX"]
while not os.path.exists(os.path.join(sys.argv[1], index)):
    time.sleep(0.05)
sys.exit(int(sys.argv[3]) if index == sys.argv[2] else 0)
"""


def gated_array(pool: Pool, gates: Path, indices: str, failing: int, code: int) -> int:
    gates.mkdir(exist_ok=True)
    return pool.submit(
        "--array", indices, "--", PY, "-c", GATED, str(gates), str(failing), str(code)
    )


def waits_for(pool: Pool, job: int) -> tuple[int, ...]:
    """The jobs a pending job's --after still waits for (a pass's answer); fails at once
    if the job is no longer pending (it started or ended too early)."""
    view = pool.client.job(job)
    if view.state != "PENDING":
        raise AssertionError(f"job {job} is {view.state.value}, not waiting: {view}")
    return view.wait.jobs if view.wait is not None and view.reason == "Dependency" else ()


def test_wait_on_an_array_waits_for_every_task_and_exits_with_the_worst_code(
    pool: Pool, tmp_path: Path
) -> None:
    gates = tmp_path / "gates"
    first = gated_array(pool, gates, "0-2", failing=1, code=3)
    tasks = [first, first + 1, first + 2]  # one transaction, nothing else submitted
    for task in tasks:
        pool.wait_state(task, "RUNNING")
    (gates / "0").touch()
    assert pool.wait(first).state == "SUCCEEDED"
    running = pool.cli("wait", "--timeout", "1s", str(first))
    assert running.returncode == 124, running
    assert f"array {first} has not ended after 1s (2 tasks RUNNING; left as they are)" in (
        running.stderr
    )
    (gates / "1").touch()
    (gates / "2").touch()
    waited = pool.cli("wait", str(first))
    assert waited.returncode == 3, waited
    assert f"job {first + 1} ({first}_1) FAILED (exit 3)" in waited.stderr
    assert f"array {first}: 3 tasks ended: 2 SUCCEEDED, 1 FAILED" in waited.stderr


def test_after_an_array_waits_for_every_task_and_ok_fails_with_any_task(
    pool: Pool, tmp_path: Path
) -> None:
    gates = tmp_path / "gates"
    first = gated_array(pool, gates, "0-2", failing=1, code=3)
    on_any = pool.cli_submit("--after", f"{first}:any", "--", "true")
    on_ok = pool.cli_submit("--after", f"{first}:ok", "--", "true")
    for dependent in (on_any, on_ok):
        pool.wait_reason(dependent, "Dependency")
    (gates / "0").touch()
    assert pool.wait(first).state == "SUCCEEDED"
    # Task 0 ended: both still wait, for the tasks that run.
    for dependent in (on_any, on_ok):

        def on_tasks_1_and_2(job: int = dependent) -> bool:
            return waits_for(pool, job) == (first + 1, first + 2)

        assert wait_for(on_tasks_1_and_2, what=f"job {dependent} to wait for tasks 1 and 2")
    (gates / "1").touch()  # task 1 fails: :ok can never be met, while task 2 still runs
    cancelled = pool.wait(on_ok)
    assert cancelled.state == "CANCELLED" and cancelled.reason == "DependencyNeverSatisfied"
    assert pool.client.job(first + 2).state == "RUNNING"
    history = pool.cli("show", str(on_ok), check=True).stdout
    assert f"job {first + 1} ({first}_1) of array {first} ended FAILED, not SUCCEEDED" in history
    assert wait_for(lambda: waits_for(pool, on_any) == (first + 2,), what="only task 2 left")
    (gates / "2").touch()
    done = pool.wait(on_any)
    last = pool.wait(first + 2)
    assert done.state == "SUCCEEDED"
    assert done.start_time is not None and last.end_time is not None
    assert done.start_time >= last.end_time
    # The array ended with a failed task: a new :ok on it is refused at submit.
    refused = pool.cli("submit", "--after", f"{first}:ok", "--", "true")
    assert refused.returncode == 2, refused
    assert f"after: job {first + 1} ({first}_1) of array {first} ended FAILED" in refused.stderr


def test_after_ok_an_array_starts_once_its_last_task_succeeded(pool: Pool, tmp_path: Path) -> None:
    gates = tmp_path / "gates"
    first = gated_array(pool, gates, "0-1", failing=-1, code=0)
    on_ok = pool.cli_submit("--after", str(first), "--", "true")
    (gates / "0").touch()
    assert pool.wait(first).state == "SUCCEEDED"
    assert wait_for(lambda: waits_for(pool, on_ok) == (first + 1,), what="task 1 left")
    (gates / "1").touch()
    done = pool.wait(on_ok)
    assert done.state == "SUCCEEDED", done


def test_show_an_array_shows_every_task(pool: Pool) -> None:
    first = pool.submit("--begin", "now+1h", "--array", "0-2", "--name", "sweep", "--", "true")
    out = pool.cli("show", str(first), check=True).stdout
    heads = [line for line in out.splitlines() if line.startswith("Job ")]
    assert [h.split()[1] for h in heads] == [str(first), str(first + 1), str(first + 2)], out
    assert f"({first}_2, sweep)" in heads[2]
    import json

    listed = json.loads(pool.cli("show", "--json", str(first), check=True).stdout)
    assert [j["id"] for j in listed] == [first, first + 1, first + 2]
    # A task's own id is that task alone.
    alone = pool.cli("show", str(first + 1), check=True).stdout
    assert sum(line.startswith("Job ") for line in alone.splitlines()) == 1
    pool.cancel(first)
