"""The pool's GPUs and the daemon's own figures as the API gives them, typed: see
client/views.py (imported by Client.gpus and Client.info only)."""

from __future__ import annotations

from gpupool.client.drain_views import DrainView
from gpupool.client.wire_json import JsonObject, JsonValue, WireShapeError, conform, json_of
from gpupool.core.hardware import Link, LinkKind
from gpupool.core.values import record, unlisted
from gpupool.core.wire_shapes import (
    BackendCapacityWire,
    BackendNodeWire,
    BackendsWire,
    GpuHolderWire,
    GpusWire,
    GpuUsageWire,
    GpuWire,
    InfoWire,
    LinkWire,
)


@record
class GpuHolder:
    """A job on a GPU: of a shared GPU, with the memory granted to it."""

    id: int
    name: str
    user: str
    gpu_memory_bytes: int | None

    @classmethod
    def read(cls, w: GpuHolderWire) -> GpuHolder:
        return cls(w["id"], w["name"], w["user"], w["gpu_memory_bytes"])


@record
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
    def read(cls, w: GpuUsageWire) -> GpuUsage:
        return cls(
            simulated=w["simulated"],
            utilization_pct=w["utilization_pct"],
            memory_used_bytes=w["memory_used_bytes"],
            memory_total_bytes=w["memory_total_bytes"],
            power_w=w["power_w"],
            temperature_c=w["temperature_c"],
            foreign_memory_bytes=w["foreign_memory_bytes"],
        )


@record
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
    # Its drain (`gpupool drain`): no new job starts on it; None: not drained (and from a
    # daemon older than drains, which has none).
    drained: DrainView | None = None

    @classmethod
    def read(cls, w: GpuWire) -> GpuView:
        usage = w.get("usage")  # absent from a daemon older than GPU sampling: not sampled
        drained = w.get("drained")
        return cls(
            index=w["index"],
            model=w["model"],
            memory_bytes=w["memory_bytes"],
            nvlink_peers=tuple(w["nvlink_peers"]),
            job=w["job"],
            job_name=w["job_name"],
            user=w["user"],
            shared=w["shared"],
            jobs=tuple(GpuHolder.read(j) for j in w["jobs"]),
            usage=None if usage is None else GpuUsage.read(usage),
            # Topology: absent from an older daemon's answer (unknown).
            pci_bus_id=w.get("pci_bus_id", ""),
            numa_node=w.get("numa_node"),
            cpu_affinity=tuple(w.get("cpu_affinity", ())),
            drained=None if drained is None else DrainView.read(drained),
        )


@record
class NodeView:
    name: str
    gpus: tuple[GpuView, ...]
    links: tuple[Link, ...] = ()  # as the scheduler sees them; undeclared pairs are SYS
    simulated: bool = False  # its GPUs do not exist (docs/nvml.md)
    # Whole GPUs no job holds and none drained, and the largest job (by GPU count) that could
    # start here now (service/fragmentation.py); counted from `gpus` for a daemon that does
    # not send them (one older than drains, too: it has none).
    free_gpus: int = 0
    largest_startable_gpus: int = 0


def _link(w: LinkWire, where: str) -> Link:
    name = w["type"]
    try:
        kind = LinkKind[name.upper()]
    except KeyError:
        raise WireShapeError(f"{where}.type", f"unknown link type {name!r}") from None
    return Link(w["a"], w["b"], kind, w["nvlinks"])


@record
class BackendNodeView:
    """A backend's node as its engine last reported it, with the pool's jobs there."""

    name: str  # as the pool names it: BACKEND/node
    backend: str
    state: str  # "up", "drained", "down"; "unknown": not in the engine's last report
    detail: str  # the engine's words for a state other than up
    gpus: int
    gpus_used: int  # allocated by anyone, as the engine counts them
    gpus_pool: float  # the pool's jobs' (`jobs`)
    jobs: tuple[tuple[int, float], ...]  # (job id, GPUs: a fraction when shared) there
    gpu_model: str  # "" where the engine does not say
    gpu_memory_bytes: int
    cpus: int
    memory_bytes: int

    @classmethod
    def read(cls, w: BackendNodeWire) -> BackendNodeView:
        return cls(
            w["name"], w["backend"], w["state"], w["detail"], w["gpus"], w["gpus_used"],
            w["gpus_pool"], tuple((j["id"], j["gpus"]) for j in w["jobs"]), w["gpu_model"],
            w["gpu_memory_bytes"], w["cpus"], w["memory_bytes"],
        )  # fmt: skip


