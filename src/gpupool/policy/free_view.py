"""What is free on every node at the start of a pass, from the snapshot's running jobs."""

from __future__ import annotations

from typing import NamedTuple

from gpupool.policy.node_facts import NodeFacts
from gpupool.policy.node_free import NodeFree, with_shared_gpus
from gpupool.policy.request import holds_whole_gpus
from gpupool.policy.snapshot import RunningJob, Snapshot


class FreeView(NamedTuple):
    frees: list[NodeFree]  # every node, in name order
    shared: bool  # some GPU is shared: a fractional job runs, or memory is held outside gpupool
    # For the quota book, from the same walk: each project's GPUs held by its whole-GPU jobs,
    # and the jobs that hold part of a GPU (what they count for depends on the GPU).
    whole_in_use: dict[str, float]
    partial: list[RunningJob]


def free_view(snapshot: Snapshot) -> FreeView:
    """What is free on every node, from one walk over the running jobs: this is most of a
    pass's fixed cost on a big cluster, so the quota book's figures come from it too."""
    used: dict[str, set[int]] = {}
    whole: dict[str, float] = {}
    partial: list[RunningJob] = []
    cpus_used: dict[str, int] = {}
    mem_used: dict[str, int] = {}
    shared = bool(snapshot.unmanaged_memory)
    facts = NodeFacts.of(snapshot.nodes)
    room = facts.declares_room  # else CPUs and memory are not counted: no node limits them
    for r in snapshot.running:
        taken = used.get(r.node)
        if taken is None:
            used[r.node] = set(r.gpus)
        else:
            taken.update(r.gpus)
        res = r.resources
        if room:
            if res.cpus:
                cpus_used[r.node] = cpus_used.get(r.node, 0) + res.cpus
            if res.mem_bytes:
                mem_used[r.node] = mem_used.get(r.node, 0) + res.mem_bytes
        if holds_whole_gpus(res, r.gpu_memory_bytes):
            whole[r.project] = whole.get(r.project, 0.0) + len(r.gpus)
        else:
            partial.append(r)
            shared = shared or res.fractional
    views: list[NodeFree] = []
    append = views.append
    for n in facts.by_name_order:
        taken = used.get(n.name)
        append(
            NodeFree(
                n,
                set(n.gpu_indices - taken) if taken else set(n.gpu_indices),
                (n.cpus - cpus_used.get(n.name, 0)) if n.cpus else None,
                (n.memory_bytes - mem_used.get(n.name, 0)) if n.memory_bytes else None,
            )
        )
    frees = with_shared_gpus(views, snapshot) if shared else views
    return FreeView(frees, shared, whole, partial)
