"""A LaunchRequest as Kubernetes objects: pure, nothing contacted (docs/kubernetes.md).

Why a batch/v1 Job in Indexed completion mode, not a JobSet: it is built into every cluster
(no CRD to install beside Kueue), Kueue admits it as one workload (all its pods or none: a
gang), and the official client has its model, so every manifest is checked against it in
the tests. A gang of `nodes` pods is one Job with parallelism = completions = nodes; pod i
has completion index i (its NODE_RANK) and the stable hostname `NAME-i`, resolvable through
a headless Service of the same name (the pods' `subdomain`) that lives as long as the Job
(an ownerReference). A single-pod run is the same Job with one index and no Service.

The Job is created suspended, as Kueue requires (it unsuspends what it admits); the queue
is the `kueue.x-k8s.io/queue-name` label; priority is the pods' `priorityClassName` (read by
Kueue for the workload's priority and by kube-scheduler). backoffLimit is 0: a failed pod
fails the Job, and a retry is the pool's (a new attempt is a new Job, named after it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from gpupool.backends.kubernetes.settings import (
    DNS_LABEL_RE,
    KubernetesSettings,
)
from gpupool.core.backends import run_name
from gpupool.core.execution import BackendRequest, LaunchRequest
from gpupool.core.job import PRIORITY_CLASSES
from gpupool.core.json_types import JsonObject, JsonValue

LABEL_POOL = "gpupool.io/pool"
LABEL_JOB = "gpupool.io/job-id"
LABEL_ATTEMPT = "gpupool.io/attempt"
LABEL_RUN = "gpupool.io/run"  # the run's name, on the Job, its pods and its Service
ANNOTATION_PROJECT = "gpupool.io/project"
ANNOTATION_JOB_NAME = "gpupool.io/job-name"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
HOSTNAME_LABEL = "kubernetes.io/hostname"  # a pinned run's node (EngineNode.pin)
# Set by the Job controller on each pod of an Indexed Job (the label since Kubernetes 1.28).
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
CONTAINER = "main"
MASTER_PORT = 29500  # each pod has its own network namespace: a fixed port never clashes
MAX_POD_HOSTNAME = 63  # NAME-INDEX is a pod's hostname, a DNS-1123 label


class RenderRefused(ValueError):
    """A request this backend cannot turn into a Job (no image, no queue for the project, a
    GPU type it has no nodes for): the run fails at launch with this message."""


@dataclass(frozen=True)
class RenderedRun:
    """What one launch creates: the Job, and for a gang of several pods the name and labels
    its headless Service takes once the Job's uid is known (`service_manifest`)."""

    name: str
    job: JsonObject
    needs_service: bool
    labels: Mapping[str, str]


def pool_selector(pool_id: str) -> str:
    """The label selector of every object of a pool: one list call finds all its runs."""
    return f"{LABEL_POOL}={pool_id}"


def priority_class_of(priority: int) -> str:
    """The gpupool class of a priority: the highest named class at or below it (a number
    below `low` counts as low)."""
    below = [(v, n) for n, v in PRIORITY_CLASSES.items() if v <= priority]
    return max(below)[1] if below else min((v, n) for n, v in PRIORITY_CLASSES.items())[1]


def escape_expansion(text: str) -> str:
    """`text` as Kubernetes passes it on: the kubelet expands `$(VAR)` in a container's
    command, args and env values, and `$$` is its escape for one `$`, so every `$` doubled
    keeps the user's text exactly as written."""
    return text.replace("$", "$$")


def queue_for(settings: KubernetesSettings, project: str) -> str:
    queue = settings.queues.get(project, project)
    if not DNS_LABEL_RE.fullmatch(queue):
        raise RenderRefused(
            f"project {project!r} has no LocalQueue in the backend's `queues` and its name is "
            "not one (lower-case letters, digits and '-')"
        )
    return queue


def _image(request: LaunchRequest, settings: KubernetesSettings) -> str:
    if request.container is not None:
        return request.container.image
    if settings.default_image is None:
        raise RenderRefused(
            "a Kubernetes job runs in an image: give the job one (--image) or set the "
            "backend's default_image"
        )
    return settings.default_image


def _resources(backend: BackendRequest, settings: KubernetesSettings) -> JsonObject:
    requests: dict[str, JsonValue] = {}
    if backend.cpus_per_node is not None:
        requests["cpu"] = str(backend.cpus_per_node)
    if backend.mem_bytes_per_node is not None:
        requests["memory"] = str(backend.mem_bytes_per_node)
    out: JsonObject = {}
    if backend.gpus_per_node > 0:
        # Extended resources are limits (requests default to them and may not differ).
        out["limits"] = {settings.gpu_resource: str(backend.gpus_per_node)}
    if requests:
        out["requests"] = requests
    return out


def _node_selector(backend: BackendRequest, settings: KubernetesSettings) -> dict[str, str]:
    if backend.gpu_type is None:
        return {}
    selector = settings.gpu_types.get(backend.gpu_type)
    if selector is None:
        raise RenderRefused(
            f"GPU type {backend.gpu_type!r} has no node labels in the backend's `gpu_types`"
        )
    return dict(selector)


def pinned_affinity(pins: tuple[str, ...]) -> JsonObject:
    """A gang pinned to several nodes (`BackendRequest.pinned`): every pod of the Indexed
    Job must land on one of them. The pods of one Job share one template, so pod i cannot be
    sent to pin i; the pool admitted the run to these nodes together, and the scheduler
    places the gang's pods among them (each pod's GPUs fit only where the pool found room)."""
    term: JsonObject = {
        "matchExpressions": [
            {"key": HOSTNAME_LABEL, "operator": "In", "values": list(pins)},
        ]
    }
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }


