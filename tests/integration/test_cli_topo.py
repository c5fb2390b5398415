"""`gpupool topo` end to end: from NVML (the fake pynvml standing in for the library, in
process), without NVML, from a declared inventory (a real CLI process), and from a running
daemon (a real one): the daemon's answer draws the same matrix as the file it was started on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import fixtures.fake_nvml as fake  # tests/ is on sys.path (tests/conftest.py)
from fixtures.fake_nvml import FakeNvml
from gpupool.cli.main import main
from integration.pool_harness import Pool

# what the CLI prints does not depend on the database (the rule: integration/conftest.py)
pytestmark = pytest.mark.backend_independent

T = FakeNvml

# Two sockets, two GPUs each: an NVLink pair on socket 0, a PCIe-switch pair on socket 1.
INVENTORY = """\
nodes:
  - name: box
    gpus:
      - {model: A100-80GB, cpu_affinity: "0-15,32-47"}
      - {model: A100-80GB, cpu_affinity: "0-15,32-47"}
      - {model: A100-80GB, cpu_affinity: "16-31,48-63"}
      - {model: A100-80GB, cpu_affinity: "16-31,48-63"}
    links:
      - {gpus: [0, 1], type: nvlink, count: 4}
      - {gpus: [2, 3], type: pix}
    numa: [[0, 1], [2, 3]]
"""


def _rows(text: str) -> dict[str, list[str]]:
    """The matrix's rows by their label: the cells, CPU affinity, NUMA affinity."""
    return {
        line.split()[0]: line.split()[1:] for line in text.splitlines() if line.startswith("GPU")
    }


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpupool", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_topo_from_nvml(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    gpus = fake.nvlinked({(0, 1): 2}, 3)
    for i, g in enumerate(gpus):
        g.numa = 0 if i < 2 else 1
        g.cpu_affinity = [*range(0, 8), *range(16, 24)] if i < 2 else [*range(8, 16)]
    nvml = FakeNvml(gpus, {(0, 2): T.NVML_TOPOLOGY_HOSTBRIDGE})
    monkeypatch.setitem(sys.modules, "pynvml", nvml)  # what discovery imports
    assert main(["topo"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == [
        *("GPU0", "GPU1", "GPU2"),
        *("CPU", "Affinity", "NUMA", "Affinity"),
    ]
    assert _rows(out) == {
        "GPU0": ["X", "NV2", "PHB", "0-7,16-23", "0"],
        "GPU1": ["NV2", "X", "SYS", "0-7,16-23", "0"],
        "GPU2": ["PHB", "SYS", "X", "8-15", "1"],
    }
    assert "  NV#  = Connection traversing a bonded set of # NVLinks" in out
    assert "  PIX  = Connection traversing at most a single PCIe bridge" in out
    assert nvml.shutdown_count == 1

    assert main(["topo", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["source"] == "nvml"
    assert [g["connections"]["GPU1"] for g in data["nodes"][0]["gpus"]] == ["NV2", "X", "SYS"]
    assert data["nodes"][0]["gpus"][2]["cpu_affinity"] == "8-15"


def test_topo_without_nvml_says_so_and_names_the_other_sources(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(
        sys.modules, "pynvml", FakeNvml([], init_error=fake.NVMLError_LibraryNotFound())
    )
    assert main(["topo"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "no NVML on this machine (NVML Shared Library Not Found)" in captured.err
    assert "--inventory FILE or --gpus 8xH100" in captured.err and "--pool" in captured.err

    # NVML sees GPUs but cannot read one: no fallback either, and the reason is given
    lost = FakeNvml([fake.FakeGpu()], errors={"nvmlDeviceGetName": fake.NVMLError_GpuIsLost()})
    monkeypatch.setitem(sys.modules, "pynvml", lost)
    assert main(["topo"]) == 1
    assert "reading GPU 0 failed: GPU is lost" in capsys.readouterr().err


def test_topo_of_a_declared_inventory(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY)
    proc = _run("topo", "--inventory", str(path))
    assert proc.returncode == 0, proc.stderr
    assert _rows(proc.stdout) == {
        "GPU0": ["X", "NV4", "SYS", "SYS", "0-15,32-47", "0"],
        "GPU1": ["NV4", "X", "SYS", "SYS", "0-15,32-47", "0"],
        "GPU2": ["SYS", "SYS", "X", "PIX", "16-31,48-63", "1"],
        "GPU3": ["SYS", "SYS", "PIX", "X", "16-31,48-63", "1"],
    }
    shorthand = _run("topo", "--gpus", "2xH100")
    assert _rows(shorthand.stdout) == {
        "GPU0": ["X", "SYS", "N/A", "N/A"],
        "GPU1": ["SYS", "X"] + ["N/A"] * 2,
    }
    assert "declares no links" in shorthand.stdout
    two = tmp_path / "two.yaml"  # every node of a file is drawn, the simulated one marked
    two.write_text(INVENTORY + "  - {name: other, simulated: true, gpus: 2xL4}\n")
    both_nodes = _run("topo", "--inventory", str(two))
    assert both_nodes.stdout.startswith("box:\n")
    assert "\nother (simulated):\n" in both_nodes.stdout
    assert both_nodes.stdout.split("other (simulated):")[1].split()[:6] == [
        *("GPU0", "GPU1", "CPU", "Affinity", "NUMA", "Affinity")
    ]
    path.write_text(INVENTORY.replace('"16-31,48-63"', '"31-16"', 1))
    bad = _run("topo", "--inventory", str(path))
    assert bad.returncode == 2
    assert "inv.yaml:6: nodes[0].gpus[2].cpu_affinity: not a CPU range: '31-16'" in bad.stderr
    both = _run("topo", "--gpus", "2xH100", "--pool")
    assert both.returncode == 2 and "not allowed with" in both.stderr


def test_topo_of_the_running_pool_matches_its_inventory(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text(INVENTORY)
    pool = Pool(tmp_path / "pool", gpus=None, inventory=path).start()
    try:
        from_pool = pool.cli("topo", "--pool", "--json", check=True)
        text = pool.cli("topo", "--pool", check=True).stdout
    finally:
        pool.cleanup()
    from_file = _run("topo", "--inventory", str(path), "--json")
    pool_node = json.loads(from_pool.stdout)["nodes"][0]
    file_node = json.loads(from_file.stdout)["nodes"][0]
    assert pool_node["gpus"] == file_node["gpus"]
    assert pool_node["links"] == file_node["links"]
    assert pool_node["simulated"] is file_node["simulated"] is False
    assert _rows(text)["GPU2"] == ["SYS", "SYS", "X", "PIX", "16-31,48-63", "1"]
