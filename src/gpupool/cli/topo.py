"""`gpupool topo`: the GPU connection matrix as `nvidia-smi topo -m` prints it, with each GPU's
CPU and NUMA affinity, from the inventory placement uses (inventory/topology.py).

Where the topology comes from (one of, docs/nvml.md "Topology: gpupool topo"):
- default: this machine's NVML (the same discovery `gpupool server` runs); no NVML says so
  and names the other sources, exit 1: a made-up matrix would be read as this machine's;
- `--inventory FILE` / `--gpus 8xH100`: a declared inventory, as `gpupool server` takes it;
- `--pool`: the running daemon's inventory (GET /v1/gpus, links included): what its
  scheduler places on, whatever it came from; then its backends' nodes, one line each, named
  `BACKEND/node` (no matrix: an engine reports no links), and `backends` in --json as
  GET /v1/gpus gives it.
Offline unless --pool, so it works with no daemon; `main` words the client's errors.
"""

from __future__ import annotations

import argparse
import sys

from gpupool.cli.commands import Offline, Parents, Subparsers

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see cli/commands.py
if TYPE_CHECKING:
    from gpupool.client.pool_views import BackendCapacityView
    from gpupool.core.hardware import Inventory, Node
    from gpupool.core.json_types import JsonObject

NO_NVML_HINT = (
    "show a declared inventory's topology with --inventory FILE or --gpus 8xH100, "
    "or the running pool's with --pool"
)


def register(sub: Subparsers, parents: Parents) -> None:
    p = sub.add_parser(
        "topo",
        parents=[parents.common, parents.listing],
        help="GPU connection matrix (NVLink, PCIe), CPU and NUMA affinity",
        description="The GPU connection matrix like `nvidia-smi topo -m`: NV# (bonded "
        "NVLinks), PIX, PXB, PHB, NODE, SYS, with each GPU's CPU and NUMA affinity. From "
        "this machine's NVML unless a source below is given.",
    )
    source = p.add_mutually_exclusive_group()
    source.add_argument("--inventory", metavar="FILE", help="a declared inventory file")
    source.add_argument("--gpus", metavar="SPEC", help="the shorthand, e.g. 8xH100 (no links)")
    source.add_argument(
        "--pool", action="store_true", help="the running pool's inventory (its scheduler's)"
    )
    p.set_defaults(handler=Offline(cmd_topo))


def cmd_topo(args: argparse.Namespace) -> int:
    from gpupool.inventory import DiscoveryError, InventoryError

    backends: tuple[BackendCapacityView, ...] = ()
    drained: dict[tuple[str, int], str] = {}  # the pool's drained GPUs (--pool): their reasons
    try:
        if args.pool:
            inventory, backends, drained = _pool_inventory(args)
        else:
            inventory = _inventory(args)
    except InventoryError as e:
        print(f"gpupool: bad inventory: {e}", file=sys.stderr)
        return 2
    except DiscoveryError as e:
        if e.devices_found:  # GPUs are there but NVML cannot read them: no fallback
            print(f"gpupool: NVML: {e.reason}", file=sys.stderr)
        else:
            print(f"gpupool: no NVML on this machine ({e.reason}): {NO_NVML_HINT}", file=sys.stderr)
        return 1
    if args.json:
        from gpupool.cli.render import print_json
        from gpupool.inventory.topology import topology_to_dict

        found = topology_to_dict(inventory)
        if args.pool:
            found["backends"] = [_backend_json(b) for b in backends]
            found["drained"] = [
                {"node": n, "gpu": g, "reason": why} for (n, g), why in sorted(drained.items())
            ]
        print_json(found)
        return 0
    for pos, node in enumerate(inventory.nodes):
        if len(inventory.nodes) > 1:
            print(("\n" if pos else "") + f"{node.name}{' (simulated)' if node.simulated else ''}:")
        print(render_matrix(node))
        mine = [
            f"GPU{g} ({why or 'no reason given'})"
            for (n, g), why in drained.items()
            if n == node.name
        ]
        if mine:
            print(f"Drained (no new job starts there): {', '.join(sorted(mine))}")
    print(render_legend())
    if inventory.note:
        print(f"\nNote: {inventory.note}")
    if backends:
        print("\n" + render_backends(backends))
    return 0


