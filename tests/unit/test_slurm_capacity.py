"""The Slurm backend's capacity (backends/slurm/capacity.py) read from sinfo's words, and a
pinned run's --nodelist (render.py). The real cluster's tests: test_slurm_backend.py."""

from __future__ import annotations

from pathlib import Path

from slurm_answers import AnsweringRunner
from test_slurm_render import argv, req

from gpupool.backends.slurm.backend import SlurmBackend
from gpupool.backends.slurm.capacity import NODE_ARGV, gres_gpus, node_state, parse_nodes
from gpupool.backends.slurm.runner import CommandResult
from gpupool.backends.slurm.settings import SlurmSettings
from gpupool.core.backends import BackendContext, EngineNode, EngineNodeState

MIB = 1 << 20
# Recorded from the tests' cluster (Slurm 22.05.8), n1 drained by hand, a job on n2.
TEST_CLUSTER = (
    "n1|main*|idle+drain|gpu:2|gpu:0|2|1000|maintenance window|\n"
    "n2|main*|mixed|gpu:2|gpu:1|2|1000|none|\n"
)
# A larger cluster as Slurm 23.11 prints it: typed GPUs with socket bindings, a node in two
# partitions (listed twice), a CPU-only node, a node down and one draining.
SITE = (
    "gpu01|gpu*|mixed|gpu:a100:4(S:0-1)|gpu:a100:3(IDX:0-2)|64|515000|none|\n"
    "gpu01|debug|mixed|gpu:a100:4(S:0-1)|gpu:a100:3(IDX:0-2)|64|515000|none|\n"
    "gpu02|gpu*|allocated|gpu:a100:4(S:0-1)|gpu:a100:4(IDX:0-3)|64|515000|none|\n"
    "gpu03|gpu*|down+not_responding|gpu:h100:8(S:0-1)|gpu:h100:0(IDX:N/A)|112|2063000|"
    "Not responding|\n"
    "gpu04|gpu*|mixed+drain|gpu:h100:8(S:0-1),shard:16|gpu:h100:2(IDX:0,5),shard:0|112|"
    "2063000|bad GPU 5: ECC errors [ops@2024-05-02T10:11:12]|\n"
    "cpu01|cpu|idle|(null)|gpu:0|128|257000|none|\n"
)


def test_the_test_clusters_nodes() -> None:
    assert parse_nodes(TEST_CLUSTER) == (
        EngineNode(
            "n1", gpus=2, cpus=2, memory_bytes=1000 * MIB, state=EngineNodeState.DRAINED,
            detail="idle+drain: maintenance window", pin="n1",
        ),
        EngineNode("n2", gpus=2, gpus_used=1, cpus=2, memory_bytes=1000 * MIB, pin="n2"),
    )  # fmt: skip


def test_a_sites_nodes_each_once_typed_and_in_their_states() -> None:
    nodes = {n.name: n for n in parse_nodes(SITE)}
    assert sorted(nodes) == ["gpu01", "gpu02", "gpu03", "gpu04"]  # cpu01: no GPUs
    assert (nodes["gpu01"].gpus, nodes["gpu01"].gpus_used, nodes["gpu01"].gpu_model) == (
        4, 3, "a100",
    )  # fmt: skip
    assert (nodes["gpu01"].cpus, nodes["gpu01"].memory_bytes) == (64, 515000 * MIB)
    assert nodes["gpu02"].gpus_used == 4 and nodes["gpu02"].state is EngineNodeState.UP
    assert nodes["gpu03"].state is EngineNodeState.DOWN
    assert nodes["gpu03"].detail == "down+not_responding: Not responding"
    assert (nodes["gpu04"].gpus, nodes["gpu04"].gpus_used) == (8, 2)
    assert nodes["gpu04"].state is EngineNodeState.DRAINED
    assert nodes["gpu04"].detail.endswith("bad GPU 5: ECC errors [ops@2024-05-02T10:11:12]")
    assert all(n.pin == n.name for n in nodes.values())


def test_only_the_backends_partitions() -> None:
    assert [n.name for n in parse_nodes(SITE, {"debug"})] == ["gpu01"]
    assert [n.name for n in parse_nodes(SITE, {"debug", "cpu"})] == ["gpu01"]
    assert len(parse_nodes(SITE, {"gpu"})) == 4


def test_gres_and_states() -> None:
    assert gres_gpus("gpu:2") == (2, "")
    assert gres_gpus("gpu:a100:2,gpu:v100:1") == (3, "")  # two models: none named
    assert gres_gpus("(null)") == (0, "")
    for state, want in [
        ("idle", EngineNodeState.UP), ("allocated", EngineNodeState.UP),
        ("idle+cloud+powered_down", EngineNodeState.UP), ("drained", EngineNodeState.DRAINED),
        ("allocated+draining", EngineNodeState.DRAINED), ("down*", EngineNodeState.DOWN),
        ("idle+drain+not_responding", EngineNodeState.DOWN), ("future", EngineNodeState.DOWN),
    ]:  # fmt: skip
        assert node_state(state) is want, state


def _backend(tmp_path: Path, answer: CommandResult | None, **kw: object) -> SlurmBackend:
    settings = SlurmSettings(**kw)  # type: ignore[arg-type]
    return SlurmBackend(
        "hpc", settings, BackendContext("p", tmp_path), runner=AnsweringRunner(answer)
    )


def test_capacity_is_one_sinfo_of_the_backends_partition(tmp_path: Path) -> None:
    backend = _backend(tmp_path, CommandResult(0, SITE, ""), partition="debug")
    capacity = backend.capacity()
    assert capacity.known and [n.name for n in capacity.nodes] == ["gpu01"]
    assert backend.runner.calls == [NODE_ARGV]


def test_capacity_of_a_cluster_that_does_not_answer(tmp_path: Path) -> None:
    down = _backend(tmp_path, None).capacity()
    assert down.nodes == () and down.problem == "slurmctld cannot be reached: sinfo gave no " \
        "answer in 5 s"  # fmt: skip
    said = "slurm_load_partitions: Unable to contact slurm controller (connect failure)\n"
    refused = _backend(tmp_path, CommandResult(1, "", said)).capacity()
    assert not refused.known and refused.problem == said.strip()


def test_a_pinned_run_names_its_nodes() -> None:
    assert "--nodelist=n2" in argv(req(b_pinned=("n2",)))
    two = argv(req(b_nodes=2, b_pinned=("gpu01", "gpu04")))
    assert "--nodelist=gpu01,gpu04" in two and "--nodes=2" in two
    assert not any(a.startswith("--nodelist") for a in argv(req()))
