"""`gpupool gpus`: every GPU, who holds it, and how the GPUs are linked."""

from __future__ import annotations

import argparse

from gpupool.cli.render import fit, print_json, print_table, printable
from gpupool.client import Client
from gpupool.core.units import format_size


def cmd_gpus(client: Client, args: argparse.Namespace) -> int:
    data = client.gpus()
    if args.json:
        print_json(data)
        return 0
    rows = []
    for node in data["nodes"]:
        for g in node["gpus"]:
            if g.get("shared"):
                holder = "shared: " + ", ".join(
                    f"{j['id']} ({j['user']}, {format_size(j['gpu_memory_bytes'] or 0)})"
                    for j in g["jobs"]
                )
            elif g["job"]:
                name = fit(printable(g["job_name"] or ""), 32)
                holder = f"{g['job']} ({g['user']}: {name})"
            else:
                holder = "free"
            peers = ",".join(str(p) for p in g["nvlink_peers"]) or "-"
            rows.append(
                (
                    node["name"],
                    g["index"],
                    g["model"],
                    format_size(g["memory_bytes"]),
                    holder,
                    peers,
                )
            )
    print_table(("NODE", "GPU", "MODEL", "MEMORY", "JOB", "NVLINK PEERS"), rows)
    if data.get("note"):
        print(f"\nNote: {data['note']}")
    return 0
