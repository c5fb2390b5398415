"""What the engine's fair-share refresh costs as the pool's history grows (issue 35, goal 8).

Every `usage_refresh_s` (10 s) the engine's thread recomputes decayed usage from the store
(engine/usage_cache.py: `usage_history` reads every run of the last ten half-lives, 70 days
by default, and `decayed_usage` sums them). Its cost and its memory, taken and freed at once,
grow with the runs the store holds, not with what changed since the last refresh. This bench
measures it on SQLite stores holding `--runs` ended runs each (made by copying one stored,
ended job row; 30 environment variables in its spec, as bench/daemon_scale.py's jobs):
the refresh's wall time (p50 of `--repeat`, in process), and its peak of traced memory
(tracemalloc, one more refresh). The baseline in the same run is the smallest store: the
ratios say how the cost grows with the history (an incremental ledger, as the simulator's
sim/usage.py keeps, would stay near 1).
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
    store = Store.open(url)
    try:
        half_life = PolicyConfig().fairshare_half_life_s
        walls = []
        for _ in range(repeat):
            cache = UsageCache(store, half_life, REFRESH_S, {})  # a first read: the refresh
            t0 = time.perf_counter()
            cache.at(time.time())
            walls.append((time.perf_counter() - t0) * 1000)
        cache = UsageCache(store, half_life, REFRESH_S, {})
        tracemalloc.start()
        cache.at(time.time())
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    finally:
        store.close()
    return {"refresh_p50_ms": round(statistics.median(walls), 1), "peak_mb": round(peak / 1e6, 2)}


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
        n: {
            "refresh": round(r["refresh_p50_ms"] / base["refresh_p50_ms"], 2),
            "peak_memory": round(r["peak_mb"] / base["peak_mb"], 2),
        }
        for n, r in results.items()
    }
    out["refresh_every_s"] = REFRESH_S
    out["load_after"] = list(os.getloadavg())
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
