"""`gpupool plan`: the infrastructure playbook's arithmetic from one command (docs/plan.md).

    gpupool plan cost --capex 8000 --cloud-rate 1.5
    gpupool plan power --volts 208 --amps 60 --phases 3
    gpupool plan network --endpoints 216 --radix 36
    gpupool plan scaling --params 25557032 --gpus 8 --bandwidth 10GB/s
    gpupool plan memory --params 7.5e9 --gpus 64 --zero 3
    gpupool plan train --params 175e9 --tokens 300e9 --gpus 1024 --gpu A100-80GB --mfu 0.4

Each sub-command lives in cli/plan/<name>.py with `add_arguments(parser)` and `run(args) -> int`
(the `PlanVerb` protocol); the arithmetic itself is in plan/<name>.py. Offline: no daemon is needed, except for
`plan cost --from-usage`, which asks the running pool for its job history.
"""

from __future__ import annotations

import argparse
import sys
from typing import Protocol

from gpupool.cli.commands import Offline, OfflineHandler, Parents, Subparsers
from gpupool.cli.plan import catalog as plan_catalog
from gpupool.cli.plan import cost as plan_cost
from gpupool.cli.plan import memory as plan_memory
from gpupool.cli.plan import network as plan_network
from gpupool.cli.plan import power as plan_power
from gpupool.cli.plan import scaling as plan_scaling
from gpupool.cli.plan import train as plan_train
from gpupool.cli.plan.common import add_common_flags


class PlanVerb(Protocol):
    """A cli/plan/<name>.py module (heavy imports stay inside `run`)."""

    def add_arguments(self, p: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


SUBCOMMANDS: dict[str, tuple[PlanVerb, str]] = {
    "catalog": (
        plan_catalog,
        "the hardware catalog: GPUs, servers, interconnects, cloud prices (with sources)",
    ),
    "cost": (plan_cost, "on-prem vs cloud: annual cost, break-even utilization and hours, payback"),
    "power": (plan_power, "circuit and PDU capacity, servers per PDU and per rack, plug types"),
    "network": (
        plan_network,
        "leaf-spine / fat-tree sizing: leaves, spines, cables, director switches",
    ),
    "scaling": (
        plan_scaling,
        "data-parallel step time and speedup per GPU count: add GPUs or not?",
    ),
    "memory": (
        plan_memory,
        "training memory per GPU (Adam, ZeRO 1-3, activations) and which GPUs fit",
    ),
    "train": (
        plan_train,
        "training time from 6 x params x tokens, and a compute-optimal model for a budget",
    ),
}


def register(sub: Subparsers, parents: Parents) -> None:
    """`parents.common` carries --state-dir/--url, which only `plan cost --from-usage` reads."""
    p = sub.add_parser(
        "plan",
        help="cost, power, network, scaling, memory and training-time arithmetic",
        description="The infrastructure playbook as arithmetic, with sources (docs/plan.md).",
    )
    verbs = p.add_subparsers(dest="plan_verb", metavar="WHAT")
    verbs.required = True
    for name, (verb, help_text) in SUBCOMMANDS.items():
        sp = verbs.add_parser(name, parents=[parents.common], help=help_text, description=help_text)
        sp.set_defaults(handler=Offline(_runner(name, verb)))
        add_common_flags(sp)
        verb.add_arguments(sp)


def _runner(name: str, verb: PlanVerb) -> OfflineHandler:
    def run(args: argparse.Namespace) -> int:
        from gpupool.plan.quantity import PlanError

        try:
            if getattr(args, "plot", None):
                from gpupool.cli.plan.common import check_plot_path

                check_plot_path(args.plot)
            return verb.run(args)
        except PlanError as e:
            print(f"gpupool plan {name}: {e}", file=sys.stderr)
            return 2

    return run
