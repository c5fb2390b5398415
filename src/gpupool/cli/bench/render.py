"""A benchmark result as plain tables (cli/render.py), one per result or side by side.

Columns are the rows' labels (what was varied), then their values (what was measured),
each figure to 4 significant digits; byte counts read as sizes (1 MiB). Checks and notes
follow the table, so a figure is never shown without what qualifies it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from gpupool.cli.render import Cell, print_table
from gpupool.hwbench.result import BenchResult, Label, Row

# Headers of the measures the benchmarks write; any other shows as its key in capitals.
HEADERS = {"seconds": "SECONDS", "tflops": "TFLOPS", "gbs": "GB/s", "us": "MICROSECONDS"}


def label_keys(rows: Sequence[Row]) -> list[str]:
    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row.labels if k not in keys)
    return keys


def value_keys(rows: Sequence[Row]) -> list[str]:
    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row.values if k not in keys)
    return keys


def label_text(key: str, value: Label | None) -> str:
    if value is None:
        return "-"
    if key == "bytes" and isinstance(value, int):
        return size_text(value)
    return str(value)


def size_text(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} B"


def figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def machine_line(result: BenchResult) -> str:
    m = result.machine
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(result.started_at))
    if m.device == "cuda":
        where = f"{m.gpu_count} x {m.gpu_model or 'GPU'}, driver {m.driver or '?'}"
    else:
        where = f"cpu {m.cpu_model or '?'}"
    return f"{result.benchmark} on {m.hostname} ({where}; torch {m.torch or '?'}) at {when}"


def print_result(result: BenchResult) -> None:
    labels, values = label_keys(result.rows), value_keys(result.rows)
    rows: list[tuple[Cell, ...]] = []
    for row in result.rows:
        cells: list[Cell] = [label_text(k, row.labels.get(k)) for k in labels]
        cells.extend(figure(row.values.get(k)) for k in values)
        rows.append(tuple(cells))
    columns = [k.upper() for k in labels] + [HEADERS.get(k, k.upper()) for k in values]
    print(machine_line(result))
    print_table(columns, rows)
    print_checks_and_notes(result)


def print_checks_and_notes(result: BenchResult) -> None:
    if result.checks:
        print(f"checks: {checks_line(result.checks)}")
    for note in result.notes:
        print(f"note: {note}")


MANY_CHECKS = 4  # more than this, all passed: counted, not listed (--json lists them)


def checks_line(checks: Mapping[str, bool]) -> str:
    """Every check with its verdict, in the benchmark's order; many that all passed (one
    per message size of an all-reduce) as a count, the failed ones always by name."""
    failed = [k for k, ok in checks.items() if not ok]
    if len(checks) > MANY_CHECKS:
        if not failed:
            return f"all {len(checks)} ok"
        return f"{len(checks) - len(failed)} of {len(checks)} ok; FAILED: " + ", ".join(failed)
    return ", ".join(f"{k}: {'ok' if ok else 'FAILED'}" for k, ok in checks.items())
