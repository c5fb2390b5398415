"""Which inventory the daemon runs on.

Precedence: an inventory file > the --gpus shorthand > NVML discovery > the demo
inventory. The daemon runs every job on this machine, so an inventory file may name other
machines only as simulated nodes (`_local_nodes`; docs/nvml.md). What people declare wins over what NVML finds, so a box can be shared
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
from gpupool.core.units import plural
from gpupool.inventory.declared import (
    InventoryError,
    demo_inventory,
    load_inventory_file,
    parse_gpus_shorthand,
)
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


def is_this_machine(node_name: str, host: str) -> bool:
    """Does a node's name name this host? Case-blind, and a short name matches the full one
    (gpu7 and gpu7.lab.example.com): hostnames are written both ways."""
    a, b = node_name.strip().lower(), host.strip().lower()
    if a == b:
        return True
    return "." in (a + b) and (a.split(".")[0] == b or b.split(".")[0] == a)


def _local_nodes(inv: Inventory, host: str, where: str) -> set[str]:
    """The names of the nodes that are this machine; InventoryError for nodes that are other
    machines (the daemon would run their jobs here, on GPUs given out twice).

    A one-node inventory is this machine whatever its name (the name is a label). In an
    inventory of several nodes, this machine is the node named like this host; every other
    node must be declared `simulated: true` (its GPUs do not exist). docs/nvml.md.
    """
    real = [n for n in inv.nodes if not n.simulated]
    if len(inv.nodes) == 1:
        return {n.name for n in real}
    local = [n for n in real if is_this_machine(n.name, host)]
    if len(local) > 1:
        names = " and ".join(n.name for n in local)
        raise InventoryError(f"nodes {names} both name this machine ({host}): keep one", file=where)
    others = [n for n in real if n not in local]
    if others:
        listed = " and ".join(f"{n.name} ({plural(len(n.gpus), 'GPU')})" for n in others)
        noun, verb = ("node", "is") if len(others) == 1 else ("nodes", "are")
        raise InventoryError(
            f"{noun} {listed} {verb} not this machine ({host}): gpupool server runs every job "
            f"on this machine, so jobs placed there would run here, on GPUs given out twice. "
            f"Name this machine's node {host}; mark test nodes whose GPUs do not exist with "
            f"`simulated: true`; pools of several machines need a backend (not available yet)",
            file=where,
        )
    return {n.name for n in local}


def _with_local_resources(inv: Inventory, local: set[str]) -> Inventory:
    """Give this machine's node its real CPUs and memory where nothing was declared.

    Other nodes (simulated ones) keep what the file says.
    """
    nodes: list[Node] = []
    for n in inv.nodes:
        if n.name in local:
            n = replace(
                n,
                cpus=n.cpus or local_cpus(),
                memory_bytes=n.memory_bytes or local_memory_bytes(),
            )
        nodes.append(n)
    return replace(inv, nodes=tuple(nodes))


def _simulated_note(inv: Inventory) -> str:
    simulated = [n for n in inv.nodes if n.simulated]
    if not simulated:
        return ""
    gpus = sum(len(n.gpus) for n in simulated)
    noun, verb = ("Node", "is") if len(simulated) == 1 else ("Nodes", "are")
    return (
        f"{noun} {', '.join(n.name for n in simulated)} {verb} simulated: "
        f"{plural(gpus, 'GPU')} that do not exist; jobs placed there run on this machine."
    )


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
        inv = load_inventory_file(inventory_file, node_name=name)
        inv = _with_local_resources(inv, _local_nodes(inv, name, inventory_file))
        notes = [_simulated_note(inv)]
        if gpus:
            notes.append(
                f"--gpus {gpus} ignored: the inventory file {inventory_file} takes precedence."
            )
        return replace(inv, note=" ".join(n for n in notes if n))
    if gpus:
        node = parse_gpus_shorthand(gpus, name, local_cpus(), local_memory_bytes())
        return Inventory((node,), source="declared")
    try:
        return _with_local_resources(discover_nvml(nvml, name), {name})
    except DiscoveryError as e:
        if e.devices_found:
            raise
        reason = e.reason
    demo = _with_local_resources(demo_inventory(name), {name})
    note = (
        f"No NVIDIA GPU found (NVML: {reason}); running on the declared demo inventory of "
        f"{_summary(demo)}: jobs get CUDA_VISIBLE_DEVICES but no real GPU. {DECLARE_HINT}"
    )
    return replace(demo, note=" ".join(note.split()))
