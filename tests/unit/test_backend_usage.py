"""Accounting of backends' jobs (service/accounting.py over store/accounting.py, issue: usage
by backend): a job a backend ran is stored with the backend's node and GPUs
(store/backend_runs.py `start_in_backend`), so its allocated GPU-hours count as a local job's;
`--by backend` groups by the backend's name (`local`: the pool's own machine); `--by gpu-type`
puts a backend's jobs under `[NAME]`, never under an inventory model; and used GPU-hours,
which only the pool's own GPUs' samples measure, read as unknown ('-') for a group whose
hours were all on backends, with a note under the table. Real SQLite (and PostgreSQL when
configured), the API's wire form, the client and the CLI over HTTP."""

from __future__ import annotations

import csv
import http.server
import io
import json
import math
import threading
from collections.abc import Iterator

import pytest
from test_store import spec, start, store_fixture, store_url_fixture  # noqa: F401  (fixtures)

from gpupool import __version__
from gpupool.api.usage import report_to_wire
from gpupool.cli.main import main
from gpupool.cli.usage import BY, backend_note
from gpupool.client.usage_views import read_usage_report
from gpupool.client.wire_json import JsonObject
from gpupool.core.gpu_usage import Holder, attribute
from gpupool.core.hardware import Gpu, Inventory, Node
from gpupool.core.job import JobSpec, JobState, Resources
from gpupool.core.monitoring import GpuSample
from gpupool.service.accounting import Accounting, GroupBy, UsageReport
from gpupool.store import Store

H = 3600.0
GIB = 1 << 30
T0 = 1_700_000_000.0 - (1_700_000_000.0 % H)
INVENTORY = Inventory((Node("a", tuple(Gpu(i, "H100", 80 * GIB) for i in range(4))),), "declared")


def _fill(store: Store) -> tuple[int, int]:
    """alice: 2 of the pool's GPUs for 2 h, sampled for half an hour at 40% (4 GPU-h);
    bob: a 2-node gang of 2 GPUs each on backend hpc for 2 h (8 GPU-h), asking for H100s,
    the inventory's model. The ids of alice's and bob's jobs."""
    local = store.submit(spec(gpus=2), "alice", T0)
    start(store, local.id, "a", (0, 1), now=T0)
    holder = Holder(local.id, "a", (0, 1), Resources(gpus=2))
    for i in range(6):
        t = T0 + 300 * i
        samples = [GpuSample("a", g, t, 40.0, GIB, 80 * GIB, 100.0, 40.0, (), True) for g in (0, 1)]
        store.record_samples(samples, attribute(samples, [holder], 300.0))
    store.finish(local.id, JobState.SUCCEEDED, 0, T0 + 2 * H, "done")
    gang = JobSpec(("train",), resources=Resources(gpus=2, gpu_type="H100"), nodes=2, backend="hpc")
    remote = store.submit(gang, "bob", T0 + 10)
    started = store.start_in_backend(
        remote.id, T0 + H, "hpc", "slurm://c/12", node="hpc/n1+n2", gpus=(0, 1, 0, 1)
    )
    assert started is not None and started.state is JobState.RUNNING
    store.finish(remote.id, JobState.SUCCEEDED, 0, T0 + 3 * H, "done")
    return local.id, remote.id


def _report(store: Store, by: GroupBy) -> UsageReport:
    return Accounting(store, INVENTORY, 300.0, simulated=True).report(by, T0, T0 + 3 * H)


def test_the_cli_offers_every_grouping_the_api_takes() -> None:
    """/v1/usage's `by` is checked against GroupBy (a 422 for anything else)."""
    assert BY == tuple(g.value for g in GroupBy)
    assert GroupBy("backend") is GroupBy.BACKEND


def test_the_store_reads_each_jobs_backend_and_its_gpus(store: Store) -> None:
    local, remote = _fill(store)
    by_id = {r.job_id: r for r in store.accounting_records(T0)}
    assert (by_id[local].backend, by_id[local].node, by_id[local].gpu_count) == (None, "a", 2.0)
    assert (by_id[remote].backend, by_id[remote].node) == ("hpc", "hpc/n1+n2")
    assert (by_id[remote].gpus, by_id[remote].gpu_count) == (
        (0, 1, 0, 1),
        4.0,
    )  # 2 GPUs on each node, in node order


def test_by_backend_groups_the_pools_own_jobs_as_local(store: Store) -> None:
    _fill(store)
    report = _report(store, GroupBy.BACKEND)
    hpc, local = report.rows  # by allocated GPU-hours, largest first
    assert (hpc.group, hpc.jobs, local.group, local.jobs) == ("hpc", 1, "local", 1)
    assert math.isclose(hpc.allocated_gpu_h, 4 * 2.0)
    assert math.isclose(hpc.backend_gpu_h, 8.0) and not hpc.used_measured
    assert hpc.efficiency is None and hpc.used_gpu_h == 0.0
    assert math.isclose(hpc.mean_wait_s or 0, H - 10)
    assert math.isclose(local.allocated_gpu_h, 2 * 2.0) and local.backend_gpu_h == 0.0
    assert local.used_measured and math.isclose(local.used_gpu_h, 2 * 0.4 * 0.5)
    assert math.isclose(local.efficiency or 0, 0.4)
    assert math.isclose(report.total.allocated_gpu_h, 12.0)
    assert math.isclose(report.total.backend_gpu_h, 8.0) and report.total.used_measured


