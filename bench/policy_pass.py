"""One scheduling pass (`policy.decide`) over a large queue: median and p99 pass time.

The cluster: 128 nodes x 8 GPUs (NVLink islands of 4, as the demo inventory), partly busy
with running jobs that have time limits, and 10,000 pending jobs of 1, 2, 4 and 8 GPUs and
fractional requests (0.25, 0.5 of a GPU, 20 GiB) from 4 projects and 40 users with decayed
usage, mixed priority classes and time limits. Two scenarios: without project quotas, and
with the 4 projects holding quotas of 256 GPUs each (borrowing and reclaim active).
A third scenario, `mixed_requests`, asks for what the other two do not: GPU types on a
pool of two models, CPUs and memory on nodes that declare them, fractional GPUs (a fraction
or GPU memory), with quotas; it is there for its decisions more than its time.
Baseline in the same run: the same snapshot through a plain first-fit FIFO pass written
here (no backfill, no topology, no fair share): what the policy's extra work costs.

Each scenario's `decisions` is a SHA-256 over its decision: every start (job, node, GPUs,
memory granted, other nodes), every waiting job's code, the reservations, the estimated
starts and the preemptions (victim, for whom): equal before and after a refactor means the
same decisions (the words of the messages are not in it: they are rendered, and may change).
Prints one JSON object. Usage: python bench/policy_pass.py [--pending 10000] [--passes 20]
"""

from __future__ import annotations

import argparse
import hashlib
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
from gpupool.policy import Decision, PendingJob, RunningJob, Snapshot, decide  # noqa: E402
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


def mixed_node(name: str, model: str) -> Node:
    base = node(name)
    gpus = tuple(Gpu(g.index, model, g.memory_bytes, numa_node=g.numa_node) for g in base.gpus)
    return Node(name, gpus, base.links, cpus=64, memory_bytes=512 * GIB)


def mixed_snapshot(n_pending: int, seed: int, busy: float = 0.6) -> Snapshot:
    """GPU types, CPUs, memory and fractional GPUs, with quotas (module docstring)."""
    rng = random.Random(seed)
    nodes = tuple(mixed_node(f"m{i:03d}", "A100-80GB" if i % 2 else "H100-80GB") for i in range(64))
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
                    Resources(gpus=size, cpus=4 * size, mem_bytes=32 * GIB * size),
                    now - rng.uniform(0, 7200),
                    200,
                    rng.choice(users),
                    rng.choice(projects),
                    rng.choice([3600.0, 4 * 3600.0, None]),
                )
            )
            jid += 1
        if free and rng.random() < 0.5:  # a shared GPU
            running.append(
                RunningJob(
                    jid,
                    n.name,
                    (free[0],),
                    Resources(gpus=1, gpu_fraction=0.5),
                    now - rng.uniform(0, 7200),
                    200,
                    rng.choice(users),
                    rng.choice(projects),
                    3600.0,
                    gpu_memory_bytes=40 * GIB,
                )
            )
            jid += 1
    pending = []
    classes = list(PRIORITY_CLASSES.values())
    for _ in range(n_pending):
        kind = rng.random()
        if kind < 0.15:
            res = Resources(gpus=1, gpu_fraction=rng.choice([0.25, 0.5]))
        elif kind < 0.25:
            res = Resources(gpus=1, gpu_memory_bytes=20 * GIB)
        else:
            size = rng.choices([1, 2, 4, 8], weights=[60, 20, 12, 8])[0]
            res = Resources(
                gpus=size,
                gpu_type=rng.choice([None, None, "A100", "H100"]),
                cpus=rng.choice([None, 4 * size, 16 * size]),
                mem_bytes=rng.choice([None, 32 * GIB * size, 100 * GIB * size]),
            )
        pending.append(
            PendingJob(
                jid,
                res,
                rng.choice(classes),
                now - rng.uniform(0, 86400),
                rng.choice(users),
                rng.choice(projects),
                rng.choice([600.0, 3600.0, 86400.0, None]),
                preemptible=rng.random() < 0.8,
            )
        )
        jid += 1
    usage = Usage(by_project={p: rng.uniform(0, 1e7) for p in projects})
    quotas = {p: Project(p, quota=96.0) for p in projects}
    return Snapshot(nodes, tuple(pending), tuple(running), 1, usage=usage, projects=quotas)


def decisions(d: Decision) -> str:
    """A SHA-256 over the decision, less the words (module docstring)."""
    digest = hashlib.sha256()
    for s in sorted(d.starts, key=lambda s: s.job_id):
        digest.update(f"S{s.job_id},{s.node},{s.gpus},{s.gpu_memory_bytes},{s.more};".encode())
    for job_id in sorted(d.pending):
        digest.update(f"P{job_id},{d.pending[job_id].code.value};".encode())
    for r in d.reservations:
        digest.update(f"R{r.job_id},{r.node},{r.gpus},{r.time!r},{r.gpu_memory_bytes};".encode())
    for job_id in sorted(d.estimated_start):
        digest.update(f"E{job_id},{d.estimated_start[job_id]!r};".encode())
    for p in sorted(d.preemptions, key=lambda p: (p.job_id, p.for_job_id)):
        digest.update(f"X{p.job_id},{p.for_job_id};".encode())
    return digest.hexdigest()


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
    scenarios = (
        ("no_quotas", snapshot(args.pending, args.seed, False)),
        ("quotas_4_projects", snapshot(args.pending, args.seed, True)),
        ("mixed_requests", mixed_snapshot(args.pending, args.seed)),
    )
    for label, snap in scenarios:
        decide(snap, now)  # warm up
        ms, decision = timed(lambda snap=snap: decide(snap, now), args.passes)
        assert isinstance(decision, Decision)
        results[label] = {
            **stats(ms),
            "started": len(decision.starts),
            "reservations": len(decision.reservations),
            "preemptions": len(decision.preemptions),
            "decisions": decisions(decision),
        }
    snap = scenarios[1][1]
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
