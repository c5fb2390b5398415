"""What every `gpupool plan` sub-command shares: --json, --plot, --catalog, and output."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpupool.plan.quantity import PlanError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from gpupool.plan.catalog import Catalog


def add_common_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--plot", metavar="FILE.png", help="also draw the result into this PNG")
    p.add_argument(
        "--catalog",
        metavar="FILE.yaml",
        help="a catalog override file: entries added to or replacing the built-in catalog",
    )


def load_catalog(args: argparse.Namespace) -> Catalog:
    """The built-in catalog with the user's --catalog override applied."""
    from gpupool.plan.catalog import load_catalog as _load

    return _load(Path(args.catalog) if getattr(args, "catalog", None) else None)


def jsonable(value: Any) -> Any:
    """Dataclasses, tuples and non-finite floats as plain JSON (inf -> null)."""
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def print_json(data: Any) -> None:
    json.dump(jsonable(data), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


def print_rich_table(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = ""
) -> None:
    from rich.table import Table

    table = Table(title=title, caption=caption or None)
    for i, c in enumerate(columns):
        table.add_column(c, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    print_whole(table)


def print_whole(table: Table, console: Console | None = None) -> None:
    """Print a rich table without cutting a name or a figure.

    Only the first column (names) may wrap, between words, never inside one; every other
    column keeps each cell whole. A terminal too narrow even for that gets the table at its
    least width (the terminal wraps the lines; nothing is lost). Piped or redirected, the
    table has its full width (table_console)."""
    from rich.cells import cell_len
    from rich.measure import Measurement
    from rich.text import Text

    console = console or table_console()
    first, *rest = table.columns
    for column in rest:
        column.no_wrap = True
    lines = [
        t.plain if isinstance(t, Text) else Text.from_markup(str(t)).plain
        for t in (first.header, *first.cells)
    ]
    widest_line = max((cell_len(line) for line in lines), default=1)
    longest_word = max((cell_len(w) for line in lines for w in line.split()), default=1)
    first.overflow = "fold"
    first.min_width = max(first.min_width or 0, longest_word)
    unbounded = console.options.update(max_width=PIPE_WIDTH)
    natural = Measurement.get(console, unbounded, table).maximum
    least = natural - max(0, widest_line - first.min_width)
    if least > console.width:
        console.width = least
    console.print(table)


# Wide enough for any table gpupool prints; rich lays a table out at its natural width
# within this, so a pipe gets every column whole instead of rich's default 80.
PIPE_WIDTH = 1000


def table_console(stderr: bool = False) -> Console:
    """A rich Console: the terminal's width on a terminal, PIPE_WIDTH otherwise; a reader
    that goes away ends the command quietly (_broken_pipe)."""
    from rich.console import Console

    class QuietConsole(Console):
        def on_broken_pipe(self) -> None:
            _broken_pipe()

    stream = sys.stderr if stderr else sys.stdout
    return QuietConsole(stderr=stderr, width=None if stream.isatty() else PIPE_WIDTH)


def _broken_pipe() -> None:
    """rich exits 1 when the reader goes away; gpupool ends quietly with 0 everywhere
    (cli/main.py), so hand the error to it."""
    raise BrokenPipeError


def check_plot_path(path: str) -> Path:
    """--plot's file, refused before anything is printed or computed if it cannot be one."""
    out = Path(path)
    if out.suffix.lower() not in (".png", ".svg"):
        raise PlanError(f"--plot: {path!r} must end in .png or .svg")
    if out.is_dir():
        raise PlanError(f"--plot: {path!r} is a directory")
    return out


def save_plot(
    path: str, draw: Callable[[Any], None], figsize: tuple[float, float] = (8, 4.5)
) -> Path:
    """Draw with matplotlib's object API (no pyplot, no display) into `path`."""
    from matplotlib.figure import Figure

    out = check_plot_path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=figsize, layout="constrained")
    draw(fig)
    for ax in fig.axes:
        ax.grid(True, alpha=0.3)
    fig.savefig(out, dpi=110)
    return out


def positive(value: float, flag: str) -> float:
    if not value > 0:
        raise PlanError(f"{flag} must be positive, got {value:g}")
    return value


def fraction(value: float, flag: str) -> float:
    if not 0 < value <= 1:
        raise PlanError(f"{flag} must be in (0, 1], got {value:g}")
    return value


def named(find: Callable[[str], Any], name: str, flag: str) -> Any:
    """A catalog entry by name; an unknown one is refused naming the flag it came from."""
    try:
        return find(name)
    except PlanError as e:
        raise PlanError(f"{flag}: {e}") from None
