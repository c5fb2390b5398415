"""`gpupool plan cost --from-usage` on a real daemon: the utilization it measures is the pool's
own allocated GPU-hours over its capacity, finished and running jobs, fractional jobs by their
fraction."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from integration.backends import Databases
from integration.pool_harness import FOREVER, Pool

PY = sys.executable
COST = ["plan", "cost", "--capex", "8000", "--cloud-rate", "1.5", "--from-usage", "--json"]


def test_from_usage_counts_finished_running_and_fractional_jobs(
    tmp_path: Path, databases: Databases
) -> None:
    pool = Pool(tmp_path / "usage", gpus="2xA100-80GB", database_url=databases.new_url()).start()
    try:
        whole = pool.submit("--gpus", "2", "--", PY, "-c", "import time; time.sleep(0.5)")
        done = pool.wait(whole)
        assert done.state == "SUCCEEDED"
        half = pool.submit("--gpus", "0.5", "--", *FOREVER)
        running = pool.wait_state(half, "RUNNING")

        out = json.loads(pool.cli(*COST, check=True).stdout)
        usage = out["inputs"]
        start, end = usage["window_start"], usage["window_end"]
        assert start == pytest.approx(done.submit_time)  # no earlier than the first submit
        held_s = 2 * (done.end_time - done.start_time) + 0.5 * (end - running.start_time)
        assert usage["allocated_gpu_hours"] == pytest.approx(held_s / 3600, rel=1e-6)
        assert usage["capacity_gpus"] == 2
        assert usage["capacity_gpu_hours"] == pytest.approx(2 * (end - start) / 3600, rel=1e-6)
        assert usage["jobs_counted"] == 2
        utilization = usage["measured_utilization"]
        assert 0 < utilization < 1
        assert out["inputs"]["utilization"] == pytest.approx(utilization)
        assert out["cloud_usd_per_year"] == pytest.approx(1.5 * 8760 * utilization)

        table = pool.cli(*COST[:-1], "--window", "7d", check=True).stdout
        assert "measured" in table and "GPU-hours" in table
        pool.cancel(half)
    finally:
        pool.cleanup()


def test_from_usage_with_no_daemon_says_so_and_exits_1(tmp_path: Path) -> None:
    pool = Pool(tmp_path / "absent")  # never started
    proc = pool.cli(*COST)
    assert proc.returncode == 1
    assert "no daemon is running" in proc.stderr
    assert proc.stdout == ""