def render_backends(backends: tuple[BackendCapacityView, ...]) -> str:
    """The backends' nodes, one line each, e.g. "  hpc/c1: 4 GPUs, A100 80GiB, up"; a
    backend whose nodes are not known says why instead."""
    from gpupool.cli.render import shown
    from gpupool.core.units import format_size, plural

    lines = ["Backend nodes (no matrix: their engines report no links):"]
    for b in backends:
        for n in b.nodes:
            model = n.gpu_model or "model not reported"
            if n.gpu_memory_bytes:
                model += f" {format_size(n.gpu_memory_bytes)}"
            state = f"{n.state} ({n.detail})" if n.detail else n.state
            lines.append(f"  {n.name}: {plural(n.gpus, 'GPU')}, {model}, {shown(state, 200)}")
        if b.problem:
            lines.append(f"  {b.name}: nodes not known: {shown(b.problem, 400)}")
        elif not b.nodes:
            lines.append(f"  {b.name}: its engine reports no nodes")
    return "\n".join(lines)


def _backend_json(backend: BackendCapacityView) -> JsonObject:
    """A backend as GET /v1/gpus gave it, its nodes' topology facts only."""
    return {
        "name": backend.name,
        "problem": backend.problem,
        "nodes": [
            {
                "name": n.name,
                "state": n.state,
                "gpus": n.gpus,
                "gpu_model": n.gpu_model,
                "gpu_memory_bytes": n.gpu_memory_bytes,
            }
            for n in backend.nodes
        ],
    }


def _inventory(args: argparse.Namespace) -> Inventory:
    import socket

    from gpupool.inventory import discover_nvml, load_inventory_file, parse_gpus_shorthand

    host = socket.gethostname()
    if args.inventory:
        # Any file, every node shown: a viewer, not the daemon (no "is this machine" check).
        return load_inventory_file(args.inventory, node_name=host)
    if args.gpus:
        return _shorthand_inventory(parse_gpus_shorthand(args.gpus, host, 0, 0))
    return discover_nvml(node_name=host)


def _shorthand_inventory(node: Node) -> Inventory:
    from gpupool.core.hardware import Inventory

    note = "The --gpus shorthand declares no links: every pair reads SYS, as placement counts it."
    return Inventory((node,), source="declared", note=note)


def _pool_inventory(
    args: argparse.Namespace,
) -> tuple[Inventory, tuple[BackendCapacityView, ...], dict[tuple[str, int], str]]:
    """The daemon's inventory as GET /v1/gpus gives it, back into the inventory's types,
    its backends' nodes, and its drained GPUs with their reasons (docs/operations.md)."""
    from gpupool.client import Client
    from gpupool.core.hardware import Gpu, Inventory, Node

    pool = Client(args.state_dir, url=args.url).gpus()
    nodes = tuple(
        Node(
            n.name,
            tuple(
                Gpu(
                    g.index,
                    g.model,
                    g.memory_bytes,
                    pci_bus_id=g.pci_bus_id,
                    numa_node=g.numa_node,
                    cpu_affinity=g.cpu_affinity,
                )
                for g in n.gpus
            ),
            n.links,
            simulated=n.simulated,
        )
        for n in pool.nodes
    )
    drained = {(n.name, g.index): g.drained.reason for n in pool.nodes for g in n.gpus if g.drained}
    return Inventory(nodes, source=pool.source, note=pool.note), pool.backends, drained


def render_matrix(node: Node) -> str:
    """The matrix as nvidia-smi lays it out: a header of GPU labels, one row per GPU, then
    CPU Affinity and NUMA Affinity; columns aligned (nvidia-smi uses tabs)."""
    from gpupool.inventory.topology import matrix

    rows = matrix(node)
    header = ["", *(r.label for r in rows), "CPU Affinity", "NUMA Affinity"]
    body = [[r.label, *r.cells, r.cpu_cell, r.numa_cell] for r in rows]
    widths = [max(len(line[col]) for line in (header, *body)) for col in range(len(header))]
    return "\n".join(
        "  ".join(text.ljust(w) for text, w in zip(line, widths, strict=True)).rstrip()
        for line in (header, *body)
    )


def render_legend() -> str:
    from gpupool.inventory.topology import LEGEND

    width = max(len(symbol) for symbol, _ in LEGEND)
    return "\nLegend:\n\n" + "\n".join(f"  {s.ljust(width)} = {text}" for s, text in LEGEND)
