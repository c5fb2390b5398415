"""NVML discovery against a fake pynvml, and the real pynvml on a machine without a GPU."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import fixtures.fake_nvml as fake  # tests/ is on sys.path (tests/conftest.py)
from fixtures.fake_nvml import FakeGpu, FakeNvml
from gpupool.core.hardware import LinkKind
from gpupool.inventory import DiscoveryError, discover_nvml, resolve_inventory
from gpupool.inventory import resolve as resolve_mod
from gpupool.inventory.nvml import normalize_bus_id

GiB = 1 << 30


T = FakeNvml  # for the NVML_TOPOLOGY_* constants


def two_islands(**kw: Any) -> Any:
    """8 GPUs: NVLink inside {0,1,2,3} and {4,5,6,7} (2 links per pair), PCIe elsewhere."""
    pairs = {
        (a, b): 2
        for island in ((0, 1, 2, 3), (4, 5, 6, 7))
        for a in island
        for b in island
        if a < b
    }
    gpus = fake.nvlinked(pairs, 8)
    for i, g in enumerate(gpus):
        g.numa = 0 if i < 4 else 1
        g.name = b"NVIDIA A100-SXM4-80GB" if i == 0 else "NVIDIA A100-SXM4-80GB"
    topology = {(a, b): T.NVML_TOPOLOGY_SYSTEM for a in range(4) for b in range(4, 8)}
    topology[(0, 4)] = T.NVML_TOPOLOGY_NODE  # differs from the default, to see it is read
    return FakeNvml(gpus, topology, **kw)


def test_discovers_gpus() -> None:
    nvml = two_islands()
    inv = discover_nvml(nvml, node_name="gpubox")
    assert inv.source == "nvml"
    (node,) = inv.nodes
    assert node.name == "gpubox"
    assert (node.cpus, node.memory_bytes) == (0, 0)  # resolve_inventory fills these
    assert [g.index for g in node.gpus] == list(range(8))
    assert {g.model for g in node.gpus} == {"NVIDIA A100-SXM4-80GB"}  # bytes decoded too
    assert [g.uuid for g in node.gpus] == [f"GPU-fake-{i}" for i in range(8)]
    assert {g.memory_bytes for g in node.gpus} == {81920 * 2**20}
    assert node.gpus[0].pci_bus_id == "0000:07:00.0"
    assert node.gpus[1].pci_bus_id == "0000:1a:00.0"  # Linux form: 4-digit domain, lower case
    assert [g.numa_node for g in node.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert nvml.shutdown_count == 1 and not nvml.initialized


def test_nvlink_counts_and_topology() -> None:
    node = discover_nvml(two_islands(), node_name="n").nodes[0]
    assert len(node.links) == 28  # every pair, explicitly
    by_pair = {(lk.a, lk.b): lk for lk in node.links}
    assert by_pair[(0, 3)].kind == LinkKind.NVLINK and by_pair[(0, 3)].nvlinks == 2
    assert by_pair[(5, 7)].kind == LinkKind.NVLINK and by_pair[(5, 7)].nvlinks == 2
    assert node.nvlink_peers(6) == (4, 5, 7)
    assert node.link(0, 4) == LinkKind.NODE
    assert node.link(1, 5) == LinkKind.SYS
    assert by_pair[(1, 5)].nvlinks == 0


@pytest.mark.parametrize(
    ("level", "kind"),
    [
        (T.NVML_TOPOLOGY_INTERNAL, LinkKind.PIX),
        (T.NVML_TOPOLOGY_SINGLE, LinkKind.PIX),
        (T.NVML_TOPOLOGY_MULTIPLE, LinkKind.PXB),
        (T.NVML_TOPOLOGY_HOSTBRIDGE, LinkKind.PHB),
        (T.NVML_TOPOLOGY_NODE, LinkKind.NODE),
        (T.NVML_TOPOLOGY_SYSTEM, LinkKind.SYS),
        (35, LinkKind.NODE),  # a level unknown today lands on the nearest worse kind
        (60, LinkKind.SYS),
    ],
)
def test_topology_levels(level: int, kind: LinkKind) -> None:
    nvml = FakeNvml([FakeGpu(), FakeGpu()], {(0, 1): level})
    assert discover_nvml(nvml, node_name="n").nodes[0].link(0, 1) == kind


def test_nvswitch_connects_every_pair() -> None:
    nvml = FakeNvml(fake.nvswitched(8, 18, name="NVIDIA H100 80GB HBM3"))
    node = discover_nvml(nvml, node_name="n").nodes[0]
    assert {(lk.kind, lk.nvlinks) for lk in node.links} == {(LinkKind.NVLINK, 18)}
    assert len(node.links) == 28


@pytest.mark.parametrize("how", ["hidden", "unsupported"])
def test_nvswitch_without_remote_device_type(how: str) -> None:
    # Older drivers cannot name the far end: a bus id that is no GPU's counts as a switch.
    name = "nvmlDeviceGetNvLinkRemoteDeviceType"
    kw = {"hidden": {name}} if how == "hidden" else {"unsupported": {name}}
    nvml = FakeNvml(fake.nvswitched(4, 12), **kw)
    node = discover_nvml(nvml, node_name="n").nodes[0]
    assert {(lk.kind, lk.nvlinks) for lk in node.links} == {(LinkKind.NVLINK, 12)}
    nvml = two_islands(**kw)  # and direct links are still told apart by bus id
    assert discover_nvml(nvml, node_name="n").nodes[0].link(0, 4) == LinkKind.NODE


def test_nvswitch_pair_gets_the_smaller_link_count() -> None:
    gpus = fake.nvswitched(2, 18)
    gpus[1].nvlinks[10:] = [None] * 8  # 8 of GPU 1's links are down
    node = discover_nvml(FakeNvml(gpus), node_name="n").nodes[0]
    assert node.links[0].nvlinks == 10


def test_inactive_and_non_gpu_links_do_not_count() -> None:
    gpus = fake.nvlinked({(0, 1): 3}, 3)
    gpus[0].nvlinks[0:2] = [None, None]  # down: GPU 0 sees 1 link to GPU 1 ...
    gpus[1].nvlinks[1] = None  # ... and GPU 1 sees 2 to GPU 0
    # GPU 2 has a link to a CPU (IBM NPU) at some bus id: neither a peer nor a switch.
    gpus[2].nvlinks = ["00000000:99:00.0"]
    gpus[2].nvlink_types = [T.NVML_NVLINK_DEVICE_TYPE_IBMNPU]
    nvml = FakeNvml(gpus, {(0, 2): T.NVML_TOPOLOGY_MULTIPLE, (1, 2): T.NVML_TOPOLOGY_MULTIPLE})
    node = discover_nvml(nvml, node_name="n").nodes[0]
    assert node.links[0].kind == LinkKind.NVLINK
    assert node.links[0].nvlinks == 2  # the larger of both ends' counts
    assert node.link(0, 2) == LinkKind.PXB and node.link(1, 2) == LinkKind.PXB


def test_nvlink_not_supported_falls_back_to_topology() -> None:
    nvml = two_islands(unsupported={"nvmlDeviceGetNvLinkState"})
    node = discover_nvml(nvml, node_name="n").nodes[0]
    assert LinkKind.NVLINK not in {lk.kind for lk in node.links}
    assert node.link(0, 4) == LinkKind.NODE
    assert node.link(0, 1) == LinkKind.SYS  # the fake's topology default for unlisted pairs


def test_no_topology_means_sys() -> None:
    nvml = FakeNvml(
        [FakeGpu(), FakeGpu()],
        {(0, 1): T.NVML_TOPOLOGY_SINGLE},
        unsupported={"nvmlDeviceGetTopologyCommonAncestor"},
    )
    assert discover_nvml(nvml, node_name="n").nodes[0].link(0, 1) == LinkKind.SYS
    nvml = FakeNvml(
        [FakeGpu(), FakeGpu()],
        {(0, 1): T.NVML_TOPOLOGY_SINGLE},
        errors={"nvmlDeviceGetTopologyCommonAncestor": fake.NVMLError_FunctionNotFound()},
    )
    assert discover_nvml(nvml, node_name="n").nodes[0].link(0, 1) == LinkKind.SYS


def test_nvlinks_survive_missing_topology() -> None:
    nvml = two_islands(unsupported={"nvmlDeviceGetTopologyCommonAncestor"})
    node = discover_nvml(nvml, node_name="n").nodes[0]
    assert node.link(0, 1) == LinkKind.NVLINK and node.link(0, 4) == LinkKind.SYS


def test_unsupported_device_fields_degrade() -> None:
    nvml = FakeNvml(
        [FakeGpu(), FakeGpu()],
        unsupported={"nvmlDeviceGetUUID", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetPciInfo"},
    )
    gpus = discover_nvml(nvml, node_name="n").nodes[0].gpus
    assert gpus[1].uuid == "GPU-nvml-n-1"
    assert gpus[0].memory_bytes == 80 * GiB  # from the catalog, by NVML's model name
    assert gpus[0].pci_bus_id == ""
    assert gpus[0].numa_node == 0  # still from NVML
    nvml = FakeNvml([FakeGpu()], unsupported={"nvmlDeviceGetName", "nvmlDeviceGetMemoryInfo"})
    (gpu,) = discover_nvml(nvml, node_name="n").nodes[0].gpus
    assert (gpu.model, gpu.memory_bytes) == ("unknown", 0)


def test_numa_from_sysfs_when_nvml_cannot_tell(tmp_path: Path) -> None:
    for bus, value in (("0000:07:00.0", "1\n"), ("0000:1a:00.0", "-1\n")):
        (tmp_path / bus).mkdir()
        (tmp_path / bus / "numa_node").write_text(value)
    gpus = [FakeGpu(), FakeGpu(), FakeGpu()]  # the third has no sysfs entry
    for kw in (
        {"hidden": {"nvmlDeviceGetNumaNodeId"}},
        {"unsupported": {"nvmlDeviceGetNumaNodeId"}},
    ):
        nvml = FakeNvml(gpus, **kw)
        node = discover_nvml(nvml, node_name="n", sysfs=tmp_path).nodes[0]
        assert [g.numa_node for g in node.gpus] == [1, None, None]


def test_numa_minus_one_is_unknown() -> None:
    nvml = FakeNvml([FakeGpu(numa=-1)])
    assert discover_nvml(nvml, node_name="n").nodes[0].gpus[0].numa_node is None


def test_normalize_bus_id() -> None:
    assert normalize_bus_id("00000000:B7:00.0") == "0000:b7:00.0"
    assert normalize_bus_id("00000001:07:00.0") == "0001:07:00.0"
    assert normalize_bus_id("07:00.0") == "0000:07:00.0"
    assert normalize_bus_id("") == ""


# ---------------------------------------------------------------- failures


def test_init_failure_is_a_discovery_error() -> None:
    nvml = FakeNvml([FakeGpu()], init_error=fake.NVMLError_LibraryNotFound())
    with pytest.raises(DiscoveryError) as exc:
        discover_nvml(nvml, node_name="n")
    assert exc.value.reason == "NVML Shared Library Not Found"
    assert exc.value.devices_found == 0
    assert nvml.shutdown_count == 0  # never started, nothing to shut down
    nvml = FakeNvml([FakeGpu()], init_error=OSError("libnvidia-ml.so.1: cannot open"))
    with pytest.raises(DiscoveryError, match="cannot open"):
        discover_nvml(nvml, node_name="n")


def test_no_devices_is_a_discovery_error() -> None:
    nvml = FakeNvml([])
    with pytest.raises(DiscoveryError, match="no GPU") as exc:
        discover_nvml(nvml, node_name="n")
    assert exc.value.devices_found == 0
    assert nvml.shutdown_count == 1


def test_count_failure_is_a_discovery_error() -> None:
    nvml = FakeNvml([FakeGpu()], errors={"nvmlDeviceGetCount": fake.NVMLError_DriverNotLoaded()})
    with pytest.raises(DiscoveryError, match="Driver Not Loaded"):
        discover_nvml(nvml, node_name="n")
    assert nvml.shutdown_count == 1


@pytest.mark.parametrize(
    "call",
    ["nvmlDeviceGetHandleByIndex", "nvmlDeviceGetUUID", "nvmlDeviceGetTopologyCommonAncestor"],
)
def test_real_errors_after_seeing_gpus_are_not_hidden(call: str) -> None:
    nvml = two_islands(errors={call: fake.NVMLError_GpuIsLost()})
    with pytest.raises(DiscoveryError, match="GPU is lost") as exc:
        discover_nvml(nvml, node_name="n")
    assert exc.value.devices_found == 8
    assert nvml.shutdown_count == 1
    # ... and resolving does not paper over a broken GPU box with the demo.
    with pytest.raises(DiscoveryError):
        resolve_inventory(
            node_name="n", nvml=two_islands(errors={call: fake.NVMLError_GpuIsLost()})
        )


def test_missing_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    with pytest.raises(DiscoveryError, match="pynvml is not installed"):
        discover_nvml(node_name="n")


# ---------------------------------------------------------------- resolving


def test_resolve_uses_nvml_and_fills_machine_resources(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resolve_mod, "local_cpus", lambda: 96)
    monkeypatch.setattr(resolve_mod, "local_memory_bytes", lambda: 1024 * GiB)
    inv = resolve_inventory(node_name="gpubox", nvml=two_islands())
    assert inv.source == "nvml" and inv.note == ""
    assert (inv.nodes[0].cpus, inv.nodes[0].memory_bytes) == (96, 1024 * GiB)
    assert inv.total_gpus == 8


def test_resolve_falls_back_to_demo_with_one_line_note() -> None:
    nvml = FakeNvml([], init_error=fake.NVMLError_DriverNotLoaded())
    inv = resolve_inventory(node_name="laptop", nvml=nvml)
    assert inv.source == "demo"
    assert inv.nodes[0].name == "laptop" and inv.total_gpus == 8
    assert inv.nodes[0].cpus > 0 and inv.nodes[0].memory_bytes > 0  # the real machine's
    assert inv.note == (
        "No NVIDIA GPU found (NVML: Driver Not Loaded); running on the declared demo "
        "inventory of 8x A100-80GB: jobs get CUDA_VISIBLE_DEVICES but no real GPU. "
        "Declare yours with --gpus 4xA100-80GB or --inventory FILE."
    )


def _real_nvml_works() -> bool:
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


# No skip either way (CI fails skipped tests): without a GPU the fallback path is checked,
# on a GPU machine the discovery itself.
def test_real_pynvml() -> None:
    if not _real_nvml_works():
        with pytest.raises(DiscoveryError) as exc:
            discover_nvml(node_name="n")
        assert exc.value.devices_found == 0
        assert exc.value.reason  # e.g. "NVML Shared Library Not Found"
        return
    inv = discover_nvml(node_name="n")
    assert inv.source == "nvml" and inv.total_gpus >= 1
    node = inv.nodes[0]
    assert all(g.uuid.startswith(("GPU-", "MIG-")) and g.memory_bytes > 0 for g in node.gpus)
    assert all(g.pci_bus_id.count(":") == 2 for g in node.gpus)
    n = len(node.gpus)
    assert len(node.links) == n * (n - 1) // 2


def test_resolve_with_real_pynvml() -> None:
    inv = resolve_inventory(node_name="n")
    if _real_nvml_works():
        assert inv.source == "nvml" and inv.note == ""
        return
    assert inv.source == "demo"
    assert inv.note.startswith("No NVIDIA GPU found (NVML: ")
    assert "8x A100-80GB" in inv.note and "\n" not in inv.note
