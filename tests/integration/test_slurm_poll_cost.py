"""Poll cost on a real Slurm: 1,000 tracked runs answered by one squeue call.

The 1,000 jobs are real Slurm jobs, held (`--hold`) so that they stay PENDING, submitted by
one shell loop of sbatch under the backend's run names (faster than 1,000 launches, and the
backend finds runs by name as `adopt` does). The backend's commands all go through its
CommandRunner, whose `calls` the test counts: the real code path, no mock.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster

from gpupool.backends.slurm import open_backend
from gpupool.backends.slurm.backend import SlurmBackend
from gpupool.core.backends import BackendContext
from gpupool.core.execution import Handle, RunState
from integration.slurm_pool import cluster_fixture  # noqa: F401 (the fixture)

pytestmark = pytest.mark.integration
RUNS = 1000


def test_one_squeue_for_a_thousand_runs(cluster: SlurmCluster, tmp_path: Path) -> None:
    table: dict[str, object] = {
        "slurm_conf": str(cluster.conf), "output_dir": str(tmp_path / "out"),
        "launcher_python": sys.executable,
    }  # fmt: skip
    backend = open_backend("hpc", table, BackendContext("t1", tmp_path / "state"))
    assert isinstance(backend, SlurmBackend)
    loop = (
        f"for i in $(seq 1 {RUNS}); do sbatch --hold --parsable --job-name=gp-t1-$i-0 "
        "--output=/dev/null --wrap=true >/dev/null || exit 1; done"
    )
    subprocess.run(["bash", "-c", loop], env=cluster.env, check=True, timeout=600)
    handles = [Handle(i, 0) for i in range(1, RUNS + 1)]
    first = backend.poll(handles)  # learns the cluster's config once (scontrol show config)
    assert {o.state for o in first.values()} == {RunState.QUEUED}
    backend.runner.calls.clear()
    t0 = time.perf_counter()
    obs = backend.poll(handles)
    wall = time.perf_counter() - t0
    assert [argv[0] for argv in backend.runner.calls] == ["squeue"]
    assert len(obs) == RUNS
    assert {(o.state, o.detail) for o in obs.values()} == {(RunState.QUEUED, "JobHeldUser")}
    assert len({o.ref for o in obs.values()}) == RUNS
    print(f"\npoll of {RUNS} Slurm runs: 1 squeue call, {wall * 1000:.0f} ms")
    ids = [o.ref.rsplit("/", 1)[1] for o in obs.values() if o.ref]
    cluster.run(["scancel", *ids], timeout=120)
    backend.runner.calls.clear()
    gone = backend.poll(handles)  # all ended now: still one squeue (slurmctld keeps them)
    assert [argv[0] for argv in backend.runner.calls] == ["squeue"]
    assert {o.state for o in gone.values()} == {RunState.EXITED}
