"""Declared inventories: shorthand, catalog, YAML files, the demo, the wire form, resolving."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from gpupool.core.gpu_catalog import catalog_memory_bytes
from gpupool.core.hardware import Gpu, Inventory, Link, LinkKind, Node
from gpupool.inventory import (
    InventoryError,
    demo_inventory,
    inventory_from_dict,
    inventory_to_dict,
    load_inventory_file,
    model_matches,
    parse_gpus_shorthand,
    resolve_inventory,
)
from gpupool.inventory import resolve as resolve_mod

GiB = 1 << 30


# ---------------------------------------------------------------- shorthand


def test_shorthand_four_a100() -> None:
    node = parse_gpus_shorthand("4xA100-80GB", "box", cpus=32, memory_bytes=256 * GiB)
    assert node.name == "box"
    assert node.cpus == 32 and node.memory_bytes == 256 * GiB
    assert [g.index for g in node.gpus] == [0, 1, 2, 3]
    assert {g.model for g in node.gpus} == {"A100-80GB"}
    assert {g.memory_bytes for g in node.gpus} == {80 * GiB}
    assert [g.uuid for g in node.gpus] == [f"GPU-declared-box-{i}" for i in range(4)]
    assert {g.pci_bus_id for g in node.gpus} == {""}
    assert {g.numa_node for g in node.gpus} == {None}
    # No topology is known: no links, so every pair is the worst kind.
    assert node.links == ()
    assert node.link(0, 1) == LinkKind.SYS


@pytest.mark.parametrize(
    ("text", "count", "model", "gib"),
    [
        ("8xH100", 8, "H100", 80),
        ("2xRTX4090", 2, "RTX 4090", 24),
        ("1xA10", 1, "A10", 24),
        ("4x A100-80GB", 4, "A100-80GB", 80),
        ("4X a100-80gb", 4, "A100-80GB", 80),
        (" 2 x rtx 4090 ", 2, "RTX 4090", 24),
        ("3xA100-40GB", 3, "A100-40GB", 40),
        ("1xH100-SXM", 1, "H100-SXM", 80),
        ("1xh100-pcie", 1, "H100-PCIe", 80),
        ("1xH200", 1, "H200", 141),
        ("1xB200", 1, "B200", 192),
        ("1xV100-16GB", 1, "V100-16GB", 16),
        ("1xV100-32GB", 1, "V100-32GB", 32),
        ("1xV100", 1, "V100", 32),
        ("1xL40S", 1, "L40S", 48),
        ("1xL4", 1, "L4", 24),
        ("1xA40", 1, "A40", 48),
        ("1xRTX3090", 1, "RTX 3090", 24),
        ("1xRTX2080TI", 1, "RTX 2080 Ti", 11),
        ("1xGTX1080Ti", 1, "GTX 1080 Ti", 11),
        ("1xMI300X", 1, "MI300X", 192),
    ],
)
def test_shorthand_catalog_models(text: str, count: int, model: str, gib: int) -> None:
    node = parse_gpus_shorthand(text, "n")
    assert len(node.gpus) == count
    assert node.gpus[0].model == model
    assert node.gpus[0].memory_bytes == gib * GiB


def test_shorthand_several_groups_have_consecutive_indices() -> None:
    node = parse_gpus_shorthand("2xA100-80GB,2xV100-32GB, 1xL4", "n")
    assert [(g.index, g.model, g.memory_bytes // GiB) for g in node.gpus] == [
        (0, "A100-80GB", 80),
        (1, "A100-80GB", 80),
        (2, "V100-32GB", 32),
        (3, "V100-32GB", 32),
        (4, "L4", 24),
    ]
    assert node.gpus[4].uuid == "GPU-declared-n-4"


def test_shorthand_unknown_model_with_size_suffix() -> None:
    node = parse_gpus_shorthand("2xMYGPU-48GB", "n")
    assert node.gpus[1].model == "MYGPU-48GB"
    assert node.gpus[1].memory_bytes == 48 * GiB


def test_shorthand_unknown_model_without_size_names_it_and_known_models() -> None:
    with pytest.raises(InventoryError) as exc:
        parse_gpus_shorthand("3xFOO", "n")
    msg = str(exc.value)
    assert "unknown GPU model 'FOO'" in msg
    assert "FOO-48GB" in msg  # how to give its size
    assert "H100" in msg and "A100-80GB" in msg and "MI300X" in msg  # the known models
    assert isinstance(exc.value, ValueError)


def test_shorthand_bare_a100_asks_for_its_size() -> None:
    with pytest.raises(InventoryError, match="write A100-40GB or A100-80GB"):
        parse_gpus_shorthand("4xA100", "n")


def test_shorthand_size_needs_a_separator() -> None:
    # "H100G" must not be read as a 100 GB GPU.
    with pytest.raises(InventoryError, match="unknown GPU model 'H100G'"):
        parse_gpus_shorthand("1xH100G", "n")


@pytest.mark.parametrize("text", ["", "  ", "H100", "0xH100", "4xA100-80GB,", "x4 H100", "4x"])
def test_shorthand_malformed(text: str) -> None:
    with pytest.raises(InventoryError, match="gpus"):
        parse_gpus_shorthand(text, "n")


# ---------------------------------------------------------------- catalog


@pytest.mark.parametrize(
    ("requested", "model", "expected"),
    [
        ("A100", "A100-80GB", True),
        ("A100", "NVIDIA A100-SXM4-80GB", True),
        ("a100", "NVIDIA A100-PCIE-40GB", True),
        ("A100-80GB", "NVIDIA A100-SXM4-80GB", True),
        ("A100-80GB", "NVIDIA A100 80GB PCIe", True),
        ("A100-80GB", "NVIDIA A100-PCIE-40GB", False),
        ("A100-80GB", "A100-40GB", False),
        ("A100-80GB", "A100-80GB", True),
        ("A10", "NVIDIA A100-SXM4-80GB", False),
        ("A10", "NVIDIA A10", True),
        ("A100", "NVIDIA A10", False),
        ("L4", "NVIDIA L40S", False),
        ("L40", "NVIDIA L40S", False),
        ("L40S", "NVIDIA L40S", True),
        ("H100", "NVIDIA H100 80GB HBM3", True),
        ("H100-SXM", "NVIDIA H100 80GB HBM3", True),  # NVML's name for the SXM5 part
        ("H100-SXM", "H100-SXM5-80GB", True),
        ("H100-SXM", "NVIDIA H100 PCIe", False),
        ("H100-PCIe", "NVIDIA H100 PCIe", True),
        ("H100", "H200", False),
        ("V100", "Tesla V100-SXM2-32GB", True),
        ("V100-32GB", "Tesla V100-SXM2-16GB", False),
        ("V100-32GB", "V100", True),  # the catalog knows a plain V100 is 32 GB
        ("RTX4090", "NVIDIA GeForce RTX 4090", True),
        ("rtx-4090", "NVIDIA GeForce RTX 4090", True),
        ("RTX3090", "NVIDIA GeForce RTX 4090", False),
        ("GTX1080TI", "NVIDIA GeForce GTX 1080 Ti", True),
        ("A6000", "NVIDIA RTX A6000", True),
        ("MI300X", "AMD Instinct MI300X", True),
        ("", "NVIDIA A100-SXM4-80GB", False),
        ("80GB", "NVIDIA A100-SXM4-80GB", False),
    ],
)
def test_model_matches(requested: str, model: str, expected: bool) -> None:
    assert model_matches(requested, model) is expected


def test_model_matches_uses_memory_when_the_name_has_no_size() -> None:
    # A declared "A100" of unknown size: the GPU's memory decides, NVML's totals being
    # a little under the nominal size.
    assert model_matches("A100-80GB", "A100", memory_bytes=81920 * 2**20)
    assert model_matches("H100-80GB", "NVIDIA H100 PCIe", memory_bytes=81559 * 2**20)
    assert not model_matches("A100-80GB", "A100", memory_bytes=40 * GiB)
    assert not model_matches("A100-80GB", "A100")  # size unknown: no match


def test_catalog_memory_of_nvml_names() -> None:
    assert catalog_memory_bytes("NVIDIA A100-SXM4-80GB") == 80 * GiB
    assert catalog_memory_bytes("NVIDIA H100 80GB HBM3") == 80 * GiB
    assert catalog_memory_bytes("Something-12GB") == 12 * GiB
    assert catalog_memory_bytes("Something") is None


# ---------------------------------------------------------------- YAML files

FULL = """\
nodes:
  - name: box1
    cpus: 64
    memory: 512GB           # decimal: 512 x 10^9 bytes
    gpus:
      - {index: 0, model: A100-80GB, memory: 80GiB, numa: 0, pci_bus_id: "0000:07:00.0", uuid: U0}
      - {index: 1, model: A100-80GB}
      - {index: 4, model: MYGPU, memory: 20GiB}
      - {index: 5, model: A100-80GB}
    links:
      - {gpus: [0, 1], type: nvlink, count: 12}
      - {gpus: [0, 4], type: sys}
      - {gpus: [1, 5], type: NV4}
    numa: [[0, 1], [4, 5]]
  - name: box2
    gpus: 2xH100
    links:
      - {gpus: [0, 1], type: pix}
