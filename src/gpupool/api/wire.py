"""Jobs and GPUs as JSON: the one shape the CLI, the SDK and the dashboard read."""

from __future__ import annotations

from typing import Any

from gpupool.core.hardware import Inventory
from gpupool.core.job import Job, priority_name


def job_to_wire(
    job: Job,
    explain: dict[str, Any] | None = None,
    log_path: str = "",
    gpu_count: float | None = None,
) -> dict[str, Any]:
    """A job as JSON; `explain` adds what the last scheduling pass said about it. `gpu_count`:
    the GPUs it holds, or asks for before it runs, a fraction for a shared GPU (the engine's
    `GpuCounter`; without it, the count the job's own figures give)."""
    explain = explain or {}
    spec = job.spec
    res = spec.resources
    out: dict[str, Any] = {
        "id": job.id,
        "name": job.name,
        "user": job.user,
        "project": spec.project,
        "state": job.state.value,
        "priority": spec.priority,
        "priority_name": priority_name(spec.priority),
        "command": list(spec.command),
        "resources": {
            "gpus": res.gpus,
            "gpu_type": res.gpu_type,
            "cpus": res.cpus,
            "mem_bytes": res.mem_bytes,
            "gpu_memory_bytes": res.gpu_memory_bytes,
            "gpu_fraction": res.gpu_fraction,
        },
        "preemptible": spec.is_preemptible,
        "time_limit_s": spec.time_limit_s,
        "grace_s": spec.grace_s,
        "workdir": spec.workdir,
        "env": dict(spec.env),
        "node": job.node,
        "gpus": list(job.gpus),
        "gpu_count": job.gpu_count() if gpu_count is None else gpu_count,
        "gpu_memory_bytes": job.gpu_memory_bytes,
        "submit_time": job.submit_time,
        "start_time": job.start_time,
        "end_time": job.end_time,
        "exit_code": job.exit_code,
        "reason": job.reason,
        "why": explain.get("why", ""),
        "estimated_start": explain.get("estimated_start"),
        "reservation": explain.get("reservation"),
        "priority_factors": explain.get("priority_factors"),
        "begin_time": spec.begin_time,
        "restart_count": job.restart_count,
        "cancel_requested": job.cancel_requested,
        "log_path": log_path,
    }
    if job.events:
        out["events"] = [
            {
                "time": e.time,
                "from": e.frm.value if e.frm else None,
                "to": e.to.value,
                "cause": e.cause,
            }
            for e in job.events
        ]
    return out


def gpus_to_wire(inventory: Inventory, holders: dict[tuple[str, int], list[Job]]) -> dict[str, Any]:
    nodes = []
    for node in inventory.nodes:
        gpus = []
        for g in node.gpus:
            jobs = holders.get((node.name, g.index), [])
            holder = jobs[0] if jobs else None
            gpus.append(
                {
                    "index": g.index,
                    "model": g.model,
                    "memory_bytes": g.memory_bytes,
                    "uuid": g.uuid,
                    "pci_bus_id": g.pci_bus_id,
                    "numa_node": g.numa_node,
                    "nvlink_peers": list(node.nvlink_peers(g.index)),
                    "job": holder.id if holder else None,
                    "job_name": holder.name if holder else None,
                    "user": holder.user if holder else None,
                    "shared": any(j.gpu_memory_bytes for j in jobs),
                    "jobs": [
                        {
                            "id": j.id,
                            "name": j.name,
                            "user": j.user,
                            "gpu_memory_bytes": j.gpu_memory_bytes,
                        }
                        for j in jobs
                    ],
                    "unmanaged_memory_bytes": g.unmanaged_memory_bytes,
                }
            )
        links = [
            {"a": lk.a, "b": lk.b, "type": lk.kind.name.lower(), "nvlinks": lk.nvlinks}
            for lk in node.links
        ]
        nodes.append(
            {
                "name": node.name,
                "cpus": node.cpus,
                "memory_bytes": node.memory_bytes,
                "gpus": gpus,
                "links": links,
            }
        )
    return {"source": inventory.source, "note": inventory.note, "nodes": nodes}
