"""The daemon runs jobs on this machine only: which nodes of an inventory file are this machine,
and `simulated: true` for nodes whose GPUs do not exist (test pools). See docs/nvml.md."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpupool.inventory import InventoryError, load_inventory_file, resolve_inventory
from gpupool.inventory import resolve as resolve_mod
from gpupool.inventory.resolve import is_this_machine

GiB = 1 << 30
TWO_BOXES = """\
nodes:
  - name: box1
    gpus: 8xA100-80GB
  - name: box2
    gpus: 2xA100-80GB
"""


class NoNvml:
    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"NVML used: {name}")


@pytest.fixture(autouse=True)
def machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resolve_mod, "local_cpus", lambda: 48)
    monkeypatch.setattr(resolve_mod, "local_memory_bytes", lambda: 384 * GiB)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "inv.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def resolve(path: Path, host: str = "gpu7") -> object:
    return resolve_inventory(inventory_file=str(path), node_name=host, nvml=NoNvml())


def test_nodes_of_other_machines_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, TWO_BOXES)
    with pytest.raises(InventoryError) as info:
        resolve(path)
    message = str(info.value)
    assert message.startswith(f"{path}: nodes box1 (8 GPUs) and box2 (2 GPUs) are not this machine")
    assert "(gpu7)" in message and "simulated: true" in message and "\n" not in message


def test_the_node_named_like_this_host_is_this_machine_the_others_are_refused(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, TWO_BOXES)
    with pytest.raises(InventoryError, match=r"node box2 \(2 GPUs\) is not this machine"):
        resolve(path, host="box1")


def test_simulated_nodes_are_accepted_and_said_to_be_simulated(tmp_path: Path) -> None:
    text = TWO_BOXES.replace("name: box2\n", "name: box2\n    simulated: true\n")
    inv = resolve(write(tmp_path, text), host="box1.example.com")
    box1, box2 = inv.nodes  # type: ignore[attr-defined]
    assert not box1.simulated and box2.simulated
    assert (box1.cpus, box1.memory_bytes) == (48, 384 * GiB)  # this machine's
    assert (box2.cpus, box2.memory_bytes) == (0, 0)
    assert "box2" in inv.note and "simulated" in inv.note  # type: ignore[attr-defined]


def test_a_pool_of_simulated_nodes_only_is_accepted(tmp_path: Path) -> None:
    text = TWO_BOXES.replace("gpus: 8xA100-80GB", "gpus: 8xA100-80GB\n    simulated: true")
    text = text.replace("gpus: 2xA100-80GB", "gpus: 2xA100-80GB\n    simulated: true")
    inv = resolve(write(tmp_path, text))
    assert all(n.simulated for n in inv.nodes)  # type: ignore[attr-defined]


def test_a_single_node_is_this_machine_whatever_its_name(tmp_path: Path) -> None:
    inv = resolve(write(tmp_path, "nodes:\n  - name: box\n    gpus: 4xA100-80GB\n"))
    (node,) = inv.nodes  # type: ignore[attr-defined]
    assert node.name == "box" and not node.simulated
    assert (node.cpus, node.memory_bytes) == (48, 384 * GiB)


@pytest.mark.parametrize(
    ("node", "host", "same"),
    [
        ("gpu7", "gpu7", True),
        ("GPU7", "gpu7", True),
        ("gpu7", "gpu7.lab.example.com", True),
        ("gpu7.lab.example.com", "gpu7", True),
        ("gpu7.lab", "gpu7.other", False),
        ("gpu70", "gpu7", False),
    ],
)
def test_host_names_match_case_blind_and_short_or_full(node: str, host: str, same: bool) -> None:
    assert is_this_machine(node, host) is same


def test_simulated_must_be_true_or_false(tmp_path: Path) -> None:
    path = write(tmp_path, "nodes:\n  - name: a\n    simulated: yes please\n    gpus: 1xL4\n")
    with pytest.raises(InventoryError, match=r"inv.yaml:3: nodes\[0\].simulated: expected true"):
        load_inventory_file(path)


def test_the_simulator_takes_files_of_many_machines(tmp_path: Path) -> None:
    """`gpupool sim --cluster FILE` loads the file as it is: every node counts."""
    inv = load_inventory_file(write(tmp_path, TWO_BOXES))
    assert [n.name for n in inv.nodes] == ["box1", "box2"]
    assert not any(n.simulated for n in inv.nodes)
