"""Which inventory the daemon runs on.

Precedence: an inventory file > the --gpus shorthand > NVML discovery > the demo
inventory. What people declare wins over what NVML finds, so a box can be shared
partially (declare 4 of its 8 GPUs) or described better than NVML can (topology on
hardware whose driver does not report it). The demo keeps gpupool usable on a laptop or
CI box with no GPU: jobs run for real, with CUDA_VISIBLE_DEVICES set, on GPUs that do not
exist, and Inventory.note says so in one line for the CLI and the logs.
"""

from __future__ import annotations

import os
import socket
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpupool.core.hardware import Inventory, Node
from gpupool.inventory.declared import demo_inventory, load_inventory_file, parse_gpus_shorthand
from gpupool.inventory.nvml import DiscoveryError, discover_nvml

DECLARE_HINT = "Declare yours with --gpus 4xA100-80GB or --inventory FILE."


def local_cpus() -> int:
    return os.cpu_count() or 0


def local_memory_bytes(meminfo: Path = Path("/proc/meminfo")) -> int:
    """MemTotal of this machine in bytes; 0 (memory requests unchecked) when unknown."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                value, *unit = line.split(":", 1)[1].split()
                return int(value) * (1024 if unit and unit[0].lower() == "kb" else 1)
    except (OSError, ValueError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def _with_local_resources(inv: Inventory, node_name: str) -> Inventory:
    """Give this machine's node its real CPUs and memory where nothing was declared.

    Only the node named like this host: other nodes of a file are other machines.
    """
    nodes: list[Node] = []
    for n in inv.nodes:
        if n.name == node_name:
            n = replace(
                n,
                cpus=n.cpus or local_cpus(),
                memory_bytes=n.memory_bytes or local_memory_bytes(),
            )
        nodes.append(n)
    return replace(inv, nodes=tuple(nodes))


def _summary(inv: Inventory) -> str:
    """'8x A100-80GB' or '2x A100-80GB + 2x V100-32GB'."""
    counts: dict[str, int] = {}
    for n in inv.nodes:
        for g in n.gpus:
            counts[g.model] = counts.get(g.model, 0) + 1
    return " + ".join(f"{c}x {m}" for m, c in counts.items())


def resolve_inventory(
    *,
    gpus: str | None = None,
    inventory_file: str | None = None,
    node_name: str | None = None,
    nvml: Any = None,
) -> Inventory:
    """The inventory to schedule on; see the module docstring for the precedence.

    Raises InventoryError for a bad declaration, and DiscoveryError when NVML sees GPUs
    but cannot read them (the demo would hide real, unmanaged GPUs).
    """
    name = node_name or socket.gethostname()
    if inventory_file:
        inv = _with_local_resources(load_inventory_file(inventory_file, node_name=name), name)
        if gpus:
            note = f"--gpus {gpus} ignored: the inventory file {inventory_file} takes precedence."
            inv = replace(inv, note=note)
        return inv
    if gpus:
        node = parse_gpus_shorthand(gpus, name, local_cpus(), local_memory_bytes())
        return Inventory((node,), source="declared")
    try:
        return _with_local_resources(discover_nvml(nvml, name), name)
    except DiscoveryError as e:
        if e.devices_found:
            raise
        reason = e.reason
    demo = _with_local_resources(demo_inventory(name), name)
    note = (
        f"No NVIDIA GPU found (NVML: {reason}); running on the declared demo inventory of "
        f"{_summary(demo)}: jobs get CUDA_VISIBLE_DEVICES but no real GPU. {DECLARE_HINT}"
    )
    return replace(demo, note=" ".join(note.split()))
