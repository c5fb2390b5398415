"""Reading trace CSV files cell by cell, with errors that point at the cell to fix.

Kept apart from the format loaders (sim.traces) so each format is only its column mapping.
Two concerns live here: every parse failure says "<file> line <n>: <field>: <problem>",
because traces are big and hand-edited copies are common; and speed, because the Philly table
has 82k rows: the csv module, plain int/float, and dates parsed by slicing with a per-day memo
(strptime per row would be several times slower).
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import IO

_EPOCH_DAY = date(1970, 1, 1).toordinal()


class TraceError(ValueError):
    """A trace that cannot be read; the message names the file, and the line and field."""


def open_text(path: Path) -> IO[str]:
    """Text stream of a plain or gzip-compressed file, told apart by content, not by name."""
    with path.open("rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    if gz:
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", newline="")
    return path.open(encoding="utf-8-sig", newline="")


class Rows:
    """The data rows of a CSV file, the current line number, and parsers that name it."""

    def __init__(self, stream: IO[str], name: str) -> None:
        self.name = name
        self.reader = csv.reader(stream)
        header = next(self.reader, None)
        if header is None:
            raise TraceError(f"{name}: empty file (expected a header line)")
        self.columns = [c.strip().lower() for c in header]
        self.line = 1
        self._days: dict[str, int] = {}

    def index(self, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> list[int]:
        """Column positions, required then optional (-1: an optional column that is absent)."""
        missing = [c for c in required if c not in self.columns]
        if missing:
            raise TraceError(
                f"{self.name}: missing column{'s' if len(missing) > 1 else ''} "
                f"{', '.join(missing)} (found: {', '.join(self.columns) or 'none'})"
            )
        pos = {c: i for i, c in enumerate(self.columns)}
        return [pos[c] for c in required] + [pos.get(c, -1) for c in optional]

    def __iter__(self) -> Iterator[list[str]]:
        width = len(self.columns)
        reader = self.reader
        for row in reader:
            self.line = reader.line_num
            if len(row) < width:
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue  # a blank line (Pollux's philly.csv ends with one)
                raise TraceError(
                    f"{self.name} line {self.line}: {len(row)} fields, the header has {width}"
                )
            yield row

    def fail(self, field: str, problem: str) -> TraceError:
        return TraceError(f"{self.name} line {self.line}: {field}: {problem}")

    def whole(self, text: str, field: str) -> int:
        """A count: '8' or '8.0' (pandas writes counts as floats when a column has gaps)."""
        try:
            n = int(text)
        except ValueError:
            try:
                x = float(text)
            except ValueError:
                x = math.nan
            if not x.is_integer():
                raise self.fail(field, f"{text!r} is not a whole number") from None
            n = int(x)
        if n < 0:
            raise self.fail(field, f"must not be negative, got {text!r}")
        return n

    def seconds(self, text: str, field: str) -> float:
        try:
            x = float(text)
        except ValueError:
            x = math.nan
        if not math.isfinite(x):
            raise self.fail(field, f"{text!r} is not a number of seconds")
        return x

    def name_of(self, text: str, field: str) -> str:
        text = text.strip()
        if not text:
            raise self.fail(field, "is empty")
        return text

    def epoch(self, text: str, field: str) -> float:
        """Epoch seconds of 'YYYY-MM-DD HH:MM:SS' read as UTC; other ISO forms (fractions,
        a time zone, a bare date) take the slow path."""
        day = self._days.get(text[:10])
        if day is None:
            day = self._day(text, field)
        if len(text) == 19 and text[13] == ":" and text[16] == ":" and text[10] in " T":
            try:
                h, m, s = int(text[11:13]), int(text[14:16]), int(text[17:19])
            except ValueError:
                h = -1
            if 0 <= h < 24 and 0 <= m < 60 and 0 <= s < 61:
                return float(day + h * 3600 + m * 60 + s)
        try:
            when = datetime.fromisoformat(text.strip())
        except ValueError:
            raise self.fail(
                field, f"{text!r} is not a date and time (YYYY-MM-DD HH:MM:SS)"
            ) from None
        return when.replace(tzinfo=when.tzinfo or UTC).timestamp()

    def _day(self, text: str, field: str) -> int:
        try:
            d = date.fromisoformat(text[:10])
        except ValueError:
            raise self.fail(
                field, f"{text!r} is not a date and time (YYYY-MM-DD HH:MM:SS)"
            ) from None
        self._days[text[:10]] = day = (d.toordinal() - _EPOCH_DAY) * 86400
        return day
