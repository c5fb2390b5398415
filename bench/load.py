"""Many clients submitting at once against a real daemon, on SQLite and on PostgreSQL.

For each backend: a fresh daemon (tests/integration/pool_harness.py) on a declared 8-GPU
inventory in a temporary state directory, on a fresh database; `--clients` threads, each
with its own gpupool client (a connection per request over the Unix socket, as the CLI
makes), submit `--jobs` jobs between them, all at once. Each job is held by a `--begin` ten
years ahead: the queue grows to `--jobs` pending jobs and the scheduling passes run over it,
but no process is started, so what is measured is the submit path (API, group commit,
store, engine) and not the machine's process spawning.

Each submission is one try (no retry), so a refused or cut connection counts as an error.
Afterwards the daemon's queue is checked: exactly `--jobs` jobs, one per acknowledged
submission.

PostgreSQL is a throwaway server (tests/pg_server.py) with fsync on, as SQLite's
synchronous=FULL syncs every commit, or `--postgres-url` (a database that is emptied first).
Prints one JSON object:
    {"machine": ..., "sqlite": {...}, "postgresql": {...}}
with, per backend: jobs, clients, errors (by kind), submissions_per_s, the submit
latency p50_ms, p99_ms and max_ms, and the daemon's CPU per submission. Usage:
    python bench/load.py [--jobs 10000] [--clients 100] [--backends sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "src"))

from gpupool.client import Client  # noqa: E402
from integration.backends import Backend, Databases  # noqa: E402
from integration.pool_harness import Pool  # noqa: E402

TEN_YEARS_S = 10 * 365 * 86400.0


@dataclass
class Tally:
    """What the clients saw, gathered under a lock."""

    latencies_ms: list[float] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def client_thread(state_dir: Path, count: int, start: threading.Barrier, tally: Tally) -> None:
    client = Client(state_dir)
    wire = {"command": ["true"], "gpus": 1, "workdir": "/", "begin_time": time.time() + TEN_YEARS_S}
    start.wait()
    for _ in range(count):
        t0 = time.perf_counter()
        try:
            job_id = client.submit(wire, uuid.uuid4().hex, retry=False).id
        except Exception as exc:  # noqa: BLE001  (every failure counts, by its kind)
            with tally.lock:
                tally.errors[f"{type(exc).__name__}: {str(exc)[:120]}"] += 1
            continue
        elapsed = (time.perf_counter() - t0) * 1000
        with tally.lock:
            tally.latencies_ms.append(elapsed)
            tally.ids.append(job_id)


def run_load(pool: Pool, jobs: int, clients: int) -> dict[str, object]:
    tally = Tally()
    start = threading.Barrier(clients + 1)
    shares = [jobs // clients + (1 if n < jobs % clients else 0) for n in range(clients)]
    threads = [
        threading.Thread(target=client_thread, args=(pool.state_dir, share, start, tally))
        for share in shares
    ]
    for t in threads:
        t.start()
    load_before = os.getloadavg()[0]
    cpu_before = _daemon_cpu_s(pool)
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    cpu_s = _daemon_cpu_s(pool) - cpu_before
    page = pool.client.job_page(limit=1)
    ms = tally.latencies_ms
    return {
        "jobs": jobs,
        "clients": clients,
        "acknowledged": len(tally.ids),
        "errors": sum(tally.errors.values()),
        "error_kinds": dict(tally.errors.most_common(5)),
        "jobs_in_queue": page.total,
        "one_job_per_acknowledgement": len(set(tally.ids)) == len(tally.ids) == page.total,
        "wall_s": round(wall, 2),
        "submissions_per_s": round(len(ms) / wall, 1),
        "p50_ms": round(statistics.median(ms), 1) if ms else None,
        "p99_ms": round(pct(ms, 0.99), 1) if ms else None,
        "max_ms": round(max(ms), 1) if ms else None,
        # The daemon's CPU (all its threads) per acknowledged submission: less noisy than
        # the latencies from run to run on a shared machine.
        "daemon_cpu_ms_per_submission": round(cpu_s * 1000 / len(ms), 3) if ms else None,
        "load_average_before": round(load_before, 2),
        "load_average_after": round(os.getloadavg()[0], 2),
    }


def bench_backend(
    backend: Backend, jobs: int, clients: int, pg_url: str | None
) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix=f"gpupool-load-{backend.value}-") as tmp:
        databases = Databases(backend)
        if backend is Backend.POSTGRESQL and pg_url:
            from pg_server import empty_public_schema

            empty_public_schema(pg_url)
            url: str | None = pg_url
        else:
            url = databases.new_url()  # None on SQLite: the state directory's file
        pool = Pool(Path(tmp) / "pool", gpus="8xA100-80GB", database_url=url)
        pool.start()
        try:
            result = run_load(pool, jobs, clients)
            rss = _rss_mb(pool)
            result["daemon_rss_mb"] = rss
            return result
        finally:
            pool.cleanup()
            databases.drop_all()


def _daemon_cpu_s(pool: Pool) -> float:
    """The daemon's user and system CPU time so far, in seconds (/proc/PID/stat)."""
    assert pool.proc is not None
    stat = Path(f"/proc/{pool.proc.pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # from field 3 (state) on
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _rss_mb(pool: Pool) -> float | None:
    assert pool.proc is not None
    for line in Path(f"/proc/{pool.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument(
        "--postgres-url",
        help="an empty PostgreSQL database to use (default: a throwaway server, fsync on)",
    )
    args = ap.parse_args()
    if args.jobs < 1 or args.clients < 1:
        ap.error("--jobs and --clients must be at least 1")
    chosen = [Backend(b) for b in args.backends.split(",")]
    out: dict[str, object] = {
        "machine": {"cpus": os.cpu_count(), "load_average_at_start": os.getloadavg()},
    }
    server = None
    if Backend.POSTGRESQL in chosen and not args.postgres_url:
        from pg_server import PostgresServer

        server = PostgresServer(durable=True).start()
        os.environ["GPUPOOL_TEST_POSTGRES_URL"] = server.url
    try:
        for backend in chosen:
            out[backend.value] = bench_backend(backend, args.jobs, args.clients, args.postgres_url)
    finally:
        if server is not None:
            server.stop()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
