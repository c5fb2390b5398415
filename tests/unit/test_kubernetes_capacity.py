"""The Kubernetes backend's capacity (backends/kubernetes/capacity.py) against the recorded
API server (tests/kubernetes_api.py), as test_kubernetes_backend.py drives it, and a pinned
run's manifest (render.py). The node and pod lists are Kubernetes 1.29's shapes (EKS
nodes with NVIDIA's GPU feature discovery labels), checked against the client's models."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes.client import ApiClient
from kubernetes_api import FIXTURES, RecordedApiServer, Reply, recorded_api_server
from test_kubernetes_backend import _normal, backend_for
from test_kubernetes_render import SETTINGS, pod_spec, request

from gpupool.backends.kubernetes.capacity import (
    POD_FIELD_SELECTOR,
    engine_nodes,
    gpus_by_node,
    quantity,
)
from gpupool.backends.kubernetes.render import render_job
from gpupool.core.backends import Backend, EngineNode, EngineNodeState
from gpupool.core.json_types import JsonObject

NODES, PODS = "/api/v1/nodes", "/api/v1/pods"
MIB, KIB = 1 << 20, 1 << 10
A100, L4 = "NVIDIA-A100-SXM4-80GB", "NVIDIA-L4"


def _fixture(name: str) -> JsonObject:
    found = json.loads((FIXTURES / name).read_text())
    assert isinstance(found, dict)
    return found


@pytest.fixture
def api() -> Iterator[RecordedApiServer]:
    with recorded_api_server() as server:
        yield server


@pytest.fixture
def backend(api: RecordedApiServer, tmp_path: Path) -> Iterator[Backend]:
    opened = backend_for(api.url, tmp_path)
    yield opened
    opened.close()


@pytest.mark.parametrize(
    ("name", "model"),
    [("node_list.json", "V1NodeList"), ("pod_list_all_namespaces.json", "V1PodList")],
)
def test_the_fixtures_are_what_the_api_sends(name: str, model: str) -> None:
    client = ApiClient()
    text = (FIXTURES / name).read_text()
    back = client.sanitize_for_serialization(client.deserialize(text, model, "application/json"))  # type: ignore[no-untyped-call]
    assert back == _normal(json.loads(text))


WANT = (
    EngineNode(
        "ip-10-0-1-11.ec2.internal", gpus=8, gpus_used=6, gpu_model=A100,
        gpu_memory_bytes=81920 * MIB, cpus=63, memory_bytes=527805364 * KIB,
        pin="ip-10-0-1-11.ec2.internal",
    ),
    EngineNode(
        "ip-10-0-1-12.ec2.internal", gpus=8, gpus_used=3, gpu_model=A100,
        gpu_memory_bytes=81920 * MIB, cpus=63, memory_bytes=527805364 * KIB,
        state=EngineNodeState.DRAINED, detail="cordoned (spec.unschedulable)",
        pin="ip-10-0-1-12.ec2.internal",
    ),
    EngineNode(
        "ip-10-0-1-13.ec2.internal", gpus=4, gpu_model=L4, gpu_memory_bytes=23034 * MIB,
        cpus=63, memory_bytes=527805364 * KIB, state=EngineNodeState.DOWN,
        detail="NotReady: Kubelet stopped posting node status.",
        pin="ip-10-0-1-13.ec2.internal",
    ),
)  # fmt: skip


def test_the_nodes_their_use_and_states() -> None:
    used = gpus_by_node(_fixture("pod_list_all_namespaces.json"), "nvidia.com/gpu")
    # 4 + 2 on the first (any namespace's pods); on the second an init container of 3 over
    # a main one of 1; a pod not bound yet counts nowhere.
    assert used == {"ip-10-0-1-11.ec2.internal": 6, "ip-10-0-1-12.ec2.internal": 3,
                    "ip-10-0-1-20.ec2.internal": 0}  # fmt: skip
    assert engine_nodes(_fixture("node_list.json"), used, "nvidia.com/gpu") == WANT


def test_the_pin_is_the_hostname_label_else_the_name() -> None:
    listed = _fixture("node_list.json")
    items = listed["items"]
    assert isinstance(items, list) and isinstance(items[0], dict)
    meta = items[0]["metadata"]
    assert isinstance(meta, dict)
    labels = meta["labels"]
    assert isinstance(labels, dict)
    labels["kubernetes.io/hostname"] = "gpu-a"
    first = engine_nodes(listed, {}, "nvidia.com/gpu")[0]
    assert (first.name, first.pin) == ("ip-10-0-1-11.ec2.internal", "gpu-a")
    del labels["kubernetes.io/hostname"]
    assert engine_nodes(listed, {}, "nvidia.com/gpu")[0].pin == "ip-10-0-1-11.ec2.internal"


def test_quantities() -> None:
    assert [quantity(q) for q in ("8", "7910m", "64Gi", "1e3", "129M", "", "12x")] == [
        8, 7.91, 64 * 2**30, 1000, 129e6, 0, 0,
    ]  # fmt: skip


def test_capacity_is_one_node_list_and_one_pod_list(
    api: RecordedApiServer, backend: Backend
) -> None:
    api.answer("GET", NODES, Reply.fixture(200, "node_list.json"))
    api.answer("GET", PODS, Reply.fixture(200, "pod_list_all_namespaces.json"))
    capacity = backend.capacity()
    assert capacity.known and capacity.nodes == WANT
    nodes, pods = api.requests()
    assert (nodes.method, nodes.path, pods.method, pods.path) == ("GET", NODES, "GET", PODS)
    assert pods.query["fieldSelector"] == [POD_FIELD_SELECTOR]


def test_a_pod_list_it_may_not_read_is_a_problem_not_free_gpus(
    api: RecordedApiServer, backend: Backend
) -> None:
    api.answer("GET", NODES, Reply.fixture(200, "node_list.json"))
    forbidden: JsonObject = {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'pods is forbidden: User "system:serviceaccount:gpupool:gpupoold" cannot '
        'list resource "pods" in API group "" at the cluster scope',
        "reason": "Forbidden", "details": {"kind": "pods"}, "code": 403,
    }  # fmt: skip
    api.answer("GET", PODS, Reply.json(403, forbidden))
    capacity = backend.capacity()
    assert capacity.nodes == () and not capacity.known
    assert capacity.problem.endswith("at the cluster scope") and "\n" not in capacity.problem


def test_an_api_server_that_is_not_there(tmp_path: Path) -> None:
    with recorded_api_server() as gone:
        url = gone.url
    opened = backend_for(url, tmp_path)
    try:
        capacity = opened.capacity()
    finally:
        opened.close()
    assert not capacity.known and "not reached" in capacity.problem


def test_a_pinned_pod_names_its_node() -> None:
    run = render_job(request(pinned=("gpu-a",)), SETTINGS, "p1")
    assert pod_spec(run)["nodeSelector"] == {"kubernetes.io/hostname": "gpu-a"}
    assert "affinity" not in pod_spec(run)
    typed = render_job(request(gpu_type="a100", pinned=("gpu-a",)), SETTINGS, "p1")
    assert pod_spec(typed)["nodeSelector"] == {
        "nvidia.com/gpu.product": A100, "kubernetes.io/hostname": "gpu-a",
    }  # fmt: skip
    assert "nodeSelector" not in pod_spec(render_job(request(), SETTINGS, "p1"))


def test_a_pinned_gang_may_run_only_on_its_nodes() -> None:
    run = render_job(request(nodes=2, torchrun=True, pinned=("gpu-a", "gpu-b")), SETTINGS, "p1")
    spec = pod_spec(run)
    assert "nodeSelector" not in spec
    assert spec["affinity"] == {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In",
                         "values": ["gpu-a", "gpu-b"]},
                    ]},
                ]
            }
        }
    }  # fmt: skip
    client = ApiClient()  # the manifest reads into the client's model, nothing lost
    job = client.deserialize(json.dumps(run.job), "V1Job", "application/json")
    assert client.sanitize_for_serialization(job) == run.job  # type: ignore[no-untyped-call]
