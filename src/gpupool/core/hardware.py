"""What hardware exists: GPUs, how they are linked, nodes, and the whole inventory."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum


class LinkKind(IntEnum):
    """How two GPUs talk, best first; the names follow `nvidia-smi topo -m`.

    The integer order is the quality order: a lower value is a better link.
    """

    NVLINK = 0  # NV#: direct NVLink (or through NVSwitch)
    PIX = 1  # at most one PCIe switch between them
    PXB = 2  # several PCIe switches, no host bridge
    PHB = 3  # through a PCIe host bridge (same CPU root complex)
    NODE = 4  # across host bridges inside one NUMA node
    SYS = 5  # across CPU sockets (QPI/UPI/Infinity Fabric)

    @classmethod
    def parse(cls, text: str) -> LinkKind:
        key = text.strip().upper()
        aliases = {
            "NV": "NVLINK",
            "NVSWITCH": "NVLINK",
            "PCIE_SWITCH": "PIX",
            "SWITCH": "PIX",
            "PCIE_SWITCHES": "PXB",
            "HOSTBRIDGE": "PHB",
            "HOST_BRIDGE": "PHB",
            "NUMA": "NODE",
            "SYSTEM": "SYS",
            "SOCKET": "SYS",
        }
        key = aliases.get(key, key)
        if key.startswith("NV") and key[2:].isdigit():
            key = "NVLINK"
        try:
            return cls[key]
        except KeyError:
            names = ", ".join(m.name.lower() for m in cls)
            raise ValueError(f"unknown link type {text!r} (one of: {names})") from None


@dataclass(frozen=True)
class Gpu:
    index: int  # the index CUDA_VISIBLE_DEVICES uses on its node
    model: str  # e.g. "A100-80GB", "H100-SXM"
    memory_bytes: int
    uuid: str = ""
    pci_bus_id: str = ""
    numa_node: int | None = None
    # The CPUs closest to this GPU (its NUMA node's, as nvidia-smi topo -m's "CPU Affinity"),
    # ascending; empty: unknown. Shown by `gpupool topo`; placement does not use it yet.
    cpu_affinity: tuple[int, ...] = ()
    # The minor number of its /dev/nvidiaN (NVML's nvmlDeviceGetMinorNumber): what a job's
    # cgroup denies to the jobs not holding it. None: not known, taken to be `index`.
    device_minor: int | None = None
    # Memory held by processes gpupool does not manage (a display server...): fractional jobs
    # cannot be granted it. Declared in the inventory; a monitor may report live values.
    unmanaged_memory_bytes: int = 0


@dataclass(frozen=True)
class Link:
    """A pairwise link between GPUs `a` and `b` (a < b) of one node."""

    a: int
    b: int
    kind: LinkKind
    nvlinks: int = 0  # number of NVLink lanes when kind is NVLINK


@dataclass(frozen=True)
class Node:
    name: str
    gpus: tuple[Gpu, ...]
    links: tuple[Link, ...] = ()
    cpus: int = 0  # 0: not declared, CPU requests are not checked on this node
    memory_bytes: int = 0  # 0: not declared, memory requests are not checked
    # Its GPUs do not exist: a test pool's node, whose jobs run on the daemon's machine
    # (docs/nvml.md). Scheduling treats it as any other node.
    simulated: bool = False
    _link_index: dict[tuple[int, int], Link] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    # The GPU indices, computed once: every scheduling pass starts from them on every node.
    gpu_indices: frozenset[int] = field(
        default=frozenset(), init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        index = {(lk.a, lk.b): lk for lk in self.links}
        index.update({(lk.b, lk.a): lk for lk in self.links})
        object.__setattr__(self, "_link_index", index)
        object.__setattr__(self, "gpu_indices", frozenset(g.index for g in self.gpus))

    def link(self, a: int, b: int) -> LinkKind:
        """The link kind between two GPUs; undeclared pairs count as the worst (SYS)."""
        found = self._link_index.get((a, b))  # not link_record: placement's hot loop
        return found.kind if found else LinkKind.SYS

    def link_record(self, a: int, b: int) -> Link:
        """The link between two GPUs as declared or discovered (either order); an
        undeclared pair is a SYS link with no NVLinks, as placement counts it."""
        found = self._link_index.get((a, b))
        return found if found else Link(min(a, b), max(a, b), LinkKind.SYS)

    def gpu(self, index: int) -> Gpu:
        for g in self.gpus:
            if g.index == index:
                return g
        raise KeyError(f"node {self.name} has no GPU {index}")

    def nvlink_peers(self, index: int) -> tuple[int, ...]:
        return tuple(
            sorted(
                (lk.b if lk.a == index else lk.a)
                for lk in self.links
                if lk.kind == LinkKind.NVLINK and index in (lk.a, lk.b)
            )
        )


@dataclass(frozen=True)
class Inventory:
    """All nodes of the pool, and where that knowledge came from."""

    nodes: tuple[Node, ...]
    source: str  # "nvml", "declared" or "demo"
    note: str = ""  # one line for humans, e.g. why the demo inventory is in use

    @property
    def total_gpus(self) -> int:
        return sum(len(n.gpus) for n in self.nodes)

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node named {name!r}")
