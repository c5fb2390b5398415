"""Backfill, --begin holds, `why` and `queue --priority` on the real daemon."""

from __future__ import annotations

import json
import time

from integration.pool_harness import Pool


def test_small_short_jobs_backfill_without_delaying_the_reserved_big_job(pool: Pool) -> None:
    running = pool.submit("--gpus", "3", "--time", "40s", "--", "sleep", "40")
    pool.wait_state(running, "RUNNING")
    start = pool.client.job(running)["start_time"]
    big = pool.submit("--gpus", "4", "--time", "1m", "--", "true")
    short = pool.submit("--gpus", "1", "--time", "5s", "--", "sleep", "1")
    long = pool.submit("--gpus", "1", "--time", "2h", "--", "true")
    # The short job ends before the big job's reservation: it runs at once.
    assert pool.wait(short, timeout=30)["state"] == "SUCCEEDED"
    time.sleep(0.5)
    big_job, long_job = pool.client.job(big), pool.client.job(long)
    assert big_job["state"] == "PENDING" and big_job["reason"] == "Resources"
    assert big_job["reservation"] is not None
    assert abs(big_job["estimated_start"] - (start + 40)) < 2
    assert long_job["state"] == "PENDING" and long_job["reason"] == "Priority"
    why = pool.cli("why", str(big), check=True).stdout
    assert "expected start" in why and "reserved" in why
    assert "unknown" not in why.split("expected start:")[1].splitlines()[0]
    why_long = pool.cli("why", str(long), check=True).stdout
    assert "Priority" in why_long
    data = json.loads(pool.cli("why", str(big), "--json", check=True).stdout)
    assert data["reservation"]["gpus"] and data["reason"] == "Resources"
    pool.cli("cancel", str(running), check=True)
    assert pool.wait(big, timeout=60)["state"] == "SUCCEEDED"


def test_begin_holds_a_job_without_blocking_others(pool: Pool) -> None:
    later = pool.submit("--gpus", "4", "--begin", "now+1h", "--", "true")
    soon = pool.submit("--gpus", "1", "--begin", "now+2", "--", "true")
    free = pool.submit("--gpus", "4", "--", "true")
    assert pool.wait(free, timeout=30)["state"] == "SUCCEEDED"
    held = pool.client.job(later)
    assert held["state"] == "PENDING" and held["reason"] == "BeginTime"
    assert held["begin_time"] - time.time() > 3500
    assert "held" in pool.cli("why", str(later), check=True).stdout
    job = pool.wait(soon, timeout=30)
    assert job["state"] == "SUCCEEDED"
    assert job["start_time"] >= job["begin_time"]
    pool.cli("cancel", str(later), check=True)


def test_queue_priority_lists_factors_in_queue_order(pool: Pool) -> None:
    blocker = pool.submit("--gpus", "4", "--", "sleep", "30")
    pool.wait_state(blocker, "RUNNING")
    low = pool.submit("--gpus", "1", "--priority", "low", "--", "true")
    high = pool.submit("--gpus", "1", "--priority", "high", "--", "true")
    time.sleep(0.5)
    out = pool.cli("queue", "--priority", check=True).stdout.splitlines()
    assert out[0].split()[:4] == ["ID", "USER", "PROJECT", "CLASS"]
    ids = [int(line.split()[0]) for line in out[1:]]
    assert ids == [high, low]
    pool.cli("cancel", "--mine", check=True)
