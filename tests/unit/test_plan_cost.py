"""`gpupool plan cost` and plan/usage.py: the seeds' break-even arithmetic, as pure functions and
as a user runs it, plus the invariants a cost comparison must keep."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.cli.main import main
from gpupool.client import JobView
from gpupool.client.pool_views import GpusView, read_gpus
from gpupool.client.views import read_job
from gpupool.plan.cost import CostInputs, cost_plan, cumulative_costs
from gpupool.plan.usage import measure_usage, measured_utilization

DGX_A100 = CostInputs(
    capex_usd=199_000,
    cloud_usd_per_hour=32.7726,
    power_kw=5,
    pue=1.5,
    usd_per_kwh=0.10,
    colo_usd_per_kw_month=163.44,
    colo_kw=6.5,
)
DGX_FLAGS = ["--power-kw", "5", "--pue", "1.5", "--kwh-price", "0.10", "--colo-kw-month", "163.44"]


def plan_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["plan", "cost", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# --- seed 004: $8,000 4-GPU machine vs a $1.50/h 4-GPU cloud instance -----------------------


def test_seed_004_break_even_hours_pure() -> None:
    assert cost_plan(CostInputs(8000, 1.5)).break_even_hours == pytest.approx(5333.33, abs=0.01)
    adjusted = cost_plan(CostInputs(8000, 1.5, adjust=0.3))
    assert adjusted.capex_effective_usd == pytest.approx(5600)
    assert adjusted.break_even_hours == pytest.approx(3733.33, abs=0.01)


def test_seed_004_invocation_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    out = plan_json(capsys, "--capex", "8000", "--cloud-rate", "1.5")
    assert round(out["break_even_hours"]) == 5333
    assert out["inputs"]["capex_usd"] == 8000 and out["inputs"]["cloud_usd_per_hour"] == 1.5
    assert out["running_usd_per_year"] == 0  # nothing counted unless asked, and it says so
    assert "not counted" in out["assumptions"]["power"]
    assert "not counted" in out["assumptions"]["colocation"]


@pytest.mark.parametrize("adjust", ["0.3", "30%"])
def test_seed_004_adjusted_machine(capsys: pytest.CaptureFixture[str], adjust: str) -> None:
    out = plan_json(capsys, "--capex", "8000", "--cloud-rate", "1.5", "--adjust", adjust)
    assert round(out["break_even_hours"]) == 3733
    assert out["capex_effective_usd"] == pytest.approx(5600)


def test_break_even_hours_do_not_depend_on_utilization_without_running_costs() -> None:
    for u in (0.1, 0.5, 1.0):
        hours = cost_plan(CostInputs(8000, 1.5, utilization=u)).break_even_hours
        assert hours == pytest.approx(8000 / 1.5)


# --- seed 001: $109,008 server + $15,000/yr colo vs $160,308/yr reserved p3dn.24xlarge -----


def test_seed_001_payback_pure() -> None:
    plan = cost_plan(
        CostInputs(109_008, cloud_reserved_usd_per_year=160_308, colo_usd_per_year=15_000)
    )
    assert plan.payback_years == pytest.approx(0.750, abs=0.0005)
    assert plan.payback_months == pytest.approx(9.0, abs=0.05)
    assert plan.break_even_utilization is None  # no hourly price to break even against


def test_seed_001_cli(capsys: pytest.CaptureFixture[str]) -> None:
    out = plan_json(
        capsys, "--capex", "109008", "--colo-annual", "15000", "--cloud-annual", "160308"
    )
    assert out["payback_years"] == pytest.approx(0.750, abs=0.0005)
    assert round(out["payback_months"]) == 9
    assert "reserved" in out["assumptions"]["cloud"]


def test_seed_001_from_the_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    """A reserved catalog price is an hourly equivalent paid whatever the use."""
    out = plan_json(
        capsys,
        "--server",
        "Lambda Hyperplane V100",
        "--cloud-instance",
        "aws-p3dn.24xlarge-reserved-1y",
        "--colo-annual",
        "15000",
        "--utilization",
        "0.2",
    )
    assert out["inputs"]["capex_usd"] == 109_008
    assert out["inputs"]["cloud_reserved_usd_per_year"] == pytest.approx(160_308)
    assert out["payback_years"] == pytest.approx(0.750, abs=0.0005)


# --- DGX A100 vs p4d.24xlarge ---------------------------------------------------------------


def test_dgx_a100_annual_and_break_even_utilization_pure() -> None:
    plan = cost_plan(DGX_A100)
    assert plan.depreciation_usd_per_year == pytest.approx(66_333.33, abs=0.01)
    assert plan.power_usd_per_year == pytest.approx(6_570)
    assert plan.colocation_usd_per_year == pytest.approx(12_748.32)
    assert round(plan.onprem_usd_per_year) == 85_652
    assert plan.break_even_utilization == pytest.approx(0.2983, abs=0.00005)


def test_dgx_a100_cli_with_explicit_prices(capsys: pytest.CaptureFixture[str]) -> None:
    out = plan_json(
        capsys, "--capex", "199000", "--cloud-rate", "32.7726", *DGX_FLAGS, "--colo-kw", "6.5"
    )
    assert round(out["onprem_usd_per_year"]) == 85_652
    assert round(out["break_even_utilization"], 3) == 0.298


def test_dgx_a100_cli_from_the_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    """--server brings the price and the 6.5 kW provisioned for colocation."""
    out = plan_json(
        capsys, "--server", "DGX-A100", "--cloud-instance", "aws-p4d.24xlarge", *DGX_FLAGS
    )
    assert out["inputs"]["capex_usd"] == 199_000
    assert out["inputs"]["colo_kw"] == 6.5
    assert out["inputs"]["cloud_usd_per_hour"] == pytest.approx(32.7726)
    assert round(out["onprem_usd_per_year"]) == 85_652
    assert round(out["break_even_utilization"], 3) == 0.298
    assert "capex" in out["assumptions"]  # says where the price came from


def test_cloud_gpu_rate_times_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    out = plan_json(capsys, "--capex", "8000", "--cloud-gpu-rate", "0.375", "--gpus", "4")
    assert out["inputs"]["cloud_usd_per_hour"] == pytest.approx(1.5)
    assert round(out["break_even_hours"]) == 5333


# --- invariants (50 examples each: the arithmetic is smooth, and the suite must stay fast) -----------------------------------------------------------------------------

money = st.floats(min_value=100, max_value=1e6, allow_nan=False)
rates = st.floats(min_value=0.1, max_value=100, allow_nan=False)
fractions = st.floats(min_value=0.01, max_value=1.0, allow_nan=False)
running = st.floats(min_value=0, max_value=5e4, allow_nan=False)


@settings(max_examples=50, deadline=None)
@given(money, money, rates, running)
def test_break_even_utilization_rises_with_capex(
    a: float, b: float, rate: float, admin: float
) -> None:
    low, high = sorted((a, b))
    u_low = cost_plan(CostInputs(low, rate, admin_usd_per_year=admin)).break_even_utilization
    u_high = cost_plan(CostInputs(high, rate, admin_usd_per_year=admin)).break_even_utilization
    assert u_low is not None and u_high is not None
    assert u_low <= u_high


@settings(max_examples=50, deadline=None)
@given(money, rates, rates, running)
def test_break_even_utilization_falls_with_cloud_rate(
    capex: float, a: float, b: float, admin: float
) -> None:
    cheap, dear = sorted((a, b))
    u_cheap = cost_plan(CostInputs(capex, cheap, admin_usd_per_year=admin)).break_even_utilization
    u_dear = cost_plan(CostInputs(capex, dear, admin_usd_per_year=admin)).break_even_utilization
    assert u_cheap is not None and u_dear is not None
    assert u_dear <= u_cheap


@settings(max_examples=50, deadline=None)
@given(money, rates, fractions, running)
def test_cumulative_curves_cross_at_the_break_even_point(
    capex: float, rate: float, u: float, admin: float
) -> None:
    plan = cost_plan(CostInputs(capex, rate, utilization=u, admin_usd_per_year=admin))
    if not math.isfinite(plan.payback_months):
        assert plan.cloud_usd_per_year <= plan.running_usd_per_year
        return
    (onprem,), (cloud,) = cumulative_costs(plan, [plan.payback_months])
    assert cloud == pytest.approx(onprem, rel=1e-9)
    # ... and by then the cloud was paid for exactly the break-even hours of use.
    assert cloud == pytest.approx(plan.break_even_hours * rate, rel=1e-9)
    before, after = plan.payback_months * 0.9, plan.payback_months * 1.1
    (on_b, on_a), (cl_b, cl_a) = cumulative_costs(plan, [before, after])
    assert cl_b < on_b and cl_a > on_a


@settings(max_examples=50, deadline=None)
@given(money, rates, fractions, fractions, running)
def test_more_utilization_makes_on_prem_cheaper_per_used_hour(
    capex: float, rate: float, a: float, b: float, admin: float
) -> None:
    low, high = sorted((a, b))
    plan = cost_plan(CostInputs(capex, rate, admin_usd_per_year=admin), sweep=(low, high))
    by_u = {p.utilization: p for p in plan.sweep}
    assert by_u[high].onprem_usd_per_used_hour <= by_u[low].onprem_usd_per_used_hour
    assert by_u[high].payback_months <= by_u[low].payback_months


# --- measured utilization (plan/usage.py) ---------------------------------------------------


def test_measured_utilization_clips_to_the_window_and_counts_running_jobs_to_now() -> None:
    hour = 3600.0
    intervals = [
        (-5 * hour, 2 * hour, 2),  # started before the window: 2 h counted, 2 GPUs
        (4 * hour, None, 1),  # still running: counted up to the window end (10 h) -> 6 h
        (8 * hour, 30 * hour, 0.5),  # half a GPU, past the end: 2 h x 0.5
        (20 * hour, 25 * hour, 4),  # outside the window
    ]
    usage = measure_usage(intervals, capacity_gpus=4, window_start=0, window_end=10 * hour)
    assert usage.allocated_gpu_hours == pytest.approx(4 + 6 + 1)
    assert usage.capacity_gpu_hours == pytest.approx(40)
    assert usage.jobs_counted == 3
    assert measured_utilization(intervals, 4, 0, 10 * hour) == pytest.approx(11 / 40)


def test_measured_utilization_rejects_an_empty_window() -> None:
    with pytest.raises(ValueError):
        measured_utilization([], 4, 10, 10)


jobs = st.lists(
    st.tuples(st.floats(0, 100), st.floats(0, 100), st.sampled_from([0.25, 0.5, 1.0, 2.0, 4.0])),
    max_size=20,
)


@settings(max_examples=50, deadline=None)
@given(jobs, st.tuples(st.floats(0, 100), st.floats(0, 100), st.floats(0.25, 4)))
def test_another_job_never_lowers_measured_utilization(
    existing: list[tuple[float, float, float]], extra: tuple[float, float, float]
) -> None:
    intervals = [(min(a, b), max(a, b), g) for a, b, g in existing]
    a, b, g = extra
    before = measured_utilization(intervals, 8, 10, 90)
    after = measured_utilization([*intervals, (min(a, b), max(a, b), g)], 8, 10, 90)
    assert after >= before - 1e-12


class FakeClient:
    """What `gpupool.client.Client` answers for a 4-GPU pool with a 10-day history: the
    daemon's JSON, read by the client's own views (client/views.py)."""

    now = 1_700_000_000.0
    day = 86400.0

    def __init__(self, state: Any = None, url: Any = None) -> None:
        pass

    def where(self) -> str:
        return "the fake pool"

    def gpus(self) -> GpusView:
        gpus = [
            {"index": i, "model": "A100", "memory_bytes": 80 << 30, "nvlink_peers": [],
             "job": None, "job_name": None, "user": None, "shared": False, "jobs": []}
            for i in range(4)
        ]  # fmt: skip
        return read_gpus(
            {"source": "declared", "note": "", "nodes": [{"name": "n1", "gpus": gpus}]}
        )

    def jobs(self, include_finished: bool = False) -> tuple[JobView, ...]:
        assert include_finished
        now, day = self.now, self.day

        def job(start: float, end: float | None, gpus: int, **res: Any) -> JobView:
            # gpu_count: what the daemon says each job counts for (core.job.gpu_count)
            started = res.pop("started", True)
            state = "PENDING" if not started else "RUNNING" if end is None else "SUCCEEDED"
            return read_job(
                {
                    "id": 1, "name": "j", "user": "u", "project": "default",
                    "state": state,
                    "priority": 200, "priority_name": "normal", "command": ["true"],
                    "preemptible": True, "time_limit_s": None, "grace_s": 30.0, "workdir": "/",
                    "env": {}, "exit_code": None, "reason": "", "why": "", "wait": None,
                    "estimated_start": None, "reservation": None, "priority_factors": None,
                    "begin_time": None, "restart_count": 0, "cancel_requested": False,
                    "log_path": "",
                    "gpu_count": res.pop("count", gpus),
                    "submit_time": start - 60,
                    "start_time": start if started else None,
                    "end_time": end,
                    "node": "n1",
                    "gpus": [0],
                    "gpu_memory_bytes": res.pop("granted", None),
                    "resources": {"gpus": gpus, "gpu_type": None, "cpus": None,
                                  "mem_bytes": None, "gpu_memory_bytes": None,
                                  "gpu_fraction": None, **res},
                }
            )  # fmt: skip

        return (
            job(now - 10 * day, now - 5 * day, 4),  # 5 days x 4 GPUs = 20 GPU-days
            job(
                now - 2 * day, None, 1, gpu_fraction=0.5, count=0.5
            ),  # 2 days x 0.5 = 1 GPU-day, running
            job(
                now - 2 * day,
                now - 1 * day,
                1,
                gpu_memory_bytes=20 << 30,
                granted=20 << 30,
                count=0.25,
            ),
            job(now, None, 2, started=False),  # pending: not counted
        )


def test_from_usage_measures_allocated_over_capacity(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("gpupool.client.Client", FakeClient)
    monkeypatch.setattr("time.time", lambda: FakeClient.now)
    out = plan_json(capsys, "--capex", "8000", "--cloud-rate", "1.5", "--from-usage")
    # 20 + 1 + 0.25 GPU-days over 4 GPUs x 10 days (the window starts at the first submit).
    expected = (20 + 1 + 0.25) / 40.0
    usage = out["inputs"]
    assert usage["measured_utilization"] == pytest.approx(expected, rel=1e-3)
    assert out["inputs"]["utilization"] == pytest.approx(expected, rel=1e-3)
    assert usage["capacity_gpus"] == 4 and usage["jobs_counted"] == 3
    assert "measured" in out["assumptions"]["utilization"]
    capsys.readouterr()
    assert (
        main(
            [
                "plan",
                "cost",
                "--capex",
                "8000",
                "--cloud-rate",
                "1.5",
                "--from-usage",
                "--window",
                "1d",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "measured" in text and "1.0 days" in text


def test_from_usage_without_a_daemon_is_one_error_and_exit_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("GPUPOOL_URL", raising=False)
    argv = ["plan", "cost", "--capex", "8000", "--cloud-rate", "1.5", "--from-usage"]
    assert main([*argv, "--state-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "no daemon is running" in err


# --- errors, table, plot --------------------------------------------------------------------

BASE = ["--capex", "8000", "--cloud-rate", "1.5"]


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--capex", "-5", "--cloud-rate", "1.5"], "--capex"),
        (["--capex", "lots", "--cloud-rate", "1.5"], "--capex"),
        (["--cloud-rate", "1.5"], "--capex"),
        (["--capex", "8000", "--cloud-rate", "0"], "--cloud-rate"),
        (["--capex", "8000"], "--cloud-rate"),
        ([*BASE, "--cloud-annual", "1000"], "--cloud-annual"),
        ([*BASE, "--utilization", "1.5"], "--utilization"),
        ([*BASE, "--utilization", "0"], "--utilization"),
        ([*BASE, "--adjust", "1"], "--adjust"),
        ([*BASE, "--years", "0"], "--years"),
        ([*BASE, "--pue", "0.5"], "--pue"),
        ([*BASE, "--kwh-price", "0.1"], "--power-kw"),
        ([*BASE, "--colo-kw-month", "150"], "--colo-kw"),
        ([*BASE, "--maintenance", "120%"], "--maintenance"),
        ([*BASE, "--admin-annual", "-1"], "--admin-annual"),
        ([*BASE, "--window", "30d"], "--window"),
        ([*BASE, "--from-usage", "--window", "soon"], "--window"),
        ([*BASE, "--from-usage", "--utilization", "0.5"], "--utilization"),
        ([*BASE, "--gpus", "4"], "--gpus"),
        (["--capex", "8000", "--cloud-gpu-rate", "2"], "--gpus"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(
    capsys: pytest.CaptureFixture[str], argv: list[str], flag: str
) -> None:
    assert main(["plan", "cost", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert flag in err and len(err.splitlines()) == 1


def test_table_shows_figures_assumptions_and_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "cost", *BASE]) == 0
    out = capsys.readouterr().out
    assert "5,333" in out and "20.3%" in out
    assert "not counted" in out  # the defaults are shown
    assert "pays back" in out


def test_plot_writes_a_png(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    png = tmp_path / "cost.png"
    assert main(["plan", "cost", *BASE, "--json", "--plot", str(png)]) == 0
    assert png.read_bytes().startswith(b"\x89PNG")
    captured = capsys.readouterr()
    assert json.loads(captured.out)["break_even_hours"] > 0
    assert str(png) in captured.err
