"""Quota reclaim on the real daemon: project A borrows the whole box with preemptible jobs;
project B submits within its quota; two of A's jobs get SIGTERM, are requeued, and restart
later with GPUPOOL_RESTART_COUNT=1; B's jobs start within the grace period and a pass."""

from __future__ import annotations

import sys
from pathlib import Path

from integration.backends import Databases
from integration.pool_harness import FOREVER, Pool, wait_for

GRACE_S = 2
JOB = """
import os, signal, sys, time
log = sys.argv[1]
me = os.environ["GPUPOOL_JOB_ID"] + " " + os.environ["GPUPOOL_RESTART_COUNT"]
def term(*_):
    with open(log, "a") as f:
        f.write("TERM " + me + "\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
with open(log, "a") as f:
    f.write("START " + me + "\\n")
while True:
    time.sleep(3600)
"""


def _logged(log: Path, what: str) -> list[tuple[int, int]]:
    """(job id, restart count) of each line `what` in the jobs' log."""
    lines = log.read_text().splitlines() if log.exists() else []
    return [(int(w[1]), int(w[2])) for w in map(str.split, lines) if w[0] == what]


def test_project_under_quota_reclaims_borrowed_gpus(pool: Pool, tmp_path: Path) -> None:
    for name in ("team-a", "team-b"):
        pool.cli("project", "create", name, "--quota", "2", check=True)
    script, log = tmp_path / "job.py", tmp_path / "events.log"
    script.write_text(JOB)
    a_jobs = [
        pool.submit(
            "--project", "team-a", "--gpus", "1", "--grace", f"{GRACE_S}s", "--",
            sys.executable, str(script), str(log),
        )
        for _ in range(4)
    ]  # fmt: skip
    for job_id in a_jobs:
        pool.wait_state(job_id, "RUNNING")
    # Each has set its SIGTERM handler (it logs START after): a victim can say it was told.
    wait_for(lambda: len(_logged(log, "START")) == 4, what="A's jobs to start")
    b_jobs = [pool.submit("--project", "team-b", "--gpus", "1", "--", *FOREVER) for _ in range(2)]
    b_started = [pool.wait_state(job_id, "RUNNING") for job_id in b_jobs]
    terms = sorted(job_id for job_id, _ in _logged(log, "TERM"))
    assert len(terms) == 2 and set(terms) <= set(a_jobs)
    victims = [pool.client.job(victim) for victim in terms]
    for job in victims:
        assert job.state == "PENDING"
        assert job.restart_count == 1
        assert any("preempted" in e.cause for e in job.events)
    # B's jobs started within the grace period and a pass: on the daemon's own clock (the
    # test's CLI and polling do not count), with room for a slow machine.
    for job in b_started:
        assert job.start_time - job.submit_time < GRACE_S + 10, job
    survivors = set(a_jobs) - set(terms)
    assert all(pool.client.job(j).state == "RUNNING" for j in survivors)
    # B's jobs end; the requeued jobs run again, told it is their first restart.
    pool.cancel(*b_jobs)
    for victim in terms:
        pool.wait_state(victim, "RUNNING")
    wait_for(
        lambda: {j for j, restarts in _logged(log, "START") if restarts == 1} == set(terms),
        what="the victims to start again with GPUPOOL_RESTART_COUNT=1",
    )
    pool.cli("cancel", "--mine", check=True)


def test_a_job_half_over_quota_is_reclaimed_whole(tmp_path: Path, databases: Databases) -> None:
    """Issue 30, item 1, as it was found: teama and teamb have 4 GPUs each of 8; teamb runs
    one 8-GPU preemptible job (4 within its quota, 4 borrowed); teama's 4-GPU job waited
    `Resources` for a day, since no victim could put teamb under its quota. Now teamb's job is
    preempted whole, and teama's job starts within the grace period and a pass."""
    pool = Pool(tmp_path / "pool", gpus="8xA100-80GB", database_url=databases.new_url()).start()
    try:
        for name in ("teama", "teamb"):
            pool.cli("project", "create", name, "--quota", "4", check=True)
        script, log = tmp_path / "job.py", tmp_path / "events.log"
        script.write_text(JOB)
        big = pool.submit(
            "--project", "teamb", "--gpus", "8", "--preemptible", "--grace", f"{GRACE_S}s",
            "--", sys.executable, str(script), str(log),
        )  # fmt: skip
        pool.wait_state(big, "RUNNING")
        wait_for(lambda: len(_logged(log, "START")) == 1, what="teamb's job to start")
        claim = pool.submit("--project", "teama", "--gpus", "4", "--", *FOREVER)
        started = pool.wait_state(claim, "RUNNING")
        assert started.start_time - started.submit_time < GRACE_S + 10, started
        assert _logged(log, "TERM") == [(big, 0)]
        victim = pool.client.job(big)
        assert victim.state == "PENDING" and victim.restart_count == 1
        assert any("preempted" in e.cause for e in victim.events)
        pool.cli("cancel", "--mine", check=True)
    finally:
        pool.cleanup()
