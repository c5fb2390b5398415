"""How a policy comparison is shown: `metrics.json` for machines, rich tables for the terminal,
PNG plots for people.

Tables read only the metrics dicts (so they can be re-rendered from a saved `metrics.json`);
plots need the raw records and samples, which metrics do not keep.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from gpupool.core.units import format_duration
from gpupool.sim.metrics import SIZE_BUCKETS
from gpupool.sim.model import Sample, SimResult

# Key of the run's description in metrics.json; every key starting with "_" is not a policy.
RUN_KEY = "_run"
MAX_POINTS = 2000  # per plotted line: keeps 20k-sample runs fast and the PNGs small
TOP_PROJECTS = 12  # bars beyond a dozen projects are unreadable
DAY_S = 86400.0


def policies(metrics_by_policy: Mapping[str, Any]) -> list[str]:
    """Policy names of a metrics mapping (a loaded metrics.json included), in order."""
    return [name for name in metrics_by_policy if not name.startswith("_")]


def write_metrics_json(
    path: str | Path, metrics_by_policy: Mapping[str, Mapping[str, Any]], meta: Mapping[str, Any]
) -> Path:
    """Write `{policy: metrics, ..., "_run": meta}`.

    Policies sit at the top level so `jq '.fifo.avg_jct_s'` works; the run's description
    (trace, cluster, seed, estimates) goes under "_run". Keys starting with "_" are never
    policies, which is why a policy name may not start with one."""
    bad = [name for name in metrics_by_policy if name.startswith("_")]
    if bad:
        raise ValueError(f"policy names may not start with '_': {bad}")
    data: dict[str, Any] = {RUN_KEY: dict(meta), **metrics_by_policy}
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    # default=str: meta may carry Paths or enums; a readable string beats a crash at the end.
    out.write_text(json.dumps(data, indent=2, default=str) + "\n")
    return out


# --- tables ---------------------------------------------------------------------------------


def _dur(value: Any) -> str:
    return format_duration(value) if value is not None else "-"


def _num(digits: int) -> Callable[[Any], str]:
    return lambda v: "-" if v is None else f"{v:.{digits}f}"


def _pct(value: Any) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


# (header, metrics key, formatter, better: "low"/"high"/None)
_COLUMNS: tuple[tuple[str, str, Callable[[Any], str], str | None], ...] = (
    ("avg JCT", "avg_jct_s", _dur, "low"),
    ("p50 JCT", "p50_jct_s", _dur, "low"),
    ("p99 JCT", "p99_jct_s", _dur, "low"),
    ("avg queue", "avg_queue_s", _dur, "low"),
    ("bnd slowdown", "avg_bounded_slowdown", _num(2), "low"),
    ("util", "utilization", _pct, "high"),
    ("Jain", "jain_fairness", _num(3), "high"),
    ("max FTF", "max_ftf", _num(1), "low"),
    ("preempt", "preemptions", lambda v: "-" if v is None else str(v), "low"),
    ("idle waiting", "idle_waiting_share", _pct, "low"),
    ("wall s", "wall_s", _num(1), None),
)


def _best(values: Sequence[Any], better: str | None) -> Any:
    present = [v for v in values if v is not None]
    if better is None or len(present) < 2:
        return None  # nothing to compare: no highlighting
    return min(present) if better == "low" else max(present)


def comparison_table(metrics_by_policy: Mapping[str, Mapping[str, Any]]) -> Table:
    """One row per policy; the best value of each comparable column is bold."""
    names = policies(metrics_by_policy)
    table = Table(title="policy comparison", header_style="bold")
    table.add_column("policy", style="cyan", no_wrap=True)
    for header, *_ in _COLUMNS:
        table.add_column(header, justify="right")
    best = {
        key: _best([metrics_by_policy[n].get(key) for n in names], better)
        for _, key, _, better in _COLUMNS
    }
    for name in names:
        m = metrics_by_policy[name]
        cells = []
        for _, key, fmt, _ in _COLUMNS:
            text = fmt(m.get(key))
            top = best[key] is not None and m.get(key) == best[key]
            cells.append(f"[bold]{text}[/bold]" if top else text)
        table.add_row(name, *cells)
    return table


def size_table(metrics_by_policy: Mapping[str, Mapping[str, Any]]) -> Table:
    """Rows policy x job size: shows who pays for a policy's gains (small or big jobs)."""
    table = Table(title="by job size (GPUs)", header_style="bold")
    table.add_column("policy", style="cyan", no_wrap=True)
    table.add_column("size", justify="right")
    for header in ("jobs", "avg JCT", "p99 JCT", "avg queue", "bnd slowdown"):
        table.add_column(header, justify="right")
    names = policies(metrics_by_policy)
    for i, name in enumerate(names):
        by_size = metrics_by_policy[name].get("by_size", {})
        for size, _, _ in SIZE_BUCKETS:
            row = by_size.get(size, {})
            table.add_row(
                name if size == SIZE_BUCKETS[0][0] else "",
                size,
                str(row.get("jobs", 0)),
                _dur(row.get("avg_jct_s")),
                _dur(row.get("p99_jct_s")),
                _dur(row.get("avg_queue_s")),
                _num(2)(row.get("avg_bounded_slowdown")),
                end_section=i < len(names) - 1 and size == SIZE_BUCKETS[-1][0],
            )
    return table


