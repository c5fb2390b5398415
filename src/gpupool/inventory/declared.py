"""Inventories people declare: the --gpus shorthand and YAML inventory files.

Shorthand: "8xH100", "4xA100-80GB", "4x A100-80GB", "2xA100-80GB,2xV100-32GB" (groups on
one node, indices consecutive). Memory comes from the catalog, or from a "-<N>GB" suffix
for models it does not know ("2xMYGPU-48GB"). Shorthand knows no topology: no links, so
every pair counts as SYS, the worst; placement then cannot prefer NVLink pairs.

YAML inventory file::

    nodes:
      - name: box1              # default: this host's name, for the first node only
        cpus: 64                # optional; 0/absent: CPU requests are not checked
        memory: 512GB           # optional; a size with a unit
        gpus: 8xA100-80GB       # shorthand, OR a list:
        # gpus:
        #   - {index: 0, model: A100-80GB, memory: 80GB, numa: 0,
        #      cpu_affinity: "0-15,32-47", pci_bus_id: "0000:07:00.0", uuid: GPU-...,
        #      unmanaged_memory: 4GB}
        links:                  # optional
          - {gpus: [0, 1, 2, 3], type: nvlink, count: 12}  # every pair in the group
          - {gpus: [0, 4], type: sys}
        numa: [[0, 1, 2, 3], [4, 5, 6, 7]]   # optional: GPUs per NUMA node
        simulated: false        # optional; true: its GPUs do not exist (a test pool's node)

In a GPU list, `index` defaults to the position and `memory` to the catalog's size for
`model`; `uuid` defaults to "GPU-declared-<node>-<index>"; `cpu_affinity` (the CPUs
nearest the GPU, a cpulist as nvidia-smi prints it) to unknown. `unmanaged_memory` (default 0)
is memory that processes gpupool does not manage hold on that GPU (a display server...):
fractional jobs are not granted it. Link types are those of
`nvidia-smi topo -m`: nvlink (also nv12, meaning count 12), pix, pxb, phb, node, sys.
A later link entry overrides an earlier one for the same pair, so a broad `pix` group
can be refined by `nvlink` pairs. `numa` group i is NUMA node i: it sets each GPU's
numa_node (unless the GPU declares its own, which must agree), and a pair in one NUMA
node with no declared link becomes NODE; pairs across NUMA nodes stay SYS.

Every error names the file, the line and the field, e.g.
"inv.yaml:7: nodes[0].gpus[2].memory: not a size: '80XB'". Unknown keys are refused
rather than ignored: a misspelt "numa_groups" would otherwise silently lose topology.
"""

from __future__ import annotations

import re
import socket
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, ScalarNode, SequenceNode
from yaml.nodes import Node as YamlNode

from gpupool.core import gpu_catalog as catalog
from gpupool.core.cpu_list import parse_cpu_list
from gpupool.core.hardware import Gpu, Inventory, Link, LinkKind, Node
from gpupool.core.units import format_size, parse_size


class InventoryError(ValueError):
    """A declared inventory is wrong; the message says where (file:line: field: reason)."""

    def __init__(self, reason: str, *, file: str = "", line: int = 0, field: str = "") -> None:
        self.reason = reason
        self.file = file
        self.line = line
        self.field = field
        prefix = f"{file}:{line}: " if file and line else f"{file}: " if file else ""
        super().__init__(f"{prefix}{field + ': ' if field else ''}{reason}")


# ---------------------------------------------------------------- shorthand

_GROUP_RE = re.compile(r"^\s*(\d+)\s*[xX×*]\s*(\S.*?)\s*$")


def _model_and_memory(name: str) -> tuple[str, int]:
    entry = catalog.lookup(name)
    if entry is not None:
        return entry.name, int(entry.memory_gib * (1 << 30))
    memory = catalog.memory_from_name(name)
    if memory is not None:
        return name.strip(), memory
    hint = catalog.ambiguity_hint(name) or f"add its memory, e.g. {name.strip()}-48GB"
    known = ", ".join(catalog.known_model_names())
    raise InventoryError(f"unknown GPU model {name.strip()!r}: {hint} (known models: {known})")


