"""Jobs and GPUs as JSON: the one shape the CLI, the SDK and the dashboard read.

A pending job's status comes from the policy as data (policy/status.py); here it becomes its
JSON (`wait`: the code, the rule, the binding dimension and its figures, the reservation, the
jobs it waits for) and its words (`why`, policy/render.py), so `--json` and a dashboard read
the same structure the words were made from.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from gpupool.api.backend_wire import backends_to_wire
from gpupool.core.backends import BackendNodes
from gpupool.core.cgroup_usage import CgroupUsage
from gpupool.core.drain import DrainedGpu
from gpupool.core.hardware import Inventory
from gpupool.core.job import Job, priority_name
from gpupool.core.monitoring import GpuSample
from gpupool.core.ops_shapes import DrainWire
from gpupool.core.wire_shapes import (
    CgroupUsageWire,
    GpusWire,
    GpuUsageWire,
    GpuWire,
    JobWire,
    LinkWire,
    NodeWire,
    PassWire,
    PriorityFactorsWire,
    ReservationWire,
    WaitReservationWire,
    WaitWire,
)
from gpupool.policy import Status
from gpupool.policy.reasons import Reserved
from gpupool.policy.render import status_text
from gpupool.policy.snapshot import PriorityFactors, Reservation
from gpupool.service.fragmentation import from_holders
from gpupool.service.pool_service import Explanation
from gpupool.spec.signal_rule import signal_text

# Words and wait of each status object seen lately. A pass shares one status between all the
# jobs that wait alike (one request, one project), so a queue of thousands renders a handful;
# an entry holds its status, so its id is not reused while kept.
_RENDERED: dict[int, tuple[Status, str, WaitWire]] = {}
_RENDERED_LOCK = threading.Lock()
_KEEP = 4096


def _reserved_to_wire(r: Reserved | None) -> WaitReservationWire | None:
    if r is None:
        return None
    res = r.reservation
    return {
        "job_id": res.job_id,
        "node": res.node,
        "gpus": list(res.gpus),
        "gpu_memory_bytes": res.gpu_memory_bytes,
        "time": res.time,
        "gpus_total": r.gpus,
        "nodes": r.nodes,
    }


def _reservation_to_wire(r: Reservation | None) -> ReservationWire | None:
    if r is None:
        return None
    return {
        "node": r.node,
        "gpus": list(r.gpus),
        "gpu_memory_bytes": r.gpu_memory_bytes,  # a fractional job's
        "time": r.time,
    }


def factors_to_wire(f: PriorityFactors | None) -> PriorityFactorsWire | None:
    if f is None:
        return None
    return {
        "class": f.klass,
        "fairshare": f.fairshare,
        "age": f.age,
        "size": f.size,
        "score": f.score,
        "service": f.service,
    }


def status_to_wire(status: Status) -> tuple[str, WaitWire]:
    """A pending job's status: its words, and its data as JSON (module docstring)."""
    kept = _RENDERED.get(id(status))
    if kept is not None and kept[0] is status:
        return kept[1], kept[2]
    short = status.short
    wait: WaitWire = {
        "code": status.code.value,
        "rule": status.rule.value,
        "dimension": None if short is None else short.dimension.value,
        "requested": None if short is None else short.requested,
        "free": None if short is None else short.free,
        "capacity": None if short is None else short.capacity,
        "node": None if short is None else short.node,
        "reservation": _reserved_to_wire(status.reserved),
        "jobs": list(status.jobs),
        "project": status.project,
    }
    if status.limit is not None:  # ArrayLimit: the array's %K (additive: only there)
        wait["limit"] = status.limit
    if status.user is not None:  # a per-user cap (policy/user_caps.py; additive)
        wait["user"] = status.user
    if status.backend is not None:  # QueuedInBackend, NoBackend, CapacityUnknown (additive)
        wait["backend"] = status.backend
        wait["detail"] = status.detail  # the backend's own words, shown as they are
    words = status_text(status)
    with _RENDERED_LOCK:
        if len(_RENDERED) >= _KEEP:
            _RENDERED.clear()
        _RENDERED[id(status)] = (status, words, wait)
    return words, wait


def pass_to_wire(explain: Explanation | None) -> PassWire:
    """What a scheduling pass said of a pending job, as the five keys of its JSON it fills
    (`why`, `wait`, `estimated_start`, `reservation`, `priority_factors`); all empty for a
    job it said nothing of."""
    status = None if explain is None else explain.status
    why, wait = ("", None) if status is None else status_to_wire(status)
    if explain is None:
        return {
            "why": why,
            "wait": wait,
            "estimated_start": None,
            "reservation": None,
            "priority_factors": None,
        }
    return {
        "why": why,
        "wait": wait,
        "estimated_start": explain.estimated_start,
        "reservation": _reservation_to_wire(explain.reservation),
        "priority_factors": factors_to_wire(explain.priority_factors),
    }


