"""The topology matrix (`gpupool topo`) from NVML discovery against the fake pynvml: an HGX-style
8-GPU NVSwitch box and a PCIe box across two sockets; CPU lists; affinity in declared
inventories and on the wire; and that the matrix reads the very node placement uses."""

from __future__ import annotations

from pathlib import Path

import pytest

import fixtures.fake_nvml as fake  # tests/ is on sys.path (tests/conftest.py)
from fixtures.fake_nvml import FakeNvml
from gpupool.core.cpu_list import cpus_of_masks, format_cpu_list, parse_cpu_list
from gpupool.core.hardware import Gpu, Inventory, Link, LinkKind, Node
from gpupool.inventory import (
    InventoryError,
    discover_nvml,
    inventory_from_dict,
    inventory_to_dict,
    load_inventory_file,
)
from gpupool.inventory.topology import LEGEND, cell, matrix, topology_to_dict
from gpupool.policy.placement import choose_gpus

T = FakeNvml
SOCKET0 = list(range(0, 56)) + list(range(112, 168))  # a DGX H100's, with hyperthreads
SOCKET1 = list(range(56, 112)) + list(range(168, 224))


def hgx_h100() -> FakeNvml:
    """8 GPUs, 18 NVLinks each to the NVSwitches; GPUs 0-3 on socket 0, 4-7 on socket 1."""
    gpus = fake.nvswitched(8, 18, name="NVIDIA H100 80GB HBM3")
    for i, g in enumerate(gpus):
        g.numa = 0 if i < 4 else 1
        g.cpu_affinity = SOCKET0 if i < 4 else SOCKET1
    return FakeNvml(gpus)  # topology: SYS for every pair, NVLink wins anyway


# The PCIe box: 6 GPUs, 0-2 on socket 0 and 3-5 on socket 1, one of each PCIe level.
PCIE_LEVELS = {
    (0, 1): T.NVML_TOPOLOGY_SINGLE,  # PIX
    (0, 2): T.NVML_TOPOLOGY_NODE,  # NODE
    (1, 2): T.NVML_TOPOLOGY_NODE,
    (3, 4): T.NVML_TOPOLOGY_MULTIPLE,  # PXB
    (3, 5): T.NVML_TOPOLOGY_HOSTBRIDGE,  # PHB
    (4, 5): T.NVML_TOPOLOGY_HOSTBRIDGE,
}  # every other pair: SYSTEM (across the sockets)


def pcie_box(sysfs: Path) -> FakeNvml:
    """NVML here answers neither CPU affinity nor NUMA node: the kernel's sysfs does."""
    gpus = [fake.FakeGpu(name="NVIDIA L40S") for _ in range(6)]
    nvml = FakeNvml(
        gpus,
        PCIE_LEVELS,
        hidden={"nvmlDeviceGetCpuAffinity"},
        unsupported={"nvmlDeviceGetNumaNodeId"},
    )
    for i, g in enumerate(gpus):
        device = sysfs / g.bus_id.lower()[4:]  # Linux's form: 0000:07:00.0
        device.mkdir(parents=True)
        (device / "local_cpulist").write_text("0-15,32-47\n" if i < 3 else "16-31,48-63\n")
        (device / "numa_node").write_text("0\n" if i < 3 else "1\n")
    return nvml


def test_hgx_box_reads_nv18_everywhere_and_its_sockets_cpus() -> None:
    inv = discover_nvml(hgx_h100(), node_name="hgx", cpu_count=224)
    rows = matrix(inv.nodes[0])
    assert [r.label for r in rows] == [f"GPU{i}" for i in range(8)]
    for r in rows:
        assert r.cells[r.index] == "X"
        assert {c for i, c in enumerate(r.cells) if i != r.index} == {"NV18"}
    assert [r.cpu_cell for r in rows] == ["0-55,112-167"] * 4 + ["56-111,168-223"] * 4
    assert [r.numa_cell for r in rows] == ["0"] * 4 + ["1"] * 4