def _shorthand_gpus(text: str, node_name: str) -> list[Gpu]:
    gpus: list[Gpu] = []
    if not text.strip():
        raise InventoryError("empty GPU list (examples: 8xH100, 4xA100-80GB)")
    for group in text.split(","):
        m = _GROUP_RE.match(group)
        if not m:
            raise InventoryError(
                f"not COUNTxMODEL: {group.strip()!r} "
                "(examples: 8xH100, 4xA100-80GB, 2xA100-80GB,2xV100-32GB)"
            )
        count = int(m.group(1))
        if count < 1:
            raise InventoryError(f"GPU count must be at least 1: {group.strip()!r}")
        model, memory = _model_and_memory(m.group(2))
        for _ in range(count):
            i = len(gpus)
            gpus.append(Gpu(i, model, memory, uuid=f"GPU-declared-{node_name}-{i}"))
    return gpus


def parse_gpus_shorthand(text: str, node_name: str, cpus: int = 0, memory_bytes: int = 0) -> Node:
    """One node from "4xA100-80GB" or "2xA100-80GB,2xV100-32GB"; raises InventoryError."""
    try:
        gpus = _shorthand_gpus(text, node_name)
    except InventoryError as e:
        raise InventoryError(e.reason, field=f"gpus {text!r}") from None
    return Node(node_name, tuple(gpus), cpus=cpus, memory_bytes=memory_bytes)


# ---------------------------------------------------------------- YAML files

_TOP_KEYS = ("nodes",)
_NODE_KEYS = ("name", "cpus", "memory", "gpus", "links", "numa", "simulated")
_GPU_KEYS = (
    "index",
    "model",
    "memory",
    "numa",
    "cpu_affinity",
    "pci_bus_id",
    "uuid",
    "unmanaged_memory",
)
_LINK_KEYS = ("gpus", "type", "count")
_NV_COUNT_RE = re.compile(r"^nv(\d+)$", re.IGNORECASE)


class _Reader:
    """Walks a composed YAML tree, so every value keeps the line it came from."""

    def __init__(self, file: str) -> None:
        self.file = file
        self._ctor = SafeConstructor()

    def fail(self, node: YamlNode, field: str, reason: str) -> NoReturn:
        raise InventoryError(
            reason, file=self.file, line=node.start_mark.line + 1, field=field or "top level"
        )

    def mapping(self, node: YamlNode, field: str, allowed: tuple[str, ...]) -> dict[str, YamlNode]:
        if not isinstance(node, MappingNode):
            self.fail(node, field, f"expected a mapping with keys {', '.join(allowed)}")
        out: dict[str, YamlNode] = {}
        for key_node, value_node in node.value:
            key = self.scalar(key_node, field)
            if not isinstance(key, str) or key not in allowed:
                self.fail(key_node, field, f"unknown key {key!r} (allowed: {', '.join(allowed)})")
            if key in out:
                self.fail(key_node, field, f"duplicate key {key!r}")
            out[key] = value_node
        return out

    def sequence(self, node: YamlNode, field: str, what: str) -> list[YamlNode]:
        if not isinstance(node, SequenceNode):
            self.fail(node, field, f"expected a list of {what}")
        return list(node.value)

    def scalar(self, node: YamlNode, field: str) -> Any:
        if not isinstance(node, ScalarNode):
            self.fail(node, field, "expected a single value, not a list or mapping")
        try:
            return self._ctor.construct_object(node, deep=True)
        except yaml.YAMLError as e:  # e.g. a !!python/object tag the safe loader refuses
            self.fail(node, field, f"not a plain value: {getattr(e, 'problem', None) or e}")

    def string(self, node: YamlNode, field: str) -> str:
        value = self.scalar(node, field)
        if not isinstance(value, str) or not value.strip():
            self.fail(node, field, f"expected a non-empty string, got {value!r}")
        return value.strip()

    def boolean(self, node: YamlNode, field: str) -> bool:
        value = self.scalar(node, field)
        if not isinstance(value, bool):
            self.fail(node, field, f"expected true or false, got {value!r}")
        return value

    def integer(self, node: YamlNode, field: str, minimum: int) -> int:
        value = self.scalar(node, field)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.fail(node, field, f"expected a whole number >= {minimum}, got {value!r}")
        return value

    def size(self, node: YamlNode, field: str) -> int:
        value = self.scalar(node, field)
        # A bare number would be bytes (core.units): "memory: 512" almost surely is not.
        if not isinstance(value, str):
            self.fail(node, field, f"expected a size with a unit, e.g. 80GB, got {value!r}")
        try:
            return parse_size(value)
        except ValueError as e:
            self.fail(node, field, str(e))

    def gpu_indices(self, node: YamlNode, field: str) -> list[int]:
        items = self.sequence(node, field, "GPU indices")
        return [self.integer(n, f"{field}[{i}]", 0) for i, n in enumerate(items)]


