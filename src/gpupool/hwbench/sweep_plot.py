"""The DDP sweep's plot: samples/s vs GPUs, one panel per (model, mode), a line per batch size.

Drawn from the result alone (its `table=throughput` rows), so a saved JSON can be plotted
again. matplotlib's object API (Figure + Agg on save), never pyplot: no display needed.
"""

from __future__ import annotations

from pathlib import Path

from gpupool.hwbench.result import BenchResult


def write_plot(result: BenchResult, path: str | Path) -> Path:
    from matplotlib.figure import Figure  # heavy: only when a plot is asked for

    rows = [r for r in result.rows if r.labels.get("table") == "throughput"]
    models = sorted({str(r.labels["model"]) for r in rows})
    modes = sorted({str(r.labels["mode"]) for r in rows})
    if not rows:
        raise ValueError("nothing to plot: the result has no throughput rows")
    fig = Figure(figsize=(5.5 * len(modes), 4.0 * len(models)), layout="constrained")
    axes = fig.subplots(len(models), len(modes), squeeze=False)
    for i, model in enumerate(models):
        for j, mode in enumerate(modes):
            ax = axes[i][j]
            mine = [r for r in rows if r.labels["model"] == model and r.labels["mode"] == mode]
            batches = sorted({int(r.labels["batch"]) for r in mine})
            for batch in batches:
                points = sorted(
                    (int(r.labels["gpus"]), r.values["samples_per_s"])
                    for r in mine
                    if r.labels["batch"] == batch
                )
                ax.plot(
                    [g for g, _ in points],
                    [v for _, v in points],
                    marker="o",
                    label=f"batch {batch}",
                )
            gpus = sorted({int(r.labels["gpus"]) for r in mine})
            if gpus:
                ax.set_xticks(gpus, [str(g) for g in gpus])
            ax.set_xlabel("GPUs" if result.machine.device == "cuda" else "ranks (CPU)")
            ax.set_ylabel("samples/s")
            ax.set_yscale("log")
            ax.set_title(f"{model}, {mode.upper()}")
            if batches:
                ax.legend(fontsize=7, ncol=2)
    where = result.machine.gpu_model or result.machine.device
    fig.suptitle(f"ddp-sweep on {result.machine.hostname} ({where})")
    out = Path(path)
    fig.savefig(out, dpi=110)
    return out
