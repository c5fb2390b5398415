"""How fast the web dashboard paints with a long queue (issue 14: first paint under 1 s with
10,000 jobs in the queue).

A daemon on a declared 8-GPU inventory, listening on loopback TCP, with `--jobs` jobs
(10,000) in its queue, put in its database before it starts: the first that fit run and hold
every GPU, the rest wait (the queue the page must not load whole). Then, `--runs` times, a fresh headless
Chromium context (no cache) opens `/#/queue` and `/#/gpus`, and the page's own timings are
read back (Performance API):
- first_paint_ms, first_contentful_paint_ms: from navigation start (Chromium's paint timing)
- data_ms: until the page's first data is on screen (the page marks it,
  `performance.mark("gpupool:<page>")`: every request of its first refresh answered and drawn)
- requests: each /v1 request of that first refresh, its duration in the browser
Then the daemon's CPU share over 10 s without a page, and over 10 s with a queue page open
and polling it (what a dashboard left open costs). Prints one JSON object (medians and maxima over the runs).

Needs Chromium (`apt-get install chromium`, or $GPUPOOL_CHROMIUM) and the playwright package.
    python bench/dashboard_paint.py [--jobs 10000] [--runs 5] [--screenshot DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from gpupool.core.job import JobSpec, Resources  # noqa: E402
from gpupool.store import Store  # noqa: E402
from gpupool.store.submissions import NewJob  # noqa: E402
from integration.browser import chromium_path  # noqa: E402
from integration.pool_harness import Pool, free_port, wait_for  # noqa: E402

USER = pwd.getpwuid(os.geteuid()).pw_name  # the jobs run as their owner under a root daemon

PAGE_TIMINGS = """() => {
  const paint = Object.fromEntries(performance.getEntriesByType("paint").map(e => [e.name, e.startTime]));
  const marks = performance.getEntriesByType("mark").filter(m => m.name.startsWith("gpupool:"));
  const requests = performance.getEntriesByType("resource")
    .filter(r => r.name.includes("/v1/"))
    .map(r => ({path: new URL(r.name).pathname + new URL(r.name).search, ms: r.duration}));
  return {paint, data: marks.length ? marks[0].startTime : null, requests};
}"""


def fill(state_dir: Path, jobs: int, user: str) -> float:
    """`jobs` jobs of 1 to 4 GPUs, one in ten held by a --begin time: the first that fit
    start when the daemon does (every GPU held, each job declaring some utilization) and
    run until the bench ends; the rest wait, for several reasons."""
    state_dir.mkdir(parents=True, exist_ok=True)
    store = Store.open(f"sqlite:///{state_dir / 'state.db'}")
    t0 = time.perf_counter()
    now = time.time()
    batch = []
    for i in range(jobs):
        spec = JobSpec(
            command=("sleep", "3600"),
            resources=Resources(gpus=1 + i % 4),
            name=f"sweep-{i:05d}",
            env=(("GPUPOOL_SIMULATED_UTIL", str(15 + (i * 37) % 85)),),
            workdir="/",
            begin_time=now + 3600 if i % 10 == 9 else None,
        )
        batch.append(NewJob(spec, user, now + i * 1e-3, None, None))
        if len(batch) == 1000:
            store.submit_many(batch)
            batch = []
    if batch:
        store.submit_many(batch)
    store.close()
    return time.perf_counter() - t0


def median(values: list[float]) -> float:
    return round(statistics.median(values), 1)


def measure(pool: Pool, runs: int, shots: Path | None) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    if executable is None:
        raise SystemExit("no Chromium: apt-get install chromium (or set GPUPOOL_CHROMIUM)")
    base = f"http://127.0.0.1:{pool.port}/"
    results: dict[str, Any] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--headless", "--disable-gpu"]
        )
        try:
            for route in ("queue", "gpus"):
                seen: list[dict[str, Any]] = []
                for run in range(runs):
                    context = browser.new_context(viewport={"width": 1440, "height": 900})
                    page = context.new_page()
                    page.goto(f"{base}#/{route}")
                    page.wait_for_selector(f'body[data-ready="{route}"]', timeout=60_000)
                    seen.append(page.evaluate(PAGE_TIMINGS))
                    if shots is not None and run == 0:
                        shots.mkdir(parents=True, exist_ok=True)
                        page.screenshot(path=str(shots / f"{route}-10k.png"), full_page=False)
                    context.close()
                results[route] = summarize(seen)
            results["daemon_cpu_share"] = polling_cost(browser, base, pool)
        finally:
            browser.close()
    return results


def summarize(seen: list[dict[str, Any]]) -> dict[str, Any]:
    fp = [s["paint"].get("first-paint") for s in seen]
    fcp = [s["paint"].get("first-contentful-paint") for s in seen]
    data = [s["data"] for s in seen if s["data"] is not None]
    requests: dict[str, list[float]] = {}
    for s in seen:
        for r in s["requests"]:
            requests.setdefault(r["path"], []).append(r["ms"])
    return {
        "first_paint_ms": {
            "median": median([v for v in fp if v]),
            "max": round(max(v for v in fp if v), 1),
        },
        "first_contentful_paint_ms": {
            "median": median([v for v in fcp if v]),
            "max": round(max(v for v in fcp if v), 1),
        },
        "data_ms": {"median": median(data), "max": round(max(data), 1)},
        "requests_ms_median": {path: median(ms) for path, ms in sorted(requests.items())},
        "runs": len(seen),
    }


def polling_cost(browser: Any, base: str, pool: Pool, seconds: float = 10.0) -> dict[str, float]:
    """The daemon's CPU share (of one core) over `seconds` with no page open, then with one
    queue page open and polling it (the difference is what a dashboard left open costs)."""
    assert pool.proc is not None
    stat = Path(f"/proc/{pool.proc.pid}/stat")

    def cpu_s() -> float:
        fields = stat.read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def share_over(wait: Any) -> float:
        c0, t0 = cpu_s(), time.monotonic()
        wait()
        return round((cpu_s() - c0) / (time.monotonic() - t0), 3)

    without = share_over(lambda: time.sleep(seconds))
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{base}#/queue")
    page.wait_for_selector('body[data-ready="queue"]', timeout=60_000)
    with_page = share_over(lambda: page.wait_for_timeout(seconds * 1000))  # it polls
    context.close()
    return {"no_page": without, "queue_page_open": with_page, "seconds": seconds}


def all_held(pool: Pool) -> bool:
    return all(g.jobs for node in pool.client.gpus().nodes for g in node.gpus)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=10_000, help="in the queue (a few run)")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--screenshot", type=Path, help="write a screenshot of each page here")
    args = p.parse_args()
    # Stopped supervisors may still write their jobs' exit records while it is removed.
    with tempfile.TemporaryDirectory(prefix="gpupool-paint-", ignore_cleanup_errors=True) as tmp:
        pool = Pool(
            Path(tmp) / "pool",
            gpus="8xA100-80GB",
            listen=f"127.0.0.1:{free_port()}",
            # The daemon's default poll (the harness's is 0.1 s, for fast tests).
            args=("--sample-interval", "1s", "--poll-interval", "0.5"),
        )
        fill_s = fill(pool.state_dir, args.jobs, USER)
        pool.start(timeout=300)
        try:
            wait_for(lambda: all_held(pool), 300, "every GPU to be held")
            results = measure(pool, args.runs, args.screenshot)
        finally:
            pool.cleanup()
    out = {
        "jobs": args.jobs,
        "fill_s": round(fill_s, 1),
        "chromium": chromium_path(),
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        **results,
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
