"""`gpupool top`: a live view of the pool, as nvitop is of one machine: each GPU's use and
who holds it, then the head of the queue with why each job waits and when it should start.

Redrawn every --interval seconds until Ctrl-C; with --once, or when the output is not a
terminal, one frame is printed (as `top -n 1`), so it can be piped or kept in a log.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time

from gpupool.cli.commands import OnPool, Parents, Subparsers
from gpupool.cli.render import clock_time, fit, gpus_cell, print_table, printable, reason_cell
from gpupool.client import Client
from gpupool.client.pool_views import GpuUsage, GpuView
from gpupool.core.units import format_size

BAR = 10  # cells of a bar
PENDING_SHOWN = 10  # jobs of the queue under the GPUs
_HOME_AND_CLEAR = "\x1b[H\x1b[J"


def register(sub: Subparsers, parents: Parents) -> None:
    p = sub.add_parser(
        "top", parents=[parents.common], help="live view of the GPUs and the queue (like nvitop)"
    )
    p.set_defaults(handler=OnPool(cmd_top))
    p.add_argument(
        "--interval", type=float, default=2.0, metavar="SECONDS", help="redraw every (default 2)"
    )
    p.add_argument("--once", action="store_true", help="print one frame and exit")


def cmd_top(client: Client, args: argparse.Namespace) -> int:
    if args.interval <= 0:
        print("gpupool: --interval must be more than 0 seconds", file=sys.stderr)
        return 2
    if args.once or not sys.stdout.isatty():
        print(frame(client, time.time()), end="")
        return 0
    try:
        while True:
            sys.stdout.write(_HOME_AND_CLEAR + frame(client, time.time()))
            sys.stdout.flush()
            time.sleep(args.interval)  # the refresh period the user chose
    except KeyboardInterrupt:
        return 0


def frame(client: Client, now: float) -> str:
    """One screen: a summary line, the GPUs, the head of the queue."""
    pool = client.gpus()
    queue = client.job_page(states=["PENDING"], limit=PENDING_SHOWN, order="queue")
    gpus = [(node.name, g) for node in pool.nodes for g in node.gpus]
    utils = [
        g.usage.utilization_pct
        for _, g in gpus
        if g.usage is not None and g.usage.utilization_pct is not None
    ]
    held = sum(1 for _, g in gpus if g.jobs)
    mean = f"{sum(utils) / len(utils):.0f}%" if utils else "-"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print(
            f"gpupool top  {clock_time(now, now)}   GPUs held {held}/{len(gpus)}   "
            f"mean utilization {mean}   pending {queue.total}\n"
        )
        print_table(
            ("NODE", "GPU", "UTIL", "MEMORY", "POWER", "TEMP", "JOB"),
            [(node, g.index, *_use(g.usage, g.memory_bytes), _holder(g)) for node, g in gpus],
        )
        print()
        rows = [
            (j.id, fit(printable(j.user), 16), gpus_cell(j), reason_cell(j),
             clock_time(j.estimated_start, now))
            for j in queue.jobs
        ]  # fmt: skip
        if rows:
            more = queue.total - len(rows)
            print_table(("PENDING", "USER", "GPUS", "WAITING FOR", "EXPECTED START"), rows)
            if more > 0:
                print(f"... and {more} more (gpupool queue)")
        else:
            print("No job is waiting.")
        if any(g.usage is not None and g.usage.simulated for _, g in gpus):
            print("\nUse is simulated (a declared inventory): jobs declare GPUPOOL_SIMULATED_UTIL.")
    return out.getvalue()


def bar(share: float | None) -> str:
    """'[####......]' for 0.4; '[??????????]' when unknown."""
    if share is None:
        return "[" + "?" * BAR + "]"
    filled = round(min(max(share, 0.0), 1.0) * BAR)
    return "[" + "#" * filled + "." * (BAR - filled) + "]"


def _use(usage: GpuUsage | None, memory_bytes: int) -> tuple[str, str, str, str]:
    if usage is None:
        return "-", f"- / {format_size(memory_bytes)}", "-", "-"
    util = usage.utilization_pct
    total = usage.memory_total_bytes or memory_bytes
    used = usage.memory_used_bytes
    return (
        f"{bar(None if util is None else util / 100)} {'-' if util is None else f'{util:.0f}%'}",
        f"{bar(None if used is None else used / total)} "
        f"{'-' if used is None else format_size(used)} / {format_size(total)}",
        "-" if usage.power_w is None else f"{usage.power_w:.0f} W",
        "-" if usage.temperature_c is None else f"{usage.temperature_c:.0f} C",
    )


def _holder(g: GpuView) -> str:
    if not g.jobs:
        return "free"
    return ", ".join(
        f"{j.id} {fit(printable(j.user), 12)}: {fit(printable(j.name), 20)}" for j in g.jobs
    )
