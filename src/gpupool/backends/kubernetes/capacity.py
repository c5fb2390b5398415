"""A Kubernetes cluster's GPU nodes as `Capacity` (core/backends.py): pure, from two lists
the backend asks (backend.py), a node list and one pod list of every namespace.

- A node's GPUs are `status.allocatable[GPU_RESOURCE]` (the device plugin's count; the
  settings' `gpu_resource`, nvidia.com/gpu by default); nodes without any are left out (the
  pool admits GPU runs to GPU nodes). `gpu_model` is the label nvidia.com/gpu.product and
  the memory of one GPU the label nvidia.com/gpu.memory (MiB), both set by NVIDIA's GPU
  feature discovery; "" and 0 where the labels are not there. CPUs and memory are the
  node's allocatable (quantities: `7910m`, `65843600Ki`).
- State: the Ready condition not "True" -> DOWN (its message as the detail);
  `spec.unschedulable` (a cordon) -> DRAINED; else UP.
- `pin` is the label kubernetes.io/hostname (what a run's nodeSelector names: render.py),
  the node's name where the label is missing.
- `gpus_used`: the GPUs asked by the pods bound to the node that are not over
  (POD_FIELD_SELECTOR: the API leaves out Succeeded and Failed ones), anyone's: per pod the
  sum over its containers, or its largest init container if that is more, as the scheduler
  counts them (requests; limits where a request is not written, as the API defaults it).
"""

from __future__ import annotations

import math
import re

from gpupool.backends.kubernetes.render import HOSTNAME_LABEL
from gpupool.core.backends import EngineNode, EngineNodeState
from gpupool.core.json_types import JsonObject, JsonValue

POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"  # MiB, as GPU feature discovery writes it
MIB = 1 << 20
_SUFFIXES = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "P": 1e15, "E": 1e18,
}  # fmt: skip
_QUANTITY_RE = re.compile(r"([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)")


def quantity(text: object) -> float:
    """A Kubernetes quantity (`8`, `7910m`, `64Gi`, `1e9`) as a number; 0 for anything else."""
    m = _QUANTITY_RE.fullmatch(str(text).strip())
    if m is None or m[2] not in _SUFFIXES:
        return 0.0
    try:
        return float(m[1]) * _SUFFIXES[m[2]]
    except ValueError:
        return 0.0


def _dict(value: JsonValue | None) -> JsonObject:
    return value if isinstance(value, dict) else {}


def _items(answer: JsonObject) -> list[JsonObject]:
    items = answer.get("items")
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def _container_gpus(container: JsonValue, resource: str) -> int:
    res = _dict(_dict(container).get("resources"))
    asked = _dict(res.get("requests")).get(resource, _dict(res.get("limits")).get(resource))
    return math.ceil(quantity(asked)) if asked is not None else 0


def gpus_by_node(pods: JsonObject, resource: str) -> dict[str, int]:
    """Node name -> GPUs its bound, unfinished pods ask for (module docstring)."""
    out: dict[str, int] = {}
    for pod in _items(pods):
        spec = _dict(pod.get("spec"))
        node = spec.get("nodeName")
        phase = _dict(pod.get("status")).get("phase")
        if not isinstance(node, str) or phase in ("Succeeded", "Failed"):
            continue
        containers = spec.get("containers")
        inits = spec.get("initContainers")
        main = sum(_container_gpus(c, resource) for c in _list(containers))
        init = max((_container_gpus(c, resource) for c in _list(inits)), default=0)
        out[node] = out.get(node, 0) + max(main, init)
    return out


def _list(value: JsonValue | None) -> list[JsonValue]:
    return value if isinstance(value, list) else []


def _state(node: JsonObject) -> tuple[EngineNodeState, str]:
    status = _dict(node.get("status"))
    for cond in _list(status.get("conditions")):
        c = _dict(cond)
        if c.get("type") == "Ready" and c.get("status") != "True":
            said = c.get("message") or c.get("reason") or f"Ready {c.get('status')}"
            return EngineNodeState.DOWN, f"NotReady: {said}"
    if _dict(node.get("spec")).get("unschedulable") is True:
        return EngineNodeState.DRAINED, "cordoned (spec.unschedulable)"
    return EngineNodeState.UP, ""


def engine_nodes(nodes: JsonObject, used: dict[str, int], resource: str) -> tuple[EngineNode, ...]:
    """The GPU nodes of a `GET /api/v1/nodes` answer, `used` from `gpus_by_node`."""
    out: list[EngineNode] = []
    for node in _items(nodes):
        meta = _dict(node.get("metadata"))
        name = meta.get("name")
        allocatable = _dict(_dict(node.get("status")).get("allocatable"))
        gpus = int(quantity(allocatable.get(resource, 0)))
        if not isinstance(name, str) or gpus == 0:
            continue
        labels = _dict(meta.get("labels"))
        model, memory, host = (labels.get(k) for k in (PRODUCT_LABEL, GPU_MEMORY_LABEL,
                                                       HOSTNAME_LABEL))  # fmt: skip
        state, detail = _state(node)
        out.append(
            EngineNode(
                name=name,
                gpus=gpus,
                gpus_used=min(used.get(name, 0), gpus),
                gpu_model=model if isinstance(model, str) else "",
                gpu_memory_bytes=int(quantity(memory)) * MIB if memory is not None else 0,
                cpus=int(quantity(allocatable.get("cpu", 0))),
                memory_bytes=int(quantity(allocatable.get("memory", 0))),
                state=state,
                detail=detail,
                pin=host if isinstance(host, str) and host else name,
            )
        )
    return tuple(out)
