"""A backend's job through a real daemon and a real Slurm, end to end (docs/backends.md).

One Slurm cluster (tests/slurm_cluster.py: slurmctld and two slurmd nodes with two fake GPUs
each) and one daemon whose gpupool.toml names it `[backends.hpc]` with `admission =
"engine"` (handed over at once, Slurm decides): submit --backend, PENDING
with QueuedInBackend and Slurm's reason while a job outside the pool holds every GPU,
RUNNING, logs, the ref in show and queue --json, adoption after the daemon is killed, the
exit code, a queued run's cancel reaching Slurm, refusals by field, and `gpupool backends`
with slurmctld down and back. Skips when Slurm cannot be had (GPUPOOL_REQUIRE_ALL=1 makes
that a failure).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm_cluster import CLUSTER_NAME, SlurmCluster

from gpupool.client import ApiError
from integration.pool_harness import wait_for
from integration.slurm_pool import SlurmPool, cluster_fixture, module_pool  # noqa: F401

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", name="pool")
def engine_admits_pool(
    cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SlurmPool]:
    """`[backends.hpc]` with `admission = "engine"`: jobs are handed over at once and Slurm
    decides (the pool's own admission is test_backend_admission.py's)."""
    yield from module_pool(cluster, tmp_path_factory, 'admission = "engine"\n')


def _hold_every_gpu(cluster: SlurmCluster) -> str:
    """A job outside the pool on both nodes' GPUs: the pool's next job waits for Resources."""
    out = cluster.run(
        ["sbatch", "--parsable", "-N2", "--gres=gpu:2", "--output=/dev/null", "--wrap", "sleep 600"]
    )
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip().split(";")[0]
    wait_for(
        lambda: "RUNNING" in cluster.run(["squeue", "-h", "-j", job, "-o", "%T"]).stdout,
        timeout=60,
        what="the blocking job running",
    )
    return job


def test_queued_in_slurm_then_running_adopted_and_ended(
    pool: SlurmPool, cluster: SlurmCluster, tmp_path: Path
) -> None:
    blocker = _hold_every_gpu(cluster)
    done = tmp_path / "done"
    wait_done = f"echo hello from slurm; while [ ! -e {done} ]; do sleep 0.2; done"
    job_id = pool.cli_submit("--backend", "hpc", "--gpus", "2", "--", "sh", "-c", wait_done)
    queued = pool.wait_reason(job_id, "QueuedInBackend", timeout=60)
    assert queued.state.value == "PENDING" and queued.backend == "hpc"
    wait_for(
        lambda: (w := pool.client.job(job_id).wait) is not None and w.detail == "Resources",
        what="Slurm's reason (Resources) in the job's status",
    )
    assert "handed over to backend hpc" in pool.cli("why", str(job_id), check=True).stdout
    row = next(
        j for j in json.loads(pool.cli("queue", "--json", check=True).stdout) if j["id"] == job_id
    )
    assert row["state"] == "PENDING" and row["wait"]["code"] == "QueuedInBackend"

    cluster.run(["scancel", blocker])
    running = pool.wait_state(job_id, "RUNNING", timeout=90)
    assert running.backend_ref is not None
    assert running.backend_ref.startswith(f"slurm://{CLUSTER_NAME}/")
    slurm_id = running.backend_ref.rsplit("/", 1)[1]
    assert "RUNNING" in cluster.run(["squeue", "-h", "-j", slurm_id, "-o", "%T"]).stdout
    # Its GPUs as accounting counts them: on the backend, where its engine chose.
    assert (running.node, running.gpus) == ("hpc", (0, 1))
    assert f"run {running.backend_ref}" in pool.cli("show", str(job_id), check=True).stdout

    # The daemon dies; the run goes on in Slurm and the next daemon takes it back.
    pool.kill()
    pool.start()
    assert pool.client.job(job_id).state.value == "RUNNING"
    wait_for(lambda: "re-adopted" in pool.daemon_log(), what="the adoption in the log")
    done.touch()
    ended = pool.wait(job_id, timeout=90)
    assert (ended.state.value, ended.exit_code) == ("SUCCEEDED", 0)
    assert "hello from slurm" in pool.cli("logs", str(job_id), check=True).stdout


def test_a_failing_job_reports_its_exit_code(pool: SlurmPool) -> None:
    job_id = pool.cli_submit("--backend", "hpc", "--", "sh", "-c", "echo failing >&2; exit 3")
    ended = pool.wait(job_id, timeout=90)
    assert (ended.state.value, ended.exit_code) == ("FAILED", 3)
    assert "failing" in pool.cli("logs", str(job_id), check=True).stdout


def test_a_queued_runs_cancel_reaches_slurm(pool: SlurmPool, cluster: SlurmCluster) -> None:
    blocker = _hold_every_gpu(cluster)
    try:
        job_id = pool.cli_submit("--backend", "hpc", "--gpus", "1", "--", "sleep", "600")
        pool.wait_reason(job_id, "QueuedInBackend", timeout=60)
        ref = wait_for(lambda: pool.client.job(job_id).backend_ref, what="the run's ref")
        pool.cancel(job_id)
        assert pool.wait(job_id, timeout=60).state.value == "CANCELLED"
        slurm_id = str(ref).rsplit("/", 1)[1]
        shown = cluster.run(["scontrol", "show", "job", slurm_id]).stdout
        assert "JobState=CANCELLED" in shown  # cancelled in Slurm too, not only in the pool
    finally:
        cluster.run(["scancel", blocker])


def test_refusals_name_the_field(pool: SlurmPool) -> None:
    with pytest.raises(ApiError, match="backend: no backend named slurm2 .*configured: hpc"):
        pool.submit("--backend", "slurm2", "--", "true")
    with pytest.raises(ApiError, match="nodes: the local pool is one machine; use --backend"):
        pool.submit("--nodes", "2", "--", "true")
    with pytest.raises(ApiError, match="gpus: backend hpc gives whole GPUs"):
        pool.submit("--backend", "hpc", "--gpus", "0.5", "--", "true")
    with pytest.raises(ApiError, match="image: backend hpc runs no container images"):
        pool.submit("--backend", "hpc", "--image", "busybox", "--", "true")


def test_gpupool_backends_shows_slurm_down_and_back(pool: SlurmPool, cluster: SlurmCluster) -> None:
    rows = json.loads(pool.cli("backends", "--json", check=True).stdout)["backends"]
    assert [(r["name"], r["kind"], r["reachable"]) for r in rows] == [
        ("local", "local", True),
        ("hpc", "slurm", True),
    ]
    # Killed once the earlier tests' jobs are over and saved: slurmctld recovers only what
    # it saved, and a blocker cancelled just before could come back holding every GPU.
    wait_for(
        lambda: not cluster.run(["squeue", "-h"]).stdout.strip(),
        timeout=60,
        what="the earlier tests' Slurm jobs over",
    )
    held = cluster.wait_state_saved()
    cluster.kill_controller()
    try:
        table = pool.cli("backends", check=True).stdout
        assert "NAME" in table and "REACHABLE" in table
        hpc = next(line for line in table.splitlines() if line.startswith("hpc"))
        assert " NO " in f" {hpc} "
    finally:
        cluster.restart_controller()
    wait_for(
        lambda: json.loads(pool.cli("backends", "--json", check=True).stdout)["backends"][1][
            "reachable"
        ],
        timeout=60,
        what="slurmctld reachable again",
    )
    assert cluster.run(["scancel", held]).returncode == 0


def test_a_two_node_gang_counts_and_shows_every_rank(pool: SlurmPool, tmp_path: Path) -> None:
    """examples/same_job over both nodes: 4 ranks, 4 GPUs counted, each rank's log readable."""
    workdir = tmp_path / "same_job"
    shutil.copytree(Path(__file__).resolve().parents[2] / "examples" / "same_job", workdir)
    out = pool.cli(
        "submit",
        "--parsable",
        "job.yaml",
        "--backend",
        "hpc",
        "--nodes",
        "2",
        check=True,
        cwd=workdir,
    )
    job_id = int(out.stdout.strip())
    ended = pool.wait(job_id, timeout=180)
    assert (ended.state.value, ended.exit_code) == ("SUCCEEDED", 0)
    assert ended.gpu_count == 4
    assert "4 GPUs (2 per node on 2 nodes)" in pool.cli("show", str(job_id), check=True).stdout
    rank3 = pool.cli("logs", str(job_id), "--rank", "3", check=True).stdout
    assert '"RANK": "3"' in rank3 and '"NODE_RANK": "1"' in rank3 and '"sum": 6' in rank3
    assert '"RANK": "0"' not in rank3


def test_the_sdk_submits_to_a_backend_and_follows_the_job(
    pool: SlurmPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpupool import Client, Job

    for key, value in pool.env.items():  # the SDK user's shell: the pool and the cluster
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("GPUPOOL_URL", raising=False)
    handle = Client().submit(Job("sh -c 'echo from the sdk on $SLURM_JOB_ID'", backend="hpc"))
    ended = handle.wait(timeout=90)
    assert (ended.state.value, ended.backend) == ("SUCCEEDED", "hpc")
    assert ended.backend_ref is not None and ended.backend_ref.startswith("slurm://")
    slurm_id = ended.backend_ref.rsplit("/", 1)[1]
    assert any(f"from the sdk on {slurm_id}" in line for line in handle.logs())
