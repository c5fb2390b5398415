"""One scheduling pass (`policy.decide`) over a large queue: median and p99 pass time.

The cluster: 128 nodes x 8 GPUs (NVLink islands of 4, as the demo inventory), partly busy
with running jobs that have time limits, and 10,000 pending jobs of 1, 2, 4 and 8 GPUs and
fractional requests (0.25, 0.5 of a GPU, 20 GiB) from 4 projects and 40 users with decayed
usage, mixed priority classes and time limits. Two scenarios: without project quotas, and
with the 4 projects holding quotas of 256 GPUs each (borrowing and reclaim active).
Baseline in the same run: the same snapshot through a plain first-fit FIFO pass written
here (no backfill, no topology, no fair share): what the policy's extra work costs.
Prints one JSON object. Usage: python bench/policy_pass.py [--pending 10000] [--passes 20]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from gpupool.core.hardware import Gpu, Link, LinkKind, Node  # noqa: E402
from gpupool.core.job import PRIORITY_CLASSES, Resources  # noqa: E402
from gpupool.core.project import Project  # noqa: E402
from gpupool.policy import PendingJob, RunningJob, Snapshot, decide  # noqa: E402
from gpupool.policy.snapshot import Usage  # noqa: E402

GIB = 1 << 30


def node(name: str) -> Node:
    gpus = tuple(Gpu(i, "A100-80GB", 80 * GIB, numa_node=i // 4) for i in range(8))
    links = []
    for a in range(8):
        for b in range(a + 1, 8):
            kind = LinkKind.NVLINK if a // 4 == b // 4 else LinkKind.SYS
            links.append(Link(a, b, kind, 12 if kind is LinkKind.NVLINK else 0))
    return Node(name, gpus, tuple(links))


def snapshot(n_pending: int, seed: int, with_quotas: bool, busy: float = 0.6) -> Snapshot:
    rng = random.Random(seed)
    nodes = tuple(node(f"n{i:03d}") for i in range(128))
    now = 1_000_000.0
    projects = ["vision", "nlp", "speech", "rl"]
    users = [f"u{i}" for i in range(40)]
    running = []
    jid = 1
    for n in nodes:
        free = list(range(8))
        while len(free) > 8 * (1 - busy):
            size = rng.choice([1, 1, 2, 4])
            if size > len(free):
                break
            gpus, free = tuple(free[:size]), free[size:]
            running.append(
                RunningJob(
                    jid,
                    n.name,
                    gpus,
                    Resources(gpus=size),
                    now - rng.uniform(0, 7200),
                    200,
                    rng.choice(users),
                    rng.choice(projects),
                    rng.choice([3600.0, 4 * 3600.0, None]),
                )
            )
            jid += 1
    pending = []
    classes = list(PRIORITY_CLASSES.values())
    for _ in range(n_pending):
        size = rng.choices([1, 2, 4, 8], weights=[60, 20, 12, 8])[0]
        pending.append(
            PendingJob(
                jid,
                Resources(gpus=size),
                rng.choice(classes),
                now - rng.uniform(0, 86400),
                rng.choice(users),
                rng.choice(projects),
                rng.choice([600.0, 3600.0, 86400.0, None]),
            )
        )
        jid += 1
    usage = Usage(
        by_project={p: rng.uniform(0, 1e7) for p in projects},
        by_user={(p, u): rng.uniform(0, 1e6) for p in projects for u in users},
    )
    quotas = {p: Project(p, quota=256.0) for p in projects} if with_quotas else {}
    return Snapshot(nodes, tuple(pending), tuple(running), 1, usage=usage, projects=quotas)


def fifo_first_fit(snap: Snapshot) -> int:
    """The baseline: FIFO order, first node with enough free GPUs, lowest indices."""
    free = {n.name: 8 for n in snap.nodes}
    for r in snap.running:
        free[r.node] -= len(r.gpus)
    started = 0
    for job in sorted(snap.pending, key=lambda j: (j.submit_time, j.id)):
        for name, count in free.items():
            if count >= job.resources.gpus:
                free[name] = count - job.resources.gpus
                started += 1
                break
        else:
            break
    return started


def timed(fn, passes: int) -> tuple[list[float], object]:  # type: ignore[no-untyped-def]
    out, result = [], None
    for _ in range(passes):
        t0 = time.perf_counter()
        result = fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out, result


def stats(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    return {
        "median_ms": round(statistics.median(ms), 2),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(0.99 * (len(ordered) - 1) + 0.5))], 2),
        "passes": len(ms),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--passes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    now = 1_000_000.0
    results = {}
    for label, with_quotas in (("no_quotas", False), ("quotas_4_projects", True)):
        snap = snapshot(args.pending, args.seed, with_quotas)
        decide(snap, now)  # warm up
        ms, decision = timed(lambda snap=snap: decide(snap, now), args.passes)
        results[label] = {
            **stats(ms),
            "started": len(decision.starts),  # type: ignore[attr-defined]
            "reservations": len(decision.reservations),  # type: ignore[attr-defined]
            "preemptions": len(decision.preemptions),
        }  # type: ignore[attr-defined]
    fifo_ms, fifo_started = timed(lambda: fifo_first_fit(snap), args.passes)
    free = sum(len(n.gpus) for n in snap.nodes) - sum(len(r.gpus) for r in snap.running)
    print(
        json.dumps(
            {
                "benchmark": "policy_pass",
                "cluster": {
                    "nodes": len(snap.nodes),
                    "gpus": 8 * len(snap.nodes),
                    "free_gpus": free,
                    "running_jobs": len(snap.running),
                    "pending_jobs": len(snap.pending),
                },
                "decide": results,
                "baseline_fifo_first_fit": {**stats(fifo_ms), "started": fifo_started},
                "target": {"median_ms": 50},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
