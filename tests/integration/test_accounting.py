"""Accounting on a real daemon (issue 14): samples kept in the store, each job's GPU use,
`gpupool usage` by user, project and GPU type, and each GPU's history. On a declared
inventory, so the samples are the simulated sampler's."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from integration.pool_harness import Pool, wait_for


def test_usage_shows_allocated_and_used_gpu_hours_per_user_project_and_gpu_type(
    tmp_path: Path,
) -> None:
    pool = Pool(tmp_path / "pool", args=("--sample-interval", "0.2s")).start()
    try:
        go = tmp_path / "go"
        hold = f"while [ ! -e {go} ]; do sleep 0.05; done"
        busy = pool.submit("--gpus", "2", "--env", "GPUPOOL_SIMULATED_UTIL=40", "--",
                           "sh", "-c", hold)  # fmt: skip
        idle = pool.submit("--gpus", "1", "--env", "GPUPOOL_SIMULATED_UTIL=idle", "--",
                           "sh", "-c", hold)  # fmt: skip
        pool.wait_state(busy, "RUNNING")
        pool.wait_state(idle, "RUNNING")

        def sampled_enough() -> bool:
            usage = pool.client.job_usage(busy)
            other = pool.client.job_usage(idle)
            return all(u is not None and u.samples >= 5 for u in (usage, other))

        wait_for(sampled_enough, 30, "five samples of each job")
        go.touch()
        pool.wait(busy)
        pool.wait(idle)
        usage = pool.client.job_usage(busy)
        assert usage is not None and usage.simulated
        assert (usage.mean_util_pct, usage.p95_util_pct) == (40.0, 40.0)
        assert usage.efficiency is not None and abs(usage.efficiency - 0.4) < 1e-6
        assert usage.peak_memory_bytes and usage.energy_j > 0  # the A100's board power
        shown = pool.cli("show", str(busy), check=True).stdout
        assert "mean 40%, p95 40%" in shown and "(simulated)" in shown, shown

        report = json.loads(pool.cli("usage", "--json", check=True).stdout)
        (row,) = report["rows"]
        assert row["jobs"] == 2 and report["simulated"]
        # busy: 2 GPUs at 40%, idle: 1 GPU at 0%: used over sampled is 0.8 / 3 of the time
        # both ran together (every round charges both).
        assert 0.2 < row["efficiency"] < 0.3, row
        assert row["used_gpu_hours"] <= row["sampled_gpu_hours"] <= row["allocated_gpu_hours"] * 1.1
        by_type = pool.cli("usage", "--by", "gpu-type", "--csv", check=True).stdout
        rows = list(csv.DictReader(io.StringIO(by_type)))
        assert [r["gpu-type"] for r in rows] == ["A100-80GB", "total"], by_type
        table = pool.cli("usage", "--by", "project", check=True).stdout
        assert "default" in table and "simulated samples" in table, table

        history = pool.client.request("GET", "/v1/gpus/history", query={"since": "2m"})
        assert isinstance(history, dict)
        assert history["period_s"] == 0 and history["simulated"]
        series = {(g["node"], g["index"]): g["points"] for g in history["gpus"]}
        assert len(series) == pool.client.gpus().gpu_total
        assert all(len(p) >= 5 for p in series.values())
        busy_job = pool.client.job(busy)
        node = busy_job.node
        assert any(util == 40.0 for _, util, _ in series[(node, busy_job.gpus[0])])

        bad = pool.cli("usage", "--since", "soon")
        assert bad.returncode == 2 and "since: not a duration: 'soon'" in bad.stderr, bad
    finally:
        pool.cleanup()


def test_a_jobs_usage_survives_a_daemon_restart(tmp_path: Path) -> None:
    pool = Pool(tmp_path / "pool", args=("--sample-interval", "0.2s")).start()
    try:
        job = pool.submit("--gpus", "1", "--env", "GPUPOOL_SIMULATED_UTIL=70", "--", "sleep", "600")
        pool.wait_state(job, "RUNNING")
        wait_for(lambda: (u := pool.client.job_usage(job)) is not None and u.samples >= 3, 30,
                 "three samples")  # fmt: skip
        pool.kill()
        pool.start()
        before = pool.client.job_usage(job)
        assert before is not None and before.samples >= 3
        wait_for(lambda: (u := pool.client.job_usage(job)) is not None
                 and u.samples > before.samples, 30, "samples after the restart")  # fmt: skip
        after = pool.client.job_usage(job)
        assert after is not None and after.mean_util_pct == 70.0
        pool.cli("cancel", str(job), check=True)
        pool.wait(job)
    finally:
        pool.cleanup()
