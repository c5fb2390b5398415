"""`gpupool gpus`: every GPU, who holds it, and how the GPUs are linked."""

from __future__ import annotations

import argparse

from gpupool.cli.commands import OnPool, Parents, Subparsers
from gpupool.cli.render import Cell, fit, print_json, print_table, printable
from gpupool.client import Client
from gpupool.core.units import format_size


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
            if g.shared:
                holder = "shared: " + ", ".join(
                    f"{j.id} ({j.user}, {format_size(j.gpu_memory_bytes or 0)})" for j in g.jobs
                )
            elif g.job:
                name = fit(printable(g.job_name or ""), 32)
                holder = f"{g.job} ({g.user}: {name})"
            else:
                holder = "free"
            peers = ",".join(str(p) for p in g.nvlink_peers) or "-"
            rows.append((node.name, g.index, g.model, format_size(g.memory_bytes), holder, peers))
    print_table(("NODE", "GPU", "MODEL", "MEMORY", "JOB", "NVLINK PEERS"), rows)
    if pool.note:
        print(f"\nNote: {pool.note}")
    return 0
