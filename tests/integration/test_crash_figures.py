"""Issue 13's crash figures, kept as a test of their own (it is most of the crash tests'
time, so a file of its own lets `--dist loadfile` run it beside them): 1,000 acknowledged
jobs through 15 SIGKILLs of the daemon, none lost, none run twice, no GPU overlap."""

from __future__ import annotations

from pathlib import Path

from integration.crash_load import (
    Crowd,
    assert_each_ran_once,
    assert_stored_exactly_once,
    gpu_overlaps,
    read_runs,
    recorded_job,
)
from integration.pool_harness import Pool, wait_for


def test_the_crash_figures_1000_jobs_15_sigkills(pool: Pool, tmp_path: Path) -> None:
    """Issue 13's figures, kept: 1,000 acknowledged jobs (on 1 or 2 GPUs) through 15
    SIGKILLs of the daemon: 0 lost, 0 run twice, 0 GPU overlaps."""
    total, kills, runs = 1000, 15, tmp_path / "runs.log"
    crowd = Crowd(
        pool.state_dir,
        total=total,
        clients=10,
        command=lambda n: recorded_job(runs),
        gpus=lambda n: 1 + n % 2,
        deadline_s=600,
    )
    crowd.start()
    try:
        # Kills spread over the whole stream: kill k once k/16 of the jobs have started.
        for k in range(1, kills + 1):
            wait_for(lambda k=k: len(read_runs(runs)) >= k * total // (kills + 1), 300, f"kill {k}")
            pool.kill()
            pool.start()
    finally:
        crowd.join()
    assert crowd.count() == total
    for job_id in crowd.acknowledged.values():
        assert pool.wait(job_id, timeout=300).state == "SUCCEEDED"
    assert_stored_exactly_once(pool.client, crowd.acknowledged)
    done = read_runs(runs)
    assert_each_ran_once(done, list(crowd.acknowledged.values()))
    assert gpu_overlaps(done) == []
