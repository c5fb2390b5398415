"""A SIGKILL of the daemon while 20 clients submit and short jobs run: every acknowledged
job is stored once and runs once, no GPU is given to two jobs at once, and the jobs running
at the kill are re-adopted (the crash tests without load: test_crash_recovery.py)."""

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


def test_a_sigkill_under_a_load_of_submissions_loses_and_doubles_nothing(
    pool: Pool, tmp_path: Path
) -> None:
    """20 clients submit 100 short jobs while the daemon is killed, with jobs running: every
    acknowledged job is stored once and runs once, and the jobs running at the kill are
    re-adopted (they keep their GPUs through the restart and end as they would have)."""
    runs, go = tmp_path / "runs.log", tmp_path / "go"
    until_go = f"while [ ! -e {go} ]; do sleep 0.05; done"
    held = [pool.submit("--gpus", "1", "--", *recorded_job(runs, until_go)) for _ in range(2)]
    for job_id in held:
        pool.wait_state(job_id, "RUNNING")
    crowd = Crowd(pool.state_dir, total=100, clients=20, command=lambda n: recorded_job(runs))
    crowd.start()
    try:
        # The kill comes while the clients send and the short jobs run, however fast or
        # slow the machine.
        wait_for(lambda: crowd.count() >= 30 and len(read_runs(runs)) >= 2 + 5, 120, "load")
        gpus_before = {g.index: g.job for g in pool.client.gpus().nodes[0].gpus}
        pool.kill()
        pool.start()
        # The held jobs were re-adopted: still RUNNING on the same GPUs.
        gpus_after = {g.index: g.job for g in pool.client.gpus().nodes[0].gpus}
        assert {g: j for g, j in gpus_after.items() if j in held} == {
            g: j for g, j in gpus_before.items() if j in held
        }
        assert all(pool.client.job(j).state == "RUNNING" for j in held)
    finally:
        crowd.join()
    assert crowd.count() == 100
    go.touch()
    ids = [*held, *crowd.acknowledged.values()]
    for job_id in ids:
        assert pool.wait(job_id, timeout=180).state == "SUCCEEDED"
    assert_stored_exactly_once(pool.client, crowd.acknowledged)
    done = read_runs(runs)
    assert_each_ran_once(done, ids)
    assert gpu_overlaps(done) == []
