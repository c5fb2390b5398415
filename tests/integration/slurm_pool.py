"""A real Slurm cluster and a daemon whose gpupool.toml names it `[backends.hpc]`, as module
fixtures (`cluster`, `pool`: a test module imports `cluster_fixture, pool_fixture`) for the daemon-level backend tests (test_backend_jobs.py, test_same_job_everywhere.py).

The cluster is tests/slurm_cluster.py's (slurmctld and two slurmd nodes, two fake GPUs each);
when Slurm cannot be had the tests skip, which GPUPOOL_REQUIRE_ALL=1 (CI) makes a failure.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster, SlurmUnavailable

from integration.pool_harness import Pool


def started_or_skipped(root: Path, **sizes: int) -> Iterator[SlurmCluster]:
    """A started cluster under `root` (SlurmCluster's keywords), stopped after; the test is
    skipped when Slurm cannot start here (GPUPOOL_REQUIRE_ALL=1 makes that a failure)."""
    made = SlurmCluster(root, **sizes)
    try:
        made.start()
    except SlurmUnavailable as exc:
        made.stop()
        pytest.skip(f"Slurm cannot start here: {exc}")
    try:
        yield made
    finally:
        made.stop()


@pytest.fixture(scope="module", name="cluster")
def cluster_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    yield from started_or_skipped(tmp_path_factory.mktemp("slurm"))


class SlurmPool(Pool):
    """A pool whose submissions carry the cluster's environment (SLURM_CONF and the token by
    which the cluster's teardown finds every job), as a user's login shell on a cluster would."""

    cluster_env: dict[str, str] = {}

    @property
    def env(self) -> dict[str, str]:
        return {**super().env, **self.cluster_env}


def start_pool(
    root: Path, cluster: SlurmCluster, more_toml: str = "", listen: str | None = None
) -> SlurmPool:
    """A started daemon (2 declared GPUs) with `[backends.hpc]` on `cluster`, and `more_toml`
    (other backends' tables) in its gpupool.toml; `listen`: its TCP address too."""
    p = SlurmPool(root / "pool", gpus="2xA100-80GB", listen=listen)
    p.cluster_env = {k: v for k, v in cluster.env.items() if k.startswith(("SLURM", "GPUPOOL_T"))}
    # `python` in a job is this interpreter (torch and all), on a login shell's PATH.
    p.cluster_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    p.state_dir.mkdir(parents=True)
    (p.state_dir / "gpupool.toml").write_text(
        "[backends.hpc]\n"
        'kind = "slurm"\n'
        f'slurm_conf = "{cluster.conf}"\n'
        f'output_dir = "{root / "out"}"\n'
        f'launcher_python = "{sys.executable}"\n'
        "command_timeout_s = 10\n" + more_toml
    )
    try:
        return p.start()
    except BaseException:
        p.cleanup()
        raise


def module_pool(
    cluster: SlurmCluster, factory: pytest.TempPathFactory, more_toml: str = ""
) -> Iterator[SlurmPool]:
    """A module's pool (`start_pool` with `more_toml`), cleaned up after: the body of a
    module fixture that configures `[backends.hpc]` its own way."""
    p = start_pool(factory.mktemp("pool"), cluster, more_toml)
    try:
        yield p
    finally:
        p.cleanup()


@pytest.fixture(scope="module", name="pool")
def pool_fixture(
    cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SlurmPool]:
    p = start_pool(tmp_path_factory.mktemp("pool"), cluster)
    try:
        yield p
    finally:
        p.cleanup()