def test_the_affinity_array_is_sized_for_the_machines_cpus() -> None:
    # 224 CPUs need 4 words of 64 bits: with one word, CPUs from 64 on would be cut off.
    gpu = discover_nvml(hgx_h100(), node_name="hgx", cpu_count=224).nodes[0].gpus[7]
    assert gpu.cpu_affinity == tuple(SOCKET1)
    small = discover_nvml(hgx_h100(), node_name="hgx", cpu_count=64).nodes[0].gpus[0]
    assert small.cpu_affinity == tuple(range(56))  # what one word holds, as NVML would


def test_pcie_box_across_two_sockets(tmp_path: Path) -> None:
    node = discover_nvml(pcie_box(tmp_path), node_name="pcie", sysfs=tmp_path).nodes[0]
    rows = matrix(node)
    assert rows[0].cells == ("X", "PIX", "NODE", "SYS", "SYS", "SYS")
    assert rows[2].cells == ("NODE", "NODE", "X", "SYS", "SYS", "SYS")
    assert rows[3].cells == ("SYS", "SYS", "SYS", "X", "PXB", "PHB")
    assert rows[5].cells == ("SYS", "SYS", "SYS", "PHB", "PHB", "X")
    # symmetric, as nvidia-smi's is
    assert all(rows[a].cells[b] == rows[b].cells[a] for a in range(6) for b in range(6))
    assert [r.cpu_cell for r in rows] == ["0-15,32-47"] * 3 + ["16-31,48-63"] * 3
    assert [r.numa_node for r in rows] == [0, 0, 0, 1, 1, 1]


def test_an_empty_or_failing_nvml_affinity_falls_back_to_sysfs(tmp_path: Path) -> None:
    nvml = pcie_box(tmp_path)
    nvml.hidden.clear()  # the call exists, but the GPUs' masks are empty
    assert discover_nvml(nvml, sysfs=tmp_path).nodes[0].gpus[4].cpu_affinity == tuple(
        parse_cpu_list("16-31,48-63")
    )
    failing = pcie_box(tmp_path / "again")
    failing.hidden.clear()
    failing.errors["nvmlDeviceGetCpuAffinity"] = fake.NVMLError_Unknown()
    gpu = discover_nvml(failing, sysfs=tmp_path / "again").nodes[0].gpus[0]
    assert format_cpu_list(gpu.cpu_affinity) == "0-15,32-47"
    gone = discover_nvml(hgx_h100(), sysfs=tmp_path / "nothing", cpu_count=0).nodes[0]
    assert gone.gpus[0].cpu_affinity == tuple(range(56))  # cpu_count 0 still asks one word


def test_no_affinity_anywhere_reads_na(tmp_path: Path) -> None:
    nvml = FakeNvml([fake.FakeGpu(numa=-1)], hidden={"nvmlDeviceGetCpuAffinity"})
    (row,) = matrix(discover_nvml(nvml, sysfs=tmp_path).nodes[0])
    assert (row.cells, row.cpu_cell, row.numa_cell) == (("X",), "N/A", "N/A")


def test_json_shape(tmp_path: Path) -> None:
    inv = discover_nvml(pcie_box(tmp_path), node_name="pcie", sysfs=tmp_path)
    data = topology_to_dict(inv)
    assert data["source"] == "nvml"
    assert data["legend"] == dict(LEGEND)
    (node,) = data["nodes"]  # type: ignore[misc]
    assert isinstance(node, dict)
    assert node["name"] == "pcie" and node["simulated"] is False
    gpus = node["gpus"]
    assert isinstance(gpus, list) and len(gpus) == 6
    assert gpus[3] == {
        "index": 3,
        "model": "NVIDIA L40S",
        "pci_bus_id": "0000:40:00.0",
        "connections": {
            "GPU0": "SYS",
            "GPU1": "SYS",
            "GPU2": "SYS",
            "GPU3": "X",
            "GPU4": "PXB",
            "GPU5": "PHB",
        },
        "cpu_affinity": "16-31,48-63",
        "cpu_ids": list(range(16, 32)) + list(range(48, 64)),
        "numa_affinity": 1,
    }
    links = node["links"]
    assert isinstance(links, list) and len(links) == 15  # every pair once, a < b
    assert {"a": 0, "b": 1, "type": "pix", "nvlinks": 0} in links
    assert {"a": 1, "b": 4, "type": "sys", "nvlinks": 0} in links


