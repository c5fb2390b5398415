"""`gpupool gpus`: every GPU, who holds it, and how the GPUs are linked; then the backends'
nodes (Slurm, Ray, Kubernetes) as their engines last reported them, with the pool's jobs on
each, named as the pool names them everywhere: `BACKEND/node`."""

from __future__ import annotations

import argparse

from gpupool.cli.commands import OnPool, Parents, Subparsers
from gpupool.cli.render import Cell, fit, print_json, print_table, printable, shown
from gpupool.client import Client
from gpupool.client.pool_views import BackendNodeView, GpusView, GpuUsage, GpuView
from gpupool.core.gpu_health import HEALTH_DRAINER
from gpupool.core.units import format_size, plural

_NAMED = 8  # nodes named in the summary line; beyond, how many more
_JOBS_NAMED = 4  # the pool's jobs named in a backend node's JOBS cell; beyond, how many more
_REASON_COLUMNS = 48  # of a drain's reason in the JOB cell (`gpupool drains` shows it whole)
BACKEND_COLUMNS = ("NODE", "STATE", "GPUS", "BY THE POOL", "MODEL", "JOBS")


def register(sub: Subparsers, parents: Parents) -> None:
    p = sub.add_parser(
        "gpus", parents=[parents.common, parents.listing], help="GPUs, holders and NVLink peers"
    )
    p.set_defaults(handler=OnPool(cmd_gpus))


def cmd_gpus(client: Client, args: argparse.Namespace) -> int:
    pool = client.gpus()
    if args.json:
        print_json(pool.wire)
        return 0
    rows: list[tuple[Cell, ...]] = []
    for node in pool.nodes:
        for g in node.gpus:
            peers = ",".join(str(p) for p in g.nvlink_peers) or "-"
            util, used = _usage(g.usage, g.memory_bytes)
            rows.append((node.name, g.index, g.model, util, used, job_cell(g), peers))
    print_table(("NODE", "GPU", "MODEL", "UTIL", "MEMORY USED", "JOB", "NVLINK PEERS"), rows)
    print(f"\n{room_line(pool)}")
    drained = sum(g.drained is not None for n in pool.nodes for g in n.gpus)
    if drained:
        print(f"Drained: {plural(drained, 'GPU')}, not counted as free (`gpupool drains` says why)")
    if any(g.usage is not None and g.usage.simulated for n in pool.nodes for g in n.gpus):
        print(
            "\nUTIL and MEMORY USED are simulated: there is no NVML on a declared inventory; "
            "a job declares its use with GPUPOOL_SIMULATED_UTIL (0-100, busy, idle)."
        )
    if pool.note:
        print(f"\nNote: {pool.note}")
    print_backends(pool)
    return 0


def job_cell(g: GpuView) -> str:
    """The JOB cell: its holders ('12 (alice: train)', 'shared: 12 (alice, 20GiB), ...') or
    'free'; a drained GPU says so with the admin's reason: 'drained: fan' when no job holds it,
    '12 (alice: train) - draining: fan' while a job still runs there to its end; one the
    pool drained for a fault its health showed, 'failed: XID 79: ...'."""
    if g.shared:
        holder = "shared: " + ", ".join(
            f"{j.id} ({j.user}, {format_size(j.gpu_memory_bytes or 0)})" for j in g.jobs
        )
    elif g.job:
        name = fit(printable(g.job_name or ""), 32)
        holder = f"{g.job} ({g.user}: {name})"
    else:
        holder = ""
    if g.drained is None:
        return holder or "free"
    why = f": {fit(printable(g.drained.reason), _REASON_COLUMNS)}" if g.drained.reason else ""
    if g.drained.by == HEALTH_DRAINER:  # drained for a fault NVML reported (gpupool health)
        return f"{holder} - failed{why}" if holder else f"failed{why}"
    return f"{holder} - draining{why}" if holder else f"drained{why}"


def print_backends(pool: GpusView) -> None:
    """The backends' nodes in one table (nothing without backends), then a line for each
    backend whose nodes are not known, saying why."""
    rows = [backend_row(n) for b in pool.backends for n in b.nodes]
    if rows:
        print()
        print_table(BACKEND_COLUMNS, rows, limits={"NODE": 48, "STATE": 48})
    notes = backend_notes(pool)
    if notes:
        print()
        print("\n".join(notes))


def backend_row(node: BackendNodeView) -> tuple[Cell, ...]:
    """NODE, STATE (with the engine's words), GPUS used by anyone / total, BY THE POOL (its
    jobs' GPUs there), MODEL (with each GPU's memory), JOBS (the pool's, with their GPUs)."""
    state = f"{node.state} ({node.detail})" if node.detail else node.state
    model = node.gpu_model or "-"
    if node.gpu_memory_bytes:
        model += f" {format_size(node.gpu_memory_bytes)}"
    jobs = [f"{job_id} ({plural(gpus, 'GPU')})" for job_id, gpus in node.jobs]
    if len(jobs) > _JOBS_NAMED:
        jobs = [*jobs[:_JOBS_NAMED], f"and {len(jobs) - _JOBS_NAMED} more"]
    used = f"{node.gpus_used}/{node.gpus}"
    by_pool = f"{node.gpus_pool:g}"  # two halves of one GPU on Ray: 1; one half: 0.5
    return (node.name, state, used, by_pool, model, ", ".join(jobs) or "-")


def backend_notes(pool: GpusView) -> list[str]:
    """A line per backend whose nodes are not known (its engine could not be read, or not
    yet) or that has none, e.g. "Backend hpc: nodes not known: sinfo: timed out"."""
    notes = []
    for b in pool.backends:
        if b.problem:
            notes.append(f"Backend {b.name}: nodes not known: {shown(b.problem, 400)}")
        elif not b.nodes:
            notes.append(f"Backend {b.name}: its engine reports no nodes")
    return notes


def room_line(pool: GpusView) -> str:
    """The pool's free GPUs against the largest job that could start now, e.g. "Free: 8 of
    16 GPUs; the largest job that could start now: 4 GPUs (the free GPUs are spread over
    nodes: a 4, b 4)" (service/fragmentation.py)."""
    line = (
        f"Free: {pool.free_gpus} of {plural(pool.gpu_total, 'GPU')}; the largest job that "
        f"could start now: {plural(pool.largest_startable_gpus, 'GPU')}"
    )
    if pool.free_gpus > pool.largest_startable_gpus:
        spread = [f"{n.name} {n.free_gpus}" for n in pool.nodes if n.free_gpus]
        if len(spread) > _NAMED:
            spread = [*spread[:_NAMED], f"and {plural(len(spread) - _NAMED, 'more node')}"]
        line += f" (the free GPUs are spread over nodes: {', '.join(spread)})"
    return line


def _usage(usage: GpuUsage | None, memory_bytes: int) -> tuple[str, str]:
    """UTIL and MEMORY USED cells: '-' where not sampled or not reported; memory held by
    processes that are not gpupool jobs' is named."""
    if usage is None:
        return "-", f"- / {format_size(memory_bytes)}"
    util = "-" if usage.utilization_pct is None else f"{usage.utilization_pct:.0f}%"
    total = usage.memory_total_bytes or memory_bytes
    used = "-" if usage.memory_used_bytes is None else format_size(usage.memory_used_bytes)
    cell = f"{used} / {format_size(total)}"
    if usage.foreign_memory_bytes:
        cell += f" ({format_size(usage.foreign_memory_bytes)} not gpupool's)"
    return util, cell
