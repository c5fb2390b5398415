"""A backend's job through a real daemon, end to end (docs/backends.md), with a tiny real
backend written for tests (subprocess_backend.py: the command as a local subprocess, QUEUED
until a gate file appears) standing in for Slurm: submit --backend, PENDING with
QueuedInBackend and the backend's words, RUNNING, logs, the ref in show and queue --json,
adoption after the daemon is killed, cancel of a queued run, refusals, `gpupool backends`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gpupool.client import ApiError
from integration.pool_harness import Pool, until_file, wait_for
from integration.subprocess_backend import kill_runs

_LAUNCHER = Path(__file__).parent / "subprocess_backend_daemon.py"


class BackendPool(Pool):
    def wrap(self, cmd: list[str]) -> list[str]:
        assert cmd[1:3] == ["-m", "gpupool"]
        return [sys.executable, str(_LAUNCHER), *cmd[3:]]


@pytest.fixture
def pool(tmp_path: Path):  # type: ignore[no-untyped-def]
    p = BackendPool(tmp_path / "pool", gpus="2xA100-80GB")
    p.state_dir.mkdir(parents=True)
    (p.state_dir / "gpupool.toml").write_text('[backends.fake]\nkind = "slurm"\n')
    try:
        yield p.start()
    finally:
        p.cleanup()
        kill_runs(p.state_dir / "backends" / "fake")


def _gate(pool: Pool) -> Path:
    return pool.state_dir / "backends" / "fake" / "open"


def test_a_backend_job_is_queued_there_runs_is_adopted_and_ends(
    pool: BackendPool, tmp_path: Path
) -> None:
    done = tmp_path / "done"
    job_id = pool.cli_submit("--backend", "fake", "--gpus", "2", "--", *until_file(done))
    queued = pool.wait_reason(job_id, "QueuedInBackend")
    assert queued.state.value == "PENDING" and queued.backend == "fake"
    why = pool.cli("why", str(job_id), check=True).stdout
    assert "handed over to backend fake" in why
    wait_for(
        lambda: (
            pool.client.job(job_id).wait is not None
            and pool.client.job(job_id).wait.detail == "waiting for the gate file"
        ),  # type: ignore[union-attr]
        what="the backend's words in the status",
    )
    rows = json.loads(pool.cli("queue", "--json", check=True).stdout)
    row = next(j for j in rows if j["id"] == job_id)
    assert row["state"] == "PENDING" and row["wait"]["code"] == "QueuedInBackend"

    _gate(pool).touch()
    running = pool.wait_state(job_id, "RUNNING")
    assert running.backend_ref is not None and running.backend_ref.startswith("subprocess://gp-")
    assert running.gpus == ()  # no GPU of the pool is held for it
    show = pool.cli("show", str(job_id), check=True).stdout
    assert f"run {running.backend_ref}" in show

    # The daemon dies; the run goes on in the backend and is adopted by the next daemon.
    pool.kill()
    pool.start()
    assert pool.client.job(job_id).state.value == "RUNNING"
    wait_for(lambda: "re-adopted" in pool.daemon_log(), what="the adoption in the log")
    done.touch()
    ended = pool.wait(job_id)
    assert (ended.state.value, ended.exit_code) == ("SUCCEEDED", 0)


def test_logs_come_from_the_backend(pool: BackendPool) -> None:
    _gate(pool).touch()
    job_id = pool.cli_submit("--backend", "fake", "--", "echo", "hello from the backend")
    assert pool.wait(job_id).state.value == "SUCCEEDED"
    assert "hello from the backend" in pool.cli("logs", str(job_id), check=True).stdout


def test_a_queued_runs_cancel_goes_to_the_backend(pool: BackendPool) -> None:
    job_id = pool.cli_submit("--backend", "fake", "--", "sleep", "infinity")
    pool.wait_reason(job_id, "QueuedInBackend")
    wait_for(lambda: pool.client.job(job_id).backend_ref is not None, what="the run's ref")
    pool.cancel(job_id)
    ended = pool.wait(job_id)
    assert ended.state.value == "CANCELLED"
    run = Path(pool.client.job(job_id).backend_ref.removeprefix("subprocess://"))  # type: ignore[union-attr]
    record = pool.state_dir / "backends" / "fake" / "runs" / run.name / "exit.json"
    assert json.loads(record.read_text())["reason"] == "cancelled"  # cancelled there too


def test_refusals_name_the_field(pool: BackendPool) -> None:
    with pytest.raises(ApiError, match="backend: no backend named slurm2 .*configured: fake"):
        pool.submit("--backend", "slurm2", "--", "true")
    with pytest.raises(ApiError, match="nodes: the local pool is one machine; use --backend"):
        pool.submit("--nodes", "2", "--", "true")
    with pytest.raises(ApiError, match="nodes: backend fake runs a job on one node"):
        pool.submit("--backend", "fake", "--nodes", "2", "--gpus", "1", "--", "true")
    with pytest.raises(ApiError, match="gpus: backend fake gives whole GPUs"):
        pool.submit("--backend", "fake", "--gpus", "0.5", "--", "true")
    # Not checked against the local inventory: its backend's scheduler decides.
    job_id = pool.submit("--backend", "fake", "--gpus", "64", "--", "true")
    assert pool.wait_reason(job_id, "QueuedInBackend").state.value == "PENDING"


def test_gpupool_backends_lists_the_local_pool_first(pool: BackendPool) -> None:
    rows = json.loads(pool.cli("backends", "--json", check=True).stdout)["backends"]
    assert [(r["name"], r["kind"], r["reachable"]) for r in rows] == [
        ("local", "local", True),
        ("fake", "slurm", True),
    ]
    (pool.state_dir / "backends" / "fake" / "down").touch()
    table = pool.cli("backends", check=True).stdout
    assert "NAME" in table and "REACHABLE" in table
    fake = next(line for line in table.splitlines() if line.startswith("fake"))
    assert "NO" in fake and "down (test)" in fake
