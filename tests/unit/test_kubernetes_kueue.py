"""Kueue queues rendered from gpupool's projects (backends/kubernetes/kueue.py): the shape
Kueue's v1beta1 API takes, checked field by field (no Kueue model exists in the client)."""

from __future__ import annotations

import pytest
from kubernetes_manifests import DNS_LABEL, QUANTITY

from gpupool.backends.kubernetes.kueue import KUEUE_API, render_kueue_queues
from gpupool.core.json_types import JsonObject
from gpupool.core.project import Project
from gpupool.spec.pool_config import parse_config

TOML = """
[departments.research]
quota = 16

[projects.vision]
quota = 8
limit = 12
department = "research"

[projects.Speech_Team]
quota = 2.5
weight = 2
"""


def _by_kind(manifests: list[JsonObject], kind: str) -> dict[str, JsonObject]:
    out: dict[str, JsonObject] = {}
    for m in manifests:
        meta = m["metadata"]
        assert isinstance(meta, dict)
        if m["kind"] == kind:
            out[str(meta["name"])] = m
    return out


def test_projects_become_cluster_queues_and_local_queues() -> None:
    projects = parse_config(TOML).projects
    manifests = list(
        render_kueue_queues(projects, namespace="ml", queues={"Speech_Team": "speech"})
    )
    assert [m["kind"] for m in manifests] == [
        "ResourceFlavor",
        "ClusterQueue",
        "LocalQueue",
        "ClusterQueue",
        "LocalQueue",
    ]
    assert all(m["apiVersion"] == KUEUE_API for m in manifests)
    cqs, lqs = _by_kind(manifests, "ClusterQueue"), _by_kind(manifests, "LocalQueue")
    assert set(cqs) == {"gpupool-vision", "gpupool-speech"}
    assert {n: lq["spec"] for n, lq in lqs.items()} == {
        "vision": {"clusterQueue": "gpupool-vision"},
        "speech": {"clusterQueue": "gpupool-speech"},
    }
    for lq in lqs.values():
        meta = lq["metadata"]
        assert isinstance(meta, dict) and meta["namespace"] == "ml"
    vision = cqs["gpupool-vision"]["spec"]
    assert isinstance(vision, dict)
    assert vision["cohort"] == "research"
    assert vision["preemption"] == {
        "reclaimWithinCohort": "Any",
        "withinClusterQueue": "LowerPriority",
    }
    (group,) = vision["resourceGroups"]
    assert group["coveredResources"] == ["nvidia.com/gpu", "cpu", "memory"]
    (flavor,) = group["flavors"]
    assert flavor["name"] == "gpupool-default"
    assert flavor["resources"] == [
        {"name": "nvidia.com/gpu", "nominalQuota": "8", "borrowingLimit": "4"},
        {"name": "cpu", "nominalQuota": "128", "borrowingLimit": "64"},
        {"name": "memory", "nominalQuota": "1024Gi", "borrowingLimit": "512Gi"},
    ]
    speech = cqs["gpupool-speech"]["spec"]
    assert isinstance(speech, dict)
    assert speech["cohort"] == "gpupool"  # no department: the pool's cohort
    (sgroup,) = speech["resourceGroups"]
    # A fractional quota is rounded down (Kueue counts whole devices); no limit: no cap.
    assert sgroup["flavors"][0]["resources"][0] == {"name": "nvidia.com/gpu", "nominalQuota": "2"}
    for m in manifests:
        meta = m["metadata"]
        assert isinstance(meta, dict) and DNS_LABEL.fullmatch(str(meta["name"]))
    for cq in cqs.values():
        spec = cq["spec"]
        assert isinstance(spec, dict)
        for g in spec["resourceGroups"]:
            for f in g["flavors"]:
                for r in f["resources"]:
                    assert all(QUANTITY.fullmatch(v) for k, v in r.items() if k != "name")


def test_a_project_without_a_queue_name_is_named_in_the_error() -> None:
    with pytest.raises(ValueError, match="Speech_Team"):
        render_kueue_queues([Project("Speech_Team", quota=1)])
