"""Inventory <-> plain JSON-ready dict, for the API, the store and the CLI.

The round trip is exact (inventory_from_dict(inventory_to_dict(inv)) == inv): order of
nodes, GPUs and links is kept. Link kinds travel as lowercase names ("nvlink", "sys"),
not as their integers, so the wire stays readable and survives reordering the enum.
Reading checks every field's type and names the bad one, e.g. "nodes[0].gpus[1].index",
because the dict may come from another process or an older version.
"""

from __future__ import annotations

from typing import Any

from gpupool.core.hardware import Gpu, Inventory, Link, LinkKind, Node
from gpupool.inventory.declared import InventoryError


def inventory_to_dict(inv: Inventory) -> dict[str, object]:
    return {
        "source": inv.source,
        "note": inv.note,
        "nodes": [
            {
                "name": n.name,
                "cpus": n.cpus,
                "memory_bytes": n.memory_bytes,
                "simulated": n.simulated,
                "gpus": [
                    {
                        "index": g.index,
                        "model": g.model,
                        "memory_bytes": g.memory_bytes,
                        "uuid": g.uuid,
                        "pci_bus_id": g.pci_bus_id,
                        "numa_node": g.numa_node,
                        "cpu_affinity": list(g.cpu_affinity),
                    }
                    for g in n.gpus
                ],
                "links": [
                    {"a": lk.a, "b": lk.b, "kind": lk.kind.name.lower(), "nvlinks": lk.nvlinks}
                    for lk in n.links
                ],
            }
            for n in inv.nodes
        ],
    }


def _get(d: Any, key: str, field: str, kind: type, *, nullable: bool = False) -> Any:
    name = f"{field}.{key}" if field else key
    if not isinstance(d, dict):
        raise InventoryError(f"expected an object, got {type(d).__name__}", field=field or "top")
    if key not in d:
        raise InventoryError("missing", field=name)
    value = d[key]
    if value is None and nullable:
        return None
    # bool is an int in Python; true/false where a number belongs is a bug upstream.
    if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
        raise InventoryError(f"expected {kind.__name__}, got {type(value).__name__}", field=name)
    return value


def _list(d: Any, key: str, field: str) -> list[Any]:
    value: list[Any] = _get(d, key, field, list)
    return value


def _gpu(d: Any, f: str) -> Gpu:
    return Gpu(
        index=_get(d, "index", f, int),
        model=_get(d, "model", f, str),
        memory_bytes=_get(d, "memory_bytes", f, int),
        uuid=_get(d, "uuid", f, str),
        pci_bus_id=_get(d, "pci_bus_id", f, str),
        numa_node=_get(d, "numa_node", f, int, nullable=True),
        # Absent from dicts written before CPU affinity was kept: unknown.
        cpu_affinity=_cpus(d, f) if "cpu_affinity" in d else (),
    )


def _cpus(d: Any, f: str) -> tuple[int, ...]:
    cpus = _list(d, "cpu_affinity", f)
    if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in cpus):
        raise InventoryError("expected CPU ids (integers >= 0)", field=f"{f}.cpu_affinity")
    return tuple(cpus)


def _link(d: Any, f: str) -> Link:
    kind_name = _get(d, "kind", f, str)
    try:
        kind = LinkKind[kind_name.upper()]
    except KeyError:
        names = ", ".join(k.name.lower() for k in LinkKind)
        raise InventoryError(
            f"unknown link kind {kind_name!r} (one of: {names})", field=f"{f}.kind"
        ) from None
    return Link(_get(d, "a", f, int), _get(d, "b", f, int), kind, _get(d, "nvlinks", f, int))


def _node(d: Any, f: str) -> Node:
    return Node(
        name=_get(d, "name", f, str),
        gpus=tuple(_gpu(g, f"{f}.gpus[{i}]") for i, g in enumerate(_list(d, "gpus", f))),
        links=tuple(_link(lk, f"{f}.links[{i}]") for i, lk in enumerate(_list(d, "links", f))),
        cpus=_get(d, "cpus", f, int),
        memory_bytes=_get(d, "memory_bytes", f, int),
        simulated=_get(d, "simulated", f, bool) if "simulated" in d else False,
    )


def inventory_from_dict(d: dict[str, Any]) -> Inventory:
    """The Inventory a dict from inventory_to_dict describes; raises InventoryError."""
    return Inventory(
        nodes=tuple(_node(n, f"nodes[{i}]") for i, n in enumerate(_list(d, "nodes", ""))),
        source=_get(d, "source", "", str),
        note=_get(d, "note", "", str),
    )
