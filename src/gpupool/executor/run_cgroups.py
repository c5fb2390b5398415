"""A run's cgroup seen from the daemon: found by the run's launch.json (which names it),
read for what it has used so far, and for the CPUs it is pinned to (job_cgroup.py is the
supervisor's side: making, entering, killing)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

from gpupool.core.cpu_list import parse_cpu_list
from gpupool.core.execution import RunUsage
from gpupool.executor import job_cgroup
from gpupool.executor.files import read_json

if TYPE_CHECKING:
    from gpupool.executor.job_cgroup import CgroupFile


def run_cgroup(jobdir: Path) -> CgroupFile | None:
    """The current run's cgroup, when it has one that still exists (its supervisor removes
    it once empty; one that died before that leaves it)."""
    launch = read_json(jobdir / "launch.json") or {}
    found = launch.get("cgroup")
    if not isinstance(found, dict):
        return None
    cg = cast("CgroupFile", found)
    return cg if job_cgroup.exists(cg) else None


def run_usage(jobdir: Path) -> RunUsage | None:
    """What the running job has used so far, from its cgroup (None: it has none): no mean
    memory yet (its supervisor keeps that until the end), its use now instead."""
    cg = run_cgroup(jobdir)
    if cg is None:
        return None
    counted = job_cgroup.usage(cg)
    return RunUsage(
        cpu_seconds=counted["cpu_seconds"],
        memory_peak_bytes=counted["memory_peak_bytes"],
        memory_mean_bytes=None,
        oom_kills=counted["oom_kills"],
        memory_current_bytes=job_cgroup.memory_now(cg),
    )


def pinned_cpus(jobdir: Path) -> tuple[int, ...]:
    """The CPUs the run's cgroup pins it to (() when none: not pinned, or no cgroup)."""
    cg = run_cgroup(jobdir)
    cpus = None if cg is None else cg.get("cpuset_cpus")
    return parse_cpu_list(cpus) if cpus else ()
