"""A real Slurm cluster's nodes wherever the pool's GPUs are shown (api/backend_wire.py),
through a real daemon whose policy admits the cluster's jobs (docs/monitoring.md "Backends'
nodes"): `gpupool gpus` (its table and --json), `gpupool topo --pool` and /metrics name them
`hpc/n1`, `hpc/n2` with the engine's GPUs, and a job the pool admitted there is counted on its
node as the pool's.

The cluster is tests/slurm_cluster.py's (two slurmd nodes, n1 and n2, two fake GPUs each);
skipped when Slurm cannot be had (GPUPOOL_REQUIRE_ALL=1 makes that a failure)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from slurm_cluster import SlurmCluster

from integration.pool_harness import wait_for
from integration.slurm_pool import SlurmPool, cluster_fixture, module_pool  # noqa: F401

pytestmark = pytest.mark.integration

QUOTAS = "[backends.hpc.quotas]\na = 2\n[projects.a]\nquota = 0\n"


@pytest.fixture(scope="module", name="pool")
def admitting_pool(
    cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SlurmPool]:
    yield from module_pool(cluster, tmp_path_factory, QUOTAS)


def _backends(pool: SlurmPool) -> list[dict[str, Any]]:
    found = json.loads(pool.cli("gpus", "--json", check=True).stdout)["backends"]
    assert isinstance(found, list)
    return found


def _metrics(pool: SlurmPool) -> str:
    status, _, body = pool.client.request_raw("GET", "/metrics")
    assert status == 200
    return body.decode()


def test_the_clusters_nodes_are_shown_named_by_the_pool(pool: SlurmPool) -> None:
    def read() -> list[dict[str, Any]] | None:
        [hpc] = _backends(pool)
        return hpc["nodes"] if not hpc["problem"] and hpc["nodes"] else None

    nodes = wait_for(read, 60, "the engine's first read of the cluster")
    [hpc] = _backends(pool)
    assert (hpc["name"], hpc["admission"], hpc["quotas"]) == ("hpc", "pool", {"a": 2.0})
    assert [(n["name"], n["backend"], n["state"], n["gpus"]) for n in nodes] == [
        ("hpc/n1", "hpc", "up", 2),
        ("hpc/n2", "hpc", "up", 2),
    ]
    shown = pool.cli("gpus", check=True).stdout.splitlines()
    header = next(
        i for i, line in enumerate(shown) if line.startswith("NODE  ") and "STATE" in line
    )
    assert shown[header + 1].split()[:3] == ["hpc/n1", "up", f"{nodes[0]['gpus_used']}/2"]
    assert "  hpc/n1: 2 GPUs, " in pool.cli("topo", "--pool", check=True).stdout
    text = _metrics(pool)
    assert 'gpupool_backend_capacity_known{backend="hpc"} 1.0' in text
    assert 'gpupool_backend_node_gpus{backend="hpc",node="hpc/n2",state="up"} 2.0' in text


def test_the_pools_running_job_is_counted_on_its_node(pool: SlurmPool, tmp_path: Path) -> None:
    done = tmp_path / "done"
    job = pool.cli_submit(
        "--backend", "hpc", "--gpus", "1", "--project", "a", "--",
        "bash", "-c", f"while [ ! -e {done} ]; do sleep 0.2; done",
    )  # fmt: skip
    try:
        pool.wait_state(job, "RUNNING", timeout=90)

        def seated() -> dict[str, Any] | None:
            for n in _backends(pool)[0]["nodes"]:
                if n["jobs"] == [{"id": job, "gpus": 1}] and n["gpus_used"] >= 1:
                    return dict(n)  # the engine counts its GPU too, once read again
            return None

        node = wait_for(seated, 30, f"job {job} on a node of hpc, counted by Slurm")
        assert node["gpus_pool"] == 1
        row = next(
            line.split()
            for line in pool.cli("gpus", check=True).stdout.splitlines()
            if line.startswith(node["name"] + " ")
        )
        assert row[:4] == [node["name"], "up", f"{node['gpus_used']}/2", "1"]
        assert row[-3:] == [str(job), "(1", "GPU)"]  # JOBS: the pool's, with their GPUs
        labels = f'backend="hpc",node="{node["name"]}"'
        assert f"gpupool_backend_node_gpus_pool{{{labels}}} 1.0" in _metrics(pool)
    finally:
        done.touch()
        pool.wait(job)
