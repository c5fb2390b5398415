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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

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
