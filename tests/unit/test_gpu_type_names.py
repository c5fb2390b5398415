"""Messages name a requested GPU type as the catalog does ("A100", "A100-80GB"), not in the
user's spelling ("a100", "nvidia a100-80gb")."""

from __future__ import annotations

import pytest
from policy_builders import node, pending, running

from gpupool.core.gpu_catalog import display_name
from gpupool.core.job import Resources
from gpupool.policy import Code, Snapshot, check_satisfiable, decide
from gpupool.policy.filters import insufficient
from gpupool.policy.node_free import NodeFree
from gpupool.policy.render import node_text, status_text


@pytest.mark.parametrize(
    ("asked", "shown"),
    [
        ("a100", "A100"),
        ("a100-80gb", "A100-80GB"),
        ("nvidia a100 sxm4 80gb", "A100-80GB"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("h100", "H100"),
        ("rtx a6000", "RTX A6000"),
        ("tesla v100_32gb", "V100-32GB"),
        ("mygpu 5", "MYGPU-5"),  # not in the catalog: its words, as the catalog writes names
    ],
)
def test_display_name_is_the_catalog_spelling(asked: str, shown: str) -> None:
    assert display_name(asked) == shown


def test_refusal_names_the_type_as_the_catalog_does() -> None:
    status = check_satisfiable(Resources(gpus=9, gpu_type="a100"), (node("box", 8),))
    assert status is not None and status.code is Code.UNSATISFIABLE
    assert "needs 9 A100 GPUs on one node" in status_text(status)
    shared = check_satisfiable(
        Resources(gpus=1, gpu_type="a100-80gb", gpu_memory_bytes=100 << 30), (node("box", 1),)
    )
    assert shared is not None and "A100-80GB GPU" in status_text(shared)
    assert "a100" not in status_text(status) + status_text(shared)


def test_pending_reasons_name_the_type_as_the_catalog_does() -> None:
    snap = Snapshot(
        nodes=(node("box", 2),),
        running=(running(10, "box", [0, 1]),),
        pending=(pending(1, 1, gpu_type="a100-80gb"),),
    )
    status = decide(snap, 0.0).pending[1]
    assert status.code is Code.RESOURCES
    assert "1 A100-80GB GPU" in status_text(status) and "a100" not in status_text(status)
    free = NodeFree(node("box", 2), set(), None, None)
    whole = Resources(gpus=2, gpu_type="a100")
    said = insufficient(free, whole)
    assert said is not None and "needs 2 A100 GPUs" in node_text(said, whole)
    half_res = Resources(gpus=1, gpu_type="a100", gpu_fraction=0.5)
    half = insufficient(free, half_res)
    assert half is not None
    assert "A100 GPU" in node_text(half, half_res) and "a100" not in node_text(half, half_res)
