"""Submit-time check: could any node ever run this job, with everything else gone?"""

from __future__ import annotations

from gpupool.core.gpu_catalog import display_name
from gpupool.core.hardware import Node
from gpupool.core.job import Resources
from gpupool.core.units import format_size
from gpupool.policy.node_facts import NodeFacts
from gpupool.policy.placement import granted_bytes, matching_gpus
from gpupool.policy.status import Code, Status


def check_satisfiable(
    res: Resources, nodes: tuple[Node, ...], spread: bool = False
) -> Status | None:
    """None if some node could run it on an empty pool, else an UNSATISFIABLE status. With
    `spread` (PolicyConfig.spread_wide_jobs), a whole-GPU job asking for more GPUs than any
    node has may run over several nodes instead (`_check_wide`)."""
    if not nodes:
        return Status(Code.UNSATISFIABLE, "the pool has no nodes", "feasibility")
    if res.gpu_type and not any(matching_gpus(n, res) for n in nodes):
        models = sorted({g.model for n in nodes for g in n.gpus})
        have = ", ".join(models) if models else "no GPUs"
        return Status(
            Code.UNSATISFIABLE,
            f"unknown GPU type {res.gpu_type!r}: this pool has {have}",
            "gpu_type",
        )
    if res.fractional:
        return _check_shared(res, nodes)
    if not (res.gpu_type or res.cpus or res.mem_bytes):
        # The common request, checked once per pass per distinct request: only the GPU count
        # matters, and a count is cheap (the general path below sorts and lists every node).
        facts = NodeFacts.of(nodes)
        if res.gpus <= facts.most_gpus or (spread and res.gpus <= facts.total_gpus):
            return None
    # Ties go to the first name, so the message does not depend on the order nodes came in.
    most = max(sorted(nodes, key=lambda n: n.name), key=lambda n: len(matching_gpus(n, res)))
    have_gpus = len(matching_gpus(most, res))
    if res.gpus > have_gpus and spread:
        return _check_wide(res, nodes)
    if res.gpus > have_gpus:
        kind = f"{display_name(res.gpu_type)} GPUs" if res.gpu_type else "GPUs"
        return Status(
            Code.UNSATISFIABLE,
            f"needs {res.gpus} {kind} on one node; the largest node ({most.name}) has {have_gpus}",
            "gpu_count",
        )
    candidates = [n for n in nodes if len(matching_gpus(n, res)) >= res.gpus]
    if res.cpus and not any(n.cpus == 0 or n.cpus >= res.cpus for n in candidates):
        top = max(n.cpus for n in candidates)
        return Status(
            Code.UNSATISFIABLE,
            f"needs {res.cpus} CPUs on one node; the largest node with enough GPUs has {top}",
            "cpus",
        )
    if res.cpus:
        # Memory must be on a node that also has the CPUs, or the job could never start.
        candidates = [n for n in candidates if n.cpus == 0 or n.cpus >= res.cpus]
    if res.mem_bytes and not any(
        n.memory_bytes == 0 or n.memory_bytes >= res.mem_bytes for n in candidates
    ):
        top = max(n.memory_bytes for n in candidates)
        return Status(
            Code.UNSATISFIABLE,
            f"needs {format_size(res.mem_bytes)} memory on one node; "
            f"the largest node with enough {'GPUs and CPUs' if res.cpus else 'GPUs'} "
            f"has {format_size(top)}",
            "mem",
        )
    return None


def _check_wide(res: Resources, nodes: tuple[Node, ...]) -> Status | None:
    """A wide job (policy/wide.py): its CPUs and memory are per node, so only the nodes that
    have them count, and their matching GPUs must add up to the request."""
    kind = f"{display_name(res.gpu_type)} GPUs" if res.gpu_type else "GPUs"
    total = sum(len(matching_gpus(n, res)) for n in nodes)
    if total < res.gpus:
        return Status(
            Code.UNSATISFIABLE,
            f"needs {res.gpus} {kind}; the whole pool has {total}",
            "gpu_count",
        )
    roomy = [
        n
        for n in nodes
        if (not res.cpus or n.cpus == 0 or n.cpus >= res.cpus)
        and (not res.mem_bytes or n.memory_bytes == 0 or n.memory_bytes >= res.mem_bytes)
    ]
    have = sum(len(matching_gpus(n, res)) for n in roomy)
    if have < res.gpus:
        each = " and ".join(
            w
            for w in (
                f"{res.cpus} CPUs" if res.cpus else "",
                f"{format_size(res.mem_bytes)} memory" if res.mem_bytes else "",
            )
            if w
        )
        return Status(
            Code.UNSATISFIABLE,
            f"needs {res.gpus} {kind} over nodes with {each} each; those nodes have {have}",
            "cpus" if res.cpus else "mem",
        )
    return None


def _check_shared(res: Resources, nodes: tuple[Node, ...]) -> Status | None:
    """A fractional job: some matching GPU must have room for it on an empty pool (its
    memory less what is declared unmanaged), on a node with the CPUs and memory."""
    if res.gpu_fraction is not None and not 0 < res.gpu_fraction <= 1:
        msg = f"asks for {res.gpu_fraction:g} of one GPU: a fraction must be more than 0, at most 1"
        return Status(Code.UNSATISFIABLE, msg, "gpu_fraction")
    kind = f"{display_name(res.gpu_type)} GPU" if res.gpu_type else "GPU"
    fits = [
        n
        for n in nodes
        if any(
            granted_bytes(n, g, res) <= n.gpu(g).memory_bytes - n.gpu(g).unmanaged_memory_bytes
            for g in matching_gpus(n, res)
        )
    ]
    if not fits:
        gpus = [(n.gpu(g), n.name) for n in nodes for g in matching_gpus(n, res)]
        if not gpus:
            return Status(Code.UNSATISFIABLE, f"needs one {kind}; this pool has none", "gpu_count")
        gpu, name = max(gpus, key=lambda p: (p[0].memory_bytes - p[0].unmanaged_memory_bytes, p[1]))
        room = gpu.memory_bytes - gpu.unmanaged_memory_bytes
        if res.gpu_fraction is not None:
            need = f"{res.gpu_fraction:g} of one {kind}'s memory"
        else:
            need = f"{format_size(res.gpu_memory_bytes or 0)} on one {kind}"
        return Status(
            Code.UNSATISFIABLE,
            f"needs {need}; the largest {kind} ({gpu.model} on {name}) has {format_size(room)}"
            + ("" if room == gpu.memory_bytes else " besides memory used outside gpupool"),
            "gpu_memory",
        )
    if res.cpus and not any(n.cpus == 0 or n.cpus >= res.cpus for n in fits):
        top = max(n.cpus for n in fits)
        msg = f"needs {res.cpus} CPUs on one node; the largest node with room on a GPU has {top}"
        return Status(Code.UNSATISFIABLE, msg, "cpus")
    fits = [n for n in fits if not res.cpus or n.cpus == 0 or n.cpus >= res.cpus]
    if res.mem_bytes and not any(
        n.memory_bytes == 0 or n.memory_bytes >= res.mem_bytes for n in fits
    ):
        top = max(n.memory_bytes for n in fits)
        return Status(
            Code.UNSATISFIABLE,
            f"needs {format_size(res.mem_bytes)} memory on one node; the largest node with "
            f"room on a GPU{' and the CPUs' if res.cpus else ''} has {format_size(top)}",
            "mem",
        )
    return None
