"""On-prem vs cloud: what a machine costs per year to own, and when it beats renting.

On-prem, per year (straight-line depreciation, the usual spreadsheet):

    depreciation = capex x (1 - adjust) / years
    power        = average kW x PUE x 8,760 h x $/kWh
    colocation   = $/kW/month x provisioned kW x 12  +  a flat $/yr
    admin        = admin $/yr  +  maintenance fraction x capex
    on-prem      = depreciation + power + colocation + admin       (running = all but depreciation)

Cloud, per year, at a utilization u (the fraction of hours the machine would be busy; on demand,
only used hours are paid) plus any reserved fee paid regardless of use:

    cloud(u) = $/h x 8,760 x u  +  reserved $/yr

Break-even utilization: the u at which cloud(u) = on-prem, (on-prem - reserved) / ($/h x 8,760).
Payback: capex / (cloud(u) - running) years, "never" when renting costs no more than running.
Break-even hours: hours of use at which cumulative cloud spend reaches the capex plus the running
costs accrued meanwhile; with no running costs, capex / $/h.

Worked figures (reproduced by tests/unit/test_plan_cost.py):
- seed 004 (Lambda, 2019): $8,000 vs $1.50/h -> 5,333 h; 30%-adjusted $5,600 -> 3,733 h.
- seed 001 (Lambda): $109,008 + $15,000/yr colo vs $160,308/yr reserved p3dn.24xlarge -> 0.75 yr.
- DGX A100: $199k / 3 yr + 5 kW x 1.5 x $0.10 + $163.44/kW/month x 6.5 kW = $85,652/yr,
  break-even against a $32.7726/h p4d.24xlarge at 29.8% utilization.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

HOURS_PER_YEAR = 8760.0  # 365 x 24, as cloud price sheets annualize
HOURS_PER_MONTH = HOURS_PER_YEAR / 12.0
DEFAULT_YEARS = 3.0  # a common GPU depreciation schedule (the DGX example uses 3)
SWEEP_UTILIZATIONS = (0.1, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class CostInputs:
    """Every input in dollars, kW, years and fractions; zero means "not counted"."""

    capex_usd: float
    cloud_usd_per_hour: float = 0.0  # on demand: paid for used hours only
    cloud_reserved_usd_per_year: float = 0.0  # paid regardless of use
    utilization: float = 1.0
    adjust: float = 0.0  # fraction off the capex: resale value, discount (seed 004's 30%)
    years: float = DEFAULT_YEARS
    power_kw: float = 0.0  # average draw
    pue: float = 1.0
    usd_per_kwh: float = 0.0
    colo_usd_per_kw_month: float = 0.0
    colo_kw: float = 0.0  # provisioned, often the max draw rather than the average
    colo_usd_per_year: float = 0.0  # a flat colocation fee
    admin_usd_per_year: float = 0.0
    maintenance_fraction: float = 0.0  # of the (adjusted) capex, per year


@dataclass(frozen=True)
class UtilizationPoint:
    utilization: float
    cloud_usd_per_year: float
    onprem_usd_per_used_hour: float
    cloud_usd_per_used_hour: float
    cheaper: str  # "on-prem" | "cloud" | "even"
    payback_months: float  # inf: never


@dataclass(frozen=True)
class CostPlan:
    inputs: CostInputs
    capex_effective_usd: float
    depreciation_usd_per_year: float
    power_usd_per_year: float
    colocation_usd_per_year: float
    admin_usd_per_year: float
    running_usd_per_year: float
    onprem_usd_per_year: float
    cloud_usd_per_year: float  # at inputs.utilization
    break_even_utilization: float | None  # None: no hourly cloud price to compare against
    payback_months: float  # inf: never
    payback_years: float
    break_even_hours: float  # hours of use; inf: never
    cheaper: str
    sweep: tuple[UtilizationPoint, ...]


def cloud_per_year(inputs: CostInputs, utilization: float) -> float:
    """cloud(u) = $/h x 8,760 x u + reserved $/yr."""
    return (
        inputs.cloud_usd_per_hour * HOURS_PER_YEAR * utilization
        + inputs.cloud_reserved_usd_per_year
    )


def crossing_months(capex: float, running_per_year: float, cloud_per_year: float) -> float:
    """Months t at which capex + running x t = cloud x t; inf when cloud never catches up."""
    gain = cloud_per_year - running_per_year
    if capex <= 0:
        return 0.0
    return capex / gain * 12.0 if gain > 0 else math.inf


def _cheaper(onprem: float, cloud: float) -> str:
    if math.isclose(onprem, cloud, rel_tol=1e-9):
        return "even"
    return "on-prem" if onprem < cloud else "cloud"


def _per_used_hour(per_year: float, utilization: float) -> float:
    used = HOURS_PER_YEAR * utilization
    return per_year / used if used > 0 else math.inf


def cost_plan(inputs: CostInputs, sweep: Sequence[float] = SWEEP_UTILIZATIONS) -> CostPlan:
    """The annual costs, break-even utilization, payback and break-even hours (module docstring)."""
    capex = inputs.capex_usd * (1.0 - inputs.adjust)
    depreciation = capex / inputs.years
    power = inputs.power_kw * inputs.pue * HOURS_PER_YEAR * inputs.usd_per_kwh
    colocation = inputs.colo_usd_per_kw_month * inputs.colo_kw * 12.0 + inputs.colo_usd_per_year
    admin = inputs.admin_usd_per_year + inputs.maintenance_fraction * capex
    running = power + colocation + admin
    onprem = depreciation + running

    def point(u: float) -> UtilizationPoint:
        cloud_u = cloud_per_year(inputs, u)
        return UtilizationPoint(
            utilization=u,
            cloud_usd_per_year=cloud_u,
            onprem_usd_per_used_hour=_per_used_hour(onprem, u),
            cloud_usd_per_used_hour=_per_used_hour(cloud_u, u),
            cheaper=_cheaper(onprem, cloud_u),
            payback_months=crossing_months(capex, running, cloud_u),
        )

    chosen = point(inputs.utilization)
    break_even_u = None
    if inputs.cloud_usd_per_hour > 0:
        break_even_u = (onprem - inputs.cloud_reserved_usd_per_year) / (
            inputs.cloud_usd_per_hour * HOURS_PER_YEAR
        )
    months = chosen.payback_months
    # Hours of use by the time the curves cross: calendar hours x utilization. With no running
    # costs and no reserved fee this is exactly capex / $/h, whatever the utilization.
    hours = months * HOURS_PER_MONTH * inputs.utilization if math.isfinite(months) else math.inf
    # The break-even utilization joins the sweep, where the table shows on-prem and cloud "even".
    extra = [break_even_u] if break_even_u is not None and 0 < break_even_u <= 1 else []
    points = sorted({*sweep, inputs.utilization, *extra})
    return CostPlan(
        inputs=inputs,
        capex_effective_usd=capex,
        depreciation_usd_per_year=depreciation,
        power_usd_per_year=power,
        colocation_usd_per_year=colocation,
        admin_usd_per_year=admin,
        running_usd_per_year=running,
        onprem_usd_per_year=onprem,
        cloud_usd_per_year=chosen.cloud_usd_per_year,
        break_even_utilization=break_even_u,
        payback_months=months,
        payback_years=months / 12.0,
        break_even_hours=hours,
        cheaper=chosen.cheaper,
        sweep=tuple(point(u) for u in points),
    )


def cumulative_costs(
    plan: CostPlan, months: Sequence[float]
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(on-prem, cloud) cumulative dollars at each month: capex + running x t vs cloud(u) x t."""
    onprem = tuple(plan.capex_effective_usd + plan.running_usd_per_year * m / 12.0 for m in months)
    cloud = tuple(plan.cloud_usd_per_year * m / 12.0 for m in months)
    return onprem, cloud


def plot_horizon_months(plan: CostPlan) -> float:
    """How far a cumulative-cost plot should run: the depreciation period, or past the crossing."""
    horizon = plan.inputs.years * 12.0
    if math.isfinite(plan.payback_months):
        horizon = max(horizon, plan.payback_months * 1.5)
    return min(horizon, 240.0)  # 20 years: past that the crossing is academic