"""


def write(tmp_path: Path, text: str, name: str = "inv.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_load_full_file(tmp_path: Path) -> None:
    inv = load_inventory_file(write(tmp_path, FULL), node_name="ignored")
    assert inv.source == "declared" and inv.note == ""
    box1, box2 = inv.nodes
    assert (box1.name, box1.cpus, box1.memory_bytes) == ("box1", 64, 512 * 10**9)
    assert box1.gpus[0] == Gpu(0, "A100-80GB", 80 * GiB, "U0", "0000:07:00.0", 0)
    assert box1.gpus[1] == Gpu(1, "A100-80GB", 80 * GiB, "GPU-declared-box1-1", "", 0)
    assert box1.gpus[2] == Gpu(4, "MYGPU", 20 * GiB, "GPU-declared-box1-4", "", 1)
    assert box1.gpus[3].numa_node == 1
    assert box1.link(0, 1) == LinkKind.NVLINK
    assert Link(0, 1, LinkKind.NVLINK, 12) in box1.links
    assert Link(1, 5, LinkKind.NVLINK, 4) in box1.links  # "nv4" carries its count
    assert box1.link(0, 4) == LinkKind.SYS
    assert box1.link(4, 5) == LinkKind.NODE  # same NUMA group, nothing better declared
    assert box1.link(0, 5) == LinkKind.SYS  # across NUMA groups
    assert [(lk.a, lk.b) for lk in box1.links] == sorted((lk.a, lk.b) for lk in box1.links)
    assert (box2.name, box2.cpus, box2.memory_bytes) == ("box2", 0, 0)
    assert [g.model for g in box2.gpus] == ["H100", "H100"]
    assert box2.gpus[1].uuid == "GPU-declared-box2-1"
    assert box2.link(0, 1) == LinkKind.PIX


def test_first_node_defaults_to_the_host_name(tmp_path: Path) -> None:
    inv = load_inventory_file(write(tmp_path, "nodes:\n  - gpus: 1xL4\n"), node_name="here")
    assert inv.nodes[0].name == "here"


def test_later_link_entry_overrides_earlier(tmp_path: Path) -> None:
    text = """\
    nodes:
      - gpus: 4xL4
        links:
          - {gpus: [0, 1, 2, 3], type: pxb}
          - {gpus: [2, 3], type: pix}
    """
    node = load_inventory_file(write(tmp_path, text), node_name="n").nodes[0]
    assert node.link(0, 3) == LinkKind.PXB
    assert node.link(2, 3) == LinkKind.PIX
    assert len(node.links) == 6


def assert_error(tmp_path: Path, text: str, expected: str) -> InventoryError:
    path = write(tmp_path, text)
    with pytest.raises(InventoryError) as exc:
        load_inventory_file(path, node_name="n")
    assert str(exc.value) == f"{path}:{expected}"
    return exc.value


def test_error_names_file_line_and_field(tmp_path: Path) -> None:
    text = """\
    nodes:
      - name: a
        gpus:
          - {model: A100-80GB}
          - {model: A100-80GB}
          - model: A100-80GB
            memory: 80XB
    """
    err = assert_error(
        tmp_path,
        text,
        "7: nodes[0].gpus[2].memory: unknown size unit 'XB' in '80XB' (use K, M, G, T)",
    )
    assert (err.line, err.field) == (7, "nodes[0].gpus[2].memory")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "nodes:\n  - gpus: 1xL4\n    numa_groups: [[0]]\n",
            "3: nodes[0]: unknown key 'numa_groups' (allowed: name, cpus, memory, gpus, links, numa, simulated)",
        ),
        ("nodez: []\n", "1: top level: unknown key 'nodez' (allowed: nodes)"),
        (
            "nodes:\n  - gpus:\n      - {index: 0, model: L4}\n      - {index: 0, model: L4}\n",
            "4: nodes[0].gpus[1].index: duplicate GPU index 0",
        ),
        (
            "nodes:\n  - gpus: 2xL4\n    links:\n      - {gpus: [0, 2], type: nvlink}\n",
            "4: nodes[0].links[0].gpus: no GPU 2 on this node",
        ),
        (
            "nodes:\n  - name: a\n    gpus: 1xL4\n  - name: a\n    gpus: 1xL4\n",
            "4: nodes[1].name: duplicate node name 'a'",
        ),
        (
            "nodes:\n  - gpus: 2xL4\n    links:\n      - {gpus: [0, 1], type: infiniband}\n",
            (
                "4: nodes[0].links[0].type: unknown link type 'infiniband' "
                "(one of: nvlink, pix, pxb, phb, node, sys)"
            ),
        ),
        (
            "nodes:\n  - gpus: 2xL4\n    links:\n      - {gpus: [0, 1], type: pix, count: 2}\n",
            "4: nodes[0].links[0].count: count applies to nvlink links only",
        ),
        (
            "nodes:\n  - gpus: 2xL4\n    links:\n      - {gpus: [0], type: pix}\n",
            "4: nodes[0].links[0].gpus: expected at least two distinct GPU indices",
        ),
        (
            "nodes:\n  - gpus: 2xL4\n    numa: [[0, 1], [1]]\n",
            "3: nodes[0].numa[1]: GPU 1 is in more than one NUMA group",
        ),
        (
            "nodes:\n  - gpus:\n      - {model: L4, numa: 1}\n    numa: [[0]]\n",
            "4: nodes[0].numa: GPU 0 declares numa 1 but is in NUMA group 0",
        ),
        (
            "nodes:\n  - gpus: 1xL4\n    cpus: many\n",
            "3: nodes[0].cpus: expected a whole number >= 1, got 'many'",
        ),
        (
            "nodes:\n  - gpus: 1xL4\n    cpus: true\n",
            "3: nodes[0].cpus: expected a whole number >= 1, got True",
        ),
        (
            "nodes:\n  - gpus: 1xL4\n    memory: 512\n",
            "3: nodes[0].memory: expected a size with a unit, e.g. 80GB, got 512",
        ),
        (
            "nodes:\n  - gpus: 1xL4\n  - gpus: 1xL4\n",
            "3: nodes[1].name: required (only the first node defaults to this host)",
        ),
        ("nodes:\n  - name: a\n", "2: nodes[0].gpus: required"),
        ("nodes:\n  - gpus: []\n", "2: nodes[0].gpus: a node needs at least one GPU"),
        ("nodes:\n  - gpus:\n      - {index: 0}\n", "3: nodes[0].gpus[0]: model: required"),
        (
            "nodes:\n  - gpus:\n      - {model: WEIRD}\n",
            "3: nodes[0].gpus[0].memory: required: the catalog does not know 'WEIRD'",
        ),
        ("nodes:\n  - gpus: 2xBOGUS\n", "2: nodes[0].gpus: unknown GPU model 'BOGUS'"),
        ("nodes: []\n", "1: nodes: expected at least one node"),
        ("nodes: {a: 1}\n", "1: nodes: expected a list of nodes"),
        ("- a\n", "1: top level: expected a mapping with keys nodes"),
        ("nodes:\n  - gpus: 1xL4\n    gpus: 2xL4\n", "3: nodes[0]: duplicate key 'gpus'"),
        ("nodes:\n  - gpus: [1xL4\n", "3: not valid YAML"),
        ("nodes:\n  - gpus: !!python/name:os.system 1xL4\n", "2: nodes[0].gpus: not a plain value"),
    ],
)
def test_file_errors(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InventoryError) as exc:
        load_inventory_file(path, node_name="n")
    assert str(exc.value).startswith(f"{path}:{expected}"), str(exc.value)


def test_empty_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match="inv.yaml: empty"):
        load_inventory_file(write(tmp_path, ""))
    with pytest.raises(InventoryError, match="nope.yaml: cannot read"):
        load_inventory_file(tmp_path / "nope.yaml")


# ---------------------------------------------------------------- demo


def test_demo_inventory() -> None:
    inv = demo_inventory("myhost")
    assert inv.source == "demo"
    (node,) = inv.nodes
    assert node.name == "myhost"
    assert len(node.gpus) == 8
    assert {(g.model, g.memory_bytes) for g in node.gpus} == {("A100-80GB", 80 * GiB)}
    assert [g.numa_node for g in node.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    for a in range(8):
        for b in range(a + 1, 8):
            same_island = (a < 4) == (b < 4)
            assert node.link(a, b) == (LinkKind.NVLINK if same_island else LinkKind.SYS)
    assert {lk.nvlinks for lk in node.links} == {12}
    assert node.nvlink_peers(5) == (4, 6, 7)


# ---------------------------------------------------------------- wire


def sample_inventories(tmp_path: Path) -> list[Inventory]:
    return [
        demo_inventory("h"),
        Inventory((parse_gpus_shorthand("2xA100-80GB,1xL4", "x", 8, GiB),), "declared", "a note"),
        load_inventory_file(write(tmp_path, FULL)),
    ]


def test_wire_round_trip_is_exact(tmp_path: Path) -> None:
    for inv in sample_inventories(tmp_path):
        d = inventory_to_dict(inv)
        again = inventory_from_dict(json.loads(json.dumps(d)))
        assert again == inv
        assert again.nodes[0].link(0, 1) == inv.nodes[0].link(0, 1)


def test_wire_form() -> None:
    inv = Inventory(
        (
            Node(
                "n",
                (Gpu(0, "L4", GiB), Gpu(1, "L4", GiB, numa_node=1, cpu_affinity=(4, 5))),
                (Link(0, 1, LinkKind.PHB),),
            ),
        ),
        "nvml",
    )
    d = inventory_to_dict(inv)
    assert d == {
        "source": "nvml",
        "note": "",
        "nodes": [
            {
                "name": "n",
                "cpus": 0,
                "memory_bytes": 0,
                "simulated": False,
                "gpus": [
                    {
                        "index": 0,
                        "model": "L4",
                        "memory_bytes": GiB,
                        "uuid": "",
                        "pci_bus_id": "",
                        "numa_node": None,
                        "cpu_affinity": [],
                    },
                    {
                        "index": 1,
                        "model": "L4",
                        "memory_bytes": GiB,
                        "uuid": "",
                        "pci_bus_id": "",
                        "numa_node": 1,
                        "cpu_affinity": [4, 5],
                    },
                ],
                "links": [{"a": 0, "b": 1, "kind": "phb", "nvlinks": 0}],
            }
        ],
    }


def _mutated(change: Any) -> dict[str, Any]:
    d = inventory_to_dict(demo_inventory("h"))
    change(d)
    return d


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d.pop("source"), "source"),
        (lambda d: d["nodes"][0].pop("cpus"), "nodes[0].cpus"),
        (lambda d: d["nodes"][0]["gpus"][1].update(index="1"), "nodes[0].gpus[1].index"),
        (lambda d: d["nodes"][0]["gpus"][1].update(index=True), "nodes[0].gpus[1].index"),
        (lambda d: d["nodes"][0]["gpus"][1].update(model=None), "nodes[0].gpus[1].model"),
        (lambda d: d["nodes"][0]["links"][2].update(kind="warp"), "nodes[0].links[2].kind"),
        (lambda d: d["nodes"][0].update(gpus={}), "nodes[0].gpus"),
        (lambda d: d["nodes"].append(3), "nodes[1]"),
    ],
)
def test_wire_refuses_bad_dicts(change: Any, field: str) -> None:
    with pytest.raises(InventoryError) as exc:
        inventory_from_dict(_mutated(change))
    assert exc.value.field == field


# ---------------------------------------------------------------- resolving


class NoNvml:
    """Any use fails the test: declared inventories must not touch NVML."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"NVML used: {name}")


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resolve_mod, "local_cpus", lambda: 48)
    monkeypatch.setattr(resolve_mod, "local_memory_bytes", lambda: 384 * GiB)