def job_to_wire(
    job: Job,
    explain: Explanation | None = None,
    log_path: str = "",
    gpu_count: float | None = None,
    private: bool = True,
) -> JobWire:
    """A job as JSON; `explain` adds what the last scheduling pass said about it (its
    `status`, rendered here: `why` in words, `wait` as data). `gpu_count`: the GPUs it holds,
    or asks for before it runs, a fraction for a shared GPU (the engine's `GpuCounter`;
    without it, the count the job's own figures give). `private` False: for a reader who may
    not see the job's spec (core/access.py), its command, environment (keys and values),
    workdir and log path are left out (empty) and `hidden` is true."""
    said = pass_to_wire(explain)
    spec = job.spec
    res = spec.resources
    out: JobWire = {
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
        "why": said["why"],
        "wait": said["wait"],
        "estimated_start": said["estimated_start"],
        "reservation": said["reservation"],
        "priority_factors": said["priority_factors"],
        "begin_time": spec.begin_time,
        "restart_count": job.restart_count,
        "failed_attempts": job.failed_attempts,
        # --after and --array (docs/jobs.md): what it waits for, the array it is a task of
        # (its first task's id) and its index; empty and null for a plain job.
        "after": [str(d) for d in spec.after],
        "array_id": job.array_id,
        "array_index": None if spec.array_task is None else spec.array_task.index,
        "array_limit": None if spec.array_task is None else spec.array_task.limit,
        "cancel_requested": job.cancel_requested,
        # Held (gpupool hold): "user" or "admin", null when not held (docs/jobs.md).
        "hold": None if spec.hold is None else spec.hold.value,
        "separate_stderr": spec.separate_stderr,  # `logs --stderr` reads its stderr apart
        # --signal as the user wrote it ("USR1@120", "none"); null: named none, so the
        # checkpoint default applies (docs/jobs.md, "A warning before the time limit").
        "signal": None if spec.warning_signal is None else signal_text(spec.warning_signal),
        # docs/backends.md: the backend it is handed to (null: the local pool), the nodes
        # it spans, and the backend's own name for its current run once known.
        "backend": spec.backend,
        "nodes": spec.nodes,
        "backend_ref": job.backend_ref,
        # --image (docs/containers.md): the image and the engine it runs with (settled at
        # submit); null for a job on the host.
        "image": spec.image,
        "container_engine": None if spec.container_engine is None else spec.container_engine.value,
        # Figures only, never private: /metrics shows the running jobs' to everyone.
        "cgroup_usage": cgroup_usage_to_wire(job.cgroup_usage),
        "log_path": log_path,
        "hidden": not private,
    }
    if not private:
        out.update({"command": [], "env": {}, "workdir": "", "log_path": "", "image": None})
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


def cgroup_usage_to_wire(usage: CgroupUsage | None) -> CgroupUsageWire | None:
    """A job's CPU time and memory (core/cgroup_usage.py); None: nothing counted them."""
    if usage is None:
        return None
    return {
        "cpu_seconds": usage.cpu_seconds,
        "cpu_seconds_all_runs": usage.cpu_seconds_all_runs,
        "memory_peak_bytes": usage.memory_peak_bytes,
        "memory_mean_bytes": usage.memory_mean_bytes,
        "memory_current_bytes": usage.memory_current_bytes,
        "memory_limit_bytes": usage.memory_limit_bytes,
        "live": usage.live,
    }


def usage_to_wire(sample: GpuSample | None) -> GpuUsageWire | None:
    """A GPU's latest sample (None: not sampled, or sampling is off)."""
    if sample is None:
        return None
    return {
        "time": sample.time,
        "simulated": sample.simulated,
        "utilization_pct": sample.utilization_pct,
        "memory_used_bytes": sample.memory_used_bytes,
        "memory_total_bytes": sample.memory_total_bytes,
        "power_w": sample.power_w,
        "temperature_c": sample.temperature_c,
        "foreign_memory_bytes": sample.foreign_memory_bytes,
        "processes": [
            {"pid": p.pid, "job": p.job_id, "used_memory_bytes": p.used_memory_bytes}
            for p in sample.processes
        ],
    }


def drain_to_wire(d: DrainedGpu | None) -> DrainWire | None:
    if d is None:
        return None
    return {"node": d.node, "gpu": d.gpu, "reason": d.reason, "by": d.by, "since": d.since}


def gpus_to_wire(
    inventory: Inventory,
    holders: dict[tuple[str, int], list[Job]],
    samples: Mapping[tuple[str, int], GpuSample] | None = None,
    backends: Sequence[BackendNodes] = (),
    drained: Mapping[tuple[str, int], DrainedGpu] | None = None,
) -> GpusWire:
    """The pool's GPUs by node with their holders, latest samples and drains, and each
    backend's nodes as its engine last reported them (api/backend_wire.py)."""
    nodes: list[NodeWire] = []
    drained = drained or {}
    room = from_holders(inventory, holders, drained)
    for node, node_room in zip(inventory.nodes, room.nodes, strict=True):
        gpus: list[GpuWire] = []
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
                    "cpu_affinity": list(g.cpu_affinity),
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
                    "usage": usage_to_wire((samples or {}).get((node.name, g.index))),
                    "drained": drain_to_wire(drained.get((node.name, g.index))),
                }
            )
        links: list[LinkWire] = [
            {"a": lk.a, "b": lk.b, "type": lk.kind.name.lower(), "nvlinks": lk.nvlinks}
            for lk in node.links
        ]
        nodes.append(
            {
                "name": node.name,
                "cpus": node.cpus,
                "memory_bytes": node.memory_bytes,
                "simulated": node.simulated,
                "gpus": gpus,
                "links": links,
                "free_gpus": node_room.free_gpus,
                "largest_startable_gpus": node_room.largest_startable_gpus,
            }
        )
    return {
        "source": inventory.source,
        "note": inventory.note,
        "nodes": nodes,
        "free_gpus": room.free_gpus,
        "largest_startable_gpus": room.largest_startable_gpus,
        "backends": backends_to_wire(backends),
    }
