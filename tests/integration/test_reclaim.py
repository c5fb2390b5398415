"""Quota reclaim on the real daemon: project A borrows the whole box with preemptible jobs;
project B submits within its quota; two of A's jobs get SIGTERM, are requeued, and restart
later with GPUPOOL_RESTART_COUNT=1; B's jobs start within the grace period and a pass."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from integration.pool_harness import Pool

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
time.sleep(120)
"""


def test_project_under_quota_reclaims_borrowed_gpus(pool: Pool, tmp_path: Path) -> None:
    for name in ("team-a", "team-b"):
        pool.cli("project", "create", name, "--quota", "2", check=True)
    script, log = tmp_path / "job.py", tmp_path / "events.log"
    script.write_text(JOB)
    a_jobs = [
        pool.submit(
            "--project",
            "team-a",
            "--gpus",
            "1",
            "--grace",
            "2s",
            "--",
            sys.executable,
            str(script),
            str(log),
        )
        for _ in range(4)
    ]
    for job_id in a_jobs:
        pool.wait_state(job_id, "RUNNING")
    submitted = time.monotonic()
    b_jobs = [
        pool.submit("--project", "team-b", "--gpus", "1", "--", "sleep", "60") for _ in range(2)
    ]
    for job_id in b_jobs:
        pool.wait_state(job_id, "RUNNING", timeout=20)
    assert time.monotonic() - submitted < 2 + 5  # grace + a pass, with room for a slow box
    lines = log.read_text().split("\n")
    terms = sorted(int(line.split()[1]) for line in lines if line.startswith("TERM"))
    assert len(terms) == 2 and set(terms) <= set(a_jobs)
    for victim in terms:
        job = pool.client.job(victim)
        assert job["state"] == "PENDING"
        assert job["restart_count"] == 1
        assert any("preempted" in e["cause"] for e in job["events"])
    survivors = set(a_jobs) - set(terms)
    assert all(pool.client.job(j)["state"] == "RUNNING" for j in survivors)
    # B's jobs end; the requeued jobs run again, told it is their first restart.
    pool.cli("cancel", *map(str, b_jobs), check=True)
    for victim in terms:
        pool.wait_state(victim, "RUNNING", timeout=30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        restarted = {
            int(line.split()[1])
            for line in log.read_text().split("\n")
            if line.startswith("START") and line.endswith(" 1")
        }
        if restarted == set(terms):
            break
        time.sleep(0.1)
    assert restarted == set(terms)
    pool.cli("cancel", "--mine", check=True)
