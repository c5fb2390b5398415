"""Submit-time check: could any node ever run this job, with everything else gone?

An answer is `Unsatisfiable` with the figures of what no node ever has enough of: the
largest node's (or GPU's) capacity against the request (policy/reasons.py).
"""

from __future__ import annotations

from gpupool.core.hardware import Node
from gpupool.core.job import Resources
from gpupool.policy.filters.gpu_type import matching_gpus
from gpupool.policy.node_facts import NodeFacts
from gpupool.policy.node_free import granted_bytes
from gpupool.policy.reasons import Dimension, Insufficient
from gpupool.policy.request import counts_only
from gpupool.policy.status import Code, Rule, Status


def _never(
    short: Insufficient, res: Resources, rule: Rule = Rule.NEVER_FITS, have: tuple[str, ...] = ()
) -> Status:
    return Status(Code.UNSATISFIABLE, rule, short=short, have=have, request=res)


def check_satisfiable(
    res: Resources, nodes: tuple[Node, ...], spread: bool = False
) -> Status | None:
    """None if some node could run it on an empty pool, else an UNSATISFIABLE status. With
    `spread` (PolicyConfig.spread_wide_jobs), a whole-GPU job asking for more GPUs than any
    node has may run over several nodes instead (`_check_wide`)."""
    if not nodes:
        return Status(Code.UNSATISFIABLE, Rule.NO_NODES, request=res)
    if res.gpu_type and not any(matching_gpus(n, res) for n in nodes):
        models = tuple(sorted({g.model for n in nodes for g in n.gpus}))
        short = Insufficient(None, Dimension.GPU_TYPE, max(res.gpus, 1), 0, 0)
        return _never(short, res, have=models)
    if res.fractional:
        return _check_shared(res, nodes)
    if counts_only(res):
        # The common request, checked once per pass per distinct request: only the GPU count
        # matters, and a count is cheap (the general path below sorts and lists every node).
        facts = NodeFacts.of(nodes)
        if res.gpus <= facts.most_gpus or (spread and res.gpus <= facts.total_gpus):
            return None
    # Ties go to the first name, so the answer does not depend on the order nodes came in.
    most = max(sorted(nodes, key=lambda n: n.name), key=lambda n: len(matching_gpus(n, res)))
    have_gpus = len(matching_gpus(most, res))
    if res.gpus > have_gpus and spread:
        return _check_wide(res, nodes)
    if res.gpus > have_gpus:
        return _never(
            Insufficient(most.name, Dimension.GPU_COUNT, res.gpus, have_gpus, have_gpus), res
        )
    candidates = [n for n in nodes if len(matching_gpus(n, res)) >= res.gpus]
    return _check_room(res, candidates)


def _check_room(res: Resources, candidates: list[Node]) -> Status | None:
    """CPUs, then memory on a node that also has the CPUs, among `candidates` (the nodes
    that have the GPUs, or room on a GPU)."""
    if res.cpus and not any(n.cpus == 0 or n.cpus >= res.cpus for n in candidates):
        top = max(candidates, key=lambda n: (n.cpus, n.name))
        return _never(Insufficient(top.name, Dimension.CPUS, res.cpus, top.cpus, top.cpus), res)
    if res.cpus:
        # Memory must be on a node that also has the CPUs, or the job could never start.
        candidates = [n for n in candidates if n.cpus == 0 or n.cpus >= res.cpus]
    if res.mem_bytes and not any(
        n.memory_bytes == 0 or n.memory_bytes >= res.mem_bytes for n in candidates
    ):
        top = max(candidates, key=lambda n: (n.memory_bytes, n.name))
        mem = top.memory_bytes
        return _never(Insufficient(top.name, Dimension.MEMORY, res.mem_bytes, mem, mem), res)
    return None


def _check_wide(res: Resources, nodes: tuple[Node, ...]) -> Status | None:
    """A wide job (policy/wide.py): its CPUs and memory are per node, so only the nodes that
    have them count, and their matching GPUs must add up to the request."""
    total = sum(len(matching_gpus(n, res)) for n in nodes)
    if total < res.gpus:
        short = Insufficient(None, Dimension.GPU_COUNT, res.gpus, total, total)
        return _never(short, res, Rule.NEVER_FITS_POOL)
    roomy = [
        n
        for n in nodes
        if (not res.cpus or n.cpus == 0 or n.cpus >= res.cpus)
        and (not res.mem_bytes or n.memory_bytes == 0 or n.memory_bytes >= res.mem_bytes)
    ]
    have = sum(len(matching_gpus(n, res)) for n in roomy)
    if have < res.gpus:
        short = Insufficient(None, Dimension.GPU_COUNT, res.gpus, have, have)
        return _never(short, res, Rule.NEVER_FITS_ROOMY)
    return None


def _check_shared(res: Resources, nodes: tuple[Node, ...]) -> Status | None:
    """A fractional job: some matching GPU must have room for it on an empty pool (its
    memory less what is declared unmanaged), on a node with the CPUs and memory."""
    if res.gpu_fraction is not None and not 0 < res.gpu_fraction <= 1:
        short = Insufficient(None, Dimension.GPU_FRACTION, res.gpu_fraction, 1.0, 1.0)
        return _never(short, res, Rule.BAD_FRACTION)
    fits = [
        n
        for n in nodes
        if any(
            granted_bytes(n, g, res) <= n.gpu(g).memory_bytes - n.gpu(g).unmanaged_memory_bytes
            for g in matching_gpus(n, res)
        )
    ]
    if not fits:
        gpus = [(n.gpu(g), n) for n in nodes for g in matching_gpus(n, res)]
        if not gpus:
            return _never(Insufficient(None, Dimension.GPU_COUNT, 1, 0, 0), res)
        gpu, node = max(
            gpus, key=lambda p: (p[0].memory_bytes - p[0].unmanaged_memory_bytes, p[1].name)
        )
        room = gpu.memory_bytes - gpu.unmanaged_memory_bytes
        need = granted_bytes(node, gpu.index, res)
        short = Insufficient(node.name, Dimension.GPU_MEMORY, need, room, gpu.memory_bytes)
        return _never(short, res, have=(gpu.model,))
    return _check_room(res, fits)
