"""Fractional GPUs at the edges: the spec (file, flags, wire), submit-time feasibility, and
the inventory's unmanaged memory."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpupool.core.hardware import Gpu, Node
from gpupool.core.job import Resources
from gpupool.inventory import InventoryError
from gpupool.inventory.declared import load_inventory_text
from gpupool.policy.feasibility import check_satisfiable
from gpupool.policy.render import status_text
from gpupool.policy.status import Code
from gpupool.spec import SpecError, build_spec, spec_from_wire, spec_to_wire

GiB = 1 << 30


# (id, spec fields, expected Resources)
GOOD = [
    ("gpu-memory", {"gpu_memory": "20GiB"}, Resources(gpus=1, gpu_memory_bytes=20 * GiB)),
    (
        "gpu-memory-with-gpus-1",
        {"gpus": 1, "gpu_memory": "512MiB"},
        Resources(gpus=1, gpu_memory_bytes=512 << 20),
    ),
    (
        "gpu-memory-with-type",
        {"gpu_type": "A100", "gpu_memory": "20GiB"},
        Resources(gpus=1, gpu_type="A100", gpu_memory_bytes=20 * GiB),
    ),
    ("half", {"gpus": 0.5}, Resources(gpus=1, gpu_fraction=0.5)),
    ("half-text", {"gpus": "0.5"}, Resources(gpus=1, gpu_fraction=0.5)),
    ("tenth-text-dot", {"gpus": ".1"}, Resources(gpus=1, gpu_fraction=0.1)),
    ("whole-float", {"gpus": 2.0}, Resources(gpus=2)),
]


@pytest.mark.parametrize(("fields", "expected"), [c[1:] for c in GOOD], ids=[c[0] for c in GOOD])
def test_fractional_specs(fields: dict[str, Any], expected: Resources) -> None:
    spec = build_spec({"command": "x", **fields})
    assert spec.resources == expected
    assert spec_from_wire(json.loads(json.dumps(spec_to_wire(spec)))) == spec


# (id, spec fields, field named, text in message)
BAD = [
    ("both", {"gpus": 0.5, "gpu_memory": "20GB"}, "gpu_memory", "cannot be combined"),
    ("memory-with-many-gpus", {"gpus": 2, "gpu_memory": "20GB"}, "gpu_memory", "gpus of 1"),
    ("one-and-a-half", {"gpus": 1.5}, "gpus", "between 0 and 1"),
    ("negative-fraction", {"gpus": -0.5}, "gpus", "whole number of GPUs"),
    ("memory-without-unit", {"gpu_memory": 20}, "gpu_memory", "needs a unit"),
    ("memory-zero", {"gpu_memory": "0GB"}, "gpu_memory", "more than 0"),
    ("preemptible-text", {"preemptible": "yes"}, "preemptible", "true or false"),
]


@pytest.mark.parametrize(
    ("fields", "field", "fragment"), [c[1:] for c in BAD], ids=[c[0] for c in BAD]
)
def test_bad_fractional_specs(fields: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        build_spec({"command": "x", **fields})
    (error,) = info.value.errors
    assert error.field == field
    assert fragment in error.message


def test_preemptible() -> None:
    assert build_spec({"command": "x"}).preemptible is None
    assert build_spec({"command": "x", "preemptible": True}).preemptible is True
    spec = build_spec({"command": "x", "preemptible": False})
    assert spec.preemptible is False
    assert spec_to_wire(spec)["preemptible"] is False
    assert spec_from_wire(spec_to_wire(spec)) == spec


# (id, wire change, field named, text in message)
BAD_WIRE = [
    ("fraction-needs-gpus-1", {"gpus": 2, "gpu_fraction": 0.5}, "gpu_fraction", "gpus of 1"),
    ("memory-needs-gpus-1", {"gpus": 0, "gpu_memory_bytes": GiB}, "gpu_memory_bytes", "gpus of 1"),
    (
        "both",
        {"gpus": 1, "gpu_memory_bytes": GiB, "gpu_fraction": 0.5},
        "gpu_memory_bytes",
        "cannot be combined",
    ),
    ("fraction-one", {"gpus": 1, "gpu_fraction": 1.0}, "gpu_fraction", "between 0 and 1"),
    ("fraction-text", {"gpus": 1, "gpu_fraction": "0.5"}, "gpu_fraction", "between 0 and 1"),
    ("memory-text", {"gpus": 1, "gpu_memory_bytes": "1GB"}, "gpu_memory_bytes", "bytes"),
    ("preemptible-int", {"preemptible": 1}, "preemptible", "true or false"),
]


@pytest.mark.parametrize(
    ("change", "field", "fragment"), [c[1:] for c in BAD_WIRE], ids=[c[0] for c in BAD_WIRE]
)
def test_bad_fractional_wire(change: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        spec_from_wire({"command": ["x"], **change})
    (error,) = info.value.errors
    assert error.field == field
    assert fragment in error.message


# ---- feasibility at submit ----


def _node(name: str, *sizes: int, unmanaged: int = 0, cpus: int = 0) -> Node:
    gpus = tuple(
        Gpu(i, "A100", s * GiB, unmanaged_memory_bytes=unmanaged * GiB) for i, s in enumerate(sizes)
    )
    return Node(name, gpus, cpus=cpus)


def test_fractional_feasibility() -> None:
    nodes = (_node("a", 24, 24), _node("b", 80))
    assert check_satisfiable(Resources(gpus=1, gpu_memory_bytes=80 * GiB), nodes) is None
    assert check_satisfiable(Resources(gpus=1, gpu_fraction=0.5), nodes) is None
    status = check_satisfiable(Resources(gpus=1, gpu_memory_bytes=100 * GiB), nodes)
    assert status is not None and status.code is Code.UNSATISFIABLE
    assert status_text(status) == "needs 100GiB on one GPU; the largest GPU (A100 on b) has 80GiB"
    status = check_satisfiable(Resources(gpus=1, gpu_fraction=1.5), nodes)
    assert (
        status is not None
        and status.code is Code.UNSATISFIABLE
        and "at most 1" in status_text(status)
    )


def test_feasibility_counts_declared_unmanaged_memory() -> None:
    nodes = (_node("a", 24, unmanaged=8),)
    status = check_satisfiable(Resources(gpus=1, gpu_memory_bytes=20 * GiB), nodes)
    assert status is not None
    assert "16GiB besides memory used outside gpupool" in status_text(status)
    assert check_satisfiable(Resources(gpus=1, gpu_memory_bytes=16 * GiB), nodes) is None
    assert check_satisfiable(Resources(gpus=1), nodes) is None  # whole jobs are not affected


def test_feasibility_of_a_fraction_checks_cpus_on_nodes_with_room() -> None:
    nodes = (_node("small", 24, cpus=64), _node("big", 80, cpus=8))
    status = check_satisfiable(Resources(gpus=1, gpu_memory_bytes=40 * GiB, cpus=16), nodes)
    assert status is not None and status.code is Code.UNSATISFIABLE and status.source == "cpus"


# ---- inventory ----


def test_declared_unmanaged_memory() -> None:
    inv = load_inventory_text(
        "nodes:\n"
        "  - name: box\n"
        "    gpus:\n"
        "      - {model: A100-80GB, unmanaged_memory: 4GiB}\n"
        "      - {model: A100-80GB}\n",
        "inv.yaml",
    )
    gpus = inv.nodes[0].gpus
    assert [g.unmanaged_memory_bytes for g in gpus] == [4 * GiB, 0]


def test_declared_unmanaged_memory_must_fit() -> None:
    with pytest.raises(InventoryError, match="unmanaged_memory"):
        load_inventory_text(
            "nodes:\n  - name: box\n    gpus:\n      - {model: A100-80GB, unmanaged_memory: 90GB}\n",
            "inv.yaml",
        )
