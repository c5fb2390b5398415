"""The hardware catalog: data, sources, lookup, override files, `gpupool plan catalog`."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpupool.cli.main import main
from gpupool.core.gpu_catalog import CATALOG as CORE_GPUS
from gpupool.plan.catalog import SECTIONS, Catalog, load_catalog, name_key
from gpupool.plan.quantity import PlanError

BUILTIN = load_catalog()
NOT_FIGURES = {"name", "aliases", "sources"}


def all_entries(catalog: Catalog = BUILTIN) -> list[Any]:
    return [e for section in SECTIONS for e in getattr(catalog, section)]


def write(tmp_path: Path, text: str, name: str = "mine.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rich wraps at 80 columns when not on a terminal; the long source column needs room."""
    monkeypatch.setenv("COLUMNS", "400")


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["plan", "catalog", *argv, "--json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def run_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["plan", "catalog", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    return err


# --- the data: every figure sourced and dated ------------------------------------------------


def test_every_figure_has_a_source_and_a_valid_date() -> None:
    today = dt.date.today()
    checked = 0
    for entry in all_entries():
        for field in dataclasses.fields(entry):
            if field.name in NOT_FIGURES:
                continue
            sourced = entry.source_of(field.name)
            assert sourced.source.strip(), f"{entry.name}.{field.name} has no source"
            fmt = "%Y-%m-%d" if len(sourced.as_of) == 10 else "%Y-%m"
            when = dt.datetime.strptime(sourced.as_of, fmt).date()
            assert dt.date(2000, 1, 1) <= when <= today, f"{entry.name}.{field.name}: {when}"
            checked += 1
    assert checked > 300  # 22 GPUs x 10 figures alone


def test_the_catalog_has_what_the_issue_lists() -> None:
    names = {name_key(g.name) for g in BUILTIN.gpus}
    for wanted in ["V100", "A100-40GB", "A100-80GB", "H100-SXM", "H100-PCIe", "H200", "B200"]:
        assert name_key(wanted) in names
    for wanted in ["L40S", "L4", "A10", "RTX 4090", "RTX 3090", "RTX 2080 Ti", "GTX 1080 Ti"]:
        assert name_key(wanted) in names
    assert BUILTIN.gpu("MI300X").vendor == "AMD"
    for ic in ["pcie3-x16", "pcie4-x16", "pcie5-x16", "nvlink2", "nvlink3", "nvlink4", "nvlink5"]:
        assert BUILTIN.interconnect(ic).bandwidth_gbs > 0
    for ic in ["ib-hdr", "ib-ndr", "eth-10g", "eth-25g", "eth-100g", "eth-400g"]:
        assert BUILTIN.interconnect(ic).latency_us > 0


def test_figures_others_rely_on() -> None:
    # Other plan commands' oracles use these exact figures.
    dgx = BUILTIN.server("DGX A100")
    assert (dgx.gpus, dgx.gpu, dgx.max_power_kw, dgx.price_usd) == (8, "A100-80GB", 6.5, 199000)
    assert dgx.source_of("price_usd").as_of == "2020-05-14"
    assert BUILTIN.server("DGX H100").max_power_kw == 10.2
    assert BUILTIN.server("Lambda Hyperplane V100").price_usd == 109008
    workstation = BUILTIN.server("Lambda Quad RTX 2080 Ti")
    assert (workstation.gpus, workstation.price_usd) == (4, 8000)
    p4d = BUILTIN.cloud("aws-p4d.24xlarge")
    assert (p4d.usd_per_hour, p4d.gpus, p4d.gpu, p4d.pricing) == (
        32.7726,
        8,
        "A100-40GB",
        "on-demand",
    )
    reserved = BUILTIN.cloud("aws-p3dn.24xlarge-reserved-1y")
    assert reserved.usd_per_hour * 8760 == pytest.approx(160308)  # seed 001's $/year
    assert reserved.pricing == "reserved-1y"
    assert BUILTIN.cloud("aws-p3dn.24xlarge").usd_per_hour == 31.212
    assert BUILTIN.cloud("lambda-4x-gtx1080ti").usd_per_hour == 1.5  # seed 004


def test_gpu_figures_from_the_datasheets() -> None:
    a100 = BUILTIN.gpu("A100-80GB")
    assert (a100.bf16_tflops, a100.fp16_tflops, a100.fp32_tflops) == (312, 312, 19.5)
    assert (a100.memory_bandwidth_gbs, a100.nvlink_gbs, a100.pcie_gen, a100.tdp_w) == (
        2039,
        600,
        4,
        400,
    )
    h100 = BUILTIN.gpu("H100-SXM")
    assert (h100.bf16_tflops, h100.memory_bandwidth_gbs, h100.nvlink_gbs) == (989, 3350, 900)
    assert (h100.pcie_gen, h100.tdp_w) == (5, 700)
    v100 = BUILTIN.gpu("V100")
    assert v100.bf16_tflops is None and v100.fp16_tflops == 125
    assert v100.peak_tflops("bf16") == 125  # falls back to FP16
    assert v100.peak_tflops("fp32") == 15.7
    pascal = BUILTIN.gpu("GTX 1080 Ti")
    assert pascal.fp16_tflops == pytest.approx(pascal.fp32_tflops / 64, rel=0.01)
    with pytest.raises(PlanError, match="precision"):
        a100.peak_tflops("fp8")


def test_interconnects_are_per_direction() -> None:
    per_direction = {"pcie3-x16": 15.75, "pcie4-x16": 31.5, "pcie5-x16": 63, "ib-hdr": 25}
    per_direction |= {"ib-ndr": 50, "eth-100g": 12.5, "eth-400g": 50, "eth-10g": 1.25}
    for name, gbs in per_direction.items():
        assert BUILTIN.interconnect(name).bandwidth_gbs == gbs
    # A GPU's NVLink total (both directions) is twice its generation's per-direction figure.
    for gpu, link in [("V100", "nvlink2"), ("A100-80GB", "nvlink3"), ("H100-SXM", "nvlink4")]:
        assert BUILTIN.gpu(gpu).nvlink_gbs == 2 * BUILTIN.interconnect(link).bandwidth_gbs
    assert BUILTIN.gpu("B200").nvlink_gbs == 2 * BUILTIN.interconnect("nvlink5").bandwidth_gbs


def test_servers_and_clouds_name_catalog_gpus() -> None:
    gpu_names = {g.name for g in BUILTIN.gpus}
    assert {s.gpu for s in BUILTIN.servers} <= gpu_names
    assert {c.gpu for c in BUILTIN.clouds} <= gpu_names


# --- lookup ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spelling", "name"),
    [
        ("a100-80gb", "A100-80GB"),
        ("A100 80GB", "A100-80GB"),
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("A100_SXM4_40GB", "A100-40GB"),
        ("RTX4090", "RTX 4090"),
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("GTX1080TI", "GTX 1080 Ti"),
        ("h100", "H100-SXM"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("Tesla V100-SXM2-32GB", "V100"),
        ("mi300x", "MI300X"),
    ],
)
def test_gpu_lookup_by_alias_and_case(spelling: str, name: str) -> None:
    assert BUILTIN.gpu(spelling).name == name


def test_every_core_gpu_model_name_resolves() -> None:
    """A pool's GPU model strings (core.gpu_catalog names and aliases) find a catalog entry."""
    for model in CORE_GPUS:
        for spelling in (model.name, *model.aliases):
            assert BUILTIN.gpu(spelling).memory_gb == pytest.approx(model.memory_gib, rel=0.1)


def test_other_sections_look_up_ignoring_case_and_separators() -> None:
    assert BUILTIN.server("dgx-a100").name == "DGX A100"
    assert BUILTIN.interconnect("NVLINK3").name == "nvlink3"
    assert BUILTIN.cloud("AWS P4D.24XLARGE").name == "aws-p4d.24xlarge"


@pytest.mark.parametrize(
    ("method", "what", "known"),
    [
        ("gpu", "GPU", "A100-80GB"),
        ("server", "server", "DGX A100"),
        ("interconnect", "interconnect", "nvlink3"),
        ("cloud", "cloud instance", "aws-p4d.24xlarge"),
    ],
)
def test_unknown_names_list_the_known_ones(method: str, what: str, known: str) -> None:
    with pytest.raises(PlanError) as err:
        getattr(BUILTIN, method)("no-such-thing")
    message = str(err.value)
    assert f"unknown {what} 'no-such-thing'" in message and known in message


# A name with its case changed and separators shuffled resolves to the same entry.
@settings(max_examples=60, deadline=None)
@given(
    index=st.integers(min_value=0, max_value=len(BUILTIN.gpus) - 1),
    upper=st.lists(st.booleans(), min_size=20, max_size=20),
    seps=st.lists(st.sampled_from(["", "", "-", " ", "_"]), min_size=20, max_size=20),
)
def test_name_key_ignores_case_and_separators(
    index: int, upper: list[bool], seps: list[str]
) -> None:
    gpu = BUILTIN.gpus[index]
    letters = [c for c in gpu.name if c not in "- _"]
    spelled = "".join(
        (c.upper() if up else c.lower()) + sep for c, up, sep in zip(letters, upper, seps)
    )
    assert BUILTIN.gpu(spelled).name == gpu.name


# --- override files --------------------------------------------------------------------------

OVERRIDE = """\
gpus:
  - name: a100-80gb            # same name, another spelling: replaces the built-in entry
    vendor: NVIDIA
    memory_gb: 80
    memory_bandwidth_gbs: 1935
    bf16_tflops: 312
    fp16_tflops: 312
    fp32_tflops: 19.5
    nvlink_gbs: 600
    pcie_gen: 4
    tdp_w: 300
    price_usd: 15000
    source: "our purchase order"
    as_of: 2024-03-01
    sources:
      price_usd: {source: "vendor quote #42", as_of: "2024-02"}
  - name: Future-1
    vendor: Acme
    aliases: [F1]
    memory_gb: 256
    memory_bandwidth_gbs: 10000
    bf16_tflops: null
    fp16_tflops: 4000
    fp32_tflops: 100
    nvlink_gbs: 0
    pcie_gen: 6
    tdp_w: 1200
    price_usd: null
    source: "rumour"
    as_of: "2026-01"
servers:
  - name: Our Box
    gpu: f1
    gpus: 4
    max_power_kw: 6
    price_usd: 100000
    source: "our rack plan"
    as_of: "2025-01"
"""


def test_override_replaces_and_adds(tmp_path: Path) -> None:
    catalog = load_catalog(write(tmp_path, OVERRIDE))
    replaced = catalog.gpu("A100-SXM4-80GB")  # the built-in name and aliases are kept
    assert replaced is catalog.gpu("a100-80gb") and replaced.name == "A100-80GB"
    assert (replaced.tdp_w, replaced.price_usd, replaced.memory_bandwidth_gbs) == (300, 15000, 1935)
    assert replaced.source_of("price_usd").source == "vendor quote #42"
    assert replaced.source_of("tdp_w") == replaced.source_of("*")
    assert replaced.source_of("tdp_w").as_of == "2024-03-01"  # YAML's date read as a date
    assert [g.name for g in catalog.gpus].index("A100-80GB") == [
        g.name for g in BUILTIN.gpus
    ].index("A100-80GB")  # replaced in place
    added = catalog.gpu("F1")
    assert added.name == "Future-1" and added.peak_tflops() == 4000
    box = catalog.server("our box")
    assert (box.gpu, box.gpus) == ("Future-1", 4)
    # Everything else is untouched.
    assert len(catalog.gpus) == len(BUILTIN.gpus) + 1
    assert catalog.server("DGX A100") == BUILTIN.server("DGX A100")
    assert catalog.interconnects == BUILTIN.interconnects
    assert catalog.clouds == BUILTIN.clouds


def test_an_empty_override_changes_nothing(tmp_path: Path) -> None:
    assert load_catalog(write(tmp_path, "# nothing yet\n")) == BUILTIN


GOOD_GPU = {
    "name": "X1",
    "vendor": "Acme",
    "memory_gb": 24,
    "memory_bandwidth_gbs": 900,
    "bf16_tflops": 100,
    "fp16_tflops": 100,
    "fp32_tflops": 20,
    "nvlink_gbs": 0,
    "pcie_gen": 4,
    "tdp_w": 300,
    "price_usd": None,
    "source": "datasheet",
    "as_of": "2024-01",
}
GOOD_LINK = {
    "name": "x-link",
    "kind": "ethernet",
    "bandwidth_gbs": 10,
    "latency_us": 5,
    "source": "spec",
    "as_of": "2024-01",
}


def gpus_file(tmp_path: Path, **changes: Any) -> Path:
    """An override with one good GPU first and a second GPU with `changes` (None = drop)."""
    bad = {k: v for k, v in {**GOOD_GPU, "name": "X2", **changes}.items() if v != "DROP"}
    doc = {"gpus": [GOOD_GPU, bad]}
    return write(tmp_path, json.dumps(doc), "catalog.yaml")  # JSON is YAML


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"memory_gb": "lots"}, "catalog.yaml: gpus[1].memory_gb: expected a number"),
        ({"memory_gb": True}, "gpus[1].memory_gb: expected a number"),
        ({"memory_gb": -80}, "gpus[1].memory_gb: must be positive"),
        ({"nvlink_gbs": -1}, "gpus[1].nvlink_gbs: must not be negative"),
        ({"fp16_tflops": None}, "gpus[1].fp16_tflops: expected a number"),
        ({"pcie_gen": 4.5}, "gpus[1].pcie_gen: expected a whole number"),
        ({"vendor": ""}, "gpus[1].vendor: expected a non-empty string"),
        ({"aliases": "X"}, "gpus[1].aliases: expected a list of names"),
        ({"tdp_w": "DROP"}, "catalog.yaml: gpus[1].tdp_w: missing"),
        ({"colour": "green"}, "catalog.yaml: gpus[1].colour: unknown field"),
        ({"source": "DROP"}, "gpus[1].source: missing (every figure needs a source"),
        ({"as_of": "DROP"}, "gpus[1].as_of: missing"),
        ({"as_of": "last year"}, "gpus[1].as_of: expected a date YYYY-MM or YYYY-MM-DD"),
        ({"as_of": "2024-13"}, "gpus[1].as_of: expected a date"),
        ({"sources": {"colour": {"source": "s", "as_of": "2024-01"}}}, "gpus[1].sources.colour"),
        ({"sources": {"name": {"source": "s", "as_of": "2024-01"}}}, "gpus[1].sources.name"),
        ({"sources": {"tdp_w": {"source": "s"}}}, "gpus[1].sources.tdp_w.as_of: missing"),
        ({"sources": {"tdp_w": "a blog"}}, "gpus[1].sources.tdp_w: expected a mapping"),
        ({"name": "x1"}, "catalog.yaml: gpus[1].name: 'x1' appears twice in gpus"),
    ],
)
def test_malformed_gpu_entries_name_file_entry_and_field(
    tmp_path: Path, changes: dict[str, Any], expected: str
) -> None:
    with pytest.raises(PlanError) as err:
        load_catalog(gpus_file(tmp_path, **changes))
    assert expected in str(err.value)
    assert str(tmp_path / "catalog.yaml") in str(err.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpus: [1, 2\n", "not valid YAML"),
        ("- a\n- b\n", "expected a mapping with sections gpus, servers"),
        ("tpus: []\n", "tpus: unknown section"),
        ("gpus: {name: X}\n", "gpus: expected a list of entries"),
        ("gpus: [just-a-name]\n", "gpus[0]: expected a mapping of fields"),
        (
            json.dumps({"interconnects": [{**GOOD_LINK, "kind": "carrier-pigeon"}]}),
            "interconnects[0].kind: expected one of pcie, nvlink, infiniband, ethernet",
        ),
        (
            json.dumps({"interconnects": [GOOD_LINK, {**GOOD_LINK, "name": "y", "latency_us": "x"}]}),
            "interconnects[1].latency_us: expected a number",
        ),
        (
            json.dumps({"servers": [{"name": "S", "gpu": "Z9", "gpus": 8, "max_power_kw": 1,
                                     "price_usd": None, "source": "s", "as_of": "2024-01"}]}),
            "servers[0].gpu: unknown GPU 'Z9'",
        ),
        (
            json.dumps({"clouds": [{"name": "c", "provider": "p", "instance": "i", "gpu": "V100",
                                    "gpus": 0, "usd_per_hour": 1, "pricing": "spot",
                                    "source": "s", "as_of": "2024-01"}]}),
            "clouds[0].gpus: expected a whole number >= 1",
        ),
    ],
)  # fmt: skip
def test_malformed_files_name_file_section_and_entry(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = write(tmp_path, text, "catalog.yaml")
    with pytest.raises(PlanError) as err:
        load_catalog(path)
    assert expected in str(err.value) and str(path) in str(err.value)


def test_a_missing_override_file_names_the_flag(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="--catalog: cannot read .*nope.yaml"):
        load_catalog(tmp_path / "nope.yaml")


# Any sensible figures in an override come back exactly as written.
@settings(max_examples=40, deadline=None)
@given(
    memory=st.floats(min_value=0.5, max_value=1e4, allow_nan=False),
    bandwidth=st.floats(min_value=1, max_value=1e5, allow_nan=False),
    tflops=st.floats(min_value=0.01, max_value=1e5, allow_nan=False),
    pcie=st.integers(min_value=1, max_value=7),
    price=st.one_of(st.none(), st.floats(min_value=1, max_value=1e7, allow_nan=False)),
)
def test_override_figures_round_trip(
    tmp_path_factory: pytest.TempPathFactory,
    memory: float,
    bandwidth: float,
    tflops: float,
    pcie: int,
    price: float | None,
) -> None:
    entry = {**GOOD_GPU, "memory_gb": memory, "memory_bandwidth_gbs": bandwidth}
    entry |= {"fp16_tflops": tflops, "bf16_tflops": None, "pcie_gen": pcie, "price_usd": price}
    path = write(tmp_path_factory.mktemp("cat"), json.dumps({"gpus": [entry]}))
    gpu = load_catalog(path).gpu("X1")
    assert (gpu.memory_gb, gpu.memory_bandwidth_gbs, gpu.pcie_gen) == (memory, bandwidth, pcie)
    assert gpu.peak_tflops("bf16") == tflops and gpu.price_usd == price


# --- the command -----------------------------------------------------------------------------


def test_cli_table_lists_all_four_sections(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "catalog"]) == 0
    out = capsys.readouterr().out
    for title in ["GPUs", "Servers", "Interconnects", "Cloud prices"]:
        assert title in out
    for text in ["A100-80GB", "DGX A100", "$199,000", "nvlink4", "aws-p4d.24xlarge", "$32.77"]:
        assert text in out
    assert "every figure sourced and dated" in out and "units:" in out


