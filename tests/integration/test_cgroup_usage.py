"""A job's CPU time and memory from its cgroup (core/cgroup_usage.py) through a real daemon,
on each database: read live while it runs (`show --json`, `/metrics`), kept with it once it
ended (`show`, `show --json`), and charged as CPU-hours in `gpupool usage`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpupool.executor.cgroup_plan import CgroupVersion, plan_cgroups
from integration.pool_harness import Pool, wait_for

MIB = 1 << 20
PY = sys.executable
# The job: 50 MiB written (bytearray zeroes what it allocates), then a short wait.
FIFTY_MIB = "b = bytearray(50 << 20); import time; time.sleep(0.5)"
# Holds 30 MiB until told to end (the file named by its argument exists).
HOLDS_30_MIB = (
    "import os, sys, time\n"
    "b = bytearray(30 << 20)\n"
    "while not os.path.exists(sys.argv[1]): time.sleep(0.05)\n"
)


def _cgroups_here() -> bool:
    return (
        os.geteuid() == 0 and plan_cgroups(Path("/nonexistent")).version is not CgroupVersion.NONE
    )


pytestmark = pytest.mark.skipif(
    not _cgroups_here(), reason="needs root and a cgroup hierarchy (CI has both)"
)


def shown(pool: Pool, job_id: int) -> dict[str, object]:
    """`gpupool show --json ID`'s cgroup figures."""
    out = pool.cli("show", "--json", str(job_id), check=True).stdout
    usage = json.loads(out)["cgroup_usage"]
    assert isinstance(usage, dict), out
    return usage


def test_cpu_and_memory_are_shown_live_kept_after_the_end_and_charged(
    pool: Pool, tmp_path: Path
) -> None:
    # While it runs: what it uses now, read from its cgroup; /metrics says the same.
    go = tmp_path / "go"
    holder = pool.submit("--mem", "200M", "--", PY, "-c", HOLDS_30_MIB, str(go))
    pool.wait_state(holder, "RUNNING")

    def holding() -> dict[str, object] | None:
        usage = shown(pool, holder)
        now = usage["memory_current_bytes"]
        return usage if isinstance(now, int) and now >= 30 * MIB else None

    live = wait_for(holding, 60, "the running job's memory to reach 30 MiB")
    assert live["live"] is True and live["memory_mean_bytes"] is None
    status, _, body = pool.client.request_raw("GET", "/metrics")
    assert status == 200
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    (memory,) = [s for s in families["gpupool_job_memory_bytes"].samples
                 if s.labels["job_id"] == str(holder)]  # fmt: skip
    assert memory.value >= 30 * MIB
    go.write_text("")
    assert pool.wait(holder).state == "SUCCEEDED"

    # Once it ended: its run's figures, as its cgroup counted them to the end.
    job = pool.submit("--mem", "200M", "--", PY, "-c", FIFTY_MIB)
    done = pool.wait(job)
    assert done.state == "SUCCEEDED", done.events[-1].cause
    usage = shown(pool, job)
    peak, cpu = usage["memory_peak_bytes"], usage["cpu_seconds"]
    assert isinstance(peak, int) and peak >= 50 * MIB
    assert isinstance(cpu, float) and cpu > 0
    assert usage["cpu_seconds_all_runs"] == cpu and usage["live"] is False
    assert usage["memory_limit_bytes"] == done.resources.mem_bytes
    text = pool.cli("show", str(job), check=True).stdout
    (line,) = [ln for ln in text.splitlines() if ln.startswith("CPU / memory")]
    assert "CPU-s" in line and "memory peak" in line and "(limit 200MiB)" in line

    # Accounting: CPU-hours next to GPU-hours.
    report = json.loads(pool.cli("usage", "--json", check=True).stdout)
    assert report["total"]["cpu_hours"] > 0
    table = pool.cli("usage", check=True).stdout
    assert "CPU-H" in table.splitlines()[0]
