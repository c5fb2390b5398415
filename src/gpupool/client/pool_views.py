"""The pool's GPUs and the daemon's own figures as the API gives them, typed: see
client/views.py (imported by Client.gpus and Client.info only)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpupool.client.wire_json import Fields, JsonObject, JsonValue, WireShapeError
from gpupool.core.hardware import Link, LinkKind


@dataclass(frozen=True, slots=True)
class GpuHolder:
    """A job on a GPU: of a shared GPU, with the memory granted to it."""

    id: int
    name: str
    user: str
    gpu_memory_bytes: int | None

    @classmethod
    def read(cls, f: Fields) -> GpuHolder:
        return cls(f.whole("id"), f.text("name"), f.text("user"), f.opt_whole("gpu_memory_bytes"))


@dataclass(frozen=True, slots=True)
class GpuUsage:
    """A GPU's latest sample; `simulated`: made up from what jobs declare (no NVML)."""

    simulated: bool
    utilization_pct: float | None  # None: the GPU does not report it
    memory_used_bytes: int | None
    memory_total_bytes: int
    power_w: float | None
    temperature_c: float | None
    foreign_memory_bytes: int  # held by processes that are not gpupool jobs'

    @classmethod
    def read(cls, f: Fields) -> GpuUsage:
        return cls(
            simulated=f.flag("simulated"),
            utilization_pct=f.opt_number("utilization_pct"),
            memory_used_bytes=f.opt_whole("memory_used_bytes"),
            memory_total_bytes=f.whole("memory_total_bytes"),
            power_w=f.opt_number("power_w"),
            temperature_c=f.opt_number("temperature_c"),
            foreign_memory_bytes=f.whole("foreign_memory_bytes"),
        )


@dataclass(frozen=True, slots=True)
class GpuView:
    index: int
    model: str
    memory_bytes: int
    nvlink_peers: tuple[int, ...]
    job: int | None  # the (first) job holding it
    job_name: str | None
    user: str | None
    shared: bool
    jobs: tuple[GpuHolder, ...]  # every job on it (several when shared)
    usage: GpuUsage | None  # its latest sample; None: not sampled (yet, or sampling is off)
    # Topology (`gpupool topo --pool`); absent from older daemons' answers: unknown.
    pci_bus_id: str = ""
    numa_node: int | None = None
    cpu_affinity: tuple[int, ...] = ()

    @classmethod
    def read(cls, f: Fields) -> GpuView:
        return cls(
            index=f.whole("index"),
            model=f.text("model"),
            memory_bytes=f.whole("memory_bytes"),
            nvlink_peers=f.wholes("nvlink_peers"),
            job=f.opt_whole("job"),
            job_name=f.opt_text("job_name"),
            user=f.opt_text("user"),
            shared=f.flag("shared"),
            jobs=tuple(GpuHolder.read(Fields(v, at)) for at, v in f.items("jobs")),
            # Absent from a daemon older than GPU sampling: not sampled, as null says.
            usage=None
            if (u := f.data.get("usage")) is None
            else GpuUsage.read(Fields(u, f.at("usage"))),
            pci_bus_id=f.text("pci_bus_id") if "pci_bus_id" in f.data else "",
            numa_node=f.opt_whole("numa_node") if "numa_node" in f.data else None,
            cpu_affinity=f.wholes("cpu_affinity") if "cpu_affinity" in f.data else (),
        )


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    gpus: tuple[GpuView, ...]
    links: tuple[Link, ...] = ()  # as the scheduler sees them; undeclared pairs are SYS
    simulated: bool = False  # its GPUs do not exist (docs/nvml.md)


def _link(f: Fields) -> Link:
    name = f.text("type")
    try:
        kind = LinkKind[name.upper()]
    except KeyError:
        raise WireShapeError(f.at("type"), f"unknown link type {name!r}") from None
    return Link(f.whole("a"), f.whole("b"), kind, f.whole("nvlinks"))


@dataclass(frozen=True, slots=True)
class GpusView:
    """Every GPU of the pool by node, with its holders (GET /v1/gpus)."""

    source: str  # "nvml", "declared" or "demo"
    note: str
    nodes: tuple[NodeView, ...]
    wire: JsonObject = field(repr=False, compare=False)

    @property
    def gpu_total(self) -> int:
        return sum(len(node.gpus) for node in self.nodes)


def read_gpus(value: JsonValue) -> GpusView:
    f = Fields(value)
    nodes = []
    for at, v in f.items("nodes"):
        n = Fields(v, at)
        gpus = tuple(GpuView.read(Fields(g, where)) for where, g in n.items("gpus"))
        links = tuple(_link(Fields(v, where)) for where, v in n.items("links", default=[]))
        simulated = n.flag("simulated") if "simulated" in n.data else False  # older daemons
        nodes.append(NodeView(n.text("name"), gpus, links, simulated))
    return GpusView(f.text("source"), f.opt_text("note") or "", tuple(nodes), f.data)


@dataclass(frozen=True, slots=True)
class PoolInfo:
    """GET /v1/info: where the daemon runs, its GPUs, and how much it has done."""

    version: str
    pid: int
    started: float
    state_dir: str
    socket: str
    url: str | None  # its TCP address, when it listens on one
    gpus: int
    inventory_source: str
    inventory_note: str
    passes: int  # scheduling passes so far
    polls: int  # executor polls so far


def read_info(value: JsonValue) -> PoolInfo:
    f = Fields(value)
    return PoolInfo(
        version=f.text("version"),
        pid=f.whole("pid"),
        started=f.number("started"),
        state_dir=f.text("state_dir"),
        socket=f.text("socket"),
        url=f.opt_text("url"),
        gpus=f.whole("gpus"),
        inventory_source=f.text("inventory_source"),
        inventory_note=f.opt_text("inventory_note") or "",
        passes=f.whole("passes"),
        polls=f.whole("polls"),
    )


@dataclass(frozen=True, slots=True)
class BackendRow:
    """One row of GET /v1/backends: the local pool (kind `local`) or a backend."""

    name: str
    kind: str
    reachable: bool
    capabilities: tuple[str, ...]
    jobs: int  # its active jobs (pending and running)
    summary: str  # what its health check saw, in its words


@dataclass(frozen=True, slots=True)
class BackendsView:
    backends: tuple[BackendRow, ...]
    wire: JsonObject = field(repr=False, compare=False)


def read_backends(value: JsonValue) -> BackendsView:
    f = Fields(value)
    rows = []
    for at, v in f.items("backends"):
        b = Fields(v, at)
        rows.append(
            BackendRow(
                b.text("name"),
                b.text("kind"),
                b.flag("reachable"),
                b.texts("capabilities"),
                b.whole("jobs"),
                b.text("summary"),
            )
        )
    return BackendsView(tuple(rows), f.data)