def test_cli_one_section_with_sources(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "catalog", "servers", "--sources"]) == 0
    out = capsys.readouterr().out
    assert "DGX A100" in out and "price_usd: [2]" in out and "(as of 2020-05-14)" in out
    assert "[1] NVIDIA DGX A100 datasheet" in out
    assert "Cloud prices" not in out and "GPUs (" not in out


def test_cli_json_is_the_whole_catalog_with_sources(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys)
    assert set(SECTIONS) <= set(out)
    assert out["counts"] == {s: len(getattr(BUILTIN, s)) for s in SECTIONS}
    assert out["inputs"] == {"section": None, "sources": False, "catalog": None}
    dgx = next(s for s in out["servers"] if s["name"] == "DGX A100")
    assert (dgx["max_power_kw"], dgx["price_usd"]) == (6.5, 199000)
    assert dgx["sources"]["price_usd"]["as_of"] == "2020-05-14"
    p4d = next(c for c in out["clouds"] if c["name"] == "aws-p4d.24xlarge")
    assert p4d["usd_per_hour"] == 32.7726
    assert p4d["usd_per_gpu_hour"] == pytest.approx(32.7726 / 8)
    v100 = next(g for g in out["gpus"] if g["name"] == "V100")
    assert v100["bf16_tflops"] is None and v100["peak_bf16_tflops"] == 125
    assert all(e["sources"]["*"]["source"] for s in SECTIONS for e in out[s])


def test_cli_json_with_an_override(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, OVERRIDE)
    out = run_json(capsys, "gpus", "--catalog", str(path))
    assert list(out["counts"]) == ["gpus"] and "servers" not in out
    assert out["override"] == {"added": ["Future-1", "Our Box"], "replaced": ["A100-80GB"]}
    assert "1 replaced, 2 added" in out["summary"]


def test_cli_bad_section_and_bad_override_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert "SECTION: expected one of gpus, servers" in run_error(capsys, "tpus")
    path = gpus_file(tmp_path, memory_gb="lots")
    err = run_error(capsys, "--catalog", str(path))
    assert "catalog.yaml: gpus[1].memory_gb: expected a number" in err
    assert "--catalog: cannot read" in run_error(capsys, "--catalog", str(tmp_path / "no.yaml"))


def test_cli_plot_writes_a_png(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    png = tmp_path / "gpus.png"
    assert main(["plan", "catalog", "gpus", "--plot", str(png)]) == 0
    assert png.read_bytes().startswith(b"\x89PNG")
    assert str(png) in capsys.readouterr().err
    assert "--plot" in run_error(capsys, "--plot", str(tmp_path / "gpus.txt"))
