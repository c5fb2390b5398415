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
Prints one JSON object. Usage: python bench/submit_latency.py [--jobs 50]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

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
        pool.client.submit(wire, "bench", uuid.uuid4().hex)
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
        pool.client.submit(wire, "bench", uuid.uuid4().hex)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=50)
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
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
