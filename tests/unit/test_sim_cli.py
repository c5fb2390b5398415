"""`gpupool sim` as a user runs it: a small CSV trace, several profiles side by side, the
files it leaves behind, and one clear line for each bad argument."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpupool.cli.main import main
from gpupool.cli.sim import PROFILE_NAMES
from gpupool.policy.profiles import PROFILES

REQUIRED = {
    "avg_jct_s", "p50_jct_s", "p95_jct_s", "p99_jct_s", "avg_queue_s", "p99_queue_s",
    "makespan_s", "utilization", "jain_fairness", "max_ftf", "preemptions", "load", "jobs",
    "wall_s",
}  # fmt: skip
PNG = b"\x89PNG\r\n\x1a\n"


def _csv_trace(path: Path) -> Path:
    rows = ["submit_time_s,duration_s,num_gpus,user,project"]
    for i in range(40):
        rows.append(f"{i * 30},{300 + (i * 97) % 1500},{[1, 2, 4, 8][i % 4]},u{i % 3},p{i % 2}")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_the_cli_names_every_profile_the_policy_layer_has() -> None:
    assert set(PROFILE_NAMES) == set(PROFILES)


def test_compare_writes_metrics_plots_and_a_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _csv_trace(tmp_path / "trace.csv")
    out = tmp_path / "out"
    code = main(
        ["sim", "--trace", str(trace), "--format", "csv", "--cluster", "2x8", "--load", "0.9",
         "--compare", "fifo,fifo-backfill,srtf-oracle,default", "--workers", "1", "--out", str(out)]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "40 jobs on 16 GPUs at load 0.90" in printed
    for name in ("fifo", "fifo-backfill", "srtf-oracle", "default"):
        assert name in printed
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics) == {"_run", "fifo", "fifo-backfill", "srtf-oracle", "default"}
    for name in ("fifo", "fifo-backfill", "srtf-oracle", "default"):
        assert REQUIRED <= set(metrics[name]), name
        assert metrics[name]["jobs"] == 40 and metrics[name]["unfinished"] == 0
        assert metrics[name]["load"] == pytest.approx(0.9)
    # Backfill can only help FIFO's average here, and the oracle bound is at least as good.
    assert metrics["fifo-backfill"]["avg_jct_s"] <= metrics["fifo"]["avg_jct_s"]
    assert metrics["_run"]["seed"] == 1 and metrics["_run"]["estimates"] == "noisy"
    for plot in ("jct_cdf.png", "queue_length.png", "utilization.png", "project_share.png"):
        assert (out / plot).read_bytes()[:8] == PNG, plot


def test_same_seed_same_numbers(tmp_path: Path) -> None:
    trace = _csv_trace(tmp_path / "trace.csv")
    runs = []
    for out in ("a", "b"):
        assert main(["sim", "--trace", str(trace), "--format", "csv", "--cluster", "1x8",
                     "--policy", "default", "--seed", "5", "--no-plots", "--out", str(tmp_path / out)]) == 0  # fmt: skip
        m = json.loads((tmp_path / out / "metrics.json").read_text())["default"]
        runs.append({k: v for k, v in m.items() if k != "wall_s"})
    assert runs[0] == runs[1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "nope"], "unknown policy nope; known: default, fifo, fifo-backfill"),
        (["--load", "0"], "--load must be more than 0"),
        (["--cluster", "0x8"], "0x8"),
        (["--interval", "-1"], "--interval must be 0 or more"),
        (["--format", "philly"], "trace.csv"),
    ],
)
def test_bad_arguments_get_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    trace = _csv_trace(tmp_path / "trace.csv")
    base = ["sim", "--trace", str(trace), "--format", "csv", "--out", str(tmp_path / "o")]
    code = main(base + args)
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_isolated_vcs_counts_the_jobs_of_vcs_without_a_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Three jobs of a Philly VC with a size, two of a VC with none: those two have no
    # cluster to replay on, and every count says so (they were dropped silently).
    trace = tmp_path / "vcs.csv"
    rows = ["submit_time_s,duration_s,num_gpus,user,project"]
    rows += [f"{i * 10},100,1,u,ed69ec" for i in range(3)]
    rows += [f"{i * 10 + 5},100,1,u,novc" for i in range(2)]
    trace.write_text("\n".join(rows) + "\n")
    out = tmp_path / "out"
    base = ["sim", "--trace", str(trace), "--format", "csv", "--isolated-vcs",
            "--policy", "fifo", "--no-plots", "--out", str(out)]  # fmt: skip
    assert main(base) == 0
    printed = capsys.readouterr().out
    assert "3 jobs on" in printed
    assert "2 no cluster for its VC" in printed
    run = json.loads((out / "metrics.json").read_text())["_run"]
    assert run["jobs"] == 3
    assert run["skipped"] == {"no cluster for its VC": 2}
    assert json.loads((out / "metrics.json").read_text())["fifo"]["jobs"] == 3
    assert main([*base, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["_run"]["skipped"] == {"no cluster for its VC": 2}


def test_the_cli_names_every_wide_placement_rule() -> None:
    from gpupool.cli.sim import WIDE_PLACEMENTS
    from gpupool.policy.snapshot import WidePlacement

    assert WIDE_PLACEMENTS == tuple(WidePlacement)


def test_wide_placement_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 3 nodes of 8. A (5 GPUs, 100 s) goes on node-001, B (5, 100 s) on node-002 (3 left on
    # 001); node-003 stays whole. C (12 GPUs, 100 s) at 1 s: spread starts it at once on 8 +
    # 3 + 1 (JCT 100); consolidate needs a whole node and 4 more on one node, which it has
    # when A and B end at 100 (JCT 199). Average JCT: 100 against (100 + 100 + 199) / 3.
    trace = tmp_path / "wide.csv"
    trace.write_text(
        "submit_time_s,duration_s,num_gpus,user,project\n0,100,5,u,p\n0,100,5,u,p\n1,100,12,u,p\n"
    )
    averages = {}
    for rule in ("spread", "consolidate"):
        code = main(["sim", "--trace", str(trace), "--format", "csv", "--cluster", "3x8",
                     "--policy", "fifo", "--estimates", "oracle", "--interval", "0",
                     "--wide-placement", rule, "--json"])  # fmt: skip
        assert code == 0
        metrics = json.loads(capsys.readouterr().out)
        assert metrics["_run"]["wide_placement"] == rule
        averages[rule] = metrics["fifo"]["avg_jct_s"]
    assert averages == {"spread": pytest.approx(100.0), "consolidate": pytest.approx(399 / 3)}


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_without_out_nothing_is_written(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
) -> None:
    # Files only when asked for (--out), as Slurm and SkyPilot users expect; the tables
    # (or the JSON) still print, and the table output says how to get the files.
    trace = _csv_trace(tmp_path / "trace.csv")
    monkeypatch.chdir(tmp_path)
    code = main(["sim", "--trace", str(trace), "--format", "csv", "--cluster", "1x8",
                 "--policy", "fifo", *extra])  # fmt: skip
    assert code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.csv"]
    printed = capsys.readouterr().out
    if extra:
        assert json.loads(printed)["fifo"]["jobs"] == 40
    else:
        assert "40 jobs on 8 GPUs" in printed
        assert "no files written: --out DIR writes metrics.json and the plots" in printed


def test_the_report_says_what_load_and_util_measure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "load 0.80" beside "util 8.6%" read as a contradiction (issue 30, item 23): the report
    # says what each is, with the figures the load was computed from, which give it back.
    import re

    from gpupool.core.units import parse_duration

    trace = _csv_trace(tmp_path / "trace.csv")
    code = main(["sim", "--trace", str(trace), "--format", "csv", "--cluster", "2x8",
                 "--load", "0.9", "--policy", "fifo"])  # fmt: skip
    assert code == 0
    printed = " ".join(capsys.readouterr().out.split())  # a terminal may wrap the lines
    said = re.search(
        r"load 0\.90 = ([\d.,]+) GPU-hours asked / \((\d+) GPUs x (\S+) from the first "
        r"submission to the last\)",
        printed,
    )
    assert said is not None, printed
    hours, gpus, span = float(said[1].replace(",", "")), int(said[2]), said[3]
    assert hours / (gpus * parse_duration(span) / 3600) == pytest.approx(0.9, rel=0.02)
    assert (
        "util = GPU-hours held / (GPUs x the time from the first submission to the last end)"
        in printed
    )


def test_a_drain_and_a_per_user_cap_replay_from_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One node of 2 GPUs: A and B (1 GPU, 100 s, user u) at 0 and 1 s. --drain
    node-001:0@0-50s keeps GPU 0 out until t=50, so B waits (JCT 49 + 100 = 149); a cap of 1
    GPU per user makes B wait for A's end instead (JCT 199)."""
    trace = tmp_path / "two.csv"
    trace.write_text("submit_time_s,duration_s,num_gpus,user,project\n0,100,1,u,p\n1,100,1,u,p\n")
    base = ["sim", "--trace", str(trace), "--format", "csv", "--cluster", "1x2",
            "--policy", "default", "--estimates", "oracle", "--interval", "0", "--json"]  # fmt: skip
    runs = {
        "plain": [],
        "drain": ["--drain", "node-001:0@0-50s"],
        "capped": ["--max-gpus-per-user", "1"],
    }
    averages = {}
    for name, extra in runs.items():
        assert main(base + extra) == 0
        out = json.loads(capsys.readouterr().out)
        averages[name] = out["default"]["avg_jct_s"]
    assert out["_run"]["max_gpus_per_user"] == 1
    assert averages == {
        "plain": pytest.approx(100.0),
        "drain": pytest.approx((100 + 149) / 2),
        "capped": pytest.approx((100 + 199) / 2),
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--drain", "node-001@5m"], "expected NODE[:GPU]@START-END"),
        (["--drain", "node-001:x@0-5m"], "expected NODE[:GPU]@START-END"),
        (["--drain", "node-001@5m-1m"], "END must come after START"),
        (["--drain", "elsewhere@0-5m", "--cluster", "1x2"], "no node 'elsewhere'"),
    ],
)
def test_a_bad_drain_gets_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    trace = _csv_trace(tmp_path / "trace.csv")
    try:
        code = main(["sim", "--trace", str(trace), "--format", "csv", *args])
    except SystemExit as e:  # argparse's own usage error
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err
