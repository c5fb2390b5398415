"""Kueue queues from gpupool's projects: pure, for an admin to apply (docs/kubernetes.md).

A project's quota becomes a ClusterQueue's nominal GPU quota, its limit the most it may
borrow above it (limit - quota; no limit: borrowing without bound), its department a Kueue
cohort (projects of one department lend each other their idle quota, as gpupool's
fair share lends idle GPUs; projects of none share the cohort `gpupool`). Each project gets
a LocalQueue in the backend's namespace, named as the backend's `queues` maps it (else the
project's own name), pointing at its ClusterQueue `gpupool-<queue>`. Preemption mirrors
gpupool's reclaim: a ClusterQueue takes its nominal quota back from borrowers in its
cohort, and within itself lower priorities give way.

Kueue admits a workload only when its ClusterQueue covers every resource it requests: the
jobs of this backend ask for cpu and memory too, so each ClusterQueue covers them, with a
quota per GPU (`cpu_per_gpu`, `memory_gib_per_gpu`) scaled by the project's GPU quota.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from gpupool.backends.kubernetes.settings import (
    DEFAULT_GPU_RESOURCE,
    DEFAULT_NAMESPACE,
    DNS_LABEL_RE,
)
from gpupool.core.json_types import JsonObject, JsonValue
from gpupool.core.project import Project

KUEUE_API = "kueue.x-k8s.io/v1beta1"
DEFAULT_FLAVOR = "gpupool-default"
DEFAULT_COHORT = "gpupool"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpupool"}


def _cohort(project: Project) -> str:
    if project.department is None:
        return DEFAULT_COHORT
    name = project.department.lower().replace("_", "-").replace(".", "-").strip("-")
    return name if DNS_LABEL_RE.fullmatch(name) else DEFAULT_COHORT


def _quotas(
    project: Project, gpu_resource: str, cpu_per_gpu: int, memory_gib_per_gpu: int
) -> list[JsonValue]:
    # Kueue counts whole devices: a fractional quota is rounded down, a limit up.
    gpus = math.floor(project.quota)
    per: list[tuple[str, int, str]] = [
        (gpu_resource, gpus, ""),
        ("cpu", gpus * cpu_per_gpu, ""),
        ("memory", gpus * memory_gib_per_gpu, "Gi"),
    ]
    out: list[JsonValue] = []
    for resource, amount, unit in per:
        entry: JsonObject = {"name": resource, "nominalQuota": f"{amount}{unit}"}
        if project.limit is not None:
            above = max(0, math.ceil(project.limit) - gpus)
            scale = (
                1
                if resource == gpu_resource
                else (cpu_per_gpu if resource == "cpu" else memory_gib_per_gpu)
            )
            entry["borrowingLimit"] = f"{above * scale}{unit}"
        out.append(entry)
    return out


def render_kueue_queues(
    projects: Iterable[Project],
    *,
    namespace: str = DEFAULT_NAMESPACE,
    queues: Mapping[str, str] | None = None,
    gpu_resource: str = DEFAULT_GPU_RESOURCE,
    flavor: str = DEFAULT_FLAVOR,
    cpu_per_gpu: int = 16,
    memory_gib_per_gpu: int = 128,
) -> Sequence[JsonObject]:
    """A ResourceFlavor, then a ClusterQueue and a LocalQueue per project (module
    docstring), in the order `kubectl apply` takes them. ValueError for a project whose
    queue name is not a DNS-1123 label (map it in `queues`)."""
    mapped = dict(queues or {})
    out: list[JsonObject] = [
        {
            "apiVersion": KUEUE_API,
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor, "labels": dict(MANAGED_BY)},
        }
    ]
    for project in sorted(projects, key=lambda p: p.name):
        queue = mapped.get(project.name, project.name)
        if not DNS_LABEL_RE.fullmatch(queue) or len(f"gpupool-{queue}") > 63:
            raise ValueError(
                f"project {project.name!r}: queue name {queue!r} is not a DNS-1123 label "
                "of at most 55 characters; map it in the backend's `queues`"
            )
        cluster_queue = f"gpupool-{queue}"
        covered: list[JsonValue] = [gpu_resource, "cpu", "memory"]
        flavors: list[JsonValue] = [
            {
                "name": flavor,
                "resources": _quotas(project, gpu_resource, cpu_per_gpu, memory_gib_per_gpu),
            }
        ]
        out.append(
            {
                "apiVersion": KUEUE_API,
                "kind": "ClusterQueue",
                "metadata": {
                    "name": cluster_queue,
                    "labels": dict(MANAGED_BY),
                    "annotations": {"gpupool.io/project": project.name},
                },
                "spec": {
                    "cohort": _cohort(project),
                    "namespaceSelector": {},
                    "queueingStrategy": "BestEffortFIFO",
                    "resourceGroups": [{"coveredResources": covered, "flavors": flavors}],
                    "preemption": {
                        "reclaimWithinCohort": "Any",
                        "withinClusterQueue": "LowerPriority",
                    },
                },
            }
        )
        out.append(
            {
                "apiVersion": KUEUE_API,
                "kind": "LocalQueue",
                "metadata": {
                    "name": queue,
                    "namespace": namespace,
                    "labels": dict(MANAGED_BY),
                },
                "spec": {"clusterQueue": cluster_queue},
            }
        )
    return out
