"""The Ray backend's capacity (backends/ray/capacity.py: the state API's nodes and live
actors) and a pinned run's submission (render.py). Answers as Ray 2.60's state API gives
them (recorded from tests/ray_cluster.py's cluster, ids kept); the real cluster's tests are
tests/integration/test_ray_backend.py."""

from __future__ import annotations

import json

from test_ray_render import launch, settings

from gpupool.backends.ray.capacity import engine_nodes, gpus_in_use, is_node_id
from gpupool.backends.ray.gang import GANG_ENV
from gpupool.backends.ray.render import render
from gpupool.core.backends import EngineNodeState
from gpupool.core.execution import LaunchRequest

HEAD = "a4fe906ffd97013275024ff3adb196a7f6659ae5954c2b09ac9192d0"
WORKER = "dc1c76511df471e416880e59e5fd16031040c4ba9369a616992433f1"


Row = dict[str, object]


def node(node_id: str, ip: str, state: str, totals: dict[str, float], **more: object) -> Row:
    return {
        "node_id": node_id, "node_ip": ip, "is_head_node": False, "state": state,
        "state_message": None, "node_name": ip, "resources_total": totals,
        "labels": {"ray.io/node-id": node_id}, **more,
    }  # fmt: skip


def answer(rows: list[Row]) -> Row:
    return {
        "result": True, "msg": "",
        "data": {"result": {"total": len(rows), "num_after_truncation": len(rows),
                            "num_filtered": len(rows), "result": rows,
                            "partial_failure_warning": "", "warnings": None}},
    }  # fmt: skip


# The tests' cluster: a head (4 GPUs) and a worker (2 GPUs) on one host, one IP.
ONE_HOST = answer([
    node(HEAD, "192.0.2.2", "ALIVE", {"memory": 24565645056.0, "GPU": 4.0,
         "node:192.0.2.2": 1.0, "object_store_memory": 1e8, "node:__internal_head__": 1.0,
         "CPU": 4.0}, is_head_node=True),
    node(WORKER, "192.0.2.2", "ALIVE", {"memory": 24256061184.0, "object_store_memory": 1e8,
         "CPU": 2.0, "node:192.0.2.2": 1.0, "GPU": 2.0}),
])  # fmt: skip
# A job's supervisor holding 1 GPU on the worker, and a gang's rank runner in a placement
# group's bundle (Ray renames the bundle's resources), as `/api/v0/actors?detail=true` shows.
ACTORS = answer([
    {"actor_id": "be1756115b263d61843f538b01000000", "class_name": "JobSupervisor",
     "state": "ALIVE", "job_id": "01000000", "node_id": WORKER, "pid": 10049,
     "required_resources": {"GPU": 1.0}, "placement_group_id": None,
     "label_selector": {"ray.io/node-id": WORKER}},
    {"actor_id": "c0ffee115b263d61843f538b02000000", "class_name": "NodeRunner",
     "state": "ALIVE", "job_id": "02000000", "node_id": HEAD, "pid": 10311,
     "required_resources": {"CPU_group_0_3f1c2b": 1.0, "GPU_group_0_3f1c2b": 2.0},
     "placement_group_id": "3f1c2b"},
])  # fmt: skip


def test_one_host_two_nodes_pinned_by_id_with_their_use() -> None:
    head, worker = engine_nodes(ONE_HOST, gpus_in_use(ACTORS))
    assert (head.gpus, head.gpus_used, head.cpus) == (4, 2, 4)
    assert (worker.gpus, worker.gpus_used, worker.cpus) == (2, 1, 2)
    assert worker.memory_bytes == 24256061184
    assert (head.pin, worker.pin) == (HEAD, WORKER)  # one IP: the ids tell them apart
    assert (head.name, worker.name) == (f"192.0.2.2:{HEAD[:8]}", f"192.0.2.2:{WORKER[:8]}")
    assert head.state is worker.state is EngineNodeState.UP


def test_a_cluster_of_hosts_pinned_by_ip_models_and_dead_nodes() -> None:
    a100 = {"GPU": 8.0, "CPU": 96.0, "memory": 8e11, "accelerator_type:A100": 1.0}
    listed = answer([
        node("1" * 56, "10.0.0.11", "ALIVE", a100),
        node("2" * 56, "10.0.0.12", "DEAD", a100, state_message="Expected termination"),
        node("3" * 56, "10.0.0.11", "DEAD", a100),  # 10.0.0.11's earlier life
        node("4" * 56, "10.0.0.13", "ALIVE", {"CPU": 16.0}),  # no GPUs
        node("5" * 56, "10.0.0.14", "ALIVE", {"GPU": 2.0, "CPU": 8.0},
             labels={"ray.io/accelerator-type": "L4"}),
    ])  # fmt: skip
    nodes = engine_nodes(listed, {"1" * 56: 7.5, "2" * 56: 3.0})
    assert [(n.name, n.pin, n.state) for n in nodes] == [
        ("10.0.0.11", "10.0.0.11", EngineNodeState.UP),
        ("10.0.0.12", "10.0.0.12", EngineNodeState.DOWN),
        ("10.0.0.14", "10.0.0.14", EngineNodeState.UP),
    ]
    assert (nodes[0].gpu_model, nodes[0].gpus_used) == ("A100", 8)  # a fraction held: whole
    assert (nodes[1].gpus_used, nodes[1].detail) == (0, "Expected termination")
    assert nodes[2].gpu_model == "L4"


def test_answers_of_another_shape_are_no_nodes() -> None:
    assert engine_nodes({"data": None}, {}) == ()
    assert gpus_in_use({"result": False, "msg": "boom"}) == {}


def _submitted(request: LaunchRequest) -> dict[str, object]:
    sub = render(request, settings(), "p1")
    return {"resources": sub.entrypoint_resources, "labels": sub.entrypoint_label_selector,
            "gang": sub.gang, "env": sub.runtime_env["env_vars"]}  # fmt: skip


def _pinned(request: LaunchRequest, pins: tuple[str, ...]) -> LaunchRequest:
    from dataclasses import replace

    assert request.backend is not None
    return replace(request, backend=replace(request.backend, pinned=pins))


def test_a_single_run_pinned_by_ip_or_by_id() -> None:
    by_ip = _submitted(_pinned(launch(), ("10.0.0.11",)))
    assert by_ip["resources"] == {"node:10.0.0.11": 0.001} and by_ip["labels"] is None
    by_id = _submitted(_pinned(launch(), (WORKER,)))
    assert by_id["resources"] is None and by_id["labels"] == {"ray.io/node-id": WORKER}
    free = _submitted(launch())
    assert free["resources"] is None and free["labels"] is None
    assert is_node_id(WORKER) and not is_node_id("10.0.0.11") and not is_node_id("::1")


def test_a_gang_carries_its_pins_to_the_driver() -> None:
    sub = _submitted(_pinned(launch(nodes=2), ("10.0.0.11", "10.0.0.12")))
    gang = sub["gang"]
    assert isinstance(gang, dict) and gang["pins"] == ["10.0.0.11", "10.0.0.12"]
    env = sub["env"]
    assert isinstance(env, dict) and json.loads(env[GANG_ENV])["pins"] == gang["pins"]
    assert _submitted(launch(nodes=2))["gang"]["pins"] == []  # type: ignore[index]
