"""What keeping GPU samples costs, and how fast accounting reads a year (issue 14's targets:
bytes per GPU per day after downsampling; `usage --since 365d` on a year for 8 GPUs < 1 s).

Builds, in a fresh SQLite database, what the store holds after a year of sampling 8 GPUs
every `--interval` seconds once retention has done its work (store/samples.py): one day of
full-rate samples, 30 days of minutes, a year of hours; and a year of jobs (`--jobs-per-day`
of 1-8 GPUs, 1-12 h each, some preempted once) with their per-hour use. Sizes are measured
as the file's growth (after VACUUM) per series. Then a real daemon is started on that
database and `GET /v1/usage?since=365d` is timed through its socket (p50/p99 over
`--repeat`), and `gpupool usage --since 365d` end to end, by user and by gpu-type.
Baseline in the same run: `GET /v1/info` (the daemon's own floor for one request).
Prints one JSON object. Usage: python bench/sample_storage.py [--interval 5] [--jobs-per-day 40]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from sqlalchemy import insert  # noqa: E402

from gpupool.client import Client  # noqa: E402
from gpupool.core.job import JobSpec, JobState, Resources  # noqa: E402
from gpupool.store import Store  # noqa: E402
from gpupool.store.samples import GpuRollupRow, GpuSampleRow, JobUsageHourRow  # noqa: E402

GPUS, DAY, HOUR, GIB = 8, 86400.0, 3600.0, 1 << 30


def file_size(path: Path, store: Store) -> int:
    """The database file's size with everything checkpointed from the WAL and vacuumed."""
    store._engine.dispose()  # noqa: SLF001  (a benchmark measures the file)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")
    finally:
        conn.close()
    return path.stat().st_size


def bulk(store: Store, table: object, rows: list[dict[str, object]]) -> None:
    with store._engine.begin() as c:  # noqa: SLF001
        for i in range(0, len(rows), 20_000):
            c.execute(insert(table), rows[i : i + 20_000])  # type: ignore[arg-type]


def sample_row(t: float, gpu: int, rng: random.Random) -> dict[str, object]:
    return {"node": "box", "gpu_index": gpu, "time": t, "utilization_pct": rng.uniform(0, 100),
            "memory_used_bytes": rng.randrange(80 * GIB), "memory_total_bytes": 80 * GIB,
            "power_w": rng.uniform(60, 400), "temperature_c": rng.uniform(30, 80),
            "simulated": False}  # fmt: skip


