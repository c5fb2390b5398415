"""Backfill, --begin holds, `why` and `queue --priority` on the real daemon."""

from __future__ import annotations

import json
import math
import time

from gpupool.policy.snapshot import PolicyConfig
from integration.pool_harness import FOREVER, Pool


def test_small_short_jobs_backfill_without_delaying_the_reserved_big_job(pool: Pool) -> None:
    # Held for the whole test (its limit is far off; it is cancelled at the end).
    running = pool.submit("--gpus", "3", "--time", "10m", "--", *FOREVER)
    start = pool.wait_state(running, "RUNNING").start_time
    big = pool.submit("--gpus", "4", "--time", "1m", "--", "true")
    short = pool.submit("--gpus", "1", "--time", "5s", "--", "true")
    long = pool.submit("--gpus", "1", "--time", "2h", "--", "true")
    # The short job ends before the big job's reservation: it runs at once.
    assert pool.wait(short).state == "SUCCEEDED"
    big_job = pool.wait_reason(big, "Resources")
    long_job = pool.wait_reason(long, "Priority")
    assert big_job.reservation is not None
    assert abs(big_job.estimated_start - (start + 600)) < 2
    why = pool.cli("why", str(big), check=True).stdout
    assert "expected start" in why and "reserved" in why
    assert "unknown" not in why.split("expected start:")[1].splitlines()[0]
    why_long = pool.cli("why", str(long), check=True).stdout
    assert "Priority" in why_long
    data = json.loads(pool.cli("why", str(big), "--json", check=True).stdout)
    assert data["reservation"]["gpus"] and data["reason"] == "Resources"
    assert long_job.state == "PENDING"
    pool.cancel(running)
    assert pool.wait(big).state == "SUCCEEDED"


def test_begin_holds_a_job_without_blocking_others(pool: Pool) -> None:
    later = pool.submit("--gpus", "4", "--begin", "now+1h", "--", "true")
    soon = pool.submit("--gpus", "1", "--begin", "now+2", "--", "true")
    free = pool.submit("--gpus", "4", "--", "true")
    assert pool.wait(free).state == "SUCCEEDED"
    held = pool.wait_reason(later, "BeginTime")
    assert held.begin_time - time.time() > 3500
    assert "held" in pool.cli("why", str(later), check=True).stdout
    job = pool.wait(soon)
    assert job.state == "SUCCEEDED"
    assert job.start_time >= job.begin_time
    pool.cancel(later)


PRIORITY_COLUMNS = (
    "ID",
    "USER",
    "PROJECT",
    "CLASS",
    "FAIRSHARE",
    "SERVICE",
    "AGE",
    "SIZE",
    "SCORE",
)


def expected_service(gpu_s: float) -> float:
    """The service factor of ordering.py's docstring, with the daemon's default weights."""
    scale = PolicyConfig().weights.service_max_gpu_s
    return 1.0 - min(1.0, math.log(1.0 + gpu_s / 60.0) / math.log(1.0 + scale / 60.0))


def test_queue_priority_lists_factors_in_queue_order(pool: Pool) -> None:
    blocker = pool.submit("--gpus", "4", "--", *FOREVER)
    pool.wait_state(blocker, "RUNNING")
    low = pool.submit("--gpus", "1", "--priority", "low", "--", "true")
    high = pool.submit("--gpus", "1", "--priority", "high", "--", "true")
    # Same class, project and user, the long job submitted first: the short one (less GPUs x
    # time limit: service) goes ahead of it.
    long = pool.submit("--gpus", "1", "--time", "2h", "--", "true")
    short = pool.submit("--gpus", "1", "--time", "5m", "--", "true")
    for job_id in (low, high, long, short):
        pool.wait_reason(job_id)
    out = pool.cli("queue", "--priority", check=True).stdout.splitlines()
    header = out[0].split()
    assert tuple(header) == PRIORITY_COLUMNS
    rows = [line.split() for line in out[1:]]
    assert [int(row[0]) for row in rows] == [high, short, long, low]
    # CLASS is two words ("high (300)"): the factors are counted from the right.
    column = header.index("SERVICE") - len(header)
    service = {int(row[0]): row[column] for row in rows}
    no_limit_s = PolicyConfig().default_time_limit_s  # the pool's: none configured
    assert service == {
        short: f"{expected_service(5 * 60):.3f}",  # 0.841
        long: f"{expected_service(2 * 3600):.3f}",  # 0.576
        high: f"{expected_service(no_limit_s):.3f}",  # 0.356 (a day)
        low: f"{expected_service(no_limit_s):.3f}",
    }
    pool.cancel(blocker, low, high, long, short)
