"""Submit-to-process-start latency and submission throughput against a real daemon.

Starts a daemon on a declared 8-GPU inventory in a temporary state directory and measures:
- api_idle: submit through the HTTP API (Unix socket) -> the job's first instruction runs,
  one submission at a time on an idle pool (p50, p99)
- api_back_to_back: the same with no pause, so each start competes with the previous job's
  teardown and the next standby supervisor's start-up on this machine's cores
- cli: submit end to end through `gpupool submit` (a new Python process per call) -> start
- throughput: acknowledged submissions per second through the API, one client, while the
  pool is full (the jobs queue: this measures the submit path, not job start-up)
- queue_cli: wall time of `gpupool queue` with jobs in the queue (p50, p99)
- baseline_spawn: the by-hand floor, subprocess.Popen of the same command (no scheduler)
- slurm_baseline: the same measurements for a real one-node Slurm brought up on this machine
  (bench/slurm_local.py, 8 fake GPUs): `sbatch --gres=gpu:1` of the same command -> start, idle,
  and `squeue` wall time with ~200 pending jobs. Skipped with --no-slurm; recorded as
  {"skipped": reason} when Slurm cannot be had (it is installed with apt-get when root).
Prints one JSON object. Usage: python bench/submit_latency.py [--jobs 50] [--no-slurm]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from slurm_local import (  # noqa: E402
    SlurmCluster,
    SlurmUnavailable,
    ensure_installed,
    local_slurm,
)

from gpupool.spec import build_spec, spec_to_wire  # noqa: E402
from integration.pool_harness import Pool  # noqa: E402


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summary(ms: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(statistics.median(ms), 2),
        "p99_ms": round(pct(ms, 0.99), 2),
        "mean_ms": round(statistics.fmean(ms), 2),
        "n": len(ms),
    }


def marker_command(path: Path) -> list[str]:
    # `date` records when the job's process really ran (nanoseconds since the epoch).
    return ["/bin/sh", "-c", f"date +%s%N > {path}.tmp && mv {path}.tmp {path}"]


def wait_marker(path: Path, timeout: float = 30.0) -> float:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            text = path.read_text().strip()
            if text:
                return int(text) / 1e9
        except FileNotFoundError:
            pass
        time.sleep(0.0005)
    raise TimeoutError(path)


def bench_api(pool: Pool, tmp: Path, n: int, tag: str = "api", pause: float = 0.0) -> list[float]:
    out = []
    for i in range(n):
        time.sleep(pause)
        marker = tmp / f"{tag}-{i}"
        wire = spec_to_wire(
            build_spec({"command": marker_command(marker), "gpus": 1}, default_workdir=str(tmp))
        )
        t0 = time.time()
        pool.client.submit(wire, uuid.uuid4().hex)
        out.append((wait_marker(marker) - t0) * 1000)
    return out


def bench_cli(pool: Pool, tmp: Path, n: int, pause: float = 0.25) -> list[float]:
    out = []
    for i in range(n):
        time.sleep(pause)
        marker = tmp / f"cli-{i}"
        t0 = time.time()
        pool.cli("submit", "--gpus", "1", "--", *marker_command(marker), check=True)
        out.append((wait_marker(marker) - t0) * 1000)
    return out


def bench_throughput(pool: Pool, tmp: Path, n: int) -> float:
    wire = spec_to_wire(build_spec({"command": ["true"], "gpus": 8}, default_workdir=str(tmp)))
    t0 = time.perf_counter()
    for _ in range(n):
        pool.client.submit(wire, uuid.uuid4().hex)
    return n / (time.perf_counter() - t0)


def bench_queue_cli(pool: Pool, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        pool.cli("queue", check=True)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def bench_spawn(tmp: Path, n: int) -> list[float]:
    out = []
    for i in range(n):
        marker = tmp / f"spawn-{i}"
        t0 = time.time()
        proc = subprocess.Popen(marker_command(marker), start_new_session=True)
        out.append((wait_marker(marker) - t0) * 1000)
        proc.wait()
    return out


def slurm_script(command: list[str]) -> str:
    return "#!/bin/sh\n" + shlex.join(command) + "\n"


def bench_sbatch(cluster: SlurmCluster, tmp: Path, n: int, tag: str) -> list[float]:
    out = []
    for i in range(n):
        time.sleep(0.25)
        marker = tmp / f"slurm-{tag}-{i}"
        t0 = time.time()
        cluster.sbatch(slurm_script(marker_command(marker)), gres_gpus=1)
        out.append((wait_marker(marker) - t0) * 1000)
    return out


def bench_slurm(tmp: Path, n: int, pending: int = 200, setup_budget_s: float = 60.0) -> dict:
    t0 = time.perf_counter()
    ensure_installed()  # apt-get install when missing and root (timed apart from start-up)
    installed = time.perf_counter() - t0
    t0 = time.perf_counter()
    with local_slurm(tmp / "slurm", gpus=8) as cluster:
        startup = time.perf_counter() - t0
        version = cluster.run(["sbatch", "--version"]).stdout.strip()
        bench_sbatch(cluster, tmp, 3, "warmup")
        idle = bench_sbatch(cluster, tmp, n, "idle")
        t1 = time.perf_counter()
        cluster.sbatch(slurm_script(["sleep", "600"]), gres_gpus=8)  # fill the node: the rest queue
        submitted = 0
        while submitted < pending and time.perf_counter() - t1 < setup_budget_s:
            cluster.sbatch(slurm_script(["true"]), gres_gpus=1)
            submitted += 1
        setup = time.perf_counter() - t1
        queue = []
        for _ in range(20):
            t2 = time.perf_counter()
            cluster.run(["squeue"])
            queue.append((time.perf_counter() - t2) * 1000)
        listed = cluster.run(["squeue", "-h", "-o", "%i %T"]).stdout.splitlines()
    return {
        "version": version,
        "install_s": round(installed, 2),
        "startup_s": round(startup, 2),
        "settings": "one node, CPUs=nproc, gres gpu:8 (mknod), select/cons_tres CR_Core, "
        "batch_sched_delay=0, sched_min_interval=0, sched_interval=2, munge auth",
        "sbatch_submit_to_start_idle": summary(idle),
        "squeue_wall": summary(queue),
        "queue_during_squeue": {
            "jobs": len(listed),
            "pending": sum(line.endswith("PENDING") for line in listed),
            "setup": f"1 job holding all 8 GPUs, then {submitted} `sbatch --gres=gpu:1` jobs "
            f"(target {pending}) submitted in {setup:.2f} s",
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--slurm-jobs", type=int, default=20, help="sbatch submissions timed")
    parser.add_argument("--no-slurm", action="store_true", help="skip the Slurm baseline")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpupool-bench-") as d:
        tmp = Path(d)
        pool = Pool(tmp / "pool", gpus="8xA100-80GB").start()
        try:
            bench_api(pool, tmp, 5, tag="warmup", pause=0.25)  # warm the daemon's code paths
            api_idle = bench_api(pool, tmp, args.jobs, tag="idle", pause=0.25)
            api_busy = bench_api(pool, tmp, args.jobs, tag="busy")
            cli = bench_cli(pool, tmp, max(10, args.jobs // 2))
            pool.submit("--gpus", "8", "--", "sleep", "600")  # fill the pool: the rest queue
            throughput = bench_throughput(pool, tmp, args.jobs * 4)
            queue = bench_queue_cli(pool, 20)
        finally:
            pool.cleanup()
        spawn = bench_spawn(tmp, args.jobs)
        slurm: dict | None = None
        if not args.no_slurm:
            try:
                slurm = bench_slurm(tmp, args.slurm_jobs)
            except (SlurmUnavailable, RuntimeError, OSError, subprocess.SubprocessError) as e:
                slurm = {"skipped": f"{type(e).__name__}: {e}"[:2000]}
    result = {
        "benchmark": "submit_latency",
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "api_submit_to_start_idle": summary(api_idle),
        "api_submit_to_start_back_to_back": summary(api_busy),
        "cli_submit_to_start": summary(cli),
        "api_submissions_per_s": round(throughput, 1),
        "cli_queue_wall": summary(queue),
        "queue_length_during_cli_queue": args.jobs * 4 + 1,
        "baseline_spawn_by_hand": summary(spawn),
        "targets": {"api_p50_ms": 50, "cli_queue_ms": 150},
    }
    if slurm is not None:
        result["slurm_baseline"] = slurm
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