def rollup_row(period: int, t: float, gpu: int, rng: random.Random) -> dict[str, object]:
    row = sample_row(t, gpu, rng)
    row.update(period_s=period, samples=int(period // 5), utilization_max_pct=100.0)
    return row


def build(path: Path, interval: float, jobs_per_day: int, now: float) -> dict[str, object]:
    rng = random.Random(7)
    store = Store.open(f"sqlite:///{path}")
    sizes = {"empty": file_size(path, store)}
    # A year of jobs: submitted, started, some preempted and requeued, finished.
    users, projects = [f"user{i}" for i in range(20)], ["vision", "nlp", "rl", "default"]
    job_hours: list[dict[str, object]] = []
    started = time.perf_counter()
    for day in range(365):
        for _ in range(jobs_per_day):
            submit = now - (365 - day) * DAY + rng.uniform(0, DAY)
            gpus = rng.choice([1, 1, 2, 4, 8])
            spec = JobSpec(command=("train",), resources=Resources(gpus=gpus),
                           project=rng.choice(projects))  # fmt: skip
            job = store.submit(spec, rng.choice(users), submit)
            begin = submit + rng.expovariate(1 / 600)
            store.commit_starts(
                [(job.id, "box", tuple(range(gpus)))], store.allocation_version(), begin
            )
            run = rng.uniform(1, 12) * HOUR
            if rng.random() < 0.1:  # preempted once, then run again
                store.requeue(job.id, begin + run / 3, "preempted")
                begin += run / 3 + 60
                store.commit_starts(
                    [(job.id, "box", tuple(range(gpus)))], store.allocation_version(), begin
                )
            store.finish(job.id, JobState.SUCCEEDED, 0, begin + run, "done")
            hour = (begin // HOUR) * HOUR
            while hour < begin + run:
                used = gpus * HOUR * rng.uniform(0.1, 0.95)
                job_hours.append({"job_id": job.id, "hour": hour, "used_gpu_s": used,
                                  "sampled_gpu_s": gpus * HOUR, "energy_j": gpus * 300 * HOUR})  # fmt: skip
                hour += HOUR
    jobs_s = time.perf_counter() - started
    sizes["jobs"] = file_size(path, store)
    bulk(store, JobUsageHourRow, job_hours)
    sizes["job_hours"] = file_size(path, store)
    raw = [sample_row(now - DAY + i * interval, g, rng)
           for i in range(int(DAY / interval)) for g in range(GPUS)]  # fmt: skip
    bulk(store, GpuSampleRow, raw)
    sizes["raw"] = file_size(path, store)
    minutes = [rollup_row(60, now - 30 * DAY + i * 60, g, rng)
               for i in range(30 * 1440) for g in range(GPUS)]  # fmt: skip
    bulk(store, GpuRollupRow, minutes)
    sizes["minutes"] = file_size(path, store)
    hours = [rollup_row(3600, now - 365 * DAY + i * HOUR, g, rng)
             for i in range(365 * 24) for g in range(GPUS)]  # fmt: skip
    bulk(store, GpuRollupRow, hours)
    sizes["hours"] = file_size(path, store)
    store.close()
    raw_b, min_b, hour_b = (sizes["raw"] - sizes["job_hours"], sizes["minutes"] - sizes["raw"],
                            sizes["hours"] - sizes["minutes"])  # fmt: skip
    return {
        "jobs": 365 * jobs_per_day,
        "build_jobs_s": round(jobs_s, 1),
        "rows": {
            "raw": len(raw),
            "minutes": len(minutes),
            "hours": len(hours),
            "job_hours": len(job_hours),
        },  # fmt: skip
        "bytes_per_row": {
            "raw": round(raw_b / len(raw), 1),
            "minute": round(min_b / len(minutes), 1),
            "hour": round(hour_b / len(hours), 1),
        },  # fmt: skip
        # What one GPU costs per day of history kept, once retention runs (steady state):
        # a day of full rate + 1/1 day of minutes per day kept 30 days + 24 hours a day.
        "bytes_per_gpu_day": {
            "full_rate_day": round(raw_b / GPUS),
            "minutes_day": round(min_b / GPUS / 30),
            "hours_day": round(hour_b / GPUS / 365),
            "steady_state_total_per_gpu": round((raw_b + min_b + hour_b) / GPUS),
        },
        "database_bytes": sizes["hours"],
    }


def timed_ms(fn, repeat: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    took = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        took.append((time.perf_counter() - began) * 1000)
    took.sort()
    return {"p50_ms": round(statistics.median(took), 1),
            "p99_ms": round(took[min(len(took) - 1, int(0.99 * len(took)))], 1)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--interval", type=float, default=5.0)
    ap.add_argument("--jobs-per-day", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--keep", type=Path, help="build the year's database here and keep it")
    ap.add_argument("--reuse", type=Path, help="time a database a --keep run built")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db, state = args.reuse or args.keep or Path(tmp) / "year.db", Path(tmp) / "state"
        now = time.time()
        out = {} if args.reuse else build(db, args.interval, args.jobs_per_day, now)
        env = {**os.environ, "GPUPOOL_STATE_DIR": str(state),
               "PYTHONPATH": str(ROOT / "src")}  # fmt: skip
        cmd = [sys.executable, "-m", "gpupool", "server", "--gpus", f"{GPUS}xA100-80GB",
               "--db", f"sqlite:///{db}", "--sample-interval", "off"]  # fmt: skip
        daemon = subprocess.Popen(
            cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            client = Client(state)
            deadline = time.monotonic() + 60
            while True:
                try:
                    client.info()
                    break
                except Exception:  # noqa: BLE001  (not up yet)
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            info = timed_ms(lambda: client.info(), args.repeat)
            by_user = timed_ms(lambda: client.usage("user", "365d"), args.repeat)
            by_type = timed_ms(lambda: client.usage("gpu-type", "365d"), args.repeat)
            cli = [sys.executable, "-m", "gpupool", "usage", "--since", "365d"]
            cli_ms = timed_ms(lambda: subprocess.run(cli, env=env, check=True, capture_output=True),
                              max(3, args.repeat // 4))  # fmt: skip
            report = client.usage("user", "365d")
        finally:
            daemon.terminate()
            daemon.wait(30)
    out["usage_365d"] = {"api_by_user": by_user, "api_by_gpu_type": by_type,
                         "cli_end_to_end": cli_ms, "baseline_api_info": info,
                         "total_allocated_gpu_hours": round(report.total.allocated_gpu_hours),
                         "target_ms": 1000}  # fmt: skip
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
