"""One pool across machines on a real Ray cluster: the pool's policy admits its jobs
(docs/backends.md "One pool across machines", engine/admission.py), through a real daemon.

A Ray head with 2 fake GPUs and a worker node with 2 (tests/ray_cluster.py), as a team's
second box joins with `ray start --address`; gpupool.toml gives projects a and b two GPUs
each there. Shown: `gpupool gpus` lists the Ray nodes; an over-quota job that cannot borrow
waits with `Quota` and never reaches Ray; a borrower on b's idle GPUs is stopped through
Ray when b claims them, requeued with its restart count and admitted again; a gang over the
two nodes is admitted as one, pinned to both.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from ray_cluster import RayCluster, head_and_worker

from integration.pool_harness import Pool, until_file, wait_for

pytestmark = pytest.mark.integration
JOB_DEADLINE_S = 300  # a Ray worker's start on a slow, busy 2-core machine: up to minutes


@pytest.fixture(scope="module")
def ray(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    root = tmp_path_factory.mktemp("ray")
    yield from head_and_worker(root, head_gpus=2, worker_gpus=2, worker_cpus=4)


@pytest.fixture(scope="module")
def pool(ray: RayCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    p = Pool(tmp_path_factory.mktemp("pool"), gpus="1xA100-80GB")
    p.state_dir.mkdir(parents=True)
    (p.state_dir / "gpupool.toml").write_text(
        "[backends.ray]\n"
        'kind = "ray"\n'
        f'address = "{ray.address}"\n'
        f'driver_python = "{sys.executable}"\n'
        "request_timeout_s = 10\n"
        "[backends.ray.quotas]\na = 2\nb = 2\n"
        "[projects.a]\nquota = 0\n[projects.b]\nquota = 0\n"
    )
    try:
        yield p.start()
    finally:
        p.cleanup()


def test_gpus_lists_the_ray_nodes(pool: Pool) -> None:
    def listed() -> bool:
        out = pool.cli("gpus", check=True).stdout
        return out.count("ray/") >= 2

    wait_for(listed, timeout=60, what="the Ray nodes in gpupool gpus")


def test_quota_borrowing_and_reclaim_through_ray(pool: Pool, tmp_path: Path) -> None:
    done = tmp_path / "done"
    fixed = ("--backend", "ray", "--gpus", "2", "--no-preemptible", "--project", "a")
    a1 = pool.cli_submit(*fixed, "--", *until_file(done))
    pool.wait_state(a1, "RUNNING", timeout=JOB_DEADLINE_S)
    a2 = pool.cli_submit(*fixed, "--", *until_file(done))
    assert pool.wait_reason(a2, "Quota", timeout=60).state.value == "PENDING"

    borrower = pool.cli_submit(
        "--backend", "ray", "--gpus", "2", "--preemptible", "--project", "a",
        "--", *until_file(done),
    )  # fmt: skip
    running = pool.wait_state(borrower, "RUNNING", timeout=JOB_DEADLINE_S)
    assert running.node is not None and running.node.startswith("ray/")
    b1 = pool.cli_submit(
        "--backend", "ray", "--gpus", "2", "--project", "b", "--", *until_file(done)
    )
    pool.wait_state(b1, "RUNNING", timeout=JOB_DEADLINE_S)
    requeued = pool.client.job(borrower)
    assert requeued.restart_count == 1 and requeued.state.value in ("PENDING", "RUNNING")
    pool.cancel(b1)
    assert pool.wait_state(borrower, "RUNNING", timeout=JOB_DEADLINE_S).restart_count == 1
    done.touch()
    for job_id in (a1, a2, borrower):
        assert pool.wait(job_id, timeout=JOB_DEADLINE_S).state.value == "SUCCEEDED"


def test_a_gang_over_both_nodes_is_admitted_as_one(pool: Pool) -> None:
    job_id = pool.cli_submit(
        "--backend", "ray", "--nodes", "2", "--gpus", "1", "--project", "b",
        "--", sys.executable, "-c", "print('gang rank ran')",
    )  # fmt: skip
    ended = pool.wait(job_id, timeout=JOB_DEADLINE_S)
    assert ended.state.value == "SUCCEEDED", pool.cli("show", str(job_id)).stdout
    assert ended.node is not None and ended.node.startswith("ray/") and "+" in ended.node