def _read_gpu_list(r: _Reader, node: YamlNode, field: str, node_name: str) -> list[Gpu]:
    gpus: dict[int, Gpu] = {}
    for pos, item in enumerate(r.sequence(node, field, "GPUs")):
        f = f"{field}[{pos}]"
        m = r.mapping(item, f, _GPU_KEYS)
        if "model" not in m:
            r.fail(item, f, "model: required")
        model = r.string(m["model"], f"{f}.model")
        index = r.integer(m["index"], f"{f}.index", 0) if "index" in m else pos
        if index in gpus:
            r.fail(m.get("index", item), f"{f}.index", f"duplicate GPU index {index}")
        if "memory" in m:
            memory = r.size(m["memory"], f"{f}.memory")
        else:
            found = catalog.catalog_memory_bytes(model)
            if found is None:
                r.fail(item, f"{f}.memory", f"required: the catalog does not know {model!r}")
            memory = found
        numa: int | None = None
        if "numa" in m and r.scalar(m["numa"], f"{f}.numa") is not None:
            numa = r.integer(m["numa"], f"{f}.numa", 0)
        uuid = (
            r.string(m["uuid"], f"{f}.uuid") if "uuid" in m else f"GPU-declared-{node_name}-{index}"
        )
        bus = r.string(m["pci_bus_id"], f"{f}.pci_bus_id") if "pci_bus_id" in m else ""
        cpus: tuple[int, ...] = ()
        if "cpu_affinity" in m:  # "0-15,32-47", as nvidia-smi topo -m prints it
            try:
                cpus = parse_cpu_list(str(r.scalar(m["cpu_affinity"], f"{f}.cpu_affinity")))
            except ValueError as e:
                r.fail(m["cpu_affinity"], f"{f}.cpu_affinity", str(e))
        unmanaged = 0
        if "unmanaged_memory" in m:
            unmanaged = r.size(m["unmanaged_memory"], f"{f}.unmanaged_memory")
            if unmanaged > memory:
                r.fail(
                    m["unmanaged_memory"],
                    f"{f}.unmanaged_memory",
                    f"more than the GPU's memory ({format_size(memory)})",
                )
        gpus[index] = Gpu(
            index,
            model,
            memory,
            uuid=uuid,
            pci_bus_id=bus,
            numa_node=numa,
            cpu_affinity=cpus,
            unmanaged_memory_bytes=unmanaged,
        )
    if not gpus:
        r.fail(node, field, "a node needs at least one GPU")
    return [gpus[i] for i in sorted(gpus)]


def _read_links(
    r: _Reader, node: YamlNode, field: str, indices: set[int]
) -> dict[tuple[int, int], Link]:
    links: dict[tuple[int, int], Link] = {}
    for pos, item in enumerate(r.sequence(node, field, "links")):
        f = f"{field}[{pos}]"
        m = r.mapping(item, f, _LINK_KEYS)
        for required in ("gpus", "type"):
            if required not in m:
                r.fail(item, f, f"{required}: required")
        group = r.gpu_indices(m["gpus"], f"{f}.gpus")
        if len(group) < 2 or len(set(group)) != len(group):
            r.fail(m["gpus"], f"{f}.gpus", "expected at least two distinct GPU indices")
        for g in group:
            if g not in indices:
                r.fail(m["gpus"], f"{f}.gpus", f"no GPU {g} on this node")
        type_text = r.string(m["type"], f"{f}.type")
        try:
            kind = LinkKind.parse(type_text)
        except ValueError as e:
            r.fail(m["type"], f"{f}.type", str(e))
        nv = _NV_COUNT_RE.match(type_text)
        count = int(nv.group(1)) if nv else 0
        if "count" in m:
            if kind != LinkKind.NVLINK:
                r.fail(m["count"], f"{f}.count", "count applies to nvlink links only")
            count = r.integer(m["count"], f"{f}.count", 1)
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                lo, hi = min(a, b), max(a, b)
                links[(lo, hi)] = Link(lo, hi, kind, count if kind == LinkKind.NVLINK else 0)
    return links


def _read_numa(r: _Reader, node: YamlNode, field: str, indices: set[int]) -> dict[int, int]:
    numa_of: dict[int, int] = {}
    for group_no, group_node in enumerate(r.sequence(node, field, "GPU index lists")):
        f = f"{field}[{group_no}]"
        for g in r.gpu_indices(group_node, f):
            if g not in indices:
                r.fail(group_node, f, f"no GPU {g} on this node")
            if g in numa_of:
                r.fail(group_node, f, f"GPU {g} is in more than one NUMA group")
            numa_of[g] = group_no
    return numa_of


