"""The `subject` fixture of the executor contract suite: each test runs once per
implementation (contract/subjects.py), ids `local`, `slurm`, `ray`, `kubernetes`.

A real Slurm (tests/slurm_cluster.py) and a real Ray head (tests/ray_cluster.py) are started
once per implementation (module scope, torn down before the next one starts); every test
gets a pool id of its own on them, so no test sees another's runs. When Slurm or Ray cannot
start here the tests skip, as the other integration tests do, and GPUPOOL_REQUIRE_ALL=1 (CI)
turns that skip into a failure (tests/conftest.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes_api import recorded_api_server
from ray_cluster import RayUnavailable, start_cluster

from contract.kubernetes_play import PlayedCluster
from contract.subjects import (
    KubernetesSubject,
    LocalSubject,
    RaySubject,
    SlurmSubject,
    Subject,
)
from integration.slurm_pool import started_or_skipped

IMPLEMENTATIONS = ("local", "slurm", "ray", "kubernetes")
_pool_ids = itertools.count(1)


@pytest.fixture(scope="module", params=IMPLEMENTATIONS)
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[object]:
    """What an implementation's runs need for the whole module: the Slurm cluster, the Ray
    head's address, nothing for the local executor and the recorded Kubernetes server."""
    kind = request.param
    if kind == "slurm":
        yield from started_or_skipped(tmp_path_factory.mktemp("slurm"))
    elif kind == "ray":
        try:
            head = start_cluster(tmp_path_factory.mktemp("ray"), gpus=2, cpus=4)
        except RayUnavailable as exc:
            pytest.skip(f"a local Ray head cannot start here: {exc}")
        try:
            yield head
        finally:
            head.stop()
    else:
        yield kind


@pytest.fixture
def subject(engine: object, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Subject]:
    kind = request.node.callspec.params["engine"]
    pool_id = f"c{next(_pool_ids)}"
    made: Subject
    if kind == "local":
        made = LocalSubject(tmp_path)
    elif kind == "slurm":
        from slurm_cluster import SlurmCluster

        assert isinstance(engine, SlurmCluster)
        made = SlurmSubject(tmp_path, engine, pool_id)
    elif kind == "ray":
        from ray_cluster import RayCluster

        assert isinstance(engine, RayCluster)
        made = RaySubject(tmp_path, engine.address, pool_id)
    else:
        with recorded_api_server(PlayedCluster()) as api:
            assert isinstance(api, PlayedCluster)
            played = KubernetesSubject(tmp_path, api)
            try:
                yield played
            finally:
                played.close()
        return
    try:
        yield made
    finally:
        made.close()
