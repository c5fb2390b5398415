"""`gpupool sim --trace history --compare static,default` on a real pool that ran jobs: the
pool's own history (from its API), on its own GPUs and projects, replayed under both
profiles; static (each project its quota, nothing lent) queues what pooling ran at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from integration.pool_harness import Pool, until_file

pytestmark = pytest.mark.backend_independent  # the replay reads the API, not the store


def test_history_replayed_static_queues_what_pooling_ran_at_once(
    pool: Pool, tmp_path: Path
) -> None:
    for name in ("vision", "nlp"):
        pool.client.create_project(name, {"quota": 2})
    release = tmp_path / "release"
    job = until_file(release)
    # On 4 GPUs, vision runs 3 one-GPU jobs (one above its quota, borrowing nlp's idle GPU)
    # and nlp one: all four at once, which static partitions cannot do.
    ids = [pool.submit("--gpus", "1", "--project", "vision", "--", *job) for _ in range(3)]
    ids.append(pool.submit("--gpus", "1", "--project", "nlp", "--", *job))
    for job_id in ids:
        pool.wait_state(job_id, "RUNNING")
    release.touch()
    for job_id in ids:
        assert pool.wait(job_id).state.value == "SUCCEEDED"

    out = pool.cli(
        "sim", "--trace", "history", "--compare", "static,default", "--interval", "0",
        "--estimates", "oracle", "--json", check=True, timeout=120,
    )  # fmt: skip
    got = json.loads(out.stdout)
    run = got["_run"]
    assert run["jobs"] == 4 and run["capacity_gpus"] == 4
    static, pooled = got["static"], got["default"]
    assert static["jobs"] == pooled["jobs"] == 4
    assert static["unfinished"] == pooled["unfinished"] == 0
    assert pooled["avg_queue_s"] == 0.0  # everything started at once, as on the pool
    assert static["avg_queue_s"] > 0.0  # vision's third job waited for vision's own GPUs
    # nlp's second GPU sat idle while vision's job that could use it waited: quota.
    assert static["idle_waiting_by_cause"]["quota"] > 0.0
    assert pooled["idle_waiting_gpu_hours"] == 0.0

    tables = pool.cli(
        "sim", "--trace", "history", "--compare", "static,default", "--interval", "0",
        check=True, timeout=120,
    ).stdout  # fmt: skip
    assert "4 jobs on 4 GPUs" in tables
    assert "GPU-hours idle while jobs waited, by cause" in tables
    assert "static" in tables and "default" in tables