def _read_node(r: _Reader, item: YamlNode, field: str, default_name: str | None) -> Node:
    m = r.mapping(item, field, _NODE_KEYS)
    if "name" in m:
        name = r.string(m["name"], f"{field}.name")
    elif default_name is not None:
        name = default_name
    else:
        r.fail(item, f"{field}.name", "required (only the first node defaults to this host)")
    cpus = r.integer(m["cpus"], f"{field}.cpus", 1) if "cpus" in m else 0
    memory = r.size(m["memory"], f"{field}.memory") if "memory" in m else 0
    simulated = r.boolean(m["simulated"], f"{field}.simulated") if "simulated" in m else False
    if "gpus" not in m:
        r.fail(item, f"{field}.gpus", "required")
    gpus_node = m["gpus"]
    if isinstance(gpus_node, ScalarNode):
        try:
            gpus = _shorthand_gpus(r.string(gpus_node, f"{field}.gpus"), name)
        except InventoryError as e:
            r.fail(gpus_node, f"{field}.gpus", e.reason)
    else:
        gpus = _read_gpu_list(r, gpus_node, f"{field}.gpus", name)
    indices = {g.index for g in gpus}
    links = _read_links(r, m["links"], f"{field}.links", indices) if "links" in m else {}
    if "numa" in m:
        numa_of = _read_numa(r, m["numa"], f"{field}.numa", indices)
        for pos, g in enumerate(gpus):
            group = numa_of.get(g.index)
            if group is None:
                continue
            if g.numa_node is not None and g.numa_node != group:
                r.fail(
                    m["numa"],
                    f"{field}.numa",
                    f"GPU {g.index} declares numa {g.numa_node} but is in NUMA group {group}",
                )
            gpus[pos] = replace(g, numa_node=group)
    # Same NUMA node, nothing better declared: NODE. Different or unknown: SYS (the default).
    for i, a in enumerate(gpus):
        for b in gpus[i + 1 :]:
            same = a.numa_node is not None and a.numa_node == b.numa_node
            if same and (a.index, b.index) not in links:
                links[(a.index, b.index)] = Link(a.index, b.index, LinkKind.NODE)
    ordered = tuple(links[k] for k in sorted(links))
    return Node(name, tuple(gpus), ordered, cpus=cpus, memory_bytes=memory, simulated=simulated)


def load_inventory_text(
    text: str, file: str, *, node_name: str | None = None, source: str = "declared"
) -> Inventory:
    """An Inventory from YAML text; `file` is only used to name it in errors."""
    r = _Reader(file)
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark is not None else 0
        raise InventoryError(f"not valid YAML: {e.problem or e}", file=file, line=line) from None
    except yaml.YAMLError as e:
        raise InventoryError(f"not valid YAML: {e}", file=file) from None
    if root is None:
        raise InventoryError("empty: expected a 'nodes:' list", file=file)
    top = r.mapping(root, "", _TOP_KEYS)
    if "nodes" not in top:
        r.fail(root, "nodes", "required")
    items = r.sequence(top["nodes"], "nodes", "nodes")
    if not items:
        r.fail(top["nodes"], "nodes", "expected at least one node")
    first_name = node_name if node_name is not None else socket.gethostname()
    nodes: list[Node] = []
    for pos, item in enumerate(items):
        node = _read_node(r, item, f"nodes[{pos}]", first_name if pos == 0 else None)
        if any(n.name == node.name for n in nodes):
            r.fail(item, f"nodes[{pos}].name", f"duplicate node name {node.name!r}")
        nodes.append(node)
    return Inventory(tuple(nodes), source=source)


def load_inventory_file(path: str | Path, *, node_name: str | None = None) -> Inventory:
    """An Inventory (source "declared") from a YAML file; raises InventoryError.

    `node_name` names a first node that has no name (default: this host's name).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise InventoryError(f"cannot read: {e.strerror or e}", file=str(path)) from None
    except UnicodeDecodeError:
        raise InventoryError("not a UTF-8 text file", file=str(path)) from None
    return load_inventory_text(text, str(path), node_name=node_name)


def demo_inventory(node_name: str) -> Inventory:
    """The packaged demo inventory (demo.yaml: 8x A100-80GB, two NVLink islands), source "demo".

    Its node is named `node_name`, as it stands for this machine.
    """
    text = resources.files("gpupool.inventory").joinpath("demo.yaml").read_text("utf-8")
    return load_inventory_text(text, "demo.yaml", node_name=node_name, source="demo")
