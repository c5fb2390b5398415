"""The local executor as the daemon makes it: each run in a cgroup of its own where the host
allows (executor/cgroup_plan.py), pinned to CPUs near its GPUs, opening only its own GPUs'
device files, and sharing a GPU through NVIDIA MPS under `--mps`; and the start lines that
say what of that this host enforces."""

from __future__ import annotations

import os
from pathlib import Path

from gpupool.core.hardware import Gpu, Inventory
from gpupool.executor.cgroup_plan import CgroupPlan, plan_cgroups
from gpupool.executor.cpu_sets import CpuSets
from gpupool.executor.local import LocalExecutor
from gpupool.executor.mps import MpsControl
from gpupool.executor.mps_sharing import MpsSharing


def local_executor(
    state: Path,
    sock_path: Path,
    inventory: Inventory,
    *,
    cgroups: bool,
    job_pids_max: int | None,
    mps: bool,
) -> tuple[LocalExecutor, CgroupPlan | None]:
    """The executor, and the pool's cgroup subtree (None: `--cgroups off`) for the daemon to
    release at its stop and name on its start line."""
    plan = plan_cgroups(state, pids_max=job_pids_max) if cgroups else None
    gpus: tuple[Gpu, ...] = inventory.nodes[0].gpus if inventory.nodes else ()
    executor = LocalExecutor(
        state,
        notify_socket=sock_path,
        # Containers get the GPUs as devices only where NVML found real ones
        # (docs/containers.md).
        gpu_devices=inventory.source == "nvml",
        cgroups=plan,
        # Pinned to the daemon's CPUs, near each GPU's (its CPU affinity) when known.
        cpu_sets=CpuSets(sorted(os.sched_getaffinity(0)), {g.index: g.cpu_affinity for g in gpus}),
        # Each GPU's /dev/nvidiaN minor (its index where NVML did not say, as on a declared
        # inventory): what a job's cgroup denies the jobs that do not hold it.
        gpu_minors={g.index: g.index if g.device_minor is None else g.device_minor for g in gpus},
        mps=MpsSharing(MpsControl(state), {g.index: g for g in gpus}) if mps and gpus else None,
    )
    return executor, plan


def isolation_lines(plan: CgroupPlan | None, mps: bool) -> list[str]:
    """The start lines on what a job's cgroup enforces here (and MPS, when on)."""
    if plan is None:
        lines = [
            "jobs run without cgroups (--cgroups off): --mem and --cpus are not enforced, and "
            "a process that leaves its job's session (setsid) outlives a cancel"
        ]
    else:
        lines = [plan.start_line()]
    if mps:
        lines.append("jobs sharing a GPU run as its NVIDIA MPS clients (--mps; docs/mps.md)")
    return lines
