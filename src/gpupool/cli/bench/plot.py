"""`bench compare --plot FILE`: throughput against size, one panel per benchmark, one line
per result and series (matmul: TFLOPS against n for each dtype; membw and pcie: GB/s against
bytes, log scale, for each direction and memory kind). PNG through matplotlib (Agg)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpupool.cli.bench.compare import Source
from gpupool.cli.bench.render import HEADERS, label_keys, value_keys
from gpupool.hwbench.compare import THROUGHPUT

X_LABELS = ("n", "bytes", "batch", "gpus")  # the size-like labels a panel is drawn against


def plot(sources: Sequence[Source], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[str, list[tuple[int, Source]]] = {}
    for i, s in enumerate(sources):
        groups.setdefault(s.result.benchmark, []).append((i, s))
    fig, axes = plt.subplots(len(groups), 1, figsize=(8, 4 * len(groups)), squeeze=False)
    for ax, (name, group) in zip(axes[:, 0], groups.items()):
        rows = [r for _, s in group for r in s.result.rows]
        labels = label_keys(rows)
        x_key = next((k for k in X_LABELS if k in labels), None)
        known = THROUGHPUT.get(name)
        values = value_keys(rows)
        y_key = known[0] if known else (values[0] if values else None)
        if x_key is None or y_key is None:
            ax.set_title(f"{name}: nothing to draw against a size")
            continue
        series_keys = [k for k in labels if k != x_key]
        for i, s in group:
            series: dict[tuple[object, ...], list[tuple[float, float]]] = {}
            for r in s.result.rows:
                x, y = r.labels.get(x_key), r.values.get(y_key)
                if isinstance(x, (int, float)) and y is not None:
                    key = tuple(r.labels.get(k) for k in series_keys)
                    series.setdefault(key, []).append((float(x), y))
            for named, points in series.items():
                points.sort()
                legend = " ".join(str(v) for v in named if v is not None)
                ax.plot(
                    [p[0] for p in points],
                    [p[1] for p in points],
                    marker="o",
                    label=f"{chr(65 + i) if i < 26 else i}: {legend}".rstrip(": "),
                )
        if x_key == "bytes":
            ax.set_xscale("log", base=2)
        ax.set_xlabel(x_key)
        ax.set_ylabel(HEADERS.get(y_key, y_key))
        ax.set_title(name)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
