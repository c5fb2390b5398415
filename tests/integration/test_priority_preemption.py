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
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(sys.argv[1], "a") as f:
    f.write("START " + os.environ["GPUPOOL_JOB_ID"] + " 0\\n")
time.sleep(3600)
"""


def test_a_higher_class_preempts_a_lower_class_job_of_its_project(
    pool: Pool, tmp_path: Path
) -> None:
    # Preemption spares jobs younger than the project's preempt_min_runtime (5 minutes by
    # default); this project lets its jobs be stopped at once.
    pool.cli("project", "create", "lab", "--preempt-min-runtime", "0s", check=True)
    script, log = tmp_path / "job.py", tmp_path / "events.log"
    script.write_text(JOB)
    gpus = 4  # the pool fixture's inventory: 4xA100-80GB
    low = [
        pool.submit(
            "--project", "lab", "--gpus", "1", "--priority", "low", "--preemptible",
            "--grace", f"{GRACE_S}s", "--", sys.executable, str(script), str(log),
        )
        for _ in range(gpus)
    ]  # fmt: skip
    for job_id in low:
        pool.wait_state(job_id, "RUNNING")
    wait_for(lambda: len(_logged(log, "START")) == gpus, what="the low jobs to start")
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
    pool.cli("project", "create", "lab", "--preempt-min-runtime", "0s", check=True)
    script, log = tmp_path / "stubborn.py", tmp_path / "events.log"
    script.write_text(STUBBORN)
    gpus = 4  # the pool fixture's inventory: 4xA100-80GB
    low = [
        pool.submit(
            "--project", "lab", "--gpus", "1", "--priority", "low", "--preemptible",
            "--grace", "60s", "--", sys.executable, str(script), str(log),
        )
        for _ in range(gpus)
    ]  # fmt: skip
    for job_id in low:
        pool.wait_state(job_id, "RUNNING")
    wait_for(lambda: len(_logged(log, "START")) == gpus, what="the low jobs to ignore SIGTERM")
    high = pool.submit("--project", "lab", "--gpus", "1", "--priority", "high", "--", *FOREVER)

    def told() -> str | None:
        out = pool.cli("why", str(high)).stdout
        return out if "to stop" in out else None

    said = wait_for(told, what="why to name the job being stopped")
    assert "higher priority class" in said
    assert any(f"job {j} " in said for j in low), said
    pool.cli("cancel", "--mine", check=True)
