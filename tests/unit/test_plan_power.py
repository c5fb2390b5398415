"""`gpupool plan power`: seed 000's PDU arithmetic (APC AP8966), as pure functions and as a user
runs it, plus the invariants of fitting servers onto PDUs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.cli.main import main
from gpupool.plan.power import circuit_kva, plug_options, power_plan, rack_fit


def power_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["plan", "power", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_seed_000_three_phase_pdu_pure() -> None:
    plan = power_plan(208, 60, phases=3)
    assert plan.kva == pytest.approx(21.6, abs=0.05)
    assert plan.kva_derated == pytest.approx(17.29, abs=0.005)  # sqrt(3) x 208 x 60 x 0.8
    assert plan.amps_derated == pytest.approx(48)  # the data sheet's "derated input current"


def test_seed_000_invocation_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    out = power_json(capsys, "--volts", "208", "--amps", "60", "--phases", "3")
    assert round(out["kva_derated"], 2) == 17.29
    assert round(out["kva"], 1) == 21.6
    assert out["inputs"] == {
        "volts": 208.0,
        "amps": 60.0,
        "phases": 3,
        "derate": 0.8,
        "power_factor": 1.0,
        "pdus_per_rack": 2,
        "server": None,
        "server_kw": None,
        "psus": None,
    }
    assert "NEC" in out["assumptions"]["derate"]
    assert "17.29 kVA" in out["verdict"]


def test_single_phase_230_v_32_a(capsys: pytest.CaptureFixture[str]) -> None:
    assert circuit_kva(230, 32, 1) == pytest.approx(7.36)
    out = power_json(capsys, "--volts", "230", "--amps", "32")
    assert round(out["kva"], 2) == 7.36
    assert round(out["kva_derated"], 2) == 5.89


def test_power_factor_turns_kva_into_kw(capsys: pytest.CaptureFixture[str]) -> None:
    out = power_json(capsys, "--volts", "230", "--amps", "32", "--power-factor", "0.9")
    assert out["kw_derated"] == pytest.approx(5.888 * 0.9)


def test_dgx_a100_servers_per_pdu_and_rack(capsys: pytest.CaptureFixture[str]) -> None:
    out = power_json(
        capsys,
        "--volts",
        "208",
        "--amps",
        "60",
        "--phases",
        "3",
        "--server-kw",
        "6.5",
        "--psus",
        "6",
    )
    assert out["fit"] == {
        "server_kw": 6.5,
        "servers_per_pdu": 2,  # 17.29 / 6.5 = 2.66
        "servers_per_rack": 4,
        "servers_per_rack_redundant": 2,  # A+B: each server's full load on one PDU
    }
    plugs = {p["name"]: p for p in out["plugs"]}
    assert plugs["C19/C20"]["cords_per_server"] == 3  # ceil(6.5 / 3.2)
    assert plugs["C19/C20"]["cords_per_server_redundant"] == 6
    assert plugs["C13/C14"]["kw_per_cord_given_psus"] == pytest.approx(6.5 / 3)  # 3+3 PSUs
    assert plugs["C13/C14"]["fits_given_psus"] is True


def test_dgx_a100_from_the_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    out = power_json(
        capsys, "--volts", "208", "--amps", "60", "--phases", "3", "--server", "DGX-A100"
    )
    assert out["inputs"]["server_kw"] == 6.5
    assert out["fit"]["servers_per_pdu"] == 2


def test_plugs_for_a_server_whose_psus_are_too_few() -> None:
    c13, c19 = plug_options(6.5, 2)  # 1+1 PSUs: one cord carries 6.5 kW
    assert c13.fits_given_psus is False and c19.fits_given_psus is False
    assert plug_options(2.0, 2)[0].fits_given_psus is True


# --- invariants (50 examples each: the arithmetic is smooth, and the suite must stay fast) -----------------------------------------------------------------------------

volts = st.sampled_from([120.0, 208.0, 230.0, 240.0, 400.0, 415.0, 480.0])
amps = st.sampled_from([15.0, 16.0, 20.0, 30.0, 32.0, 50.0, 60.0, 63.0])
draws = st.floats(min_value=0.2, max_value=20, allow_nan=False)


@settings(max_examples=50, deadline=None)
@given(volts, amps)
def test_three_phase_is_sqrt3_times_single_phase(v: float, a: float) -> None:
    assert circuit_kva(v, a, 3) == pytest.approx(math.sqrt(3) * circuit_kva(v, a, 1))


@settings(max_examples=50, deadline=None)
@given(volts, amps, st.sampled_from([1, 3]), draws, draws, st.integers(1, 8))
def test_a_hungrier_server_never_fits_more_per_rack(
    v: float, a: float, phases: int, d1: float, d2: float, pdus: int
) -> None:
    light, heavy = sorted((d1, d2))
    pdu_kw = power_plan(v, a, phases).kw_derated
    lo, hi = rack_fit(pdu_kw, pdus, light), rack_fit(pdu_kw, pdus, heavy)
    assert hi.servers_per_pdu <= lo.servers_per_pdu
    assert hi.servers_per_rack <= lo.servers_per_rack
    # Redundancy never adds room, and what fits never exceeds the PDU's derated capacity.
    assert lo.servers_per_rack_redundant <= lo.servers_per_rack
    assert lo.servers_per_pdu * light <= pdu_kw + 1e-9


@settings(max_examples=50, deadline=None)
@given(volts, amps, st.floats(0.5, 1.0))
def test_a_stricter_derating_never_gives_more_capacity(v: float, a: float, derate: float) -> None:
    assert (
        power_plan(v, a, 3, derate=derate).kw_derated <= power_plan(v, a, 3, derate=1.0).kw_derated
    )


# --- errors, table, plot --------------------------------------------------------------------

BASE = ["--volts", "208", "--amps", "60"]


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--volts", "-208", "--amps", "60"], "--volts"),
        (["--volts", "high", "--amps", "60"], "--volts"),
        (["--volts", "208", "--amps", "0"], "--amps"),
        ([*BASE, "--phases", "2"], "--phases"),
        ([*BASE, "--derate", "1.2"], "--derate"),
        ([*BASE, "--power-factor", "0"], "--power-factor"),
        ([*BASE, "--pdus-per-rack", "1.5"], "--pdus-per-rack"),
        ([*BASE, "--server-kw", "-1"], "--server-kw"),
        ([*BASE, "--server-kw", "inf"], "--server-kw"),
        ([*BASE, "--server-kw", "3", "--psus", "0"], "--psus"),
        ([*BASE, "--psus", "2"], "--psus"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(
    capsys: pytest.CaptureFixture[str], argv: list[str], flag: str
) -> None:
    assert main(["plan", "power", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert flag in err and len(err.splitlines()) == 1


def test_table_shows_circuit_sweep_plugs_and_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "power", *BASE, "--phases", "3", "--server-kw", "6.5"]) == 0
    out = capsys.readouterr().out
    assert "17.29" in out and "21.62" in out
    assert "C19/C20" in out and "A+B" in out
    assert "Assumptions" in out and "4 per rack" in out


def test_plot_writes_a_png(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    png = tmp_path / "power.png"
    assert main(["plan", "power", *BASE, "--server-kw", "3", "--plot", str(png)]) == 0
    assert png.read_bytes().startswith(b"\x89PNG")
    assert str(png) in capsys.readouterr().err
