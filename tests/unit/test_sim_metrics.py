"""Simulator metrics and report, on replays small enough to compute by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from gpupool.sim.metrics import compute_metrics, isolated_jct, jain_index, percentile
from gpupool.sim.model import JobRecord, Sample, SimResult
from gpupool.sim.report import (
    MAX_POINTS,
    _bucketed,
    comparison_table,
    policies,
    size_table,
    write_metrics_json,
    write_plots,
)

REQUIRED = {
    "avg_jct_s", "p50_jct_s", "p95_jct_s", "p99_jct_s", "avg_queue_s", "p99_queue_s",
    "makespan_s", "utilization", "jain_fairness", "max_ftf", "preemptions", "load", "jobs",
    "wall_s", "avg_bounded_slowdown", "ftf_over_1_share", "lost_gpu_hours", "unfinished",
    "decide_calls", "by_size", "by_project",
}  # fmt: skip
PNG = b"\x89PNG\r\n\x1a\n"


def rec(id, project, submit, dur, gpus, start=None, end=None, queue=0.0, run=0.0, **kw):
    return JobRecord(id, submit, dur, gpus, project, "u", start, end, queue, run_gpu_s=run, **kw)


def small(policy: str = "fifo") -> SimResult:
    """8 GPUs, projects a (quota 6) and b (quota 2).

    JCTs 100, 200, 300, 30; slowdowns a: 1, 1 and b: 3, 3 (j4's 5 s runtime floored to 10 s);
    j5 never started."""
    return SimResult(
        policy=policy,
        records=[
            rec(1, "a", 0, 100, 1, start=0, end=100, run=100),
            rec(2, "a", 0, 200, 2, start=0, end=200, run=400),
            rec(3, "b", 0, 100, 8, 50, 300, 155, 1160, preemptions=1, lost_gpu_s=360),
            rec(4, "b", 300, 5, 1, start=325, end=330, queue=25, run=5),
            rec(5, "a", 310, 1000, 1),
        ],
        samples=[],
        capacity_gpus=8,
        load=0.7,
        quotas={"a": 6, "b": 2},
        wall_s=1.5,
        decide_calls=42,
    )


# --- metrics --------------------------------------------------------------------------------


def test_percentile_is_nearest_rank() -> None:
    values = list(range(100, 0, -1))  # order must not matter
    assert percentile(values, 50) == 50
    assert percentile(values, 95) == 95
    assert percentile(values, 99) == 99
    assert percentile(values, 100) == 100
    assert percentile(values, 0) == 1
    assert percentile([7.0], 99) == 7.0
    assert percentile(list(range(1, 101)), 7) == 7  # 0.07 * 100 is 7.000000000000001 in floats
    assert percentile([1, 2, 3, 4], 50) == 2  # no interpolation
    assert percentile([], 50) is None


def test_jct_queue_makespan_utilization() -> None:
    m = compute_metrics(small())
    assert m["jobs"] == 5 and m["unfinished"] == 1
    assert m["avg_jct_s"] == pytest.approx(630 / 4)
    assert (m["p50_jct_s"], m["p95_jct_s"], m["p99_jct_s"]) == (100, 300, 300)
    assert m["avg_queue_s"] == pytest.approx(45.0)
    assert m["p99_queue_s"] == 155
    assert m["makespan_s"] == 330
    assert m["utilization"] == pytest.approx(1665 / (8 * 330))
    assert m["avg_bounded_slowdown"] == pytest.approx(2.0)
    assert m["preemptions"] == 1
    assert m["lost_gpu_hours"] == pytest.approx(0.1)
    assert (m["load"], m["wall_s"], m["decide_calls"], m["policy"]) == (0.7, 1.5, 42, "fifo")


def test_jain_over_project_slowdowns() -> None:
    assert jain_index([1.0, 3.0]) == pytest.approx(0.8)
    assert jain_index([2.0]) == 1.0
    assert jain_index([]) is None
    assert compute_metrics(small())["jain_fairness"] == pytest.approx(0.8)


def test_finish_time_fairness() -> None:
    # Two projects on 8 GPUs: a fair slice is 4 GPUs, so the 8-GPU job runs at half speed.
    big = small().records[2]
    assert isolated_jct(big, 8, 2) == 200
    m = compute_metrics(small())
    # rho: j1 100/100, j2 200/200, j3 300/200, j4 30/10 (5 s runtime floored to 10 s)
    assert m["max_ftf"] == pytest.approx(3.0)
    assert m["ftf_over_1_share"] == pytest.approx(0.5)


def test_by_size_buckets() -> None:
    by_size = compute_metrics(small())["by_size"]
    assert list(by_size) == ["1", "2-8", ">8"]
    one = by_size["1"]  # j1, j4 finished, j5 not
    assert one["jobs"] == 3
    assert one["avg_jct_s"] == pytest.approx(65.0)
    assert one["p99_jct_s"] == 100
    assert one["avg_queue_s"] == pytest.approx(12.5)
    assert one["avg_bounded_slowdown"] == pytest.approx(2.0)
    mid = by_size["2-8"]
    assert (mid["jobs"], mid["avg_jct_s"], mid["avg_queue_s"]) == (2, 250, 77.5)
    assert one["p50_jct_s"] == 30 and one["preemptions"] == 0
    assert by_size[">8"] == {
        "jobs": 0, "avg_jct_s": None, "p50_jct_s": None, "p95_jct_s": None, "p99_jct_s": None,
        "avg_queue_s": None, "p99_queue_s": None, "avg_bounded_slowdown": None,
        "preemptions": 0, "lost_gpu_hours": 0.0,
    }  # fmt: skip


def test_by_project_shares_and_quotas() -> None:
    by_project = compute_metrics(small())["by_project"]
    a, b = by_project["a"], by_project["b"]
    assert (a["jobs"], b["jobs"]) == (3, 2)
    assert a["avg_jct_s"] == pytest.approx(150.0)
    assert (a["avg_slowdown"], b["avg_slowdown"]) == (pytest.approx(1.0), pytest.approx(3.0))
    assert a["gpu_hours"] == pytest.approx(500 / 3600)
    assert a["share"] == pytest.approx(500 / 1665)
    assert b["share"] == pytest.approx(1165 / 1665)
    assert (a["quota_share"], b["quota_share"]) == (0.75, 0.25)
    no_quotas = small()
    no_quotas.quotas = {}
    assert compute_metrics(no_quotas)["by_project"]["a"]["quota_share"] is None


def test_unfinished_jobs_stretch_the_utilization_window() -> None:
    result = SimResult(
        policy="las",
        records=[
            rec(1, "a", 0, 100, 1, start=0, end=100, run=100),
            rec(2, "a", 0, 1000, 1, start=50, queue=50, run=350),  # still running at 400
        ],
        samples=[Sample(0, 1, 1, {"a": 1}), Sample(400, 0, 1, {"a": 1})],
        capacity_gpus=2,
        load=0.5,
        quotas={},
    )
    m = compute_metrics(result)
    assert (m["unfinished"], m["makespan_s"], m["avg_jct_s"]) == (1, 100, 100)
    assert m["utilization"] == pytest.approx(450 / (2 * 400))
    assert m["jain_fairness"] == 1.0  # one project


@pytest.mark.parametrize("records", [[], [rec(1, "a", 0, 100, 1)]])
def test_nothing_finished_does_not_crash(records: list[JobRecord]) -> None:
    m = compute_metrics(SimResult("fifo", records, [], 8, 0.0, {}))
    assert REQUIRED <= set(m)
    assert m["avg_jct_s"] is None and m["p99_jct_s"] is None and m["max_ftf"] is None
    assert m["jain_fairness"] is None
    assert (m["makespan_s"], m["utilization"], m["preemptions"]) == (0.0, 0.0, 0)
    assert m["unfinished"] == len(records)
    json.dumps(m)


# --- report ---------------------------------------------------------------------------------


def test_metrics_json_round_trips(tmp_path: Path) -> None:
    metrics = {name: compute_metrics(small(name)) for name in ("fifo", "las")}
    meta = {"trace": "tiny", "cluster": "box", "seed": 3, "where": tmp_path}
    path = write_metrics_json(tmp_path / "out" / "metrics.json", metrics, meta)
    data = json.loads(path.read_text())
    assert policies(data) == ["fifo", "las"]
    assert data["_run"]["seed"] == 3 and data["_run"]["where"] == str(tmp_path)
    for name in ("fifo", "las"):
        assert REQUIRED <= set(data[name])
        assert data[name]["by_size"]["1"]["jobs"] == 3
    with pytest.raises(ValueError, match="may not start"):
        write_metrics_json(tmp_path / "bad.json", {"_x": metrics["fifo"]}, {})


def render(table) -> str:
    console = Console(record=True, width=200)
    console.print(table)
    return console.export_text()


def test_tables_render_every_policy() -> None:
    metrics = {name: compute_metrics(small(name)) for name in ("fifo", "sjf-oracle")}
    metrics["empty"] = compute_metrics(SimResult("empty", [], [], 8, 0.0, {}))
    text = render(comparison_table({"_run": {}, **metrics}))
    for name in metrics:
        assert name in text
    assert "_run" not in text
    assert "2m38s" in text  # avg JCT 157.5 s
    assert "63.1%" in text  # utilization
    sizes = render(size_table(metrics))
    assert "sjf-oracle" in sizes and ">8" in sizes and "2-8" in sizes


def test_bucketing_keeps_the_time_weighted_mean() -> None:
    # Value 1 for 1 s, then 0 for 3 s, repeated: the time-weighted mean is 1/4 everywhere,
    # though half of the samples say 1.
    samples = []
    for i in range(3000):
        samples += [Sample(4 * i, 0, 1.0, {}), Sample(4 * i + 1, 0, 0.0, {})]
    days, values = _bucketed(samples, lambda s: s.busy_gpus)
    assert len(days) == len(values) <= MAX_POINTS
    assert sum(values) / len(values) == pytest.approx(0.25, rel=0.01)
    assert days == sorted(days)


def test_write_plots_makes_four_pngs(tmp_path: Path) -> None:
    busy = [Sample(60.0 * i, i % 7, float(i % 9), {"a": 1.0}) for i in range(5000)]
    with_samples = small("fifo")
    with_samples.samples = busy
    no_quotas = small("las")
    no_quotas.quotas = {}
    results = {"fifo": with_samples, "las": no_quotas, "empty": SimResult("e", [], [], 8, 0, {})}
    paths = write_plots(tmp_path / "plots", results)
    names = ["jct_cdf.png", "queue_length.png", "utilization.png", "project_share.png"]
    assert [p.name for p in paths] == names
    for p in paths:
        data = p.read_bytes()
        assert data.startswith(PNG) and len(data) > 1000