def test_other_groupings_keep_their_figures_and_count_the_backends_hours(store: Store) -> None:
    _fill(store)
    by_user = {r.group: r for r in _report(store, GroupBy.USER).rows}
    alice, bob = by_user["alice"], by_user["bob"]
    assert math.isclose(alice.allocated_gpu_h, 4.0) and math.isclose(alice.used_gpu_h, 0.4)
    assert alice.used_measured and alice.backend_gpu_h == 0.0
    assert math.isclose(bob.allocated_gpu_h, 8.0) and not bob.used_measured
    (project,) = _report(store, GroupBy.PROJECT).rows  # both in the default project
    assert math.isclose(project.allocated_gpu_h, 12.0) and math.isclose(project.backend_gpu_h, 8)
    assert project.used_measured  # a third of its hours were sampled: those are measured


def test_by_gpu_type_a_backends_jobs_are_under_its_name_not_an_inventory_model(
    store: Store,
) -> None:
    """bob's job asked for H100, the inventory's model, and its backend's GPUs are not the
    pool's: before backends were told apart its 8 GPU-hours went under H100 (what it asked
    for), with the pool's own. And a backend whose engine chose the node is stored under the
    backend's bare name, which may be an inventory node's: still the backend's."""
    _fill(store)
    same_name = store.submit(spec(gpus=1, backend="a"), "carol", T0)
    store.start_in_backend(same_name.id, T0 + 2 * H, "a", None, node="a", gpus=(0,))
    rows = {r.group: r for r in _report(store, GroupBy.GPU_TYPE).rows}
    assert set(rows) == {"H100", "[hpc]", "[a]"}
    assert rows["H100"].jobs == 1 and math.isclose(rows["H100"].allocated_gpu_h, 4.0)
    assert math.isclose(rows["[hpc]"].allocated_gpu_h, 8.0) and not rows["[hpc]"].used_measured
    assert math.isclose(rows["[a]"].allocated_gpu_h, 1.0)  # running at the window's end


def test_a_backend_job_not_started_yet_is_its_backends_too(store: Store) -> None:
    store.submit(spec(gpus=2, backend="hpc"), "bob", T0)
    (row,) = _report(store, GroupBy.GPU_TYPE).rows
    assert (row.group, row.jobs, row.allocated_gpu_h, row.used_measured) == ("[hpc]", 1, 0, True)
    (row,) = _report(store, GroupBy.BACKEND).rows
    assert row.group == "hpc"


# -- the wire, the client and the CLI -----------------------------------------------------


