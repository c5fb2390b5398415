"""`gpupool bench compare [ID|FILE ...]`: results side by side, each throughput as a % of
the catalog's peak for that GPU (hwbench/compare.py says which figure), and `--plot FILE`.

Results come from the pool's store (a number: a saved result's id; none given: the newest
saved, `--benchmark`/`--gpu-model` to narrow) and from JSON files a run wrote. Each is a
lettered column group (A, B, ...) named above the table; rows are matched by their labels
(dtype and size, direction and bytes...), so the same measure of two machines is one line.
"""

from __future__ import annotations

import argparse
import json
import string
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpupool.cli.commands import Offline, Parents, Subparsers
from gpupool.hwbench.registry import BENCHMARKS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpupool.core.json_types import JsonObject
    from gpupool.hwbench.compare import Figure
    from gpupool.hwbench.result import BenchResult, LabelMap
    from gpupool.plan.catalog import Catalog


@dataclass(frozen=True)
class Source:
    name: str  # "#12" (a saved result) or the file's path
    result: BenchResult
    saved_id: int | None = None


def register_compare(names: Subparsers, parents: Parents) -> None:
    c = names.add_parser(
        "compare",
        parents=[parents.common, parents.listing],
        help="results side by side, and as %% of the catalog's peak",
        description="Benchmark results side by side (saved in the pool, by id, or JSON "
        "files), each throughput as a percentage of the catalog's peak for its GPU.",
    )
    c.add_argument(
        "items",
        nargs="*",
        metavar="ID|FILE",
        help="saved result ids or result files (none: the newest saved results)",
    )
    c.add_argument("--benchmark", choices=tuple(BENCHMARKS), help="only this benchmark")
    c.add_argument("--gpu-model", help="saved results on this GPU model only (e.g. H100)")
    c.add_argument(
        "--limit", type=int, default=5, help="how many saved results with no ID given (5)"
    )
    c.add_argument("--plot", type=Path, metavar="FILE", help="also draw them into FILE (PNG)")
    c.set_defaults(handler=Offline(cmd_compare))


def cmd_compare(args: argparse.Namespace) -> int:
    from gpupool.plan.catalog import load_catalog

    sources = _sources(args)
    if isinstance(sources, int):
        return sources
    if args.benchmark:
        sources = [s for s in sources if s.result.benchmark == args.benchmark]
    if not sources:
        print("gpupool: no benchmark results to compare", file=sys.stderr)
        return 1
    catalog = load_catalog()
    if args.json:
        from gpupool.cli.render import print_json

        print_json([_to_json(s, catalog) for s in sources])
    else:
        groups: dict[str, list[Source]] = {}
        for s in sources:
            groups.setdefault(s.result.benchmark, []).append(s)
        for i, group in enumerate(groups.values()):
            if i:
                print()
            _print_group(group, catalog)
    if args.plot:
        from gpupool.cli.bench.plot import plot

        plot(sources, args.plot)
        print(f"plot: {args.plot}", file=sys.stderr)
    return 0


def _sources(args: argparse.Namespace) -> list[Source] | int:
    from gpupool.client import Client
    from gpupool.hwbench.result import BenchResult

    client: Client | None = None
    found: list[Source] = []
    if not args.items:
        if args.limit < 1:
            print(f"gpupool: --limit: at least 1, got {args.limit}", file=sys.stderr)
            return 2
        client = Client(args.state_dir, url=args.url)
        for saved in client.benchmark_results(args.benchmark, args.gpu_model, args.limit):
            found.append(_from_saved(saved.id, saved.result))
        return found[::-1]  # oldest first: A is the earlier
    for item in args.items:
        path = Path(item)
        if item.isdigit() and not path.exists():
            client = client or Client(args.state_dir, url=args.url)
            saved = client.benchmark_result(int(item))
            found.append(_from_saved(saved.id, saved.result))
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            found.append(Source(item, BenchResult.from_json(_object(data))))
        except OSError as exc:
            print(f"gpupool: {item}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        except ValueError as exc:
            print(f"gpupool: {item}: not a benchmark result: {exc}", file=sys.stderr)
            return 2
    return found


def _object(data: object) -> dict[str, object]:
    if not isinstance(data, dict):
        raise ValueError(f"a JSON object expected, got {type(data).__name__}")
    return data


def _from_saved(result_id: int, result: JsonObject) -> Source:
    from gpupool.hwbench.result import BenchResult

    return Source(f"#{result_id}", BenchResult.from_json(result), result_id)


def _to_json(source: Source, catalog: Catalog) -> JsonObject:
    from gpupool.hwbench.compare import figures

    out: JsonObject = {
        "source": source.name,
        "id": source.saved_id,
        "result": source.result.to_json(),
        "figures": [
            {
                "labels": dict(f.row.labels),
                "measure": f.measure,
                "value": f.value,
                "unit": f.unit,
                "peak": f.peak,
                "percent": f.percent,
                "why": f.why or None,
            }
            for f in figures(source.result, catalog)
        ],
    }
    return out


def _letter(i: int) -> str:
    letters = string.ascii_uppercase
    return letters[i] if i < len(letters) else f"R{i + 1}"


def _print_group(group: Sequence[Source], catalog: Catalog) -> None:
    from gpupool.cli.bench.render import (
        HEADERS,
        figure,
        label_keys,
        label_text,
        machine_line,
        value_keys,
    )
    from gpupool.cli.render import Cell, print_table
    from gpupool.hwbench.compare import THROUGHPUT, figures

    for i, s in enumerate(group):
        print(f"{_letter(i)}: {s.name}  {machine_line(s.result)}")
    all_rows = [r for s in group for r in s.result.rows]
    labels = label_keys(all_rows)
    known = THROUGHPUT.get(group[0].result.benchmark)
    measures = [known[0]] if known else value_keys(all_rows)
    keys: list[tuple[object, ...]] = []
    for row in all_rows:
        key = _key(row.labels, labels)
        if key not in keys:
            keys.append(key)
    by_source: list[dict[tuple[object, ...], Figure]] = []
    for s in group:
        by_source.append({_key(f.row.labels, labels): f for f in figures(s.result, catalog)})
    columns = [k.upper() for k in labels]
    for i in range(len(group)):
        for m in measures:
            columns.append(f"{_letter(i)} {HEADERS.get(m, m.upper())}")
        if known:
            columns.append(f"{_letter(i)} %PEAK")
    rows: list[tuple[Cell, ...]] = []
    for key in keys:
        cells: list[Cell] = [
            label_text(k, v if isinstance(v, (str, int, float)) else None)
            for k, v in zip(labels, key)
        ]
        for i, s in enumerate(group):
            match = next((r for r in s.result.rows if _key(r.labels, labels) == key), None)
            for m in measures:
                cells.append(figure(None if match is None else match.values.get(m)))
            if known:
                fig = by_source[i].get(key)
                pct = None if fig is None else fig.percent
                cells.append("-" if pct is None else f"{pct:.0f}%")
        rows.append(tuple(cells))
    print_table(columns, rows)
    for i, s in enumerate(group):
        why = sorted({f.why for f in by_source[i].values() if f.why})
        if known is None:
            why = [f"no catalog figure for {s.result.benchmark}"]
        for reason in why:
            print(f"{_letter(i)}: no % of peak where it shows -: {reason}")
        failed = [k for k, ok in s.result.checks.items() if not ok]
        if failed:
            print(f"{_letter(i)}: check FAILED: {', '.join(failed)}")


def _key(labels: LabelMap, keys: Sequence[str]) -> tuple[object, ...]:
    return tuple(labels.get(k) for k in keys)
