"""A real one-node Slurm for the benchmarks (cli_vs_slurm, submit_latency, vs_slurm): the
tests' cluster (tests/slurm_cluster.py: munged, slurmctld, slurmd as background processes,
fake GPUs as character devices, teardown by PID) with one node `n1` holding this machine's
CPUs and `gpus` GPUs, and Slurm's fast scheduler settings (ENGINES.md:
batch_sched_delay=0, sched_min_interval=0, sched_interval=2).

What the benchmarks use on top: `run(cmd, check=...)` and `sbatch(script_text, gres_gpus)`.
If the binaries are missing and we are root they are installed with apt-get; otherwise
SlurmUnavailable is raised.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: tests.*

from tests.slurm_cluster import SlurmCluster as _Cluster  # noqa: E402
from tests.slurm_cluster import SlurmUnavailable, ensure_installed  # noqa: E402

__all__ = ["SlurmCluster", "SlurmUnavailable", "ensure_installed", "local_slurm"]


class SlurmCluster:
    """A started cluster as the benchmarks drive it (`workdir`, `env`, `procs`)."""

    def __init__(self, cluster: _Cluster) -> None:
        self.cluster = cluster
        self.workdir = cluster.workdir
        self.env = cluster.env
        self.procs = cluster.procs

    def run(
        self, cmd: list[str], check: bool = True, timeout: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            cmd, env=self.env, capture_output=True, text=True, timeout=timeout, cwd=self.workdir
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"{cmd} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc

    def sbatch(self, script_text: str, gres_gpus: int = 1) -> str:
        """Submit a batch script (text, with its #! line); returns the job id."""
        out = self.workdir / "out" / "%j.out"
        cmd = ["sbatch", "--parsable", f"--output={out}", f"--chdir={self.workdir}"]
        if gres_gpus:
            cmd.append(f"--gres=gpu:{gres_gpus}")
        proc = subprocess.run(
            cmd, input=script_text, env=self.env, capture_output=True, text=True, timeout=30
        )
        if proc.returncode != 0:
            raise RuntimeError(f"sbatch exited {proc.returncode}: {proc.stderr.strip()}")
        return proc.stdout.strip().split(";")[0]

    def log(self, name: str) -> str:
        return self.cluster.log(name)


def _memory_mb() -> int:
    with open("/proc/meminfo") as f:
        return int(f.readline().split()[1]) // 1024


@contextmanager
def local_slurm(workdir: Path, gpus: int = 8, timeout: float = 30.0) -> Iterator[SlurmCluster]:
    """Bring up munged + slurmctld + one slurmd under workdir; stop all of it (by PID) on exit."""
    cluster = _Cluster(
        Path(workdir),
        nodes=("n1",),
        gpus_per_node=gpus,
        cpus_per_node=os.cpu_count() or 1,
        mem_mb=min(2000, _memory_mb()),
        cluster_name="bench",
        sched_interval_s=2,
    )
    cluster.workdir.mkdir(parents=True, exist_ok=True)
    try:
        cluster.start(timeout)
        yield SlurmCluster(cluster)
    finally:
        cluster.stop()
