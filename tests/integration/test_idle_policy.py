"""The idle-GPU policy and GPU memory overuse on a real daemon (issue 14), with the
simulated sampler: jobs declare how busy they are (GPUPOOL_SIMULATED_UTIL) and how much
GPU memory they use (GPUPOOL_SIMULATED_MEMORY)."""

from __future__ import annotations

import json
from pathlib import Path

from integration.pool_harness import Pool, wait_for

HOLD = "while :; do sleep 0.05; done"


def history(pool: Pool, job: int) -> str:
    return pool.cli("show", str(job), check=True).stdout


def test_an_idle_job_is_stopped_noted_in_its_log_and_counted_as_reclaimed(tmp_path: Path) -> None:
    pool = Pool(tmp_path / "pool", args=("--sample-interval", "0.2s")).start()
    try:
        pool.cli("project", "create", "ml", "--idle-timeout", "1s", "--idle-action", "stop",
                 check=True)  # fmt: skip
        listed = pool.cli("project", "list", check=True).stdout
        assert "stop after 1s below 5%" in listed, listed
        busy = pool.submit("--project", "ml", "--gpus", "1", "--", "sh", "-c", HOLD)
        idle = pool.submit("--project", "ml", "--gpus", "1", "--time", "1h",
                           "--env", "GPUPOOL_SIMULATED_UTIL=idle", "--", "sh", "-c", HOLD)  # fmt: skip
        done = pool.wait(idle, timeout=60)
        assert done.state.value == "CANCELLED"
        assert "stopped as idle: GPU utilization below 5% for" in history(pool, idle)
        assert "[gpupool] stopped as idle" in pool.log(idle)
        assert pool.client.job(busy).state.value == "RUNNING"  # busy: left alone
        report = json.loads(pool.cli("usage", "--by", "project", "--json", check=True).stdout)
        (ml,) = [r for r in report["rows"] if r["group"] == "ml"]
        # from the stop to the end of its 1 h limit, within the window (which ends now)
        assert 0 < ml["idle_reclaimed_gpu_hours"] < 0.01, ml
        pool.cancel(busy)
    finally:
        pool.cleanup()


def test_an_idle_preemptible_job_is_requeued_for_a_waiting_one_and_notify_only_notes(
    tmp_path: Path,
) -> None:
    pool = Pool(tmp_path / "pool", gpus="1xA100-80GB", args=("--sample-interval", "0.2s")).start()
    try:
        pool.cli("project", "create", "ml", "--idle-timeout", "1s", "--idle-action", "notify",
                 check=True)  # fmt: skip
        first = pool.submit("--project", "ml", "--gpus", "1",
                            "--env", "GPUPOOL_SIMULATED_UTIL=2", "--", "sh", "-c", HOLD)  # fmt: skip
        wait_for(lambda: "[gpupool] idle: GPU utilization below 5%" in pool.log(first), 60,
                 "the idle note in the job's log")  # fmt: skip
        assert "(project ml's idle policy: notify)" in history(pool, first)
        assert pool.client.job(first).state.value == "RUNNING"
        pool.cli("project", "set", "ml", "--idle-action", "requeue", check=True)
        waiting = pool.submit("--gpus", "1", "--", "true")
        pool.wait(waiting, timeout=60)  # it got the idle job's GPU
        text = history(pool, first)
        assert "requeued to give its GPUs to waiting jobs" in text, text
        assert "requeued, held 1s so that waiting jobs start first" in text, text
        assert pool.client.job(first).restart_count >= 1
        pool.cancel(first)
    finally:
        pool.cleanup()


def test_a_shared_gpu_job_above_its_memory_is_warned_then_stopped(tmp_path: Path) -> None:
    args = ("--sample-interval", "0.2s", "--memory-overuse-grace", "1s")
    pool = Pool(tmp_path / "pool", args=args).start()
    try:
        over = pool.submit("--gpus", "0.25", "--env", "GPUPOOL_SIMULATED_MEMORY=30GiB", "--",
                           "sh", "-c", HOLD)  # fmt: skip
        fits = pool.submit("--gpus", "0.25", "--env", "GPUPOOL_SIMULATED_MEMORY=10GiB", "--",
                           "sh", "-c", HOLD)  # fmt: skip
        done = pool.wait(over, timeout=60)
        assert done.state.value == "CANCELLED"
        text = history(pool, over)
        assert "uses 30GiB of GPU memory, more than the 20GiB it was granted" in text, text
        assert "stopped: used 30GiB of GPU memory for over 1s" in text, text
        assert pool.client.job(fits).state.value == "RUNNING"
        refused = pool.cli("submit", "--env", "GPUPOOL_SIMULATED_MEMORY=lots", "--", "true")
        assert refused.returncode == 2 and "GPUPOOL_SIMULATED_MEMORY='lots'" in refused.stderr
        pool.cancel(fits)
    finally:
        pool.cleanup()


def test_memory_overuse_can_be_only_warned(tmp_path: Path) -> None:
    args = ("--sample-interval", "0.2s", "--memory-overuse", "warn")
    pool = Pool(tmp_path / "pool", args=args).start()
    try:
        over = pool.submit("--gpus", "0.25", "--env", "GPUPOOL_SIMULATED_MEMORY=30GiB", "--",
                           "sh", "-c", HOLD)  # fmt: skip
        wait_for(lambda: "the pool only warns" in history(pool, over), 60, "the warning")
        assert "[gpupool] uses 30GiB" in pool.log(over)
        assert pool.client.job(over).state.value == "RUNNING"
        pool.cancel(over)
    finally:
        pool.cleanup()
