"""Priorities that preempt, on the real daemon (issue 33, item 2): a full pool of
`--priority low` preemptible jobs; a `--priority high` job of the same project stops the one
that loses least, starts within its grace period and a pass, and says why while it waits;
the victim is requeued, told why in its history, and runs again once there is room."""

from __future__ import annotations

import sys
from pathlib import Path

from integration.pool_harness import FOREVER, Pool, wait_for
from integration.test_reclaim import JOB, _logged

GRACE_S = 2
STUBBORN = """
import os, signal, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(sys.argv[1], "a") as f:
    f.write("START " + os.environ["GPUPOOL_JOB_ID"] + " 0\\n")
while True:  # until SIGKILL: SIGTERM is ignored
    signal.pause()
"""


GPUS = 4  # the pool fixture's inventory: 4xA100-80GB


def fill_with_low_jobs(pool: Pool, job: str, log: Path, grace: str) -> list[int]:
    """A project `lab` whose jobs may be stopped at once (preemption otherwise spares jobs
    younger than its preempt_min_runtime, 5 minutes by default), and the pool full of its
    preemptible `--priority low` jobs running `job`, each having logged START."""
    pool.cli("project", "create", "lab", "--preempt-min-runtime", "0s", check=True)
    script = log.with_name("job.py")
    script.write_text(job)
    low = [
        pool.submit(
            "--project", "lab", "--gpus", "1", "--priority", "low", "--preemptible",
            "--grace", grace, "--", sys.executable, str(script), str(log),
        )
        for _ in range(GPUS)
    ]  # fmt: skip
    for job_id in low:
        pool.wait_state(job_id, "RUNNING")
    wait_for(lambda: len(_logged(log, "START")) == GPUS, what="the low jobs to start")
    return low


def test_a_higher_class_preempts_a_lower_class_job_of_its_project(
    pool: Pool, tmp_path: Path
) -> None:
    log = tmp_path / "events.log"
    low = fill_with_low_jobs(pool, JOB, log, f"{GRACE_S}s")
    high = pool.submit("--project", "lab", "--gpus", "1", "--priority", "high", "--", *FOREVER)
    started = pool.wait_state(high, "RUNNING")
    assert started.start_time - started.submit_time < GRACE_S + 10, started
    (victim,) = [job_id for job_id, _ in _logged(log, "TERM")]
    assert victim in low
    stopped = pool.client.job(victim)
    assert stopped.state == "PENDING" and stopped.restart_count == 1
    assert any("priority class high" in e.cause for e in stopped.events), stopped.events
    # The victim is of the low class: it waits behind nothing now but room.
    pool.cancel(high)
    pool.wait_state(victim, "RUNNING")
    pool.cli("cancel", "--mine", check=True)


def test_why_names_the_job_a_high_class_job_waits_to_stop(pool: Pool, tmp_path: Path) -> None:
    # Victims that ignore SIGTERM and have a long grace: the preemption is seen under way.
    low = fill_with_low_jobs(pool, STUBBORN, tmp_path / "events.log", "60s")
    high = pool.submit("--project", "lab", "--gpus", "1", "--priority", "high", "--", *FOREVER)

    def told() -> str | None:
        out = pool.cli("why", str(high)).stdout
        return out if "to stop" in out else None

    said = wait_for(told, what="why to name the job being stopped")
    assert "higher priority class" in said
    assert any(f"job {j} " in said for j in low), said
    pool.cli("cancel", "--mine", check=True)