@record
class BackendCapacityView:
    """One backend's nodes (GET /v1/gpus's `backends`): `problem` says why they are not
    known ("" when they are: then `nodes` is what the engine last reported)."""

    name: str
    admission: str  # "pool" or "engine"
    problem: str
    quotas: dict[str, float]  # project -> GPUs guaranteed on this backend
    nodes: tuple[BackendNodeView, ...]

    @classmethod
    def read(cls, w: BackendCapacityWire) -> BackendCapacityView:
        nodes = tuple(BackendNodeView.read(n) for n in w["nodes"])
        return cls(w["name"], w["admission"], w["problem"], dict(w["quotas"]), nodes)


@record
class GpusView:
    """Every GPU of the pool by node, with its holders (GET /v1/gpus)."""

    source: str  # "nvml", "declared" or "demo"
    note: str
    nodes: tuple[NodeView, ...]
    wire: JsonObject = unlisted()

    # The pool's free whole GPUs, and the largest job that could start now (the most on one
    # node): fewer than free when the free GPUs are spread over nodes.
    free_gpus: int = 0
    largest_startable_gpus: int = 0
    # Each backend's nodes; () from a daemon older than backend admission (none known).
    backends: tuple[BackendCapacityView, ...] = ()

    @property
    def gpu_total(self) -> int:
        return sum(len(node.gpus) for node in self.nodes)


def read_gpus(value: JsonValue) -> GpusView:
    w = conform(GpusWire, value)
    nodes = []
    for i, n in enumerate(w["nodes"]):
        gpus = tuple(GpuView.read(g) for g in n["gpus"])
        links = n.get("links", [])  # absent from older daemons' answers, as is `simulated`
        read = tuple(_link(lk, f"nodes[{i}].links[{j}]") for j, lk in enumerate(links))
        free = n.get("free_gpus", sum(not g.jobs for g in gpus))  # absent from older daemons
        largest = n.get("largest_startable_gpus", free)
        nodes.append(NodeView(n["name"], gpus, read, n.get("simulated", False), free, largest))
    pool_free = w.get("free_gpus", sum(n.free_gpus for n in nodes))
    pool_largest = w.get(
        "largest_startable_gpus", max((n.largest_startable_gpus for n in nodes), default=0)
    )
    backends = tuple(BackendCapacityView.read(b) for b in w.get("backends", ()))
    return GpusView(
        w["source"], w["note"], tuple(nodes), json_of(w), pool_free, pool_largest, backends
    )


@record
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
    w = conform(InfoWire, value)
    return PoolInfo(
        version=w["version"],
        pid=w["pid"],
        started=w["started"],
        state_dir=w["state_dir"],
        socket=w["socket"],
        url=w["url"],
        gpus=w["gpus"],
        inventory_source=w["inventory_source"],
        inventory_note=w["inventory_note"],
        passes=w["passes"],
        polls=w["polls"],
    )


@record
class BackendRow:
    """One row of GET /v1/backends: the local pool (kind `local`) or a backend."""

    name: str
    kind: str
    reachable: bool
    capabilities: tuple[str, ...]
    jobs: int  # its active jobs (pending and running)
    summary: str  # what its health check saw, in its words


@record
class BackendsView:
    backends: tuple[BackendRow, ...]
    wire: JsonObject = unlisted()


def read_backends(value: JsonValue) -> BackendsView:
    w = conform(BackendsWire, value)
    rows = tuple(
        BackendRow(
            b["name"], b["kind"], b["reachable"], tuple(b["capabilities"]), b["jobs"], b["summary"]
        )
        for b in w["backends"]
    )
    return BackendsView(rows, json_of(w))
