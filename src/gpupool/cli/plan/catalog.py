"""`gpupool plan catalog`: the hardware catalog the other plan commands read, with sources.

    gpupool plan catalog                      # all four sections
    gpupool plan catalog gpus --sources       # one section, with where each figure came from
    gpupool plan catalog --catalog mine.yaml  # with an override file applied
    gpupool plan catalog --json               # everything, sources included
    gpupool plan catalog --plot gpus.png      # peak BF16 TFLOPS vs memory bandwidth per GPU

The data is gpupool/plan/data/catalog.yaml, loaded by gpupool.plan.catalog. Nothing heavy is
imported at module top: the parser is built for every gpupool command.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

SECTION_TITLES = {
    "gpus": "GPUs",
    "servers": "Servers",
    "interconnects": "Interconnects",
    "clouds": "Cloud prices",
}

TABLE_TITLES = {
    **SECTION_TITLES,
    "gpus": "GPUs (dense TFLOPS; memory GB and GB/s; NVLink GB/s total both directions)",
}

ASSUMPTIONS = {
    "units": "decimal SI: GB = 1e9 bytes, GB/s = 1e9 bytes/s, TFLOPS = 1e12 FLOP/s",
    "tflops": "dense tensor-core peaks, without the 2:4 sparsity doubling; GeForce cards at "
    "FP32 accumulate; bf16 falls back to fp16 where a GPU has no BF16 (V100, Turing, Pascal)",
    "nvlink_gbs": "the vendor's total per GPU, both directions (interconnects list per direction)",
    "interconnect_bandwidth": "usable GB/s per direction per GPU or port: what a ring "
    "all-reduce sees",
    "interconnect_latency": "NCCL's per-step ring latency model (src/graph/tuning.cc)",
    "cloud_price": "US$ per instance-hour at the stated pricing and date; prices change",
}
# Which assumptions a section's figures rest on.
SECTION_ASSUMPTIONS = {
    "gpus": ("units", "tflops", "nvlink_gbs"),
    "servers": ("units",),
    "interconnects": ("units", "interconnect_bandwidth", "interconnect_latency"),
    "clouds": ("cloud_price",),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "section",
        nargs="?",
        metavar="SECTION",
        help=f"one of {', '.join(SECTION_TITLES)} (default: all four)",
    )
    p.add_argument(
        "--sources", action="store_true", help="add a column with each entry's source and date"
    )


def _num(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "—"
    return f"{value:,.{digits}g}" if value < 1e4 else f"{value:,.0f}"


def _money(value: float | None) -> str:
    if value is None:
        return "—"
    return f"${value:,.0f}" if value >= 100 else f"${value:,.2f}" if value >= 1 else f"${value:.3f}"


def _rows(section: str, entries: tuple[Any, ...]) -> tuple[list[str], list[list[str]]]:
    if section == "gpus":
        columns = ["GPU", "mem GB", "GB/s", "BF16", "FP16", "FP32", "NVLink", "PCIe", "TDP W"]
        columns.append("price")
        rows = [
            [g.name, _num(g.memory_gb), _num(g.memory_bandwidth_gbs)]
            + [_num(g.bf16_tflops), _num(g.fp16_tflops), _num(g.fp32_tflops)]
            + [_num(g.nvlink_gbs), f"gen{g.pcie_gen}", _num(g.tdp_w), _money(g.price_usd)]
            for g in entries
        ]
    elif section == "servers":
        columns = ["server", "GPUs", "max kW", "price", "$ per GPU"]
        rows = [
            [s.name, f"{s.gpus}x {s.gpu}", _num(s.max_power_kw), _money(s.price_usd)]
            + [_money(None if s.price_usd is None else s.price_usd / s.gpus)]
            for s in entries
        ]
    elif section == "interconnects":
        columns = ["interconnect", "kind", "GB/s per direction", "Gb/s", "latency us"]
        rows = [
            [i.name, i.kind, _num(i.bandwidth_gbs), _num(i.bandwidth_gbs * 8), _num(i.latency_us)]
            for i in entries
        ]
    else:
        columns = ["cloud", "GPUs", "pricing", "$/h", "$/GPU-h", "$/year"]
        rows = [
            [c.name, f"{c.gpus}x {c.gpu}", c.pricing, _money(c.usd_per_hour)]
            + [_money(c.usd_per_hour / c.gpus), _money(c.usd_per_hour * 8760)]
            for c in entries
        ]
    return columns, rows


def _with_sources(columns: list[str], rows: list[list[str]], entries: tuple[Any, ...]) -> list[str]:
    """Add a footnote column ("[1]", "[1] price: [2]") and return the numbered sources.

    Footnotes rather than a text column: sources are long and a table must fit a terminal."""
    notes: dict[tuple[str, str], int] = {}
    columns.append("source")
    for row, entry in zip(rows, entries):
        marks = []
        for field, sourced in entry.sources.items():
            number = notes.setdefault((sourced.source, sourced.as_of), len(notes) + 1)
            marks.append(f"[{number}]" if field == "*" else f"{field}: [{number}]")
        row.append(" ".join(marks))
    return [f"  [{n}] {source} (as of {as_of})" for (source, as_of), n in notes.items()]


def _entry_json(section: str, entry: Any) -> dict[str, Any]:
    from gpupool.cli.plan.common import jsonable

    data: dict[str, Any] = jsonable(entry)
    if section == "gpus":
        data["peak_bf16_tflops"] = entry.peak_tflops("bf16")
    elif section == "clouds":
        data["usd_per_gpu_hour"] = entry.usd_per_hour / entry.gpus
    return data


def _changes(builtin: Any, merged: Any) -> tuple[list[str], list[str]]:
    """Names the override added, and names whose built-in entry it replaced."""
    added: list[str] = []
    replaced: list[str] = []
    for section in SECTION_TITLES:
        before = {e.name: e for e in getattr(builtin, section)}
        for entry in getattr(merged, section):
            if entry.name not in before:
                added.append(entry.name)
            elif entry != before[entry.name]:
                replaced.append(entry.name)
    return added, replaced


def _place_labels(
    points: list[tuple[float, float, str]], box: tuple[float, float, float, float]
) -> list[tuple[float, float, str]]:
    """A text offset (points) and alignment per label, greedily avoiding earlier labels.

    Positions are mapped to approximate points on a log-log axes of about 560 x 330 points
    (box = x and y limits); a label is about 4.3 points per character wide, 9 high at size 7."""
    import math

    x0, x1, y0, y1 = (math.log10(v) for v in box)
    placed: list[tuple[float, float, float, float]] = []
    out = []
    for x, y, label in points:
        px = (math.log10(x) - x0) / (x1 - x0) * 560
        py = (math.log10(y) - y0) / (y1 - y0) * 330
        width = 4.3 * len(label)
        choice = (5.0, 4.0, "left")
        candidates: list[tuple[float, float, str]] = [
            (dx, dy, al) for dy in (4, -11, 14, -21) for dx, al in ((5, "left"), (-5, "right"))
        ]
        for dx, dy, align in candidates:
            left = px + dx - (width if align == "right" else 0)
            rect = (left, py + dy, left + width, py + dy + 9)
            if not any(
                rect[0] < r[2] and r[0] < rect[2] and rect[1] < r[3] and r[1] < rect[3]
                for r in placed
            ):
                choice = (float(dx), float(dy), align)
                break
        dx, dy, align = choice
        left = px + dx - (width if align == "right" else 0)
        placed.append((left, py + dy, left + width, py + dy + 9))
        out.append(choice)
    return out


def draw_gpus(fig: Any, gpus: tuple[Any, ...]) -> None:
    """Peak dense BF16 TFLOPS against memory bandwidth, log-log, one labelled point per GPU.

    Dashed lines mark constant FLOP per byte: a kernel needs at least that arithmetic
    intensity to be compute-bound on GPUs along the line (the roofline ridge point)."""
    ax = fig.add_subplot(1, 1, 1)
    colors = {"NVIDIA": "tab:green", "AMD": "tab:red"}
    # GPUs with the same two figures (V100 32/16 GB) share one point and one label.
    groups: dict[tuple[float, float], list[Any]] = {}
    for g in gpus:
        groups.setdefault((g.memory_bandwidth_gbs, g.peak_tflops("bf16")), []).append(g)
    xs = [x for x, _ in groups]
    ys = [y for _, y in groups]
    lo, hi = min(xs) / 1.5, max(xs) * 2.5
    bottom, top = min(ys) / 2, max(ys) * 3
    points = [(x, y, " / ".join(g.name for g in group)) for (x, y), group in sorted(groups.items())]
    offsets = _place_labels(points, (lo, hi, bottom, top))
    for (x, y, label), (dx, dy, align) in zip(points, offsets):
        group = groups[(x, y)]
        size = 20 + max(g.memory_gb for g in group)
        ax.scatter([x], [y], s=size, color=colors.get(group[0].vendor, "tab:blue"), alpha=0.7)
        ax.annotate(
            label, (x, y), textcoords="offset points", xytext=(dx, dy), ha=align, fontsize=7
        )
    for intensity in (10, 100, 1000):
        ax.plot([lo, hi], [lo * intensity / 1e3, hi * intensity / 1e3], "--", lw=0.7, color="grey")
        ax.annotate(
            f"{intensity} FLOP/byte", (lo * 1.1, lo * 1.1 * intensity / 1e3 * 1.25), fontsize=7
        ).set_color("grey")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.minorticks_off()  # log-axis minor ticks add clutter and most of the drawing time
    ax.set_xlim(lo, hi)
    ax.set_ylim(bottom, top)
    ax.set_xlabel("memory bandwidth (GB/s)")
    ax.set_ylabel("peak dense BF16 TFLOPS (FP16 where no BF16)")
    ax.set_title("Catalog GPUs: compute vs memory bandwidth (marker size ~ memory)")


def run(args: argparse.Namespace) -> int:
    from gpupool.cli.plan.common import load_catalog, print_json, print_rich_table, save_plot
    from gpupool.plan.catalog import load_catalog as load_builtin
    from gpupool.plan.quantity import PlanError

    section = args.section.lower() if args.section else None
    if section is not None and section not in SECTION_TITLES:
        raise PlanError(
            f"SECTION: expected one of {', '.join(SECTION_TITLES)}, got {args.section!r}"
        )
    sections = [section] if section else list(SECTION_TITLES)
    assumptions = {
        k: v for k, v in ASSUMPTIONS.items() if any(k in SECTION_ASSUMPTIONS[s] for s in sections)
    }
    catalog = load_catalog(args)
    counts = {s: len(getattr(catalog, s)) for s in SECTION_TITLES}
    summary = ", ".join(f"{counts[s]} {SECTION_TITLES[s].lower()}" for s in sections)
    summary = f"catalog: {summary}; every figure sourced and dated"
    added: list[str] = []
    replaced: list[str] = []
    if args.catalog:
        added, replaced = _changes(load_builtin(None), catalog)
        summary += f"; override {args.catalog}: {len(replaced)} replaced, {len(added)} added"

    if args.json:
        out: dict[str, Any] = {
            "inputs": {"section": section, "sources": args.sources, "catalog": args.catalog},
            "assumptions": assumptions,
            "counts": {s: counts[s] for s in sections},
            "override": {"added": added, "replaced": replaced} if args.catalog else None,
            "summary": summary,
        }
        for s in sections:
            out[s] = [_entry_json(s, e) for e in getattr(catalog, s)]
        print_json(out)
    else:
        for s in sections:
            entries = getattr(catalog, s)
            columns, rows = _rows(s, entries)
            notes = _with_sources(columns, rows, entries) if args.sources else []
            print_rich_table(TABLE_TITLES[s], columns, rows)
            if notes:
                print("\n".join(notes))
        print(summary)
        for key, text in assumptions.items():
            print(f"  {key}: {text}")
        if not args.sources:
            print("  sources: add --sources for each entry's source and date, or use --json")
    if args.plot:
        path = save_plot(args.plot, lambda fig: draw_gpus(fig, catalog.gpus), figsize=(9, 6))
        print(f"wrote {path}", file=sys.stderr)
    return 0
