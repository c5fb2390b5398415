"""`gpupool plan power`: circuit and PDU capacity, servers per PDU and per rack, plug types.

    gpupool plan power --volts 208 --amps 60 --phases 3
    gpupool plan power --volts 208 --amps 60 --phases 3 --server DGX-A100 --psus 6
    gpupool plan power --volts 230 --amps 32 --server-kw 2.2 --pdus-per-rack 4

The arithmetic is gpupool.plan.power; this module parses flags, resolves --server through the
catalog and prints. Nothing heavy is imported at module top: the parser is built for every
gpupool command.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from gpupool.cli.plan.common import named


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--volts", required=True, help="circuit voltage (line-to-line for 3-phase)")
    p.add_argument("--amps", required=True, help="breaker / PDU input current rating in A")
    p.add_argument("--phases", default="1", help="1 (P = V x I) or 3 (P = sqrt(3) x V x I)")
    p.add_argument(
        "--derate", default="0.8", help="continuous-load fraction of the rating (NEC: 0.8)"
    )
    p.add_argument(
        "--power-factor", default="1", help="kW per kVA of the load (default 1: kW = kVA)"
    )
    p.add_argument("--pdus-per-rack", default="2", help="PDUs (circuits) per rack (default 2: A+B)")
    draw = p.add_mutually_exclusive_group()
    draw.add_argument("--server-kw", help="one server's maximum draw in kW")
    draw.add_argument("--server", help="a catalog server (its max draw), e.g. DGX-A100")
    p.add_argument(
        "--psus", help="the server's power supplies (cords), assumed N+N redundant, e.g. 6"
    )


def _number(text: str, flag: str) -> float:
    from gpupool.plan.quantity import PlanError

    try:
        value = float(text)
    except ValueError:
        raise PlanError(f"{flag}: not a number: {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise PlanError(f"{flag} must be a positive number, got {text!r}")
    return value


def _whole(text: str, flag: str) -> int:
    from gpupool.plan.quantity import PlanError

    value = _number(text, flag)
    if value != int(value):
        raise PlanError(f"{flag} must be a whole number, got {text!r}")
    return int(value)


def _inputs(args: argparse.Namespace) -> dict[str, Any]:
    from gpupool.cli.plan.common import fraction
    from gpupool.plan.quantity import PlanError

    if args.phases not in ("1", "3"):
        raise PlanError(f"--phases must be 1 or 3, got {args.phases!r}")
    inputs: dict[str, Any] = {
        "volts": _number(args.volts, "--volts"),
        "amps": _number(args.amps, "--amps"),
        "phases": int(args.phases),
        "derate": fraction(_number(args.derate, "--derate"), "--derate"),
        "power_factor": fraction(_number(args.power_factor, "--power-factor"), "--power-factor"),
        "pdus_per_rack": _whole(args.pdus_per_rack, "--pdus-per-rack"),
        "server": None,
        "server_kw": None,
        "psus": _whole(args.psus, "--psus") if args.psus is not None else None,
    }
    if args.server_kw is not None:
        inputs["server_kw"] = _number(args.server_kw, "--server-kw")
    elif args.server is not None:
        from gpupool.cli.plan.common import load_catalog

        server = named(load_catalog(args).server, args.server, "--server")
        inputs["server"] = server.name
        inputs["server_kw"] = server.max_power_kw
    if inputs["psus"] is not None and inputs["server_kw"] is None:
        raise PlanError("--psus needs a server draw: give --server-kw or --server")
    return inputs


def _kw(value: float) -> str:
    return f"{value:,.2f}"


def _verdict(plan: Any) -> str:
    phase = "3-phase" if plan.phases == 3 else "single-phase"
    text = (
        f"{plan.volts:g} V {phase} {plan.amps:g} A: {plan.kva:,.2f} kVA, "
        f"{plan.kva_derated:,.2f} kVA after x{plan.derate:g} derating "
        f"({plan.kw_derated:,.2f} kW at power factor {plan.power_factor:g})"
    )
    if plan.fit is not None:
        fit = plan.fit
        text += (
            f"; {fit.servers_per_pdu} x {plan.server_kw:g} kW servers per PDU, "
            f"{fit.servers_per_rack} per rack of {plan.pdus_per_rack} PDUs, "
            f"{fit.servers_per_rack_redundant} with A+B redundancy"
        )
    return text


def _assumptions(plan: Any, inputs: dict[str, Any]) -> dict[str, str]:
    return {
        "formula": "P = sqrt(3) x V x I (V line-to-line)" if plan.phases == 3 else "P = V x I",
        "derate": f"x{plan.derate:g}: continuous loads at 80% of the rating (NEC 210.19/210.20)",
        "power_factor": f"{plan.power_factor:g}: kW = kVA x power factor",
        "servers_per_rack": "whole servers per PDU x PDUs; with A+B feeds each server's full "
        "load must fit on one PDU, so each pair of PDUs carries what one can",
        "plugs": "C13/C14 ~2.5 kW per cord, C19/C20 ~3.2 kW (the plug table of Lambda's "
        '"Building a GPU cluster", at 200-240 V, derated); '
        "PSUs assumed N+N redundant: half the cords carry the whole load",
        "server": f"{inputs['server']} from the catalog (max draw)"
        if inputs["server"]
        else "--server-kw"
        if inputs["server_kw"]
        else "none given: circuit capacity only",
    }


def _plugs_rows(plan: Any) -> list[list[Any]]:
    rows = []
    for plug in plan.plugs:
        fits = "" if plug.fits_given_psus is None else ("yes" if plug.fits_given_psus else "no")
        per_cord = plug.kw_per_cord_given_psus
        rows.append(
            [
                plug.name,
                f"{plug.kw_per_cord:g}",
                plug.cords_per_server,
                plug.cords_per_server_redundant,
                "" if per_cord is None else _kw(per_cord),
                fits,
            ]
        )
    return rows


def _draw_plot(plan: Any) -> Any:
    from gpupool.plan.power import rack_fit

    def draw(fig: Any) -> None:
        ax = fig.add_subplot()
        top = max(15.0, 1.5 * (plan.server_kw or 0.0))
        kws = [1.0 + i * (top - 1.0) / 400 for i in range(401)]
        fits = [rack_fit(plan.kw_derated, plan.pdus_per_rack, k) for k in kws]
        ax.step(kws, [f.servers_per_rack for f in fits], where="post", label="all PDUs loaded")
        ax.step(
            kws,
            [f.servers_per_rack_redundant for f in fits],
            where="post",
            label="A+B redundant",
        )
        if plan.server_kw:
            ax.axvline(plan.server_kw, color="grey", linestyle="--", label=f"{plan.server_kw:g} kW")
        ax.set_ylim(bottom=0)
        ax.set_xlabel("server draw (kW)")
        ax.set_ylabel("servers per rack")
        ax.set_title(
            f"{plan.pdus_per_rack} PDUs of {plan.kw_derated:,.2f} kW "
            f"({plan.volts:g} V, {plan.phases}-phase, {plan.amps:g} A, x{plan.derate:g})"
        )
        ax.legend()

    return draw


def run(args: argparse.Namespace) -> int:
    from gpupool.cli.plan.common import print_json, print_rich_table, save_plot
    from gpupool.plan.power import power_plan

    inputs = _inputs(args)
    plan = power_plan(
        inputs["volts"],
        inputs["amps"],
        inputs["phases"],
        inputs["derate"],
        inputs["power_factor"],
        inputs["pdus_per_rack"],
        inputs["server_kw"],
        inputs["psus"],
    )
    assumptions = _assumptions(plan, inputs)
    verdict = _verdict(plan)
    if args.json:
        from gpupool.cli.plan.common import jsonable

        print_json(
            {"inputs": inputs, "assumptions": assumptions, **jsonable(plan), "verdict": verdict}
        )
    else:
        phase = "3-phase" if plan.phases == 3 else "single-phase"
        print_rich_table(
            f"Circuit: {plan.volts:g} V {phase}, {plan.amps:g} A",
            ["figure", "value", "how"],
            [
                ["kVA (rating)", _kw(plan.kva), assumptions["formula"]],
                ["kVA derated", _kw(plan.kva_derated), f"x {plan.derate:g}"],
                ["kW per PDU", _kw(plan.kw_derated), f"x power factor {plan.power_factor:g}"],
                ["amps derated", f"{plan.amps_derated:g}", f"{plan.amps:g} A x {plan.derate:g}"],
                ["kW per rack", _kw(plan.rack_kw), f"{plan.pdus_per_rack} PDUs"],
                ["kW per rack (A+B)", _kw(plan.rack_kw_redundant), "one PDU per pair"],
            ],
        )
        print_rich_table(
            "Servers per PDU and per rack, by server draw",
            ["server kW", "per PDU", "per rack", "per rack (A+B)"],
            [
                [
                    f"{f.server_kw:g}" + (" <-" if f.server_kw == plan.server_kw else ""),
                    f.servers_per_pdu,
                    f.servers_per_rack,
                    f.servers_per_rack_redundant,
                ]
                for f in plan.sweep
            ],
        )
        if plan.server_kw:
            print_rich_table(
                f"Plugs for a {plan.server_kw:g} kW server",
                ["plug", "kW/cord", "cords", "cords (N+N)", "kW/cord, own PSUs", "fits"],
                _plugs_rows(plan),
            )
        print("Assumptions: " + "; ".join(f"{k}: {v}" for k, v in assumptions.items()))
        print(verdict)
    if args.plot:
        path = save_plot(args.plot, _draw_plot(plan))
        print(f"plot written to {path}", file=sys.stderr)
    return 0
