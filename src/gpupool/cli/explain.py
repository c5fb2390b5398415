"""`gpupool why ID` and `gpupool queue --priority`: why a job waits, and when it will start."""

from __future__ import annotations

import argparse
import time
from typing import Any

from gpupool.cli.render import clock_time, elapsed, print_json, print_table
from gpupool.client import Client
from gpupool.core.units import format_duration, format_size

# The dimensions whose figures are bytes (policy/reasons.py's Dimension values).
_BYTES = ("gpu_memory", "memory")


def describe(job: dict[str, Any], now: float | None = None) -> list[str]:
    """The answer to "why is my job not running, and when will it?" as lines of text."""
    now = now or time.time()
    head = f"job {job['id']} ({job['name']}) is {job['state']}"
    state = job["state"]
    if state == "RUNNING":
        gpus = ",".join(map(str, job["gpus"])) or "no GPUs"
        return [
            f"{head} on {job['node']} (GPUs {gpus}) since {clock_time(job['start_time'])} "
            f"({elapsed(job, now)})"
        ]
    if state != "PENDING":
        last = job.get("events", [])[-1:] or [{"cause": ""}]
        return [f"{head}: {last[0]['cause']}"]
    lines = [f"{head} [{job['reason'] or 'waiting for the next scheduling pass'}]"]
    if job.get("why"):
        lines.append(f"  why: {job['why']}")
    binding = binding_text(job.get("wait"))
    if binding:
        lines.append(f"  binding: {binding}")
    lines.append(f"  expected start: {estimate_text(job, now)}")
    factors = job.get("priority_factors")
    if factors:
        lines.append(
            f"  priority: class {job['priority_name']} ({factors['class']}), "
            f"fair share {factors['fairshare']:.2f}, age {factors['age']:.2f}, "
            f"size {factors['size']:.2f} -> score {factors['score']:.0f}"
        )
    return lines


def binding_text(wait: dict[str, Any] | None) -> str:
    """The binding dimension of a waiting job and its figures, from the API's `wait`, e.g.
    "gpu_count on box: 4 requested, 1 free, 8 at most"; "" when none binds."""
    if not wait or not wait.get("dimension"):
        return ""
    dim = wait["dimension"]

    def figure(value: float) -> str:
        return format_size(int(value)) if dim in _BYTES else f"{value:g}"

    if wait.get("node"):
        where = f" on {wait['node']}"
    elif wait.get("project"):
        where = f" of project {wait['project']}"
    else:
        where = " across the pool"
    return (
        f"{dim}{where}: {figure(wait['requested'])} requested, {figure(wait['free'])} free, "
        f"{figure(wait['capacity'])} at most"
    )


def estimate_text(job: dict[str, Any], now: float) -> str:
    at = job.get("estimated_start")
    if at is None and job.get("reason") == "QuotaNeverFits":
        return "never, while its project's quota and limit stay as they are (see why)"
    if at is None:
        if job.get("reason") == "Priority":
            return "unknown: jobs ahead of it start first, and their starts are not known yet"
        if job.get("reason") == "Resources":
            return (
                "unknown: only the first job that cannot start gets a reservation and an "
                "estimate (EASY backfill); this one comes later in the queue"
            )
        return "unknown"
    if at <= now:
        return "at the next scheduling pass"
    return f"{clock_time(at, now)} (in {format_duration(at - now)})"


def cmd_why(client: Client, args: argparse.Namespace) -> int:
    job = client.job(args.job_id)
    if args.json:
        keys = (
            "id",
            "state",
            "reason",
            "why",
            "wait",
            "estimated_start",
            "reservation",
            "priority_factors",
            "begin_time",
        )
        print_json({k: job.get(k) for k in keys})
        return 0
    print("\n".join(describe(job)))
    return 0


def queue_order(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pending jobs the last pass ranked, in queue order (class, score, submit time, id:
    policy/ordering.py's key), as `queue --priority` lists them."""
    pending = [j for j in jobs if j["state"] == "PENDING" and j.get("priority_factors")]
    pending.sort(
        key=lambda j: (
            -j["priority_factors"]["class"],
            -j["priority_factors"]["score"],
            j["submit_time"],
            j["id"],
        )
    )
    return pending


def print_priorities(jobs: list[dict[str, Any]]) -> None:
    pending = queue_order(jobs)
    rows = [
        (
            j["id"],
            j["user"],
            j["project"],
            f"{j['priority_name']} ({f['class']})",
            f"{f['fairshare']:.3f}",
            f"{f['age']:.3f}",
            f"{f['size']:.3f}",
            f"{f['score']:.0f}",
        )
        for j in pending
        for f in [j["priority_factors"]]
    ]
    if not rows:
        print("No pending jobs.")
        return
    print_table(("ID", "USER", "PROJECT", "CLASS", "FAIRSHARE", "AGE", "SIZE", "SCORE"), rows)