def test_resolve_file_beats_shorthand(tmp_path: Path, machine: None) -> None:
    path = write(
        tmp_path,
        "nodes:\n  - gpus: 2xL4\n    cpus: 8\n  - name: other\n    gpus: 1xL4\n    simulated: true\n",
    )
    inv = resolve_inventory(gpus="4xH100", inventory_file=str(path), node_name="me", nvml=NoNvml())
    assert inv.source == "declared"
    me, other = inv.nodes
    assert [g.model for g in me.gpus] == ["L4", "L4"]
    assert (me.cpus, me.memory_bytes) == (8, 384 * GiB)  # declared cpus kept, memory filled
    assert (other.cpus, other.memory_bytes) == (0, 0)  # simulated: left undeclared
    assert "--gpus 4xH100 ignored" in inv.note and "\n" not in inv.note


def test_resolve_shorthand_beats_nvml(machine: None) -> None:
    inv = resolve_inventory(gpus="4xH100", node_name="me", nvml=NoNvml())
    assert inv.source == "declared" and inv.note == ""
    (node,) = inv.nodes
    assert (node.name, len(node.gpus), node.cpus, node.memory_bytes) == ("me", 4, 48, 384 * GiB)


def test_resolve_bad_shorthand_raises() -> None:
    with pytest.raises(InventoryError):
        resolve_inventory(gpus="4xNOPE", node_name="me", nvml=NoNvml())


def test_resolve_node_name_defaults_to_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resolve_mod.socket, "gethostname", lambda: "thishost")
    assert resolve_inventory(gpus="1xL4", nvml=NoNvml()).nodes[0].name == "thishost"


def test_local_memory_from_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16384 kB\nMemFree:   10 kB\n")
    assert resolve_mod.local_memory_bytes(meminfo) == 16384 * 1024
    assert resolve_mod.local_memory_bytes(Path("/proc/meminfo")) > 0
    assert resolve_mod.local_cpus() >= 1
