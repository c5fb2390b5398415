"""Why a Ray job waits: its entrypoint's resources against the cluster's live nodes (pure).

A Ray job stays PENDING while its supervisor actor, which holds the entrypoint's resources
(`entrypoint_num_gpus`, `_num_cpus`, `_memory`, `entrypoint_resources`), cannot be placed.
Ray's own message then is the same whatever the cause ("may be waiting for resources ...
or for the runtime environment"), and Ray fails such a job only after its start timeout
(`RAY_JOB_START_TIMEOUT_SECONDS`, 15 minutes by default). A job that asks for more than any
live node has in total can never start as the cluster is: this module finds that case, from
the nodes' totals (the state API's `resources_total`), and names the binding resource and
its figures, so `gpupool why` says it instead of waiting silently.

The job is not ended here: a Ray cluster with an autoscaler may still add a node that fits
(then Ray starts it), and one without gives up after its start timeout (then the job ends
FAILED with Ray's words). Free resources are not compared: they change between two polls,
and a job that fits a node's totals starts when that node frees.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpupool.core.backends import EngineNode, EngineNodeState

GPU, CPU, MEMORY = "GPU", "CPU", "memory"
_UNITS = {GPU: "GPUs", CPU: "CPUs"}


@dataclass(frozen=True)
class NodeTotals:
    """One live Ray node: its name and its resources' totals (Ray's names: GPU, CPU,
    memory in bytes, custom resources)."""

    name: str
    totals: Mapping[str, float]


def live_nodes(answer: object) -> list[NodeTotals]:
    """The ALIVE nodes of a `GET /api/v0/nodes` answer; [] for an answer of another shape."""
    try:
        rows = answer["data"]["result"]["result"]  # type: ignore[index]
    except (KeyError, TypeError):
        return []
    found: list[NodeTotals] = []
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict) or row.get("state") != "ALIVE":
            continue
        totals = row.get("resources_total")
        if isinstance(totals, dict):
            figures = {k: float(v) for k, v in totals.items() if isinstance(v, int | float)}
            found.append(
                NodeTotals(str(row.get("node_name") or row.get("node_ip") or "?"), figures)
            )
    return found


def entrypoint_asks(
    gpus: float | None,
    cpus: float | None,
    memory: int | None,
    resources: Mapping[str, float] | None,
) -> dict[str, float]:
    """What the supervisor actor holds, by Ray's resource names (only what is asked)."""
    asks = {name: float(v) for name, v in (resources or {}).items() if v}
    for name, value in ((GPU, gpus), (CPU, cpus), (MEMORY, memory)):
        if value:
            asks[name] = float(value)
    return asks


