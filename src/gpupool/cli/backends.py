"""`gpupool backends`: the local pool and the pool's backends (Slurm, Ray, Kubernetes), with
their health, what they can do and their active jobs (docs/backends.md)."""

from __future__ import annotations

import argparse

from gpupool.cli.commands import OnPool, Parents, Subparsers
from gpupool.cli.render import Cell, print_json, print_table, printable
from gpupool.client import Client
from gpupool.client.pool_views import BackendsView
from gpupool.core.backends import summary_line


def register(sub: Subparsers, parents: Parents) -> None:
    p = sub.add_parser(
        "backends",
        parents=[parents.common, parents.listing],
        help="the pool's backends (Slurm, Ray, Kubernetes) and their health",
    )
    p.set_defaults(handler=OnPool(cmd_backends))


def cmd_backends(client: Client, args: argparse.Namespace) -> int:
    view = client.backends()
    if args.json:
        print_json(view.wire)
        return 0
    print_table(*backends_table(view))
    return 0


def backends_table(view: BackendsView) -> tuple[tuple[str, ...], list[tuple[Cell, ...]]]:
    """The header and rows `gpupool backends` prints."""
    rows: list[tuple[Cell, ...]] = []
    for b in view.backends:
        rows.append(
            (
                b.name,
                b.kind,
                "yes" if b.reachable else "NO",
                ",".join(b.capabilities) or "-",
                b.jobs,
                printable(summary_line(b.summary)),
            )
        )
    return ("NAME", "KIND", "REACHABLE", "CAPABILITIES", "JOBS", "SUMMARY"), rows
