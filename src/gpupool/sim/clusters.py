"""Clusters to replay a trace on: a uniform one, or Philly's virtual clusters (VCs).

Philly can be replayed two ways, and both are here because they answer different questions:
- `philly_vcs_cluster`: all VCs' nodes in one shared pool, each VC a project whose quota is
  its own GPUs. This is gpupool's model (guaranteed quotas, idle GPUs lent out), so it shows
  what sharing buys over fixed partitions.
- `isolated_vc_clusters`: every VC its own cluster without quotas, as the Helios artifact
  replays Philly; this is the setup its published JCT numbers come from.

VC sizes come from the Helios artifact (sim/data/ATTRIBUTION.md). Four small VCs of the job
table (18 jobs) have no size: in the shared cluster they get no project entry, which the
policy reads as quota 0, so their jobs run only on borrowed GPUs; in the isolated setup they
have no cluster at all (the caller decides whether to drop their jobs).
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from gpupool.core.gpu_catalog import catalog_memory_bytes, known_model_names
from gpupool.core.hardware import Gpu, Node
from gpupool.core.project import Project
from gpupool.sim.csvrows import Rows, TraceError, open_text
from gpupool.sim.model import SimCluster

DEFAULT_MODEL = "V100-32GB"  # Philly-era datacenter GPU that the catalog knows
PHILLY_GPUS_PER_NODE = 8
PHILLY_VCS = "philly-vcs"
MAX_NODES = 100_000  # a typo guard: "10000000" nodes would build millions of objects
_SPEC_RE = re.compile(r"(\d+)(?:x(\d+))?")


def uniform_cluster(nodes: int, gpus_per_node: int = 8, model: str = DEFAULT_MODEL) -> SimCluster:
    """`nodes` identical nodes named node-001...; the name says the shape, e.g. "16x8"."""
    return SimCluster(
        name=f"{nodes}x{gpus_per_node}",
        nodes=_nodes("node", nodes, gpus_per_node, model),
    )


def packaged_vc_sizes_path() -> Path:
    return Path(str(resources.files("gpupool.sim") / "data" / "philly_vc_nodes.csv"))


def philly_vc_sizes(path: str | Path | None = None) -> dict[str, int]:
    """Nodes per VC, in file order, from a `vc,node num` CSV (the packaged one by default)."""
    path = Path(path) if path is not None else packaged_vc_sizes_path()
    sizes: dict[str, int] = {}
    try:
        with open_text(path) as stream:
            rows = Rows(stream, str(path))
            i_vc, i_nodes = rows.index(("vc", "node num"))
            for row in rows:
                vc = rows.name_of(row[i_vc], "vc")
                if vc in sizes:
                    raise rows.fail("vc", f"{vc!r} is listed twice")
                n = rows.whole(row[i_nodes], "node num")
                if n < 1:
                    raise rows.fail("node num", f"must be at least 1, got {n}")
                sizes[vc] = n
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {e.strerror or e}") from None
    if not sizes:
        raise TraceError(f"{path}: no VCs listed")
    return sizes


def philly_vcs_cluster(
    sizes: dict[str, int] | None = None, model: str = DEFAULT_MODEL
) -> SimCluster:
    """One shared pool of all VCs' 8-GPU nodes (named <vc>-001...), and one project per VC
    with quota = its GPUs. VCs missing from `sizes` get no project (quota 0: borrow only)."""
    sizes = philly_vc_sizes() if sizes is None else sizes
    nodes: list[Node] = []
    projects: dict[str, Project] = {}
    for vc, count in sizes.items():
        nodes.extend(_nodes(vc, count, PHILLY_GPUS_PER_NODE, model))
        projects[vc] = Project(name=vc, quota=count * PHILLY_GPUS_PER_NODE)
    return SimCluster(name=PHILLY_VCS, nodes=tuple(nodes), projects=projects)


def isolated_vc_clusters(
    sizes: dict[str, int] | None = None, model: str = DEFAULT_MODEL
) -> dict[str, SimCluster]:
    """Every VC its own cluster, no quotas (Helios' Philly setup); keyed by VC."""
    sizes = philly_vc_sizes() if sizes is None else sizes
    return {
        vc: SimCluster(name=vc, nodes=_nodes(vc, count, PHILLY_GPUS_PER_NODE, model))
        for vc, count in sizes.items()
    }


def cluster_from_spec(text: str) -> SimCluster:
    """The CLI's --cluster: "16" (16 nodes of 8 GPUs), "16x4" (16 nodes of 4), "philly-vcs"."""
    spec = text.strip().lower()
    if spec == PHILLY_VCS:
        return philly_vcs_cluster()
    m = _SPEC_RE.fullmatch(spec)
    usage = "expected N (N nodes of 8 GPUs), NxG (N nodes of G GPUs) or philly-vcs"
    if m is None:
        raise ValueError(f"cluster {text!r}: {usage}")
    nodes, gpus = int(m.group(1)), int(m.group(2) or 8)
    if not 1 <= nodes <= MAX_NODES:
        raise ValueError(f"cluster {text!r}: nodes must be 1 to {MAX_NODES:,}, got {nodes}")
    if not 1 <= gpus <= 64:
        raise ValueError(f"cluster {text!r}: GPUs per node must be 1 to 64, got {gpus}")
    return uniform_cluster(nodes, gpus)


def _nodes(prefix: str, count: int, gpus_per_node: int, model: str) -> tuple[Node, ...]:
    if count < 1 or gpus_per_node < 1:
        raise ValueError(f"need at least 1 node and 1 GPU per node, got {count}x{gpus_per_node}")
    memory = catalog_memory_bytes(model)
    if memory is None:
        known = ", ".join(known_model_names())
        raise ValueError(f"unknown GPU model {model!r}: one of {known}, or a name like X-48GB")
    gpus = tuple(Gpu(index=i, model=model, memory_bytes=memory) for i in range(gpus_per_node))
    # Gpu is frozen: all nodes can share one tuple.
    return tuple(Node(name=f"{prefix}-{k:03d}", gpus=gpus) for k in range(1, count + 1))
