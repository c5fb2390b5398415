"""--after and --array with a real daemon: a job starts only once its dependencies ended as
asked (or is cancelled, saying why, when they never can); an array's tasks each see their
index and never run more than its %K at once; `cancel ARRAYID` cancels every task."""

from __future__ import annotations

import sys
from pathlib import Path

from integration.module_daemons import (  # noqa: F401
    pool_fixture,
    pytest_generate_tests,
    shared_daemon_fixture,
)
from integration.pool_harness import FOREVER, Pool, until_file, wait_for

# `pool`: one daemon per backend for the module (integration/module_daemons.py), idle again
# after each test: each test looks only at its own jobs (`queue` and `jobs()` list the
# active ones only).

PY = sys.executable

# A task of an array: records its index, array id and when it ran, taking a little time so
# that tasks started together overlap.
TASK = """
import os, pathlib, sys, time
start = time.time()
time.sleep(0.4)
index, array = os.environ["GPUPOOL_ARRAY_INDEX"], os.environ["GPUPOOL_ARRAY_JOB_ID"]
pathlib.Path(sys.argv[1], index).write_text(f"{array} {start} {time.time()}")
"""


def test_a_job_after_another_ok_starts_only_once_it_succeeded(pool: Pool, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    first = pool.submit("--", *until_file(gate))
    second = pool.submit("--after", f"{first}:ok", "--", "true")
    waiting = pool.wait_reason(second, "Dependency")
    assert f"waiting for job {first} to end (--after)" in waiting.why
    gate.touch()
    done = pool.wait(second)
    assert done.state == "SUCCEEDED", done
    ended = pool.wait(first)
    assert done.start_time is not None and ended.end_time is not None
    assert done.start_time >= ended.end_time


def test_a_failed_ok_dependency_cancels_the_job_and_any_runs_after_it(pool: Pool) -> None:
    failing = pool.submit("--", PY, "-c", "import time; time.sleep(0.5); exit(3)")
    on_ok = pool.submit("--after", str(failing), "--", "true")
    on_any = pool.submit("--after", f"{failing}:any", "--", "true")
    cancelled = pool.wait(on_ok)
    assert cancelled.state == "CANCELLED", cancelled
    assert cancelled.reason == "DependencyNeverSatisfied"
    history = pool.cli("show", str(on_ok), check=True).stdout
    assert f"dependency job {failing} ended FAILED, not SUCCEEDED" in history
    assert pool.wait(on_any).state == "SUCCEEDED"
    # Once it is known to have failed, a new --after on it is refused at submit.
    proc = pool.cli("submit", "--after", f"{failing}:ok", "--", "true")
    assert proc.returncode == 2, proc
    assert f"after: job {failing} ended FAILED" in proc.stderr


def test_an_unknown_dependency_is_refused_at_submit(pool: Pool) -> None:
    proc = pool.cli("submit", "--after", "99999", "--", "true")
    assert proc.returncode == 2, proc
    assert "after: no job 99999 in this pool" in proc.stderr


def test_an_array_runs_each_index_never_more_than_its_limit_at_once(
    pool: Pool, tmp_path: Path
) -> None:
    script, out = tmp_path / "task.py", tmp_path / "out"
    script.write_text(TASK)
    out.mkdir()
    first = pool.submit("--array", "0-5%2", "--", PY, str(script), str(out))
    ids = range(first, first + 6)  # one transaction, nothing else submitted: consecutive
    for job_id in ids:
        assert pool.wait(job_id).state == "SUCCEEDED"
    runs = {p.name: p.read_text().split() for p in out.iterdir()}
    assert sorted(runs, key=int) == [str(i) for i in range(6)]  # each task saw its index
    assert {array for array, _, _ in runs.values()} == {str(first)}
    spans = [(float(start), float(end)) for _, start, end in runs.values()]
    for start, _ in spans:  # at every task's start, at most 2 tasks were running
        assert sum(1 for s, e in spans if s <= start < e) <= 2, spans


def test_cancelling_an_array_cancels_every_task(pool: Pool) -> None:
    first = pool.submit("--array", "0-3%1", "--", *FOREVER)
    pool.wait_state(first, "RUNNING")
    waiting = pool.wait_reason(first + 1, "ArrayLimit")
    assert waiting.array_id == first and waiting.array_index == 1
    queue = pool.cli("queue", check=True).stdout
    assert f"{first}_0 " in queue and f"{first}_[1-3%1] " in queue, queue
    expanded = pool.cli("queue", "--expand", check=True).stdout
    assert all(f"{first}_{i} " in expanded for i in range(4)), expanded
    pool.cancel(first)
    for job_id in range(first, first + 4):
        assert pool.wait(job_id).state == "CANCELLED"
    wait_for(lambda: not pool.client.jobs(), 30, "no active job left")
