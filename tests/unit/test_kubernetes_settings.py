"""The `[backends.NAME]` table of a Kubernetes backend (backends/kubernetes/settings.py) and
opening it (`open_backend`: the kubeconfig read, nothing contacted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.backends.kubernetes import open_backend
from gpupool.backends.kubernetes.settings import KubernetesSettings, parse_settings
from gpupool.core.backends import BackendConfigError, BackendContext, BackendKind

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster: {server: "http://127.0.0.1:1"}
users:
- name: me
  user: {token: "t"}
contexts:
- name: lab
  context: {cluster: lab, user: me, namespace: ml}
current-context: lab
"""


def test_defaults_and_a_full_table() -> None:
    assert parse_settings({"kind": "kubernetes"}) == KubernetesSettings()
    full = parse_settings(
        {
            "kind": "kubernetes",
            "context": "lab",
            "kubeconfig": "/etc/gpupool/kubeconfig",
            "namespace": "ml",
            "queues": {"Vision_Team": "vision"},
            "priority_classes": {"high": "gpupool-high"},
            "gpu_types": {"a100": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}},
            "default_image": "python:3.12-slim",
            "gpu_resource": "amd.com/gpu",
            "service_account": "trainer",
            "request_timeout_s": 2,
        }
    )
    assert full.queues == {"Vision_Team": "vision"}
    assert full.gpu_resource == "amd.com/gpu" and full.request_timeout_s == 2.0


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"namespce": "ml"}, "namespce"),
        ({"namespace": "ML"}, "namespace"),
        ({"namespace": 3}, "namespace"),
        ({"queues": {"vision": "Vision Queue"}}, "queues.vision"),
        ({"queues": ["vision"]}, "queues"),
        ({"priority_classes": {"urgent": "x"}}, "priority_classes.urgent"),
        ({"priority_classes": {"high": "Not_Valid"}}, "priority_classes.high"),
        ({"gpu_types": {"a100": {}}}, "gpu_types.a100"),
        (
            {"gpu_types": {"a100": {"nvidia.com/gpu.product": "has space"}}},
            "gpu_types.a100.nvidia.com/gpu.product",
        ),
        ({"default_image": "two words"}, "default_image"),
        ({"default_image": ""}, "default_image"),
        ({"gpu_resource": "gpu"}, "gpu_resource"),
        ({"service_account": "Bad_Name"}, "service_account"),
        ({"request_timeout_s": 0}, "request_timeout_s"),
        ({"request_timeout_s": 600}, "request_timeout_s"),
        ({"request_timeout_s": True}, "request_timeout_s"),
        ({"in_cluster": "yes"}, "in_cluster"),
        ({"in_cluster": True, "context": "lab"}, "context"),
        ({"in_cluster": True, "kubeconfig": "/x"}, "kubeconfig"),
    ],
)
def test_a_bad_key_is_named(table: dict[str, object], key: str) -> None:
    with pytest.raises(BackendConfigError) as caught:
        parse_settings(table)
    assert caught.value.key == key


def test_open_reads_the_kubeconfig_and_contacts_nothing(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(KUBECONFIG)
    context = BackendContext("p1", tmp_path / "state")
    backend = open_backend("k8s", {"kubeconfig": str(config), "namespace": "ml"}, context)
    assert (backend.name, backend.kind) == ("k8s", BackendKind.KUBERNETES)
    assert backend.capabilities.multi_node and backend.capabilities.containers
    with pytest.raises(BackendConfigError) as caught:
        open_backend("k8s", {"kubeconfig": str(config), "context": "prod"}, context)
    assert caught.value.key == "context" and "lab" in caught.value.problem
    with pytest.raises(BackendConfigError) as caught:
        open_backend("k8s", {"kubeconfig": str(tmp_path / "missing")}, context)
    assert caught.value.key == "kubeconfig"
    in_cluster = open_backend("k8s", {"in_cluster": True}, context)
    assert in_cluster.name == "k8s"  # the service account's files are read at the first call
