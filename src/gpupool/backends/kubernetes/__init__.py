"""The Kubernetes (Kueue) backend: a run is a suspended batch/v1 Job that Kueue admits
(docs/kubernetes.md). `open_backend` is its BackendOpener (core/backends.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import cast

from gpupool.core.backends import Backend, BackendConfigError, BackendContext

IN_CLUSTER = "in-cluster"  # the context part of a ref when the daemon runs in a pod


def open_backend(name: str, settings: Mapping[str, object], context: BackendContext) -> Backend:
    """Settings checked and the kubeconfig read (its context must exist); nothing contacted,
    no credential plugin run (the client is made at the first call)."""
    from kubernetes import config as kube_config
    from kubernetes.config.config_exception import ConfigException

    from gpupool.backends.kubernetes.backend import KubernetesBackend
    from gpupool.backends.kubernetes.settings import parse_settings

    list_contexts = cast(
        Callable[[str | None], tuple[list[object], object]],
        kube_config.list_kube_config_contexts,
    )
    checked = parse_settings(settings)
    if checked.in_cluster:
        return KubernetesBackend(name, checked, context, IN_CLUSTER)
    try:
        contexts, current = list_contexts(checked.kubeconfig)
    except (ConfigException, OSError, ValueError) as exc:
        raise BackendConfigError("kubeconfig", f"cannot be read: {exc}") from exc
    known = [str(c.get("name")) for c in contexts or [] if isinstance(c, dict)]
    if checked.context is None:
        if not isinstance(current, dict) or not current.get("name"):
            raise BackendConfigError(
                "context", "not set, and the kubeconfig has no current-context"
            )
        return KubernetesBackend(name, checked, context, str(current["name"]))
    if checked.context not in known:
        raise BackendConfigError(
            "context",
            f"{checked.context!r} is not in the kubeconfig ({', '.join(known) or 'none'})",
        )
    return KubernetesBackend(name, checked, context, checked.context)
