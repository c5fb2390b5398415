"""`gpupool plan cost`: on-prem vs cloud, annual costs, break-even utilization, hours, payback.

    gpupool plan cost --capex 8000 --cloud-rate 1.5
    gpupool plan cost --capex 109008 --colo-annual 15000 --cloud-annual 160308
    gpupool plan cost --server DGX-A100 --cloud-instance aws-p4d.24xlarge \\
        --power-kw 5 --pue 1.5 --kwh-price 0.10 --colo-kw-month 163.44
    gpupool plan cost --server DGX-A100 --cloud-instance aws-p4d.24xlarge --from-usage

The arithmetic is gpupool.plan.cost (and plan.usage for --from-usage); this module parses
flags, resolves catalog names, asks the pool for its history and prints. Every running cost
defaults to zero, and the output says which were not counted.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from gpupool.cli.plan.common import named
from gpupool.cli.pool_usage import measured_utilization, window_seconds

CLOUD_FLAGS = ("cloud_rate", "cloud_gpu_rate", "cloud_instance", "cloud_annual")


def add_arguments(p: argparse.ArgumentParser) -> None:
    own = p.add_argument_group("on-prem (running costs default to 0: not counted)")
    own.add_argument("--capex", help="purchase price in $ (default: the --server's catalog price)")
    own.add_argument("--server", help="a catalog server: price, GPUs, max draw (e.g. DGX-A100)")
    own.add_argument(
        "--adjust", default="0", help="fraction off the capex: 0.3 or 30%% (default 0)"
    )
    own.add_argument("--years", default="3", help="depreciation years (default 3)")
    own.add_argument("--power-kw", help="average draw in kW (default: the --server's max draw)")
    own.add_argument("--pue", default="1", help="power usage effectiveness (default 1)")
    own.add_argument("--kwh-price", help="electricity $/kWh")
    own.add_argument("--colo-kw-month", help="colocation $ per provisioned kW per month")
    own.add_argument("--colo-kw", help="provisioned kW (default: --server max draw, or --power-kw)")
    own.add_argument("--colo-annual", help="a flat colocation fee in $/yr")
    own.add_argument("--admin-annual", help="admin and support in $/yr")
    own.add_argument(
        "--maintenance", help="maintenance per year as a fraction of capex: 0.08 or 8%%"
    )
    cloud = p.add_argument_group("cloud (give one)")
    cloud.add_argument("--cloud-rate", help="$/h for the equivalent instance (on demand)")
    cloud.add_argument("--cloud-gpu-rate", help="$/GPU-hour, times --gpus")
    cloud.add_argument("--gpus", help="GPUs for --cloud-gpu-rate (default: the --server's)")
    cloud.add_argument("--cloud-instance", help="a catalog cloud price, e.g. aws-p4d.24xlarge")
    cloud.add_argument("--cloud-annual", help="reserved $/yr, paid whatever the use")
    use = p.add_argument_group("utilization")
    use.add_argument("--utilization", help="fraction of hours in use: 0.3 or 30%% (default 1)")
    use.add_argument(
        "--from-usage",
        action="store_true",
        help="use the running pool's measured utilization (allocated / capacity GPU-hours)",
    )
    use.add_argument(
        "--window", help="with --from-usage: how far back, e.g. 30d, 12h, 2w (default 30d)"
    )


def _number(text: str | None, flag: str, default: float = 0.0, positive: bool = False) -> float:
    from gpupool.plan.quantity import PlanError

    if text is None:
        return default
    try:
        value = float(str(text).replace(",", "").lstrip("$"))
    except ValueError:
        raise PlanError(f"{flag}: not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise PlanError(
            f"{flag} must be {'positive' if positive else 'zero or more'}, got {text!r}"
        )
    return value


def _fraction(text: str | None, flag: str, default: float, low_open: bool = True) -> float:
    """'0.3' or '30%'; in (0, 1] (or [0, 1) where low_open is False: --adjust, --maintenance)."""
    from gpupool.plan.quantity import PlanError

    if text is None:
        return default
    raw = text.strip()
    scale = 100.0 if raw.endswith("%") else 1.0
    value = _number(raw.rstrip("%"), flag) / scale
    ok = 0 < value <= 1 if low_open else 0 <= value < 1
    if not ok:
        span = "(0, 1]" if low_open else "[0, 1)"
        raise PlanError(f"{flag} must be a fraction in {span} (or a percentage), got {text!r}")
    return value


def _cloud(
    args: argparse.Namespace, catalog: Any, server: Any
) -> tuple[float, float, dict[str, Any]]:
    """($/h, reserved $/yr, what was used) from exactly one of the cloud flags."""
    from gpupool.plan.quantity import PlanError

    given = [f for f in CLOUD_FLAGS if getattr(args, f) is not None]
    if len(given) != 1:
        flags = ", ".join("--" + f.replace("_", "-") for f in CLOUD_FLAGS)
        got = ", ".join("--" + f.replace("_", "-") for f in given) or "none"
        raise PlanError(f"give exactly one cloud price of {flags} (got {got})")
    if args.gpus is not None and args.cloud_gpu_rate is None:
        raise PlanError("--gpus only applies to --cloud-gpu-rate")
    if args.cloud_rate is not None:
        rate = _number(args.cloud_rate, "--cloud-rate", positive=True)
        return rate, 0.0, {"cloud_usd_per_hour": rate, "cloud_source": "--cloud-rate"}
    if args.cloud_annual is not None:
        fee = _number(args.cloud_annual, "--cloud-annual", positive=True)
        return 0.0, fee, {"cloud_reserved_usd_per_year": fee, "cloud_source": "--cloud-annual"}
    if args.cloud_gpu_rate is not None:
        per_gpu = _number(args.cloud_gpu_rate, "--cloud-gpu-rate", positive=True)
        if args.gpus is None and server is None:
            raise PlanError("--cloud-gpu-rate needs --gpus (or a --server to take them from)")
        gpus = _number(args.gpus, "--gpus", positive=True) if args.gpus else float(server.gpus)
        info = {"cloud_usd_per_gpu_hour": per_gpu, "gpus": gpus, "cloud_source": "--cloud-gpu-rate"}
        return per_gpu * gpus, 0.0, {**info, "cloud_usd_per_hour": per_gpu * gpus}
    price = named(catalog.cloud, args.cloud_instance, "--cloud-instance")
    info = {
        "cloud_instance": price.name,
        "cloud_usd_per_hour": price.usd_per_hour,
        "cloud_gpus": f"{price.gpus} x {price.gpu}",
        "cloud_pricing": price.pricing,
        "cloud_source": f"catalog: {_source(price)}",
    }
    if price.pricing.startswith("reserved"):  # an hourly equivalent, paid whatever the use
        from gpupool.plan.cost import HOURS_PER_YEAR

        fee = price.usd_per_hour * HOURS_PER_YEAR
        return 0.0, fee, {**info, "cloud_reserved_usd_per_year": fee}
    return price.usd_per_hour, 0.0, info


def _source(entry: Any, field: str = "usd_per_hour") -> str:
    try:
        s = entry.source_of(field) if hasattr(entry, "source_of") else entry.sources["*"]
        return f"{s.source} ({s.as_of})"
    except (KeyError, AttributeError, TypeError):
        return "catalog"


def _inputs(args: argparse.Namespace) -> tuple[Any, dict[str, Any], dict[str, str]]:
    from gpupool.plan.cost import CostInputs
    from gpupool.plan.quantity import PlanError

    needs_catalog = args.server is not None or args.cloud_instance is not None
    catalog = None
    if needs_catalog:
        from gpupool.cli.plan.common import load_catalog

        catalog = load_catalog(args)
    server = None
    if catalog is not None and args.server:
        server = named(catalog.server, args.server, "--server")
    notes: dict[str, str] = {}
    echo: dict[str, Any] = {"server": server.name if server else None}

    if args.capex is not None:
        capex = _number(args.capex, "--capex", positive=True)
    elif server is not None and server.price_usd:
        capex = float(server.price_usd)
        notes["capex"] = f"{server.name} catalog price, {_source(server, 'price_usd')}"
    else:
        raise PlanError("--capex is required (or a --server with a catalog price)")
    if args.window is not None and not args.from_usage:
        raise PlanError("--window only applies with --from-usage")
    if args.from_usage and args.utilization is not None:
        raise PlanError("--utilization and --from-usage exclude each other: pick one")
    rate, reserved, cloud_echo = _cloud(args, catalog, server)
    if "cloud_instance" in cloud_echo:
        notes["cloud_price"] = (
            f"{cloud_echo['cloud_instance']} ({cloud_echo['cloud_gpus']}, "
            f"{cloud_echo['cloud_pricing']}) at ${cloud_echo['cloud_usd_per_hour']:g}/h, "
            f"{cloud_echo['cloud_source']}"
        )
        cloud_gpus = int(cloud_echo["cloud_gpus"].split(" x ")[0])
        if server is not None and server.gpus != cloud_gpus:
            notes["mismatch"] = f"{server.name} has {server.gpus} GPUs, the instance {cloud_gpus}"

    max_kw = server.max_power_kw if server is not None else None
    power_kw = _number(args.power_kw, "--power-kw", default=-1.0)
    kwh_price = _number(args.kwh_price, "--kwh-price")
    colo_price = _number(args.colo_kw_month, "--colo-kw-month")
    if power_kw < 0:  # not given
        power_kw = max_kw if (max_kw and kwh_price) else 0.0
        if max_kw and kwh_price and server is not None:  # max_kw is the server's
            notes["power_kw"] = f"{max_kw:g} kW: {server.name}'s max draw, an upper bound"
    if kwh_price and not power_kw:
        raise PlanError("--kwh-price needs --power-kw (the average draw in kW) or a --server")
    colo_kw = _number(args.colo_kw, "--colo-kw", default=-1.0)
    if colo_kw < 0:
        colo_kw = (max_kw or power_kw) if colo_price else 0.0
    if colo_price and not colo_kw:
        raise PlanError("--colo-kw-month needs --colo-kw (provisioned kW), --power-kw or --server")

    utilization = _fraction(args.utilization, "--utilization", 1.0)
    usage_echo: dict[str, Any] = {
        "utilization_source": "--utilization" if args.utilization else "default"
    }
    window_s = window_seconds(args.window) if args.from_usage else 0.0
    inputs = CostInputs(
        capex_usd=capex,
        cloud_usd_per_hour=rate,
        cloud_reserved_usd_per_year=reserved,
        utilization=utilization,
        adjust=_fraction(args.adjust, "--adjust", 0.0, low_open=False),
        years=_number(args.years, "--years", positive=True),
        power_kw=power_kw,
        pue=_number(args.pue, "--pue", positive=True),
        usd_per_kwh=kwh_price,
        colo_usd_per_kw_month=colo_price,
        colo_kw=colo_kw,
        colo_usd_per_year=_number(args.colo_annual, "--colo-annual"),
        admin_usd_per_year=_number(args.admin_annual, "--admin-annual"),
        maintenance_fraction=_fraction(args.maintenance, "--maintenance", 0.0, low_open=False),
    )
    if inputs.pue < 1:
        raise PlanError(
            f"--pue must be at least 1 (facility power over IT power), got {args.pue!r}"
        )
    if args.from_usage:  # last: every flag is checked before the pool is asked
        import dataclasses

        utilization, usage_echo = measured_utilization(args, window_s)
        inputs = dataclasses.replace(inputs, utilization=utilization)
    return inputs, {**echo, **cloud_echo, **usage_echo}, notes


def _usd(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "never" if value is not None else "n/a"
    if value == 0:
        return "$0"
    return f"${value:,.0f}" if abs(value) >= 100 else f"${value:,.2f}"


def _months(value: float) -> str:
    return f"{value:,.1f}" if math.isfinite(value) else "never"


def _assumptions(i: Any, notes: dict[str, str], echo: dict[str, Any]) -> dict[str, str]:
    out = {
        "year": "8,760 hours; straight-line depreciation"
        + (f" of capex x (1 - {i.adjust:g})" if i.adjust else ""),
        "power": f"{i.power_kw:g} kW x PUE {i.pue:g} x 8,760 h x ${i.usd_per_kwh:g}/kWh"
        if i.usd_per_kwh
        else "not counted (give --kwh-price and --power-kw)",
        "colocation": " + ".join(
            part
            for part in (
                f"${i.colo_usd_per_kw_month:g}/kW/month x {i.colo_kw:g} kW x 12"
                if i.colo_usd_per_kw_month
                else "",
                f"${i.colo_usd_per_year:,.0f}/yr flat" if i.colo_usd_per_year else "",
            )
            if part
        )
        or "not counted (give --colo-kw-month or --colo-annual)",
        "admin": " + ".join(
            part
            for part in (
                f"${i.admin_usd_per_year:,.0f}/yr" if i.admin_usd_per_year else "",
                f"{i.maintenance_fraction:.1%} of capex/yr" if i.maintenance_fraction else "",
            )
            if part
        )
        or "not counted (give --admin-annual or --maintenance)",
        "cloud": "reserved: the fee is paid whatever the use"
        if i.cloud_reserved_usd_per_year
        else "on demand: only used hours are paid",
        "utilization": f"{i.utilization:.1%} of hours ({echo['utilization_source']})",
    }
    if "window_days" in echo:
        days = echo["window_days"]
        window = f"{days:.1f} days" if days >= 1 else f"{days * 24:.2g} hours"

        def hours(h: float) -> str:
            return f"{h:,.0f}" if h >= 100 else f"{h:.3g}"

        out["utilization"] += (
            f": {hours(echo['allocated_gpu_hours'])} of {hours(echo['capacity_gpu_hours'])} GPU-hours "
            f"on {echo['capacity_gpus']} GPUs over the last {window}"
        )
    return {**out, **notes}


def _rows(plan: Any) -> list[list[str]]:
    i = plan.inputs
    beu = plan.break_even_utilization
    return [
        [
            "depreciation / yr",
            _usd(plan.depreciation_usd_per_year),
            f"{_usd(plan.capex_effective_usd)} / {i.years:g} yr",
        ],
        ["power / yr", _usd(plan.power_usd_per_year), "kW x PUE x 8,760 x $/kWh"],
        ["colocation / yr", _usd(plan.colocation_usd_per_year), "$/kW/month x kW x 12 + flat"],
        ["admin + maintenance / yr", _usd(plan.admin_usd_per_year), "$/yr + fraction x capex"],
        ["on-prem / yr", _usd(plan.onprem_usd_per_year), "depreciation + running"],
        [
            "cloud / yr",
            _usd(plan.cloud_usd_per_year),
            f"$/h x 8,760 x {i.utilization:.1%} + reserved",
        ],
        [
            "break-even utilization",
            "n/a" if beu is None else f"{beu:.1%}",
            "(on-prem - reserved) / ($/h x 8,760)",
        ],
        ["payback (months)", _months(plan.payback_months), "capex / (cloud - running) x 12"],
        [
            "break-even hours of use",
            "never"
            if not math.isfinite(plan.break_even_hours)
            else f"{plan.break_even_hours:,.0f}",
            "cloud spend = capex + running so far",
        ],
    ]


def _verdict(plan: Any) -> str:
    i = plan.inputs
    head = (
        f"At {i.utilization:.1%} utilization on-prem costs {_usd(plan.onprem_usd_per_year)}/yr, "
        f"cloud {_usd(plan.cloud_usd_per_year)}/yr: {plan.cheaper} is cheaper"
    )
    if math.isfinite(plan.payback_months):
        head += (
            f"; buying pays back in {plan.payback_months:,.1f} months "
            f"({plan.break_even_hours:,.0f} hours of use)"
        )
    else:
        head += "; buying never pays back at this utilization"
    if plan.break_even_utilization is not None:
        head += f"; break-even utilization {plan.break_even_utilization:.1%}"
    return head


def _draw_plot(plan: Any) -> Any:
    from gpupool.plan.cost import cumulative_costs, plot_horizon_months

    def draw(fig: Any) -> None:
        ax = fig.add_subplot()
        horizon = plot_horizon_months(plan)
        months = [horizon * k / 200 for k in range(201)]
        onprem, cloud = cumulative_costs(plan, months)
        ax.plot(months, onprem, label="on-prem: capex + running")
        ax.plot(months, cloud, label=f"cloud at {plan.inputs.utilization:.0%} utilization")
        if math.isfinite(plan.payback_months) and plan.payback_months <= horizon:
            ax.axvline(plan.payback_months, color="grey", linestyle="--")
            ax.annotate(
                f"break-even: {plan.payback_months:,.1f} months\n"
                f"({plan.break_even_hours:,.0f} h of use)",
                (plan.payback_months, plan.capex_effective_usd),
                textcoords="offset points",
                xytext=(8, -30),
            )
        ax.set_xlabel("months")
        ax.set_ylabel("cumulative cost ($)")
        ax.set_title("Cumulative cost: on-prem vs cloud")
        ax.yaxis.set_major_formatter("${x:,.0f}")
        ax.set_xlim(0, horizon)
        ax.set_ylim(bottom=0)
        ax.legend()

    return draw


def run(args: argparse.Namespace) -> int:
    import dataclasses

    from gpupool.cli.plan.common import jsonable, print_json, print_rich_table, save_plot
    from gpupool.plan.cost import cost_plan

    # --from-usage asks the pool; cli/main.py turns "no pool answered" into one line, exit 1.
    inputs, echo, notes = _inputs(args)
    plan = cost_plan(inputs)
    assumptions = _assumptions(inputs, notes, echo)
    verdict = _verdict(plan)
    if args.json:
        result = jsonable(plan)
        result["inputs"] = {**dataclasses.asdict(inputs), **echo}
        print_json({**result, "assumptions": assumptions, "verdict": verdict})
    else:
        print_rich_table("On-prem vs cloud", ["figure", "value", "how"], _rows(plan))
        print_rich_table(
            "By utilization",
            [
                "utilization",
                "cloud / yr",
                "on-prem / used h",
                "cloud / used h",
                "cheaper",
                "payback (months)",
            ],
            [
                [
                    f"{p.utilization:.1%}" + (" <-" if p.utilization == inputs.utilization else ""),
                    _usd(p.cloud_usd_per_year),
                    _usd(p.onprem_usd_per_used_hour),
                    _usd(p.cloud_usd_per_used_hour),
                    p.cheaper,
                    _months(p.payback_months),
                ]
                for p in plan.sweep
            ],
        )
        print("Assumptions: " + "; ".join(f"{k}: {v}" for k, v in assumptions.items()))
        print(verdict)
    if args.plot:
        path = save_plot(args.plot, _draw_plot(plan))
        print(f"plot written to {path}", file=sys.stderr)
    return 0
