"""`gpupool plan`: the infrastructure playbook's arithmetic from one command (docs/plan.md).

    gpupool plan cost --capex 8000 --cloud-rate 1.5
    gpupool plan power --volts 208 --amps 60 --phases 3
    gpupool plan network --endpoints 216 --radix 36
    gpupool plan scaling --params 25557032 --gpus 8 --bandwidth 10GB/s
    gpupool plan memory --params 7.5e9 --gpus 64 --zero 3
    gpupool plan train --params 175e9 --tokens 300e9 --gpus 1024 --gpu A100-80GB --mfu 0.4

Each sub-command lives in cli/plan_<name>.py with `add_arguments(parser)` and `run(args) -> int`;
the arithmetic itself is in plan/<name>.py. Offline: no daemon is needed, except for
`plan cost --from-usage`, which asks the running pool for its job history.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from gpupool.cli.plan_common import add_common_flags

SUBCOMMANDS: dict[str, str] = {
    "catalog": "the hardware catalog: GPUs, servers, interconnects, cloud prices (with sources)",
    "cost": "on-prem vs cloud: annual cost, break-even utilization and hours, payback",
    "power": "circuit and PDU capacity, servers per PDU and per rack, plug types",
    "network": "leaf-spine / fat-tree sizing: leaves, spines, cables, director switches",
    "scaling": "data-parallel step time and speedup per GPU count: add GPUs or not?",
    "memory": "training memory per GPU (Adam, ZeRO 1-3, activations) and which GPUs fit",
    "train": "training time from 6 x params x tokens, and a compute-optimal model for a budget",
}


def _module(name: str):  # type: ignore[no-untyped-def]
    return importlib.import_module(f"gpupool.cli.plan_{name}")


def add_arguments(p: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    """`common` carries --state-dir/--url, which only `plan cost --from-usage` reads."""
    sub = p.add_subparsers(dest="plan_verb", metavar="WHAT")
    sub.required = True
    for name, help_text in SUBCOMMANDS.items():
        sp = sub.add_parser(name, parents=[common], help=help_text, description=help_text)
        add_common_flags(sp)
        _module(name).add_arguments(sp)


def run(args: argparse.Namespace) -> int:
    from gpupool.plan.quantity import PlanError

    try:
        if getattr(args, "plot", None):
            from gpupool.cli.plan_common import check_plot_path

            check_plot_path(args.plot)
        return int(_module(args.plan_verb).run(args))
    except PlanError as e:
        print(f"gpupool plan {args.plan_verb}: {e}", file=sys.stderr)
        return 2