def _gang_env(name: str, request: LaunchRequest, backend: BackendRequest) -> list[JsonValue]:
    """MASTER_ADDR, MASTER_PORT, NODE_RANK (the pod's completion index), NNODES, WORLD_SIZE,
    NPROC_PER_NODE: torchrun's rendezvous, the same in every pod but NODE_RANK."""
    nproc = request.ranks.nproc_per_node if request.ranks else max(1, backend.gpus_per_node)
    master = f"{name}-0.{name}" if backend.nodes > 1 else "127.0.0.1"
    index_ref = f"metadata.annotations['{INDEX_ANNOTATION}']"
    return [
        {"name": "MASTER_ADDR", "value": master},
        {"name": "MASTER_PORT", "value": str(MASTER_PORT)},
        {"name": "NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": index_ref}}},
        {"name": "NNODES", "value": str(backend.nodes)},
        {"name": "NPROC_PER_NODE", "value": str(nproc)},
        {"name": "WORLD_SIZE", "value": str(nproc * backend.nodes)},
    ]


def _command(request: LaunchRequest, backend: BackendRequest) -> list[JsonValue]:
    """The command as given, or under torchrun (one per pod, `--no-python`: the command is
    run as it is) for a `--distributed torchrun` job. torchrun must be in the image."""
    own: list[JsonValue] = [escape_expansion(arg) for arg in request.command]
    if request.ranks is None:
        return own
    launcher: list[JsonValue] = [
        "torchrun",
        f"--nnodes={backend.nodes}",
        f"--nproc-per-node={request.ranks.nproc_per_node}",
        "--node-rank=$(NODE_RANK)",
        "--master-addr=$(MASTER_ADDR)",
        "--master-port=$(MASTER_PORT)",
        "--no-python",
    ]
    return launcher + own


def run_labels(pool_id: str, request: LaunchRequest) -> dict[str, str]:
    name = run_name(pool_id, request.handle)
    return {
        LABEL_POOL: pool_id,
        LABEL_JOB: str(request.handle.job_id),
        LABEL_ATTEMPT: str(request.handle.attempt),
        LABEL_RUN: name,
    }


def render_job(request: LaunchRequest, settings: KubernetesSettings, pool_id: str) -> RenderedRun:
    """The Job of a backend LaunchRequest (module docstring); RenderRefused when it cannot
    be one."""
    backend = request.backend
    if backend is None:
        raise RenderRefused("not a backend's run (LaunchRequest.backend is None)")
    name = run_name(pool_id, request.handle)
    if len(f"{name}-{backend.nodes - 1}") > MAX_POD_HOSTNAME or not DNS_LABEL_RE.fullmatch(name):
        raise RenderRefused(f"run name {name!r} is too long for a pod's hostname")
    labels = run_labels(pool_id, request)
    job_labels: dict[str, JsonValue] = {**labels, QUEUE_LABEL: queue_for(settings, backend.project)}
    annotations: dict[str, JsonValue] = {ANNOTATION_PROJECT: backend.project}
    if backend.name:
        annotations[ANNOTATION_JOB_NAME] = backend.name
    env: list[JsonValue] = [
        {"name": k, "value": escape_expansion(v)} for k, v in backend.job_env.items()
    ]
    multi = backend.nodes > 1
    if multi or request.ranks is not None:
        env += _gang_env(name, request, backend)
    container: JsonObject = {
        "name": CONTAINER,
        "image": _image(request, settings),
        "command": _command(request, backend),
        "env": env,
        "resources": _resources(backend, settings),
    }
    pod_spec: JsonObject = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": math.ceil(request.grace_s),
        "containers": [container],
    }
    if multi:
        pod_spec["subdomain"] = name  # hostname NAME-i resolves through the Service NAME
    if settings.service_account is not None:
        pod_spec["serviceAccountName"] = settings.service_account
    gp_class = priority_class_of(backend.priority)
    if gp_class in settings.priority_classes:
        pod_spec["priorityClassName"] = settings.priority_classes[gp_class]
    selector = _node_selector(backend, settings)
    if len(backend.pinned) == 1:
        selector[HOSTNAME_LABEL] = backend.pinned[0]
    elif backend.pinned:
        pod_spec["affinity"] = pinned_affinity(backend.pinned)
    if selector:
        pod_spec["nodeSelector"] = dict(selector.items())
    spec: JsonObject = {
        "suspend": True,
        "completionMode": "Indexed",
        "completions": backend.nodes,
        "parallelism": backend.nodes,
        "backoffLimit": 0,
        "template": {
            "metadata": {"labels": dict(labels.items()), "annotations": dict(annotations)},
            "spec": pod_spec,
        },
    }
    if request.time_limit_s is not None:
        spec["activeDeadlineSeconds"] = max(1, math.ceil(request.time_limit_s))
    job: JsonObject = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": job_labels, "annotations": annotations},
        "spec": spec,
    }
    return RenderedRun(name=name, job=job, needs_service=multi, labels=labels)


def service_manifest(run: RenderedRun, job_uid: str) -> JsonObject:
    """The headless Service of a gang (module docstring): DNS for NAME-i as soon as each pod
    exists (publishNotReadyAddresses: rendezvous happens before any pod is ready), deleted
    with its Job (an ownerReference that blocks nothing, so no finalizer permission)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": run.name,
            "labels": dict(run.labels.items()),
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": run.name,
                    "uid": job_uid,
                    "controller": False,
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {LABEL_RUN: run.name},
            "publishNotReadyAddresses": True,
            "ports": [{"name": "rendezvous", "port": MASTER_PORT, "protocol": "TCP"}],
        },
    }
