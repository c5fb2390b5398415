"""health: each GPU's health as NVML reported it (api/health.py, core/gpu_health.py,
docs/operations.md): a row per GPU with its state and last event, and with --events the
events themselves (each GPU's last 10), newest first.

A GPU's state: "ok"; "degraded" (a GPU fault or clock throttling in the last hour, not
drained); "drained" (by an admin: `gpupool drain`); "failed" (drained by gpupool-health for a
GPU fault: `gpupool resume NODE:GPU` once it is fixed).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from gpupool.cli.commands import OnPool, Parents, Subparsers
from gpupool.cli.render import Cell, clock_time, print_json, print_table, shown
from gpupool.client import Client

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpupool.client.health_views import GpuHealthView, HealthEventView

HEALTH_COLUMNS = ("NODE", "GPU", "STATE", "LAST EVENT")
EVENTS_COLUMNS = ("TIME", "NODE", "GPU", "FAULT", "DETAIL")
FAILED_FOOTER = "Failed GPUs are drained by gpupool-health; gpupool resume NODE:GPU once fixed."
NO_GPUS = "This pool has no GPUs."
NO_EVENTS = "No health event recorded."


def register(sub: Subparsers, parents: Parents) -> None:
    p = sub.add_parser(
        "health",
        parents=[parents.common, parents.listing],
        help="each GPU's health (XID errors, ECC, throttling) and which failed",
        description="A row per GPU: its state (ok, degraded: a GPU fault or throttling in "
        "the last hour; drained: by an admin; failed: drained by gpupool-health for a GPU "
        "fault) and its last event. --events: the events, newest first.",
    )
    p.set_defaults(handler=OnPool(cmd_health))
    p.add_argument(
        "--events",
        action="store_true",
        help="list the events (each GPU's last 10), newest first",
    )


def cmd_health(client: Client, args: argparse.Namespace) -> int:
    from gpupool.client.health_views import health

    found = health(client)
    if args.json:
        print_json(found.wire)
        return 0
    if args.events:
        events = newest_first(found.gpus)
        if events:
            print_table(EVENTS_COLUMNS, events_rows(events), limits={"NODE": 32})
        else:
            print(NO_EVENTS)
    elif found.gpus:
        print_table(HEALTH_COLUMNS, health_rows(found.gpus), limits={"NODE": 32})
    else:
        print(NO_GPUS)
    if any(g.state == "failed" for g in found.gpus):
        print(FAILED_FOOTER)
    return 0


def last_event(g: GpuHealthView, now: float | None = None) -> str:
    """'XID 79: GPU has fallen off the bus (14:05:09)', or '-' for none."""
    if not g.events:
        return "-"
    e = g.events[0]
    return f"{shown(e.detail, 120)} ({clock_time(e.time, now)})"


def health_rows(gpus: Sequence[GpuHealthView], now: float | None = None) -> list[tuple[Cell, ...]]:
    """NODE, GPU, STATE, LAST EVENT (its detail and when: today's '14:05:09', else
    'Nov 21 14:05')."""
    return [(g.node, g.gpu, g.state, last_event(g, now)) for g in gpus]


def newest_first(gpus: Sequence[GpuHealthView]) -> list[HealthEventView]:
    """Every GPU's events, newest first (the daemon sends each GPU's last 10)."""
    events = [e for g in gpus for e in g.events]
    return sorted(events, key=lambda e: e.time, reverse=True)


def events_rows(
    events: Sequence[HealthEventView], now: float | None = None
) -> list[tuple[Cell, ...]]:
    """TIME, NODE, GPU, FAULT ("gpu", "job", "none"), DETAIL."""
    return [(clock_time(e.time, now), e.node, e.gpu, e.fault, e.detail) for e in events]
