"""GPUs idle while a job that could use them waited, on a real daemon (issue 33): a job held
by its project's limit while GPUs are free shows as quota idle time in `gpupool usage` (its
table and its --json) and in /metrics, and the figure survives a daemon restart (kept in the
store: store/idle_waiting.py), on each database."""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from integration.pool_harness import Pool, until_file, wait_for

COUNTER = "gpupool_idle_while_waiting_gpu_seconds"


def idle_hours(pool: Pool) -> dict[str, float]:
    report = json.loads(pool.cli("usage", "--json", check=True).stdout)
    by_cause = report["idle_waiting_gpu_hours"]
    assert set(by_cause) == {"quota", "fragmentation", "reservation", "other"}, report
    return by_cause


def quota_counter(pool: Pool) -> float:
    status, _, body = pool.client.request_raw("GET", "/metrics")
    assert status == 200
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    (quota,) = [s for s in families[COUNTER].samples if s.labels["cause"] == "quota"]
    return quota.value


def test_a_job_held_by_its_project_limit_on_free_gpus_counts_as_quota_idle_across_a_restart(
    pool: Pool, tmp_path: Path
) -> None:
    pool.client.create_project("vision", {"quota": 1, "limit": 1})
    job = until_file(tmp_path / "release")
    running = pool.submit("--gpus", "1", "--project", "vision", "--", *job)
    waiting = pool.submit("--gpus", "1", "--project", "vision", "--", *job)
    pool.wait_state(running, "RUNNING")
    pool.wait_reason(waiting)  # the pass that held it by vision's limit, 3 GPUs free

    # 3 GPUs free, the waiting job could use 1 of them: 1 GPU idle for quota while it waits.
    wait_for(lambda: idle_hours(pool)["quota"] * 3600 >= 1.0, 15, "a GPU-second of quota idle")
    table = pool.cli("usage", check=True).stdout
    assert "GPU-hours idle while jobs waited:" in table and "quota" in table, table

    pool.cancel(waiting)  # nothing waits any more: the figure stops growing
    pool.wait(waiting)
    before = idle_hours(pool)
    assert before["fragmentation"] == before["reservation"] == 0.0, before
    pool.stop()  # a clean stop writes what was not stored yet
    pool.start()
    after = idle_hours(pool)
    # Nothing waited since the restart: without the store this daemon would say 0.
    # (Up to rounding: the store adds the parts up in another order than the report did.)
    assert after["quota"] >= before["quota"] * (1 - 1e-9) > 0.0, (before, after)
    assert quota_counter(pool) >= before["quota"] * 3600 * (1 - 1e-9)  # the counter went on
    (tmp_path / "release").touch()
    assert pool.wait(running).state.value == "SUCCEEDED"