@pytest.fixture
def serve() -> Iterator[list[object]]:
    """A server that answers every GET with the JSON put in the list it yields, as the
    daemon's HTTP does (its version header)."""
    answer: list[object] = [{}]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802  (http.server's name)
            body = json.dumps(answer[0]).encode()
            self.send_response(200)
            self.send_header("x-gpupool-version", __version__)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    answer.append(f"http://127.0.0.1:{server.server_address[1]}")
    try:
        yield answer
    finally:
        server.shutdown()
        server.server_close()


def _usage(
    serve: list[object], capsys: pytest.CaptureFixture[str], wire: object, *args: str
) -> str:
    serve[0] = json.loads(json.dumps(wire))
    assert main(["--url", str(serve[1]), "usage", *args]) == 0
    return capsys.readouterr().out


def test_the_json_adds_keys_and_keeps_every_old_one_as_it_was(store: Store) -> None:
    _fill(store)
    wire = json.loads(json.dumps(report_to_wire(_report(store, GroupBy.BACKEND))))
    hpc, local = wire["rows"]
    assert hpc["used_gpu_hours"] == 0.0  # still a number: older clients read it as one
    assert (hpc["backend_gpu_hours"], hpc["used_gpu_hours_measured"]) == (8.0, False)
    assert (local["backend_gpu_hours"], local["used_gpu_hours_measured"]) == (0.0, True)
    assert wire["by"] == "backend"
    view = read_usage_report(wire)
    assert [(r.group, r.used_gpu_hours_measured) for r in view.rows] == [
        ("hpc", False),
        ("local", True),
    ]


def test_the_table_shows_unmeasured_used_hours_as_a_dash_and_says_why(
    store: Store, serve: list[object], capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(store)
    wire = report_to_wire(_report(store, GroupBy.BACKEND))
    out = _usage(serve, capsys, wire, "--by", "backend")
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["BACKEND", "JOBS", "ALLOC", "GPU-H"]
    hpc = next(line.split() for line in lines if line.startswith("hpc"))
    local = next(line.split() for line in lines if line.startswith("local"))
    total = next(line.split() for line in lines if line.startswith("total"))
    assert hpc[1:5] == ["1", "8.00", "-", "-"]  # USED, then CPU-H: neither measured
    assert hpc[5] == "-"  # efficiency: nothing sampled
    assert local[1:4] == ["1", "4.00", "0.40"]
    assert total[1:4] == ["2", "12.00", "0.40"]
    assert backend_note(8.0, 8.0) in out
    assert "not for 8.00 GPU-h on backends." in out and "Slurm's gres/gpuutil" in out

    rows = list(
        csv.DictReader(io.StringIO(_usage(serve, capsys, wire, "--by", "backend", "--csv")))
    )
    assert [(r["backend"], r["used_gpu_hours"], r["backend_gpu_hours"]) for r in rows] == [
        ("hpc", "", "8.0"),
        ("local", "0.4", "0.0"),
        ("total", "0.4", "8.0"),
    ]


def test_a_pool_without_backend_hours_has_no_note_and_an_older_daemon_reads_as_measured(
    serve: list[object], capsys: pytest.CaptureFixture[str]
) -> None:
    row: JsonObject = {
        "group": "alice", "jobs": 1, "allocated_gpu_hours": 2.0, "used_gpu_hours": 0.0,
        "sampled_gpu_hours": 0.0, "efficiency": None, "mean_wait_s": None,
        "preempted_gpu_hours": 0.0, "idle_reclaimed_gpu_hours": 0.0, "energy_kwh": 0.0,
    }  # fmt: skip
    older: JsonObject = {"by": "user", "since": 0.0, "until": H, "simulated": False, "rows": [row],
             "total": {**row, "group": "total"}}  # fmt: skip
    view = read_usage_report(older)
    assert (view.total.backend_gpu_hours, view.total.used_gpu_hours_measured) == (0.0, True)
    out = _usage(serve, capsys, older)
    assert "backends" not in out
    assert next(x.split() for x in out.splitlines() if x.startswith("alice"))[3] == "0.00"


def test_a_backend_run_its_engine_measured_counts_as_used(
    store: Store, serve: list[object], capsys: pytest.CaptureFixture[str]
) -> None:
    """Slurm measured bob's gang 25% busy (gres/gpuutil, backends/slurm/gpu_use.py): its
    end stores that over its 2 h on 4 GPUs as samples would (2 of 8 GPU-h used, all 8
    sampled), so `usage` shows it used, and the note counts only what nothing measured."""
    _fill(store)  # bob's gang ended unmeasured
    carol = store.submit(
        JobSpec(("train",), resources=Resources(gpus=2), nodes=2, backend="hpc"), "carol", T0
    )
    store.start_in_backend(carol.id, T0 + 0.5 * H, "hpc", "slurm://c/13", "hpc/n1+n2", (0, 1, 0, 1))
    store.finish(carol.id, JobState.SUCCEEDED, 0, T0 + 2.5 * H, "done", gpu_utilization=0.25)
    by_user = {r.group: r for r in _report(store, GroupBy.USER).rows}
    measured, unmeasured = by_user["carol"], by_user["bob"]
    assert measured.allocated_gpu_h == pytest.approx(8.0)
    assert (measured.used_gpu_h, measured.sampled_gpu_h) == (pytest.approx(2.0), pytest.approx(8.0))
    assert measured.efficiency == pytest.approx(0.25) and measured.used_measured
    assert measured.backend_measured_gpu_h == pytest.approx(8.0)
    assert not unmeasured.used_measured and unmeasured.backend_measured_gpu_h == 0.0
    wire = report_to_wire(_report(store, GroupBy.USER))
    out = _usage(serve, capsys, wire)
    carol_row = next(line.split() for line in out.splitlines() if line.startswith("carol"))
    assert carol_row[1:4] == ["1", "8.00", "2.00"]
    assert "not for 8.00 of 16.00 GPU-h on backends." in out  # bob's, unmeasured
    assert read_usage_report(wire).total.backend_measured_gpu_hours == pytest.approx(8.0)


def test_a_preempted_backend_run_its_engine_measured_counts_too(store: Store) -> None:
    """A run that ended by preemption: its requeue stores what the engine measured of it."""
    job = store.submit(JobSpec(("train",), resources=Resources(gpus=1), backend="hpc"), "dan", T0)
    store.start_in_backend(job.id, T0, "hpc", "slurm://c/14", "hpc/n1", (0,))
    store.requeue(job.id, T0 + H, "preempted", gpu_utilization=0.5)
    [dan] = _report(store, GroupBy.USER).rows
    assert (dan.used_gpu_h, dan.sampled_gpu_h, dan.preempted_gpu_h) == (
        pytest.approx(0.5), pytest.approx(1.0), pytest.approx(1.0)
    )  # fmt: skip
