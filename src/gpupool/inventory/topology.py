"""A node's GPU topology as `nvidia-smi topo -m` shows it, from the inventory's own records.

The matrix is read from the same `Node` the scheduler places jobs on (its `links`, via
`Node.link`, and each GPU's `numa_node`), so `gpupool topo` shows exactly what placement
sees: an undeclared pair reads SYS here because placement counts it as SYS. Cells and legend
follow nvidia-smi: X (self), NV# (# bonded NVLinks), PIX, PXB, PHB, NODE, SYS. Two
departures, both documented in docs/nvml.md: an NVLink whose count is unknown (declared
without `count`) reads `NV`; NICs are not shown (the inventory knows GPUs only).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpupool.core.cpu_list import format_cpu_list
from gpupool.core.hardware import Inventory, LinkKind, Node
from gpupool.core.json_types import JsonObject

SELF = "X"
UNKNOWN = "N/A"  # nvidia-smi's word for an affinity it cannot tell

# nvidia-smi topo -m's legend, in its order and words.
LEGEND: tuple[tuple[str, str], ...] = (
    (SELF, "Self"),
    (
        "SYS",
        "Connection traversing PCIe as well as the SMP interconnect between NUMA nodes "
        "(e.g., QPI/UPI)",
    ),
    (
        "NODE",
        "Connection traversing PCIe as well as the interconnect between PCIe Host Bridges "
        "within a NUMA node",
    ),
    ("PHB", "Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)"),
    (
        "PXB",
        "Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
    ),
    ("PIX", "Connection traversing at most a single PCIe bridge"),
    ("NV#", "Connection traversing a bonded set of # NVLinks"),
)


@dataclass(frozen=True)
class GpuRow:
    """One row of the matrix: a GPU, its cell towards every GPU of the node, its affinity."""

    index: int
    model: str
    pci_bus_id: str
    cells: tuple[str, ...]  # towards each GPU of the node, in the node's GPU order
    cpu_affinity: tuple[int, ...]  # empty: unknown
    numa_node: int | None

    @property
    def label(self) -> str:
        return f"GPU{self.index}"

    @property
    def cpu_cell(self) -> str:
        return format_cpu_list(self.cpu_affinity) or UNKNOWN

    @property
    def numa_cell(self) -> str:
        return UNKNOWN if self.numa_node is None else str(self.numa_node)


def cell(node: Node, a: int, b: int) -> str:
    """The matrix cell between GPUs `a` and `b`: "X", "NV18", "PIX", ..., "SYS"."""
    if a == b:
        return SELF
    kind = node.link(a, b)
    if kind is LinkKind.NVLINK:
        count = node.link_record(a, b).nvlinks
        return f"NV{count}" if count else "NV"
    return kind.name


def matrix(node: Node) -> tuple[GpuRow, ...]:
    order = [g.index for g in node.gpus]
    return tuple(
        GpuRow(
            index=g.index,
            model=g.model,
            pci_bus_id=g.pci_bus_id,
            cells=tuple(cell(node, g.index, other) for other in order),
            cpu_affinity=g.cpu_affinity,
            numa_node=g.numa_node,
        )
        for g in node.gpus
    )


def topology_to_dict(inventory: Inventory) -> JsonObject:
    """`gpupool topo --json`: per node, its GPUs (with their row of the matrix, as printed,
    and their affinity both as nvidia-smi writes it and as CPU ids) and its links as data."""
    return {
        "source": inventory.source,
        "note": inventory.note,
        "legend": {symbol: text for symbol, text in LEGEND},
        "nodes": [
            {
                "name": node.name,
                "simulated": node.simulated,
                "gpus": [
                    {
                        "index": row.index,
                        "model": row.model,
                        "pci_bus_id": row.pci_bus_id,
                        "connections": {
                            f"GPU{other.index}": text
                            for other, text in zip(node.gpus, row.cells, strict=True)
                        },
                        "cpu_affinity": format_cpu_list(row.cpu_affinity) or None,
                        "cpu_ids": list(row.cpu_affinity),
                        "numa_affinity": row.numa_node,
                    }
                    for row in matrix(node)
                ],
                "links": [
                    {
                        "a": a.index,
                        "b": b.index,
                        "type": node.link(a.index, b.index).name.lower(),
                        "nvlinks": node.link_record(a.index, b.index).nvlinks,
                    }
                    for pos, a in enumerate(node.gpus)
                    for b in node.gpus[pos + 1 :]
                ],
            }
            for node in inventory.nodes
        ],
    }
