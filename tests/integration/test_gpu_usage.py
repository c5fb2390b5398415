"""What the pool shows of its GPUs' use (issue 14): on a declared inventory the simulated
sampler, through `GET /v1/gpus` and `gpupool gpus`. Backend-independent (no store writes of
its own): SQLite only, as the rule in conftest.py says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from integration.pool_harness import Pool, wait_for


def test_a_jobs_declared_use_shows_on_its_gpus_and_goes_when_it_ends(tmp_path: Path) -> None:
    pool = Pool(tmp_path / "pool", args=("--sample-interval", "0.2s")).start()
    try:
        go = tmp_path / "go"
        job = pool.submit(
            "--gpus", "2", "--env", "GPUPOOL_SIMULATED_UTIL=35", "--",
            "sh", "-c", f"while [ ! -e {go} ]; do sleep 0.05; done",
        )  # fmt: skip
        running = pool.wait_state(job, "RUNNING")

        def usage_of_its_gpus() -> list[float | None] | None:
            gpus = pool.client.gpus().nodes[0].gpus
            found = [g.usage for g in gpus if g.index in running.gpus]
            if any(u is None or u.utilization_pct != 35.0 for u in found):
                return None
            return [u.utilization_pct for u in found if u is not None]

        assert wait_for(usage_of_its_gpus, 30, "35% on the job's GPUs") == [35.0, 35.0]
        others = [g for g in pool.client.gpus().nodes[0].gpus if g.index not in running.gpus]
        assert all(g.usage is not None and g.usage.utilization_pct == 0.0 for g in others)
        assert all(g.usage is not None and g.usage.simulated for g in others)
        shown = pool.cli("gpus", check=True).stdout
        assert "35%" in shown and "UTIL and MEMORY USED are simulated" in shown, shown
        go.touch()
        pool.wait(job)

        def idle_again() -> bool:
            gpus = pool.client.gpus().nodes[0].gpus
            return all(g.usage is not None and g.usage.utilization_pct == 0.0 for g in gpus)

        wait_for(idle_again, 30, "the GPUs idle again")
    finally:
        pool.cleanup()


def test_sampling_can_be_switched_off(tmp_path: Path) -> None:
    pool = Pool(tmp_path / "pool", args=("--sample-interval", "off")).start()
    try:
        gpus = pool.client.gpus().nodes[0].gpus
        assert all(g.usage is None for g in gpus)
        shown = pool.cli("gpus", check=True).stdout
        assert "simulated" not in shown and "- / 80GiB" in shown, shown
    finally:
        pool.cleanup()


def test_a_declared_utilization_that_is_not_one_is_refused_at_submit(tmp_path: Path) -> None:
    pool = Pool(tmp_path / "pool").start()
    try:
        refused = pool.cli("submit", "--env", "GPUPOOL_SIMULATED_UTIL=half", "--", "true")
        assert refused.returncode == 2, refused
        assert "GPUPOOL_SIMULATED_UTIL='half'" in refused.stderr
        assert pool.client.job_page(limit=1).total == 0
    finally:
        pool.cleanup()


def test_an_exported_declared_use_is_honoured_as_an_env_one(tmp_path: Path) -> None:
    """GPUPOOL_SIMULATED_UTIL exported in the submitter's shell is the job's declaration, as
    with --env (issue 30, item 13: it was dropped with the client's GPUPOOL_* settings); a
    bad one is refused at submit, naming it and where it came from. docs/monitoring.md."""
    pool = Pool(tmp_path / "pool", args=("--sample-interval", "0.2s")).start()
    try:
        go = tmp_path / "go"
        env = {**pool.env, "GPUPOOL_SIMULATED_UTIL": "35"}
        submit = [sys.executable, "-m", "gpupool", "submit", "--parsable", "--gpus", "1", "--"]
        hold = ["sh", "-c", f"echo declared=$GPUPOOL_SIMULATED_UTIL; while [ ! -e {go} ]; "
                "do sleep 0.05; done"]  # fmt: skip
        done = subprocess.run(submit + hold, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        job = int(done.stdout)
        running = pool.wait_state(job, "RUNNING")

        def declared_on_its_gpu() -> bool:
            gpus = pool.client.gpus().nodes[0].gpus
            return all(
                g.usage is not None and g.usage.utilization_pct == 35.0
                for g in gpus
                if g.index in running.gpus
            )

        wait_for(declared_on_its_gpu, 30, "35% on the job's GPU")
        wait_for(lambda: "declared=35" in pool.log(job), 30, "the job's own view of it")
        go.touch()
        pool.wait(job)
        bad = {**pool.env, "GPUPOOL_SIMULATED_UTIL": "half"}
        refused = subprocess.run(
            submit + ["true"], env=bad, capture_output=True, text=True, timeout=60
        )
        assert refused.returncode == 2, refused
        assert "GPUPOOL_SIMULATED_UTIL='half'" in refused.stderr, refused.stderr
        assert "exported" in refused.stderr, refused.stderr
        assert pool.client.job_page(include_finished=True, limit=1).total == 1
    finally:
        pool.cleanup()


def test_top_shows_each_gpus_use_and_holder_then_why_jobs_wait(tmp_path: Path) -> None:
    pool = Pool(tmp_path / "pool", args=("--sample-interval", "0.2s")).start()
    try:
        go = tmp_path / "go"
        wait = f"while [ ! -e {go} ]; do sleep 0.05; done"
        running = pool.submit(
            "--gpus", "4", "--name", "train-a", "--env", "GPUPOOL_SIMULATED_UTIL=35", "--",
            "sh", "-c", wait,
        )  # fmt: skip
        pool.wait_state(running, "RUNNING")
        waiting = pool.submit("--gpus", "2", "--", "true")

        def frame() -> str | None:
            shown = pool.cli("top", "--once", check=True).stdout
            return shown if "35%" in shown and f"\n{waiting} " in shown else None

        shown = wait_for(frame, 30, "a frame with the job's use and the waiting job")
        assert "GPUs held 4/4" in shown and "pending 1" in shown, shown
        assert f"{running} " in shown and "train-a" in shown, shown
        assert "Resources" in shown and "simulated" in shown, shown
        go.touch()
        pool.wait(running)
    finally:
        pool.cleanup()
