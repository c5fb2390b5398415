"""A `[backends.NAME]` table of kind "kubernetes", checked (docs/kubernetes.md).

Every key is checked when the daemon opens the backend; a bad one is a BackendConfigError
naming it, an unknown one is refused (a typo must not silently fall back to a default).
Nothing is contacted here: reading the kubeconfig file is the backend's, at open.

    [backends.k8s]
    kind = "kubernetes"
    context = "prod"                 # a kubeconfig context (default: its current-context)
    kubeconfig = "/etc/gpupool/kubeconfig"   # default: $KUBECONFIG or ~/.kube/config
    # in_cluster = true              # or: the daemon runs in a pod, with its ServiceAccount
    namespace = "gpupool"
    default_image = "nvcr.io/nvidia/pytorch:24.05-py3"
    queues = { vision = "vision-queue" }          # project -> Kueue LocalQueue
    priority_classes = { high = "gpupool-high" }  # gpupool class -> PriorityClass
    gpu_types = { a100 = { "nvidia.com/gpu.product" = "NVIDIA-A100-SXM4-80GB" } }
    gpu_resource = "nvidia.com/gpu"
    service_account = "trainer"      # the pods' ServiceAccount
    request_timeout_s = 5
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpupool.core.backends import BackendConfigError
from gpupool.core.job import PRIORITY_CLASSES

# RFC 1123 label: a namespace, a LocalQueue name, a ServiceAccount (kept to the stricter form).
DNS_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
# RFC 1123 subdomain: a PriorityClass name.
DNS_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
# A label's value (also a qualified name's name part): empty or [A-Za-z0-9] at both ends.
LABEL_VALUE_RE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
# A qualified name (a label key, an extended resource): an optional DNS prefix and a name.
QUALIFIED_NAME_RE = re.compile(
    r"([a-z0-9.-]{1,253}/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)

DEFAULT_NAMESPACE = "default"
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_REQUEST_TIMEOUT_S = 5.0
MAX_REQUEST_TIMEOUT_S = 60.0  # a poll must never hold the engine longer than this


@dataclass(frozen=True)
class KubernetesSettings:
    """The checked table. `queues` maps a gpupool project to its Kueue LocalQueue (a project
    missing from it uses a queue of its own name); `priority_classes` a gpupool priority class
    (low, normal, high, interactive) to a PriorityClass; `gpu_types` a gpupool GPU type to the
    node labels its nodes carry (a nodeSelector)."""

    context: str | None = None
    kubeconfig: str | None = None
    in_cluster: bool = False
    namespace: str = DEFAULT_NAMESPACE
    queues: Mapping[str, str] = field(default_factory=dict)
    priority_classes: Mapping[str, str] = field(default_factory=dict)
    gpu_types: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    default_image: str | None = None
    gpu_resource: str = DEFAULT_GPU_RESOURCE
    service_account: str | None = None
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S


KNOWN_KEYS = frozenset(
    {
        "kind",
        "context",
        "kubeconfig",
        "in_cluster",
        "namespace",
        "queues",
        "priority_classes",
        "gpu_types",
        "default_image",
        "gpu_resource",
        "service_account",
        "request_timeout_s",
    }
)


def _text(settings: Mapping[str, object], key: str) -> str | None:
    value = settings.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise BackendConfigError(key, f"must be a non-empty string, got {value!r}")
    return value


def _matching(value: str | None, key: str, pattern: re.Pattern[str], what: str) -> str | None:
    if value is not None and (not pattern.fullmatch(value) or len(value) > 253):
        raise BackendConfigError(key, f"must be {what}, got {value!r}")
    return value


def _table(settings: Mapping[str, object], key: str) -> Mapping[str, object]:
    value = settings.get(key, {})
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise BackendConfigError(key, f"must be a table, got {value!r}")
    return value


def _queues(settings: Mapping[str, object]) -> dict[str, str]:
    out: dict[str, str] = {}
    for project, queue in _table(settings, "queues").items():
        key = f"queues.{project}"
        if not isinstance(queue, str) or not DNS_LABEL_RE.fullmatch(queue):
            raise BackendConfigError(
                key, f"must name a LocalQueue (a DNS-1123 label), got {queue!r}"
            )
        out[project] = queue
    return out


def _priority_classes(settings: Mapping[str, object]) -> dict[str, str]:
    out: dict[str, str] = {}
    for gp_class, name in _table(settings, "priority_classes").items():
        key = f"priority_classes.{gp_class}"
        if gp_class not in PRIORITY_CLASSES:
            known = ", ".join(PRIORITY_CLASSES)
            raise BackendConfigError(key, f"is not a gpupool priority class ({known})")
        if not isinstance(name, str) or not DNS_SUBDOMAIN_RE.fullmatch(name) or len(name) > 253:
            raise BackendConfigError(
                key, f"must name a PriorityClass (a DNS-1123 subdomain), got {name!r}"
            )
        out[gp_class] = name
    return out


def _gpu_types(settings: Mapping[str, object]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for gpu_type, selector in _table(settings, "gpu_types").items():
        key = f"gpu_types.{gpu_type}"
        if not isinstance(selector, Mapping) or not selector:
            raise BackendConfigError(
                key, f"must be a non-empty table of node labels, got {selector!r}"
            )
        labels: dict[str, str] = {}
        for label, value in selector.items():
            if not isinstance(label, str) or not QUALIFIED_NAME_RE.fullmatch(label):
                raise BackendConfigError(key, f"{label!r} is not a label key")
            if not isinstance(value, str) or not LABEL_VALUE_RE.fullmatch(value):
                raise BackendConfigError(f"{key}.{label}", f"is not a label value: {value!r}")
            labels[label] = value
        out[gpu_type] = labels
    return out


def _timeout(settings: Mapping[str, object]) -> float:
    value = settings.get("request_timeout_s", DEFAULT_REQUEST_TIMEOUT_S)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BackendConfigError("request_timeout_s", f"must be a number of seconds, got {value!r}")
    if not 0 < value <= MAX_REQUEST_TIMEOUT_S:
        raise BackendConfigError(
            "request_timeout_s", f"must be in (0, {MAX_REQUEST_TIMEOUT_S:g}], got {value!r}"
        )
    return float(value)


def parse_settings(settings: Mapping[str, object]) -> KubernetesSettings:
    """The checked table (module docstring); BackendConfigError for the first bad key."""
    unknown = sorted(set(settings) - KNOWN_KEYS)
    if unknown:
        raise BackendConfigError(unknown[0], "is not a setting of a kubernetes backend")
    in_cluster = settings.get("in_cluster", False)
    if not isinstance(in_cluster, bool):
        raise BackendConfigError("in_cluster", f"must be true or false, got {in_cluster!r}")
    context, kubeconfig = _text(settings, "context"), _text(settings, "kubeconfig")
    if in_cluster and (context is not None or kubeconfig is not None):
        clash = "context" if context is not None else "kubeconfig"
        raise BackendConfigError(clash, "cannot be set with in_cluster = true")
    namespace = _text(settings, "namespace") or DEFAULT_NAMESPACE
    _matching(namespace, "namespace", DNS_LABEL_RE, "a namespace name (a DNS-1123 label)")
    service_account = _matching(
        _text(settings, "service_account"),
        "service_account",
        DNS_SUBDOMAIN_RE,
        "a ServiceAccount name (a DNS-1123 subdomain)",
    )
    gpu_resource = _text(settings, "gpu_resource") or DEFAULT_GPU_RESOURCE
    if not QUALIFIED_NAME_RE.fullmatch(gpu_resource) or "/" not in gpu_resource:
        raise BackendConfigError(
            "gpu_resource", f"must be an extended resource (vendor/name), got {gpu_resource!r}"
        )
    default_image = _text(settings, "default_image")
    if default_image is not None and any(c.isspace() for c in default_image):
        raise BackendConfigError(
            "default_image", f"must be an image reference, got {default_image!r}"
        )
    return KubernetesSettings(
        context=context,
        kubeconfig=kubeconfig,
        in_cluster=in_cluster,
        namespace=namespace,
        queues=_queues(settings),
        priority_classes=_priority_classes(settings),
        gpu_types=_gpu_types(settings),
        default_image=default_image,
        gpu_resource=gpu_resource,
        service_account=service_account,
        request_timeout_s=_timeout(settings),
    )
