"""The backends' nodes wherever the pool's GPUs are shown (api/backend_wire.py): GET /v1/gpus's
`backends` (valid against the OpenAPI document, read back by the client, absent from an older
daemon), `gpupool gpus`' table and lines, `gpupool topo --pool`'s lines, and /metrics.

No engine runs here: what an engine publishes (core/backends.py's BackendNodes) is
declared, as the engine's thread sets it (`EngineState.backend_view`); the real engines'
reads are tested against real Slurm and Ray (tests/integration/test_*_backend.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_metrics import Pool, pool  # noqa: F401  (the metrics' pool fixture)
from test_wire_shapes import _validator, document  # noqa: F401  (the OpenAPI document)

from gpupool.api.wire import gpus_to_wire
from gpupool.cli.gpus import BACKEND_COLUMNS, backend_notes, backend_row, print_backends
from gpupool.cli.topo import render_backends
from gpupool.client.pool_views import BackendNodeView, GpusView, read_gpus
from gpupool.client.wire_json import conform
from gpupool.core.backends import (
    Admission,
    BackendAdmission,
    BackendNodes,
    Capacity,
    EngineNode,
    EngineNodeState,
)
from gpupool.core.wire_shapes import GpusWire
from gpupool.inventory import resolve_inventory

GIB = 2**30


def published() -> tuple[BackendNodes, ...]:
    """Three backends as the engine publishes them: `hpc` read (a node with two of the pool's
    jobs and another tenant's GPU, a drained one), `k8s` whose read failed while one of the
    pool's jobs runs there, `ray` not read yet."""
    c1 = EngineNode(
        "c1", 4, gpus_used=3, gpu_model="A100", gpu_memory_bytes=80 * GIB, cpus=64,
        memory_bytes=512 * GIB, pin="c1",
    )  # fmt: skip
    c2 = EngineNode("c2", 8, state=EngineNodeState.DRAINED, detail="maintenance", pin="c2")
    hpc = BackendNodes(
        "hpc",
        BackendAdmission(Admission.POOL, {"vision": 8}),
        Capacity((c1, c2)),
        {"c1": ((41, 1), (42, 1))},
    )
    k8s = BackendNodes(
        "k8s", BackendAdmission(), Capacity(problem="connection refused"), {"n1": ((50, 2),)}
    )
    ray = BackendNodes("ray", BackendAdmission(Admission.ENGINE), None, {})
    return hpc, k8s, ray


def answer(backends: tuple[BackendNodes, ...]) -> Any:
    """GET /v1/gpus as it goes over the wire, for a one-node pool and `backends`."""
    wire = gpus_to_wire(resolve_inventory(gpus="2xA100-80GB"), {}, None, backends)
    return json.loads(json.dumps(wire))


def test_the_api_gives_each_backends_nodes_named_as_the_pool_names_them(
    document: dict[str, Any],  # noqa: F811
) -> None:
    got = answer(published())
    _validator(document, "Gpus").validate(got)  # the OpenAPI document's shape
    conform(GpusWire, got)  # and the client's
    hpc, k8s, ray = got["backends"]
    assert (hpc["name"], hpc["admission"], hpc["problem"], hpc["quotas"]) == (
        "hpc", "pool", "", {"vision": 8.0}
    )  # fmt: skip
    assert hpc["nodes"][0] == {
        "name": "hpc/c1", "backend": "hpc", "state": "up", "detail": "", "gpus": 4,
        "gpus_used": 3, "gpus_pool": 2, "jobs": [{"id": 41, "gpus": 1}, {"id": 42, "gpus": 1}],
        "gpu_model": "A100", "gpu_memory_bytes": 80 * GIB, "cpus": 64,
        "memory_bytes": 512 * GIB,
    }  # fmt: skip
    drained = hpc["nodes"][1]
    assert (drained["name"], drained["state"], drained["detail"], drained["gpus_pool"]) == (
        "hpc/c2", "drained", "maintenance", 0
    )  # fmt: skip
    # A failed read hides no job of the pool's: its node is shown, its state unknown.
    assert k8s["problem"] == "connection refused"
    [n1] = k8s["nodes"]
    assert (n1["name"], n1["state"], n1["gpus"], n1["gpus_pool"]) == ("k8s/n1", "unknown", 0, 2)
    assert n1["detail"] == "not in the engine's last report"
    assert (ray["admission"], ray["problem"], ray["nodes"]) == ("engine", "not read yet", [])
    assert answer(())["backends"] == []


def test_the_client_reads_them_and_none_from_an_older_daemon() -> None:
    got = answer(published())
    view = read_gpus(got)
    assert [b.name for b in view.backends] == ["hpc", "k8s", "ray"]
    c1 = view.backends[0].nodes[0]
    assert c1 == BackendNodeView(
        "hpc/c1", "hpc", "up", "", 4, 3, 2, ((41, 1), (42, 1)), "A100", 80 * GIB, 64, 512 * GIB
    )
    assert view.backends[0].quotas == {"vision": 8.0}
    assert view.wire["backends"] == got["backends"]  # --json prints the answer as it came
    del got["backends"]
    assert read_gpus(got).backends == ()


def test_gpupool_gpus_prints_the_backend_nodes_and_why_a_backend_is_unknown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    view = read_gpus(answer(published()))
    rows = [backend_row(n) for b in view.backends for n in b.nodes]
    assert rows == [
        ("hpc/c1", "up", "3/4", "2", "A100 80GiB", "41 (1 GPU), 42 (1 GPU)"),
        ("hpc/c2", "drained (maintenance)", "0/8", "0", "-", "-"),
        ("k8s/n1", "unknown (not in the engine's last report)", "0/0", "2", "-", "50 (2 GPUs)"),
    ]
    assert backend_notes(view) == [
        "Backend k8s: nodes not known: connection refused",
        "Backend ray: nodes not known: not read yet",
    ]
    print_backends(view)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["NODE", "STATE", "GPUS", "BY", "THE", "POOL", "MODEL", "JOBS"]
    assert lines[2].startswith("hpc/c1 ") and lines[2].endswith("41 (1 GPU), 42 (1 GPU)")
    assert lines[-1] == "Backend ray: nodes not known: not read yet"
    assert len(BACKEND_COLUMNS) == len(rows[0])


def test_halves_of_a_gpu_are_shown_as_halves() -> None:
    """Ray's `--gpus 0.5`: two halves on one GPU are 1 GPU by the pool, each half 0.5."""
    halves = BackendNodes(
        "ray", BackendAdmission(), Capacity((EngineNode("w1", 2, 1),)),
        {"w1": ((7, 0.5), (8, 0.5), (9, 0.5))},
    )  # fmt: skip
    node = read_gpus(answer((halves,))).backends[0].nodes[0]
    assert backend_row(node)[3:] == ("1.5", "-", "7 (0.5 GPU), 8 (0.5 GPU), 9 (0.5 GPU)")


def test_a_node_with_many_of_the_pools_jobs_names_the_first_few() -> None:
    many = BackendNodes(
        "hpc", BackendAdmission(), Capacity((EngineNode("c1", 8),)),
        {"c1": tuple((i, 1) for i in range(1, 8))},
    )  # fmt: skip
    node = read_gpus(answer((many,))).backends[0].nodes[0]
    assert backend_row(node)[-1] == "1 (1 GPU), 2 (1 GPU), 3 (1 GPU), 4 (1 GPU), and 3 more"


def test_without_backends_gpupool_gpus_prints_nothing_more(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_backends(read_gpus(answer(())))
    assert capsys.readouterr().out == ""
    empty = BackendNodes("hpc", BackendAdmission(), Capacity(), {})
    assert backend_notes(read_gpus(answer((empty,)))) == [
        "Backend hpc: its engine reports no nodes"
    ]


def test_topo_of_the_pool_lists_backend_nodes_one_line_each() -> None:
    view: GpusView = read_gpus(answer(published()))
    assert render_backends(view.backends).splitlines() == [
        "Backend nodes (no matrix: their engines report no links):",
        "  hpc/c1: 4 GPUs, A100 80GiB, up",
        "  hpc/c2: 8 GPUs, model not reported, drained (maintenance)",
        "  k8s/n1: 0 GPUs, model not reported, unknown (not in the engine's last report)",
        "  k8s: nodes not known: connection refused",
        "  ray: nodes not known: not read yet",
    ]


def test_metrics_export_each_backend_node_and_whether_a_backend_is_known(
    pool: Pool,  # noqa: F811
) -> None:
    pool.engine.state.backend_view = published()  # as the engine's thread publishes it
    assert pool.service.backend_nodes() == published()
    got = pool.scrape()
    assert got["gpupool_backend_capacity_known"] == {
        (("backend", "hpc"),): 1.0,
        (("backend", "k8s"),): 0.0,
        (("backend", "ray"),): 0.0,
    }
    c1 = (("backend", "hpc"), ("node", "hpc/c1"))
    c2 = (("backend", "hpc"), ("node", "hpc/c2"))
    n1 = (("backend", "k8s"), ("node", "k8s/n1"))
    assert got["gpupool_backend_node_gpus"] == {
        (*c1, ("state", "up")): 4.0,
        (*c2, ("state", "drained")): 8.0,
    }
    assert got["gpupool_backend_node_gpus_used"] == {c1: 3.0, c2: 0.0}
    # A node not in the engine's last report: only the pool's GPUs, never made-up zeros.
    assert got["gpupool_backend_node_gpus_pool"] == {c1: 2.0, c2: 0.0, n1: 2.0}


def test_a_pool_without_backends_exports_no_backend_figures(pool: Pool) -> None:  # noqa: F811
    got = pool.scrape()
    assert not any(name.startswith("gpupool_backend_") for name in got)