def idle_waiting_table(metrics_by_policy: Mapping[str, Mapping[str, Any]]) -> Table:
    """Rows policy: GPU-hours idle while a job that could use them waited, in all, as a share
    of capacity, and by cause (policy/idle_waiting.py says the rule)."""
    from gpupool.policy.idle_waiting import IdleCause

    table = Table(title="GPU-hours idle while jobs waited, by cause", header_style="bold")
    table.add_column("policy", style="cyan", no_wrap=True)
    for header in ("GPU-h", "of capacity", *(c.value for c in IdleCause)):
        table.add_column(header, justify="right")
    for name in policies(metrics_by_policy):
        m = metrics_by_policy[name]
        causes = m.get("idle_waiting_by_cause", {})
        table.add_row(
            name,
            _num(1)(m.get("idle_waiting_gpu_hours")),
            _pct(m.get("idle_waiting_share")),
            *(_num(1)(causes.get(c.value, 0.0)) for c in IdleCause),
        )
    return table


# --- plots ----------------------------------------------------------------------------------


def _bucketed(
    samples: Sequence[Sample], value: Callable[[Sample], float]
) -> tuple[list[float], list[float]]:
    """(days, values) of a sampled step series, at most MAX_POINTS long.

    Samples come at regular ticks *and* at events, so bursts of events would dominate a
    plain per-bucket mean; each sample instead counts for the time it held (until the next
    sample), which is what an average over time means."""
    if len(samples) <= MAX_POINTS:
        return [s.time_s / DAY_S for s in samples], [value(s) for s in samples]
    start, end = samples[0].time_s, samples[-1].time_s
    width = (end - start) / MAX_POINTS or 1.0
    last = MAX_POINTS - 1
    area = [0.0] * MAX_POINTS
    held = [0.0] * MAX_POINTS
    for here, nxt in zip(samples, samples[1:]):
        v, t0, t1 = value(here), here.time_s, nxt.time_s
        while t1 > t0:
            b = min(int((t0 - start) / width), last)
            if b < last and start + (b + 1) * width <= t0:
                b += 1  # float rounding put t0, sitting on a bucket edge, one bucket early
            cut = t1 if b == last else min(t1, start + (b + 1) * width)
            area[b] += v * (cut - t0)
            held[b] += cut - t0
            t0 = cut
    days = [(start + (b + 0.5) * width) / DAY_S for b in range(MAX_POINTS) if held[b] > 0]
    values = [area[b] / held[b] for b in range(MAX_POINTS) if held[b] > 0]
    return days, values


_DURATION_TICKS = (
    (1, "1s"), (10, "10s"), (60, "1m"), (600, "10m"), (3600, "1h"), (36000, "10h"),
    (86400, "1d"), (864000, "10d"), (8640000, "100d"),
)  # fmt: skip


