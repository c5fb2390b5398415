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

from integration.slurm_pool import SlurmPool, cluster_fixture, start_pool  # noqa: F401

pytestmark = pytest.mark.integration
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "same_job"


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
    ended = pool.wait(job_id, timeout=180)
    log = pool.cli("logs", str(job_id), check=True).stdout
    assert (ended.state.value, ended.exit_code) == ("SUCCEEDED", 0), log
    assert ended.backend == backend
    seen = _ranks_seen(log)
    assert [(s["RANK"], s["LOCAL_RANK"], s["WORLD_SIZE"], s["NODE_RANK"]) for s in seen] == [
        ("0", "0", "2", "0"),
        ("1", "1", "2", "0"),
    ], log
    assert {(s["sum"], s["GREETING"]) for s in seen} == {(1, "hello")}
