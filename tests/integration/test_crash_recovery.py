"""SIGKILL the daemon at any moment: nothing acknowledged is lost, nothing starts twice,
running jobs are re-adopted with their true exit codes, and their GPUs stay held.

The same under load: test_crash_under_load.py (a crowd of clients) and
test_crash_figures.py (issue 13's 1,000 jobs through 15 SIGKILLs); three files, so that
`pytest -n 3 --dist loadfile` can run them on different workers."""

from __future__ import annotations

import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from gpupool.client import ApiError, DaemonNotRunning
from integration.pool_harness import Pool, wait_for

PY = sys.executable
STARTER = """
import os, sys, time
with open(sys.argv[1], "a") as f:
    f.write(os.environ["GPUPOOL_JOB_ID"] + "\\n")
time.sleep(float(sys.argv[2]))
sys.exit(int(sys.argv[3]))
"""
# until.py STARTS GO CODE: note the start in STARTS, run until the file GO exists, exit CODE.
UNTIL = """
import os, sys, time
with open(sys.argv[1], "a") as f:
    f.write(os.environ["GPUPOOL_JOB_ID"] + "\\n")
while not os.path.exists(sys.argv[2]):
    time.sleep(0.02)
sys.exit(int(sys.argv[3]))
"""


def test_running_jobs_survive_a_daemon_sigkill_and_are_readopted(
    pool: Pool, tmp_path: Path
) -> None:
    # The jobs run until told to stop: none can end during the restart, however slow it is.
    script, starts = tmp_path / "until.py", tmp_path / "starts.log"
    script.write_text(UNTIL)
    go = [tmp_path / f"go-{n}" for n in range(4)]
    first = [
        pool.submit("--gpus", "1", "--", PY, str(script), str(starts), str(go[n]), str(n))
        for n in range(4)
    ]
    for job_id in first:
        pool.wait_state(job_id, "RUNNING")
    # Submitted once the first hold every GPU: in one pass with them, a 2-GPU job could rank
    # ahead (the size factor) and start first.
    at_once = tmp_path / "go-later"
    at_once.touch()  # the later jobs end as soon as they start
    later = [
        pool.submit("--gpus", "2", "--", PY, str(script), str(starts), str(at_once), "7")
        for _ in range(2)
    ]
    held_before = {g.index: g.job for g in pool.client.gpus().nodes[0].gpus}
    assert sorted(held_before.values()) == sorted(first)
    pool.kill()
    pool.start()
    # Straight after the restart the GPUs are still held by the same jobs.
    held_after = {g.index: g.job for g in pool.client.gpus().nodes[0].gpus}
    assert held_after == held_before
    assert all(pool.client.job(j).state == "RUNNING" for j in first)
    assert all(pool.client.job(j).state == "PENDING" for j in later)
    for n, job_id in enumerate(first):
        go[n].touch()
        job = pool.wait(job_id)
        assert job.exit_code == n
        assert job.state == ("SUCCEEDED" if n == 0 else "FAILED")
    for job_id in later:
        job = pool.wait(job_id)
        assert (job.state, job.exit_code) == ("FAILED", 7)
    started = starts.read_text().split()
    assert sorted(started) == sorted(str(j) for j in first + later)  # each exactly once


def test_repeated_sigkills_during_a_stream_of_jobs(pool: Pool, tmp_path: Path) -> None:
    script, starts = tmp_path / "starter.py", tmp_path / "starts.log"
    script.write_text(STARTER)
    ids = [
        pool.submit("--gpus", str(1 + n % 2), "--", PY, str(script), str(starts), "0.3", "0")
        for n in range(12)
    ]
    # Each kill comes while the stream runs, however fast or slow the machine: after 2, 5
    # and 8 of the 12 jobs have started.
    for count in (2, 5, 8):
        wait_for(_at_least(starts, count), what=f"{count} jobs started")
        pool.kill()
        pool.start()
    for job_id in ids:
        assert pool.wait(job_id, timeout=90).state == "SUCCEEDED"
    started = starts.read_text().split()
    assert sorted(started, key=int) == [str(j) for j in ids]


def test_every_acknowledged_submission_exists_exactly_once(pool: Pool) -> None:
    acknowledged: dict[str, int] = {}
    in_flight: list[tuple[str, str]] = []
    stop = threading.Event()

    def submitter() -> None:
        n = 0
        while not stop.is_set():
            name, token = f"ack-{n}", uuid.uuid4().hex
            in_flight[:] = [(name, token)]
            try:  # one try: the test retries the cut-off submission itself, below
                job = pool.client.submit(_spec(name), token, retry=False)
            except (DaemonNotRunning, ApiError, OSError):
                return
            acknowledged[name] = job.id
            n += 1

    thread = threading.Thread(target=submitter)
    thread.start()
    wait_for(lambda: len(acknowledged) > 5 or not thread.is_alive(), what="6 acknowledged")
    pool.kill()  # while the submitter is still sending
    stop.set()
    thread.join(10)
    pool.start()
    assert len(acknowledged) > 5
    # The submission that was cut off is retried with its token: it lands at most once.
    name, token = in_flight[0]
    retried = pool.client.submit(_spec(name), token)
    again = pool.client.submit(_spec(name), token)
    assert retried.id == again.id
    jobs = pool.client.jobs(include_finished=True)
    by_name: dict[str, list[int]] = {}
    for job in jobs:
        by_name.setdefault(job.name, []).append(job.id)
    for name, job_id in acknowledged.items():
        assert by_name[name] == [job_id]
    assert all(len(v) == 1 for v in by_name.values())


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def _at_least(path: Path, count: int) -> Callable[[], bool]:
    return lambda: len(_lines(path)) >= count


def _spec(name: str) -> dict[str, object]:
    from gpupool.spec import build_spec, spec_to_wire

    return spec_to_wire(build_spec({"name": name, "command": ["true"]}, default_workdir="/"))