def test_nvlink_cells_and_undeclared_pairs_read_as_placement_counts_them() -> None:
    node = Node(
        "n",
        tuple(Gpu(i, "A100-80GB", 80 << 30) for i in range(4)),
        (Link(0, 1, LinkKind.NVLINK, 12), Link(1, 2, LinkKind.NVLINK), Link(2, 3, LinkKind.PXB)),
    )
    assert [cell(node, 0, b) for b in range(4)] == ["X", "NV12", "SYS", "SYS"]
    assert cell(node, 2, 1) == "NV"  # NVLink of unknown count (declared without count)
    assert cell(node, 3, 2) == "PXB"
    assert node.link_record(3, 0) == Link(0, 3, LinkKind.SYS)


def test_the_matrix_shows_what_placement_chooses_on(tmp_path: Path) -> None:
    """Same node, same links: placement puts a 2-GPU job on the PIX pair, the only PIX cell."""
    node = discover_nvml(pcie_box(tmp_path), sysfs=tmp_path).nodes[0]
    chosen = choose_gpus(node, list(range(6)), 2, set(range(6)))
    rows = matrix(node)
    assert chosen == (0, 1)
    assert [(r.index, b) for r in rows for b in range(6) if r.cells[b] == "PIX"] == [(0, 1), (1, 0)]
    # and on the socket-1 group it takes the PXB pair over the PHB ones
    assert choose_gpus(node, [3, 4, 5], 2, set(range(6))) == (3, 4)
    assert rows[3].cells[4] == "PXB"


@pytest.mark.parametrize(
    ("text", "cpus", "canonical"),
    [
        ("0-15,32-47", [*range(16), *range(32, 48)], "0-15,32-47"),
        ("3", [3], "3"),
        ("0-1,2,5\n", [0, 1, 2, 5], "0-2,5"),  # sysfs ends in a newline; ranges merge
        ("7,1-2,2", [1, 2, 7], "1-2,7"),
        ("", [], ""),
    ],
)
def test_cpu_lists(text: str, cpus: list[int], canonical: str) -> None:
    assert parse_cpu_list(text) == tuple(cpus)
    assert format_cpu_list(cpus) == canonical
    assert parse_cpu_list(format_cpu_list(cpus)) == tuple(cpus)


@pytest.mark.parametrize("text", ["a-3", "5-2", "-1", "1-2-3", "0x3"])
def test_bad_cpu_lists_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="CPU"):
        parse_cpu_list(text)


def test_affinity_masks() -> None:
    assert cpus_of_masks([0b1011]) == (0, 1, 3)
    assert cpus_of_masks([0, 1 | 1 << 63]) == (64, 127)
    assert cpus_of_masks([]) == ()


def test_declared_cpu_affinity(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(
        "nodes:\n  - name: box\n    gpus:\n"
        "      - {model: H100, numa: 0, cpu_affinity: '0-15,32-47'}\n"
        "      - {model: H100, numa: 1, cpu_affinity: 16}\n"
        "      - {model: H100}\n"
    )
    rows = matrix(load_inventory_file(path).nodes[0])
    assert [r.cpu_cell for r in rows] == ["0-15,32-47", "16", "N/A"]
    path.write_text("nodes:\n  - gpus:\n      - {model: H100, cpu_affinity: '0-x'}\n")
    with pytest.raises(InventoryError, match=r"inv.yaml:3: nodes\[0\].gpus\[0\].cpu_affinity"):
        load_inventory_file(path)


def test_cpu_affinity_on_the_inventory_wire() -> None:
    node = Node("n", (Gpu(0, "H100", 80 << 30, cpu_affinity=(0, 1, 2, 64)),))
    inv = Inventory((node,), source="nvml")
    data = inventory_to_dict(inv)
    assert inventory_from_dict(data) == inv
    gpu = data["nodes"][0]["gpus"][0]  # type: ignore[index]
    del gpu["cpu_affinity"]  # a dict from before CPU affinity was kept: unknown
    assert inventory_from_dict(data).nodes[0].gpus[0].cpu_affinity == ()
    gpu["cpu_affinity"] = [0, "1"]
    with pytest.raises(InventoryError, match=r"nodes\[0\].gpus\[0\].cpu_affinity"):
        inventory_from_dict(data)
