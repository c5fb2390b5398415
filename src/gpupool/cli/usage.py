"""`gpupool usage`: accounting per user, project, GPU type or backend over a window (like Slurm's
`sreport cluster AccountUtilizationByUser`): GPU-hours allocated and used, the CPU-hours the
jobs' cgroups counted, efficiency, mean wait, GPU-hours lost to preemption and reclaimed from
idle jobs; under the table, the pool's GPU-hours idle while a job that could use them waited,
by cause. A table, CSV or JSON (CSV: the groups' rows only).

Used GPU-hours (and efficiency, energy) are measured on the pool's own GPUs only: a backend's
job (Slurm, Ray, Kubernetes) is not sampled, so a group whose allocated GPU-hours were all on
backends shows USED GPU-H as '-' (unknown, not 0), and a note under the table says how many
GPU-hours were on backends."""

from __future__ import annotations

import argparse
import csv
import sys

from gpupool.cli.commands import OnPool, Parents, Subparsers
from gpupool.cli.render import Cell, print_json, print_table
from gpupool.client import Client
from gpupool.client.usage_views import GroupUsageView, UsageReportView
from gpupool.core.units import format_duration

BY = ("user", "project", "gpu-type", "backend")
COLUMNS = (
    "JOBS",
    "ALLOC GPU-H",
    "USED GPU-H",
    "CPU-H",
    "EFFICIENCY",
    "MEAN WAIT",
    "PREEMPTED GPU-H",
    "IDLE RECLAIMED GPU-H",
    "ENERGY KWH",
)
# The causes of GPUs idle while jobs waited (policy/idle_waiting.py's IdleCause), in the
# order they are shown; a cause a newer daemon adds is shown after them.
IDLE_CAUSES = ("quota", "fragmentation", "reservation", "other")


def register(sub: Subparsers, parents: Parents) -> None:
    p = sub.add_parser(
        "usage",
        parents=[parents.common, parents.listing],
        help="GPU-hours allocated vs used, by user, project, GPU type or backend",
        description="Accounting over a window: GPU-hours allocated (held by jobs), used "
        "(utilization-weighted, from the GPU samples), CPU-hours (from the jobs' cgroups, "
        "charged when a run ends; '-' where none was counted), efficiency (used over the "
        "allocated time that was sampled), mean wait, GPU-hours lost to preemption, idle "
        "GPU-hours reclaimed; and for the pool, the GPU-hours idle while a job that could use "
        "them waited, by cause (quota, fragmentation, reservation, other). Used GPU-hours are "
        "measured on the pool's own GPUs only: '-' for a group whose GPU-hours were all on "
        "backends. --by gpu-type puts a backend's jobs under its name in brackets ([hpc]); "
        "--by backend groups by the backend that ran them ('local': the pool's own machine).",
    )
    p.add_argument("--by", choices=BY, default="user", help="group by (default: user)")
    p.add_argument("--since", default="30d", help="window back from now: 30d, 12h, 1w")
    p.add_argument("--csv", action="store_true", help="comma-separated, with a header row")
    p.set_defaults(handler=OnPool(cmd_usage))


def cmd_usage(client: Client, args: argparse.Namespace) -> int:
    since = args.since.strip()
    if since[-1:].lower() == "w" and since[:-1].replace(".", "", 1).isdigit():
        since = f"{float(since[:-1]) * 7:g}d"  # weeks, which durations elsewhere lack
    report = client.usage(args.by, since)
    if args.json:
        print_json(report.wire)
        return 0
    if args.csv:
        _print_csv(report)
        return 0
    rows: list[tuple[Cell, ...]] = [_cells(r) for r in report.rows]
    rows.append(_cells(report.total))
    print_table((args.by.upper(), *COLUMNS), rows)
    if report.idle_waiting_gpu_hours is not None:  # None: an older daemon
        print(f"\n{idle_waiting_line(report.idle_waiting_gpu_hours)}")
    unmeasured = report.total.backend_gpu_hours - report.total.backend_measured_gpu_hours
    if unmeasured > 1e-9:
        print(f"\n{backend_note(report.total.backend_gpu_hours, unmeasured)}")
    if report.simulated:
        print(
            "\nUSED, EFFICIENCY and ENERGY come from simulated samples (a declared inventory, "
            "no NVML): jobs declare their use with GPUPOOL_SIMULATED_UTIL."
        )
    return 0


def idle_waiting_line(by_cause: dict[str, float]) -> str:
    """`GPU-hours idle while jobs waited: 1.50 (quota 1.00, fragmentation 0.50, ...)`."""
    causes = [c for c in IDLE_CAUSES if c in by_cause]
    causes += sorted(set(by_cause) - set(IDLE_CAUSES))
    parts = ", ".join(f"{c} {by_cause[c]:.2f}" for c in causes)
    return f"GPU-hours idle while jobs waited: {sum(by_cause.values()):.2f} ({parts})"


def backend_note(backend_gpu_hours: float, unmeasured: float) -> str:
    """Why USED GPU-H leaves backends' jobs out (or shows '-'): the pool samples its own
    GPUs, and a backend's only where its engine measures them (Slurm's gres/gpuutil)."""
    if unmeasured >= backend_gpu_hours - 1e-9:
        said = f"{backend_gpu_hours:.2f} GPU-h on backends"
    else:
        said = f"{unmeasured:.2f} of {backend_gpu_hours:.2f} GPU-h on backends"
    return (
        "Used GPU-hours (and efficiency, energy) are measured on the pool's own GPUs, and on "
        f"a backend's where its engine measures them (Slurm's gres/gpuutil); not for {said}."
    )


def _used(r: GroupUsageView) -> str:
    """USED GPU-H: '-' where it measures nothing (all the group's hours on backends)."""
    return f"{r.used_gpu_hours:.2f}" if r.used_gpu_hours_measured else "-"


def _cells(r: GroupUsageView) -> tuple[Cell, ...]:
    eff = "-" if r.efficiency is None else f"{100 * r.efficiency:.0f}%"
    return (
        r.group,
        r.jobs,
        f"{r.allocated_gpu_hours:.2f}",
        _used(r),
        "-" if r.cpu_hours is None else f"{r.cpu_hours:.2f}",
        eff,
        format_duration(r.mean_wait_s),
        f"{r.preempted_gpu_hours:.2f}",
        f"{r.idle_reclaimed_gpu_hours:.2f}",
        f"{r.energy_kwh:.2f}",
    )


def _print_csv(report: UsageReportView) -> None:
    out = csv.writer(sys.stdout)
    out.writerow(
        [
            report.by,
            "jobs",
            "allocated_gpu_hours",
            "used_gpu_hours",
            "sampled_gpu_hours",
            "efficiency",
            "mean_wait_s",
            "preempted_gpu_hours",
            "idle_reclaimed_gpu_hours",
            "energy_kwh",
            "cpu_hours",  # last: added after scripts read these columns by position
            "backend_gpu_hours",  # and after it, in the order they were added
            "backend_measured_gpu_hours",
        ]
    )
    for r in (*report.rows, report.total):
        out.writerow(
            [
                r.group,
                r.jobs,
                r.allocated_gpu_hours,
                r.used_gpu_hours if r.used_gpu_hours_measured else "",
                r.sampled_gpu_hours,
                "" if r.efficiency is None else r.efficiency,
                "" if r.mean_wait_s is None else r.mean_wait_s,
                r.preempted_gpu_hours,
                r.idle_reclaimed_gpu_hours,
                r.energy_kwh,
                "" if r.cpu_hours is None else r.cpu_hours,
                r.backend_gpu_hours,
                r.backend_measured_gpu_hours,
            ]
        )
