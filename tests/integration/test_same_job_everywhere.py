"""The same job file runs unchanged on the local pool, on a real Slurm and on a real Ray
(issue 16, "must show"; its Kubernetes manifest is validated in test_kubernetes_render.py): examples/same_job/job.yaml (2 GPUs, 1 node, `distributed: torchrun`, a time limit,
an env value) with its real torch.distributed script, submitted by `gpupool submit job.yaml`
with only `--backend` added. Every rank all-reduces over gloo and prints what it saw; the
ranks, the world size, the sum and the env value must be the same everywhere.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from ray_cluster import RayCluster, RayUnavailable, start_cluster
from slurm_cluster import SlurmCluster

from integration.pool_harness import wait_for
from integration.slurm_pool import SlurmPool, cluster_fixture, start_pool  # noqa: F401

pytestmark = pytest.mark.integration
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "same_job"
# A job's wait on any backend, on a slow, busy 2-core machine (a Ray worker's start alone
# can take a minute there: tests/ray_cluster.py). Met in seconds on a quiet one.
JOB_DEADLINE_S = 300


@pytest.fixture(scope="module")
def ray(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    root = tmp_path_factory.mktemp("ray")
    try:
        started = start_cluster(root, gpus=4, cpus=4)
    except RayUnavailable as exc:
        pytest.skip(f"a local Ray head cannot start here: {exc}")
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def pool(
    cluster: SlurmCluster, ray: RayCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SlurmPool]:
    """A daemon with two backends: `hpc` (the Slurm cluster) and `ray` (the Ray head), whose
    jobs find this interpreter as `python` (the cluster's environment, set by its admin)."""
    ray_table = (
        "[backends.ray]\n"
        'kind = "ray"\n'
        f'address = "{ray.address}"\n'
        f'driver_python = "{sys.executable}"\n'
        "request_timeout_s = 10\n"
    )
    p = start_pool(tmp_path_factory.mktemp("pool"), cluster, ray_table)
    try:
        yield p
    finally:
        p.cleanup()


def _ranks_seen(log: str) -> list[dict[str, object]]:
    """Each rank's JSON line, whatever prefix its backend puts before it."""
    return sorted(
        (json.loads(line[line.index("{") :]) for line in log.splitlines() if '"sum"' in line),
        key=lambda seen: str(seen["RANK"]),
    )


@pytest.mark.parametrize("backend", [None, "hpc", "ray"], ids=["local", "slurm", "ray"])
def test_the_same_job_file_runs_on_every_backend(
    pool: SlurmPool, tmp_path: Path, backend: str | None
) -> None:
    workdir = tmp_path / "same_job"
    shutil.copytree(EXAMPLE, workdir)
    extra = ["--backend", backend] if backend else []
    out = pool.cli("submit", "--parsable", "job.yaml", *extra, check=True, cwd=workdir)
    job_id = int(out.stdout.strip())
    ended = pool.wait(job_id, timeout=JOB_DEADLINE_S)
    log = pool.cli("logs", str(job_id), check=True).stdout
    assert (ended.state.value, ended.exit_code) == ("SUCCEEDED", 0), log
    assert ended.backend == backend
    seen = _ranks_seen(log)
    assert [(s["RANK"], s["LOCAL_RANK"], s["WORLD_SIZE"], s["NODE_RANK"]) for s in seen] == [
        ("0", "0", "2", "0"),
        ("1", "1", "2", "0"),
    ], log
    assert {(s["sum"], s["GREETING"]) for s in seen} == {(1, "hello")}


@pytest.mark.parametrize("backend", [None, "hpc", "ray"], ids=["local", "slurm", "ray"])
def test_an_array_runs_one_job_per_task_on_every_backend(
    pool: SlurmPool, backend: str | None
) -> None:
    """gpupool expands an array at submit: each task is a job of its own, handed to the
    backend when the array's throttle lets it go (`%2`)."""
    extra = ["--backend", backend] if backend else []
    script = 'echo "task $GPUPOOL_ARRAY_INDEX of $GPUPOOL_ARRAY_JOB_ID"'
    first = pool.cli_submit("--array", "0-2%2", *extra, "--", "sh", "-c", script)
    tasks = [j for j in pool.client.jobs(include_finished=True) if j.array_id == first]
    assert sorted(t.array_index for t in tasks if t.array_index is not None) == [0, 1, 2]
    for task in tasks:
        ended = pool.wait(task.id, timeout=JOB_DEADLINE_S)
        assert (ended.state.value, ended.backend) == ("SUCCEEDED", backend)
        log = pool.cli("logs", str(task.id), check=True).stdout
        assert f"task {task.array_index} of {first}" in log


@pytest.mark.parametrize("backend", [None, "hpc", "ray"], ids=["local", "slurm", "ray"])
def test_cancel_stops_a_running_job_on_every_backend(pool: SlurmPool, backend: str | None) -> None:
    extra = ["--backend", backend] if backend else []
    job_id = pool.cli_submit(*extra, "--", "sleep", "600")
    running = pool.wait_state(job_id, "RUNNING", timeout=JOB_DEADLINE_S)
    assert running.backend == backend and (backend is None) == (running.backend_ref is None)
    pool.cli("cancel", str(job_id), check=True)
    assert pool.wait(job_id, timeout=JOB_DEADLINE_S).state.value == "CANCELLED"


def test_a_ray_job_no_ray_node_can_hold_says_so_in_why(pool: SlurmPool) -> None:
    """Issues 38 and 34: a Ray job that asks for more GPUs than any live Ray node has (the
    head has 4) is never admitted: `gpupool why` says it cannot start there, with the
    figures of the largest node as Ray reports it."""
    job_id = pool.cli_submit("--backend", "ray", "--gpus", "8", "--", "true")

    def told() -> bool:
        wait = pool.client.job(job_id).wait
        return wait is not None and wait.code.value == "Unsatisfiable"

    wait_for(told, JOB_DEADLINE_S, f"job {job_id}'s wait names the shortfall")
    said = pool.cli("why", str(job_id), check=True).stdout
    assert "8 GPUs" in said and "ray/" in said and "4" in said, said
    assert pool.client.job(job_id).state.value == "PENDING"
    pool.cli("cancel", str(job_id), check=True)
    assert pool.wait(job_id, timeout=JOB_DEADLINE_S).state.value == "CANCELLED"
