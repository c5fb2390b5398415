"""The GPUs each job counts for, with the pool's GPU memory at hand: `core.job.gpu_count`
(the one rule) bound to the inventory, for every view the engine serves (`show`, `queue`,
`project list`, the API) and for fair-share usage. The policy's quota book applies the same
rule to the same memory figures (policy/quota.py)."""

from __future__ import annotations

from gpupool.core.hardware import Inventory
from gpupool.core.job import Job, gpu_count


class GpuCounter:
    def __init__(self, inventory: Inventory) -> None:
        # (node, GPU index) -> its memory in bytes
        self.memory = {(n.name, g.index): g.memory_bytes for n in inventory.nodes for g in n.gpus}
        self.largest = max(self.memory.values(), default=0)

    def of(self, job: Job) -> float:
        """What `job` holds (or held, if it ran), else what it asks for: a fraction for a
        shared GPU, measured against its GPU's memory (the largest GPU's, before it has one)."""
        if job.node is not None and job.gpus:
            return job.gpu_count(self.memory.get((job.node, job.gpus[0])))
        return job.gpu_count(self.largest)

    def asked(self, job: Job) -> float:
        """What `job` asks for, whether or not it runs (pending sums)."""
        if job.spec.nodes > 1:  # a backend's job: whole GPUs on each of its nodes
            return float(job.spec.resources.gpus * job.spec.nodes)
        return gpu_count(job.spec.resources, gpu_memory_bytes=self.largest)
