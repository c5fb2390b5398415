"""`gpupool plan network`: leaf-spine and fat-tree sizing, directors, rail-optimized layouts."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.cli.main import main
from gpupool.plan.network import (
    endpoint_sweep,
    leaf_ports,
    max_endpoints,
    plan_director,
    plan_fabric,
    plan_rail_fabric,
)
from gpupool.plan.quantity import PlanError


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["plan", "network", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# --- oracles -----------------------------------------------------------------------------------


def test_216_endpoints_on_36_port_switches_is_12_leaves_and_6_spines() -> None:
    plan = plan_fabric(216, 36)
    assert (plan.levels, plan.leaves, plan.spines) == (2, 12, 6)
    assert (plan.leaf_down_ports, plan.leaf_up_ports) == (18, 18)
    assert plan.non_blocking and plan.oversubscription == 1
    assert plan.leaves * plan.leaf_up_ports / 36 == 6  # 216 uplinks / 36 ports per spine
    assert plan.cables == 216 + 216


def test_the_issue_invocation_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, "--endpoints", "216", "--radix", "36")
    assert (out["leaves"], out["spines"], out["levels"]) == (12, 6, 2)
    assert out["non_blocking"] is True
    assert (out["leaf_down_ports"], out["leaf_up_ports"]) == (18, 18)
    assert out["inputs"] == {
        "endpoints": 216,
        "nodes": None,
        "nics": None,
        "radix": 36,
        "oversubscription": 1.0,
        "levels": None,
        "rail_optimized": False,
        "director": False,
    }
    assert "12 leaves + 6 spines" in out["summary"]
    assert out["assumptions"]["radix"] == "36 ports per switch"


def test_radix_64_reaches_2048_in_two_levels_and_65536_in_three(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert max_endpoints(64, 2) == 64**2 // 2 == 2048
    assert max_endpoints(64, 3) == 64**3 // 4 == 65536
    assert plan_fabric(2048, 64).levels == 2
    assert plan_fabric(2049, 64).levels == 3
    full = plan_fabric(65536, 64)
    # The k-ary fat tree: k pods, k^2/2 leaves and aggregation switches, (k/2)^2 cores.
    assert (full.pods, full.leaves, full.aggregation, full.core) == (64, 2048, 2048, 1024)
    assert full.switches == 5 * 64**2 // 4
    with pytest.raises(PlanError, match="--endpoints"):
        plan_fabric(65537, 64)
    out = run_json(capsys, "--endpoints", "2048", "--radix", "64")
    assert out["levels"] == 2 and out["spines"] == 32
    assert out["max_endpoints_by_levels"] == {"1": 64, "2": 2048, "3": 65536}
    assert out["non_blocking_max_endpoints_by_levels"]["3"] == 65536


def test_the_cs7520_director_needs_6_spines(capsys: pytest.CaptureFixture[str]) -> None:
    director = plan_director(216, 36)
    assert (director.spine_cards, director.line_cards) == (6, 12)
    assert director.max_ports == 648
    out = run_json(capsys, "--endpoints", "216", "--radix", "36", "--director")
    assert out["director"]["spine_cards"] == 6
    assert out["director"]["line_cards"] == 12


# --- the rest of the design --------------------------------------------------------------------


def test_oversubscription_splits_leaf_ports_and_never_exceeds_the_ratio() -> None:
    assert leaf_ports(36, 2) == leaf_ports(36, 2.0)
    assert (leaf_ports(36, 2).down, leaf_ports(36, 2).up) == (24, 12)
    assert (leaf_ports(64, 3).down, leaf_ports(64, 3).up) == (48, 16)
    odd = leaf_ports(36, 4)  # 28 + 8 = 3.5:1 rather than 29 + 7 = 4.1:1
    assert (odd.down, odd.up, odd.oversubscription) == (28, 8, 3.5)
    assert max_endpoints(64, 2, 3) == 64 * 48


def test_small_networks_are_one_switch() -> None:
    plan = plan_fabric(20, 36)
    assert (plan.levels, plan.switches, plan.cables, plan.spines) == (1, 1, 20, 0)


def test_nodes_times_nics_and_forced_levels(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, "--nodes", "16", "--nics", "8", "--radix", "36", "--levels", "3")
    assert out["endpoints"] == 128 and out["levels"] == 3
    assert out["inputs"]["nodes"] == 16 and out["inputs"]["nics"] == 8
    assert out["pods"] == 1 and out["core"] > 0


def test_three_levels_with_oversubscription(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, "--endpoints", "5000", "--radix", "64", "--oversubscription", "3:1")
    assert out["levels"] == 3 and out["leaves"] == math.ceil(5000 / 48)
    assert out["oversubscription"] == 3 and out["non_blocking"] is False


def test_rail_optimized_gives_each_rail_its_own_leaves(capsys: pytest.CaptureFixture[str]) -> None:
    plan = plan_rail_fabric(32, 8, 64)  # a DGX SuperPOD scalable unit: 32 nodes, 8 rails
    assert (plan.rails, plan.leaves_per_rail, plan.leaves, plan.spines) == (8, 1, 8, 4)
    assert plan.endpoints == 256
    out = run_json(capsys, "--nodes", "128", "--radix", "64", "--rail-optimized")
    assert (out["rails"], out["leaves_per_rail"], out["leaves"], out["spines"]) == (8, 4, 32, 16)
    # Rails split leaves that endpoints alone would fill: 3 nodes still take 8 leaves.
    assert plan_rail_fabric(3, 8, 64).leaves == 8 > plan_fabric(24, 64).leaves


def test_the_table_shows_layers_capacity_and_assumptions(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", "network", "--endpoints", "216", "--radix", "36", "--director"]) == 0
    out = capsys.readouterr().out
    for text in ("leaf", "spine", "k^3/4", "11,664", "line cards", "assumptions:", "non-blocking"):
        assert text in out


def test_plot_writes_a_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "net.png"
    run_json(capsys, "--endpoints", "216", "--radix", "36", "--plot", str(png))
    assert png.read_bytes().startswith(b"\x89PNG")


# --- bad flags ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--endpoints", "216", "--radix", "35"], "--radix"),
        (["--endpoints", "216", "--radix", "many"], "--radix"),
        (["--endpoints", "216", "--radix", "2"], "--radix"),
        (["--endpoints", "216", "--oversubscription", "0.5"], "--oversubscription"),
        (["--endpoints", "216", "--oversubscription", "lots"], "--oversubscription"),
        (["--endpoints", "216", "--levels", "4"], "--levels"),
        (["--endpoints", "5000", "--radix", "36", "--levels", "2"], "--levels"),
        (["--endpoints", "0"], "--endpoints"),
        (["--endpoints", "-3"], "--endpoints"),
        (["--endpoints", "2.5"], "--endpoints"),
        (["--endpoints", "20000", "--radix", "36"], "--endpoints"),
        (["--endpoints", "8", "--nodes", "2"], "--endpoints"),
        ([], "--endpoints"),
        (["--nodes", "0", "--nics", "8"], "--nodes"),
        (["--nodes", "4", "--nics", "x"], "--nics"),
        (["--endpoints", "64", "--rail-optimized"], "--rail-optimized"),
        (["--nodes", "4", "--rail-optimized", "--levels", "1"], "--levels"),
        (["--nodes", "2000", "--radix", "36", "--rail-optimized"], "--nodes"),
        (["--endpoints", "216", "--plot", "net.txt"], "--plot"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(
    argv: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "network", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert flag in err and "\n" not in err


# --- properties --------------------------------------------------------------------------------

radixes = st.sampled_from([8, 16, 24, 32, 36, 40, 48, 64])
ratios = st.sampled_from([1.0, 1.5, 2.0, 3.0, 4.0, 5.0])


@settings(max_examples=80, deadline=None)
@given(radix=radixes, ratio=ratios, fraction=st.floats(0, 1))
def test_every_endpoint_and_uplink_has_a_port(radix: int, ratio: float, fraction: float) -> None:
    top = max_endpoints(radix, 3, ratio)
    n = max(1, round(fraction * top))
    plan = plan_fabric(n, radix, ratio)
    assert plan.leaves * plan.leaf_down_ports >= n
    assert plan.oversubscription <= ratio
    uplinks = plan.leaves * plan.leaf_up_ports
    if plan.levels == 2:
        assert plan.spines * radix >= uplinks and plan.leaves <= radix
    if plan.levels == 3:
        assert plan.core * radix >= uplinks and plan.aggregation * radix // 2 >= uplinks
        assert plan.pods <= radix
    assert plan.max_endpoints >= n


@settings(max_examples=60, deadline=None)
@given(radix=radixes, ratio=ratios, a=st.floats(0, 1), b=st.floats(0, 1))
def test_more_endpoints_never_need_fewer_switches_or_cables(
    radix: int, ratio: float, a: float, b: float
) -> None:
    top = max_endpoints(radix, 3, ratio)
    small, large = sorted(max(1, round(x * top)) for x in (a, b))
    lo, hi = plan_fabric(small, radix, ratio), plan_fabric(large, radix, ratio)
    assert lo.switches <= hi.switches and lo.cables <= hi.cables and lo.levels <= hi.levels


@settings(max_examples=60, deadline=None)
@given(radix=radixes, n=st.integers(1, 20000))
def test_more_oversubscription_never_needs_more_switches(radix: int, n: int) -> None:
    if n > max_endpoints(radix, 3):
        return
    plans = [plan_fabric(n, radix, r) for r in (1.0, 2.0, 3.0)]
    assert [p.switches for p in plans] == sorted((p.switches for p in plans), reverse=True)


@pytest.mark.parametrize("radix", [4, 8, 36, 64, 128])
def test_non_blocking_limits_are_k2_over_2_and_k3_over_4(radix: int) -> None:
    assert max_endpoints(radix, 2) == radix**2 // 2
    assert max_endpoints(radix, 3) == radix**3 // 4
    sweep = endpoint_sweep(radix)
    assert sweep[-1] == radix**3 // 4 and max_endpoints(radix, 2) in sweep
