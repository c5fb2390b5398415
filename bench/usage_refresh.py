"""What the engine's fair-share refresh costs as the pool's history grows (issue 35, goal 8).

Every `usage_refresh_s` (10 s) the engine's thread brings fair-share usage up to date
(engine/usage_cache.py). It used to read every run of the last ten half-lives (70 days by
default) each time: a cost and a transient memory that grew with the runs the store holds
(at fb31019: 9.7 / 131 / 1,168 ms and 0.46 / 6.3 / 62.5 MB at 1,000 / 10,000 / 100,000
runs). Now only its first read does; a refresh takes the runs ended since, as the store
handed them over, and reads the running ones. This bench measures it on SQLite stores holding `--runs` ended runs each (made by copying one stored,
ended job row; 30 environment variables in its spec, as bench/daemon_scale.py's jobs):
the first read's wall time (at a daemon's start: it reads the history once) and a refresh's
after it (every 10 s from then on: the runs ended since, handed over by the store, and the
running ones), p50 of `--repeat`, in process, and the peak of traced memory of each
(tracemalloc). The baseline in the same run is the smallest store: the ratios say how each
grows with the history (before the ledger, every refresh was a first read).
Prints one JSON object. Usage: python bench/usage_refresh.py [--runs 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "src"))

from vs_slurm import run_header, say  # noqa: E402

from gpupool.core.job import JobSpec, Resources  # noqa: E402
from gpupool.engine.usage_cache import UsageCache  # noqa: E402
from gpupool.policy.snapshot import PolicyConfig  # noqa: E402
from gpupool.store import Store  # noqa: E402

ENV_VARS = 30
REFRESH_S = 10.0  # engine/loop.py's default usage_refresh_s


def store_with_ended_runs(folder: Path, runs: int) -> str:
    """A SQLite store holding `runs` jobs that ran one 1-GPU run, an hour ago, of 10 minutes."""
    db = folder / "state.db"
    url = f"sqlite:///{db}"
    store = Store.open(url)
    env = tuple((f"BENCH_VAR_{i}", "x" * 40) for i in range(ENV_VARS))
    spec = JobSpec(command=("true",), resources=Resources(gpus=1), workdir="/", base_env=env)
    store.submit(spec, "bench", time.time())
    store.close()
    now = time.time()
    con = sqlite3.connect(db)
    con.execute(
        "UPDATE jobs SET state = 'SUCCEEDED', start_time = ?, end_time = ?, gpus = '[0]', "
        "node = 'vm'",
        (now - 3600.0, now - 3000.0),
    )
    columns = ",".join(r[1] for r in con.execute("PRAGMA table_info(jobs)") if r[1] != "id")
    copy = f"INSERT INTO jobs ({columns}) SELECT {columns} FROM jobs WHERE id = 1"
    for _ in range(runs - 1):
        con.execute(copy)
    con.commit()
    con.close()
    return url


def measure(url: str, repeat: int) -> dict[str, float]:
    """The first read (a daemon's start), a refresh after it (every 10 s from then on), and
    the peak of traced memory of each."""
    store = Store.open(url)
    try:
        half_life = PolicyConfig().fairshare_half_life_s
        firsts, refreshes = [], []
        for _ in range(repeat):
            cache = UsageCache(store, half_life, REFRESH_S, {})
            now = time.time()
            t0 = time.perf_counter()
            cache.at(now)
            firsts.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            cache.at(now + REFRESH_S)
            refreshes.append((time.perf_counter() - t0) * 1000)
        cache = UsageCache(store, half_life, REFRESH_S, {})
        now = time.time()
        tracemalloc.start()
        cache.at(now)
        first_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        cache.at(now + REFRESH_S)
        refresh_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    finally:
        store.close()
    return {
        "first_read_p50_ms": round(statistics.median(firsts), 1),
        "first_read_peak_mb": round(first_peak / 1e6, 3),
        "refresh_p50_ms": round(statistics.median(refreshes), 2),
        "refresh_peak_mb": round(refresh_peak / 1e6, 3),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", default="1000,10000,100000", help="ended runs in each store")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    sizes = sorted(int(x) for x in args.runs.split(","))
    out = run_header("usage_refresh", {"runs": sizes, "repeat": args.repeat})
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            folder = Path(tmp) / str(n)
            folder.mkdir()
            say(f"a store of {n:,} ended runs")
            results[str(n)] = measure(store_with_ended_runs(folder, n), args.repeat)
    base = results[str(sizes[0])]
    out["results"] = results
    out["ratios_to_smallest"] = {
        n: {key: round(r[key] / base[key], 2) for key in r if base[key] > 0}
        for n, r in results.items()
    }
    out["refresh_every_s"] = REFRESH_S
    out["load_after"] = list(os.getloadavg())
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