def _jct_cdf(fig: Any, results: Mapping[str, SimResult]) -> None:
    ax = fig.add_subplot()
    low, high = math.inf, 0.0
    for name, result in results.items():
        jcts = sorted(max(r.end_s - r.submit_s, 1.0) for r in result.records if r.end_s is not None)
        if not jcts:
            continue
        n = len(jcts)
        step = max(1, n // MAX_POINTS)
        idx = list(range(0, n, step)) + ([n - 1] if (n - 1) % step else [])
        ax.plot(
            [jcts[i] for i in idx], [(i + 1) / n for i in idx], label=name, drawstyle="steps-post"
        )
        low, high = min(low, jcts[0]), max(high, jcts[-1])
    ax.set_xscale("log")
    if high > 0:
        ticks = [(t, label) for t, label in _DURATION_TICKS if low / 10 <= t <= high * 10]
        ax.set_xticks([t for t, _ in ticks], [label for _, label in ticks])
    ax.set_title("job completion time CDF")
    ax.set_xlabel("job completion time (log scale)")
    ax.set_ylabel("fraction of finished jobs")
    ax.set_ylim(0, 1.01)


def _series(fig: Any, results: Mapping[str, SimResult], what: str) -> None:
    ax = fig.add_subplot()
    for name, result in results.items():
        cap = result.capacity_gpus or 1

        def value(s: Sample, cap: float = cap) -> float:
            return float(s.queued_jobs) if what == "queue" else 100 * s.busy_gpus / cap

        days, values = _bucketed(result.samples, value)
        ax.plot(days, values, label=name, linewidth=1)
    ax.set_xlabel("time since first submission (days)")
    if what == "queue":
        ax.set_title("queue length over time")
        ax.set_ylabel("queued jobs")
    else:
        ax.set_title("GPU utilization over time")
        ax.set_ylabel("busy GPUs (% of capacity)")
        ax.set_ylim(0, 105)


def _project_share(fig: Any, results: Mapping[str, SimResult]) -> None:
    gpu_s: dict[str, dict[str, float]] = {}
    overall: dict[str, float] = {}
    for name, result in results.items():
        mine = gpu_s.setdefault(name, {})
        for r in result.records:
            mine[r.project] = mine.get(r.project, 0.0) + r.run_gpu_s
            overall[r.project] = overall.get(r.project, 0.0) + r.run_gpu_s
    # One project set for every panel, so the panels line up.
    top = sorted(overall, key=lambda p: (-overall[p], p))[:TOP_PROJECTS]
    cols = 1 if len(results) == 1 else 2
    rows = max(1, math.ceil(len(results) / cols))
    fig.set_size_inches(7 * cols, 3.2 * rows)
    for i, (name, result) in enumerate(results.items()):
        ax = fig.add_subplot(rows, cols, i + 1)
        total = sum(gpu_s[name].values()) or 1.0
        xs = list(range(len(top)))
        shares = [100 * gpu_s[name].get(p, 0.0) / total for p in top]
        width = 0.4 if result.quotas else 0.8
        ax.bar(
            [x - width / 2 if result.quotas else x for x in xs], shares, width, label="GPU share"
        )
        if result.quotas and result.capacity_gpus:
            quota = [100 * result.quotas.get(p, 0.0) / result.capacity_gpus for p in top]
            ax.bar([x + width / 2 for x in xs], quota, width, label="quota share", color="0.6")
        ax.set_xticks(xs, top, rotation=45, ha="right", fontsize=7)
        ax.set_title(name)
        ax.set_ylabel("share of the cluster (%)")
        if i == 0 or result.quotas:  # the quota bars need a key wherever they are
            ax.legend(fontsize=7)
    fig.suptitle(f"GPU share vs quota share, top {min(len(top), TOP_PROJECTS)} projects")


def write_plots(out_dir: str | Path, results: Mapping[str, SimResult]) -> list[Path]:
    """jct_cdf.png, queue_length.png, utilization.png, project_share.png under `out_dir`.

    Figures are built on matplotlib's object API (Figure + Agg on save), never pyplot: no
    global state, no display needed, safe to call from a server or from tests in parallel."""
    from matplotlib.figure import Figure  # heavy import: only when plots are asked for

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    plots: list[tuple[str, Callable[[Any], None]]] = [
        ("jct_cdf.png", lambda f: _jct_cdf(f, results)),
        ("queue_length.png", lambda f: _series(f, results, "queue")),
        ("utilization.png", lambda f: _series(f, results, "utilization")),
        ("project_share.png", lambda f: _project_share(f, results)),
    ]
    for filename, draw in plots:
        fig = Figure(figsize=(9, 5), layout="constrained")
        draw(fig)
        for ax in fig.axes:
            if filename != "project_share.png" and ax.get_lines():
                ax.legend(fontsize=8)
            ax.grid(True, alpha=0.3)
        path = out / filename
        fig.savefig(path, dpi=110)
        written.append(path)
    return written