def asks_of(metadata: Mapping[str, str] | None, key: str) -> dict[str, float]:
    """The asks a submission recorded in its metadata under `key` (render.py); {} when
    absent or not of the shape written (a gang, a run of an older gpupool)."""
    try:
        found = json.loads((metadata or {})[key])
    except (KeyError, TypeError, ValueError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {str(k): float(v) for k, v in found.items() if isinstance(v, int | float) and v}


def _figure(name: str, value: float) -> str:
    if name == MEMORY:
        return f"{value / 2**30:.3g} GiB of memory"
    return f"{value:g} {_UNITS.get(name, name)}"


def never_fits(asks: Mapping[str, float], nodes: Iterable[NodeTotals]) -> str | None:
    """Why `asks` fits on no live node, in words naming the binding resource; None when
    some node's totals hold all of it (it waits for that node to free)."""
    live = list(nodes)
    if not asks or not live:
        return None  # no node listed: the head always is one, so its list is not known yet
    if any(all(node.totals.get(k, 0.0) >= v for k, v in asks.items()) for node in live):
        return None
    for name, value in sorted(asks.items()):
        largest = max(node.totals.get(name, 0.0) for node in live)
        if largest < value:
            where = f"the largest of its {len(live)} live nodes has {largest:g}"
            if largest == 0:
                where = f"none of its {len(live)} live nodes has any"
            return f"asks for {_figure(name, value)}; {where}: it cannot start on this Ray cluster"
    wanted = " and ".join(_figure(k, v) for k, v in sorted(asks.items()))
    return f"no live Ray node has {wanted} together: it cannot start on this Ray cluster"


# -- the cluster's nodes as Capacity (Backend.capacity) ----------------------------------
# Two calls of the state API: the node list (totals, state, IP, name, id) and the live
# actors with their resources (ACTORS_ENDPOINT). The state API gives no per-node available
# resources, and the dashboard's per-node usage (`/nodes?view=summary`) is the autoscaler's,
# absent on a cluster without one (a plain `ray start`); so a node's `gpus_used` is the GPUs
# its live actors hold: every Ray job's supervisor (its entrypoint's GPUs), every gang's
# rank runners (gang.py), and other tenants' actors alike. GPUs held by plain tasks (not
# actors) are not counted: listing them would be a call per poll over every task. Ray's
# figures may be fractional (`num_gpus=0.5`); the count is rounded UP to whole GPUs (1.5 in
# use: 2), since a GPU partly held by another tenant is not free for a whole-GPU job, and
# Ray packs fractions onto one GPU before the next, so the halves of the pool's own runs
# on one GPU (engine/backend_seats.py counts each GPU once) make one GPU in use.
ACTORS_ENDPOINT = (
    "/api/v0/actors?limit=10000&detail=true"
    "&filter_keys=state&filter_predicates=%3D&filter_values=ALIVE"
)
ACCELERATOR_PREFIX = "accelerator_type:"  # Ray's resource naming a node's GPU model
ACCELERATOR_LABEL = "ray.io/accelerator-type"
NODE_ID_LABEL = "ray.io/node-id"  # every node's label of its own id (Ray 2.4x and later)
PIN_AMOUNT = 0.001  # of a node's built-in `node:IP` resource: any number of runs fit there
_NODE_ID_RE = re.compile(r"[0-9a-f]{56}")  # a NodeID: 28 bytes, as hex
_PG_GPU_RE = re.compile(r"GPU_group_(?:[0-9]+_)?[0-9a-f]+")


def is_node_id(pin: str) -> bool:
    """A pin that names a node by its id (several nodes share its IP), not by its IP."""
    return _NODE_ID_RE.fullmatch(pin) is not None


def pin_resources(pin: str) -> dict[str, float]:
    """The entrypoint resources that pin a run to the node of IP `pin` (`node:IP`); {} for
    a pin by node id (that one is a label selector: `pin_labels`)."""
    return {} if is_node_id(pin) else {f"node:{pin}": PIN_AMOUNT}


def pin_labels(pin: str) -> dict[str, str]:
    """The label selector that pins a run to the node of id `pin`; {} for a pin by IP."""
    return {NODE_ID_LABEL: pin} if is_node_id(pin) else {}


def _rows(answer: object) -> list[dict[str, object]]:
    try:
        rows = answer["data"]["result"]["result"]  # type: ignore[index]
    except (KeyError, TypeError):
        return []
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def _actor_gpus(asked: object) -> float:
    """An actor's GPUs: `GPU`, or in a placement group's bundle `GPU_group_I_PGID` /
    `GPU_group_PGID` (Ray renames a bundle's resources), counted once."""
    if not isinstance(asked, dict):
        return 0.0
    figures = [asked.get(GPU)] + [v for k, v in asked.items() if _PG_GPU_RE.fullmatch(str(k))]
    return next((float(v) for v in figures if isinstance(v, int | float)), 0.0)


def gpus_in_use(answer: object) -> dict[str, float]:
    """Node id -> GPUs held by the live actors of a state API actor list (ACTORS_ENDPOINT)."""
    out: dict[str, float] = {}
    for row in _rows(answer):
        node = row.get("node_id")
        if row.get("state") == "ALIVE" and isinstance(node, str):
            out[node] = out.get(node, 0.0) + _actor_gpus(row.get("required_resources"))
    return out


def _model(totals: Mapping[str, float], labels: object) -> str:
    for key in totals:
        if key.startswith(ACCELERATOR_PREFIX):
            return key[len(ACCELERATOR_PREFIX) :]
    said = labels.get(ACCELERATOR_LABEL) if isinstance(labels, dict) else None
    return said if isinstance(said, str) else ""


def engine_nodes(answer: object, used: Mapping[str, float]) -> tuple[EngineNode, ...]:
    """The GPU nodes of a `GET /api/v0/nodes` answer, `used` from `gpus_in_use`.

    ALIVE -> UP, DEAD -> DOWN; a DEAD node of an IP with a live node is an earlier life of
    it, left out. The pin is the node's IP, or its id where several live nodes share that
    IP (several raylets on one host: `node:IP` would not tell them apart). The name is
    Ray's node name (its IP unless named), with the id's head added where names repeat."""
    rows = _rows(answer)
    live = [r.get("node_ip") for r in rows if r.get("state") == "ALIVE"]
    rows = [r for r in rows if r.get("state") == "ALIVE" or r.get("node_ip") not in live]
    names = [str(r.get("node_name") or r.get("node_ip") or "?") for r in rows]
    nodes: list[EngineNode] = []
    for row, name in zip(rows, names, strict=True):
        raw = row.get("resources_total")
        totals = {k: float(v) for k, v in (raw if isinstance(raw, dict) else {}).items()
                  if isinstance(v, int | float)}  # fmt: skip
        gpus = int(totals.get(GPU, 0.0))
        if gpus == 0:
            continue
        node_id, ip = str(row.get("node_id") or ""), str(row.get("node_ip") or "")
        alive = row.get("state") == "ALIVE"
        nodes.append(
            EngineNode(
                name=f"{name}:{node_id[:8]}" if names.count(name) > 1 else name,
                gpus=gpus,
                gpus_used=min(math.ceil(used.get(node_id, 0.0) - 1e-9), gpus) if alive else 0,
                gpu_model=_model(totals, row.get("labels")),
                cpus=int(totals.get(CPU, 0.0)),
                memory_bytes=int(totals.get(MEMORY, 0.0)),
                state=EngineNodeState.UP if alive else EngineNodeState.DOWN,
                detail="" if alive else str(row.get("state_message") or row.get("state")),
                pin=node_id if live.count(ip) > 1 else ip,
            )
        )
    return tuple(nodes)
