"""Tables and times for people; JSON for scripts."""

from __future__ import annotations

import json
import sys
import time
import unicodedata
from collections.abc import Mapping, Sequence

from gpupool.core.units import format_duration

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpupool.client import JobView, JsonValue

# A table's cell: text, or a figure (str() of it is shown; None shows as "").
Cell = str | int | float | None


def print_json(data: JsonValue) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")


def print_json_list(items: Sequence[JsonValue]) -> None:
    """A JSON array with one item per line (keys sorted): as readable as `print_json` for
    a list of records, and written in one go by the C encoder, where an indented dump of
    10,000 jobs goes through Python's encoder value by value (seconds)."""
    lines = ",\n".join(json.dumps(item, sort_keys=True) for item in items)
    sys.stdout.write(f"[\n{lines}\n]\n" if items else "[]\n")


def write_bytes(data: bytes) -> None:
    """UTF-8 JSON as it came, to stdout: through its bytes where it has them (no decode and
    re-encode of megabytes), as text where it is a text stream only (a test's StringIO)."""
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        sys.stdout.write(data.decode())
    else:
        buffer.write(data)
        buffer.flush()


def print_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    title: str = "",
    limits: Mapping[str, int] | None = None,
) -> None:
    """Aligned columns, like squeue and docker ps: greppable, never wrapped, and with no
    import cost (rich would add ~40 ms to every listing).

    Widths are display columns (an emoji or a CJK character takes two), so rows stay
    aligned. `limits` caps name columns ({"NAME": 32}): a longer name is cut with an
    ellipsis, so one long name does not widen every row; other cells are cut only past
    MAX_CELL columns (free text from the store: a 10 MB user name prints as 200 columns).
    Control characters show escaped (`printable`)."""
    limits = limits or {}
    cells = []
    for row in rows:
        line = []
        for column, value in zip(columns, row):
            text = "" if value is None else str(value)
            line.append(shown(text, limits.get(column, MAX_CELL)))
        cells.append(line)
    widths = [max([width(c)] + [width(r[i]) for r in cells]) for i, c in enumerate(columns)]
    bold = sys.stdout.isatty()
    if title:
        print(title)
    header = "  ".join(pad(c, w) for c, w in zip(columns, widths)).rstrip()
    print(f"\033[1m{header}\033[0m" if bold else header)
    for r in cells:
        print("  ".join(pad(c, w) for c, w in zip(r, widths)).rstrip())


def width(text: str) -> int:
    """Terminal columns `text` takes, as a terminal draws it: each character cluster
    (`_clusters`) takes its base's columns, wide (W/F) 2, the rest 1; marks and joiners
    none; VS16 makes its base an emoji, 2 columns. What wcwidth computes for the
    characters a job name may hold, without the dependency."""
    if text.isascii():  # every ASCII character takes one column: most cells, at once
        return len(text)
    return sum(columns for _, columns in _clusters(text))


# Drawn with no column of its own: zero-width space, non-joiner, word joiner, BOM, VS1-VS15.
_ZERO_WIDTH = frozenset("\u200b\u200c\u2060\ufeff") | frozenset(
    chr(c) for c in range(0xFE00, 0xFE0F)
)
_ZWJ, _VS16 = "\u200d", "\ufe0f"  # joins two emoji into one; asks for emoji presentation
_SKIN_TONES = frozenset(chr(c) for c in range(0x1F3FB, 0x1F400))  # Fitzpatrick modifiers
_REGIONAL = range(0x1F1E6, 0x1F200)  # two of them are a flag


def _own_columns(ch: str) -> int:
    """Columns of one character drawn alone: 0 for marks (Mn, Me), format characters (Cf,
    but the soft hyphen) and Hangul's medial and final jamo; 2 for wide; else 1."""
    if ch in _ZERO_WIDTH or "\u1160" <= ch <= "\u11ff":
        return 0
    if unicodedata.combining(ch) or (
        unicodedata.category(ch) in ("Mn", "Me", "Cf") and ch != "\u00ad"
    ):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def _clusters(text: str) -> list[tuple[str, int]]:
    """`text` as the units a terminal draws, each with its columns: a base character with
    the marks, variation selectors and skin tone after it, emoji joined by ZWJ, a flag's
    two regional indicators. Never cut inside one (`fit`)."""
    out: list[tuple[str, int]] = []
    for ch in text:
        if out:
            last, columns = out[-1]
            joined = last.endswith(_ZWJ) and columns == 2  # an emoji, then ZWJ
            if ch == _VS16:  # an emoji now, whatever its base: 2 columns
                out[-1] = (last + ch, max(columns, 2))
                continue
            if joined or (ch in _SKIN_TONES and columns == 2) or _own_columns(ch) == 0:
                out[-1] = (last + ch, columns)
                continue
            if ord(ch) in _REGIONAL and len(last) == 1 and ord(last) in _REGIONAL:
                out[-1] = (last + ch, 2)
                continue
        out.append((ch, _own_columns(ch)))
    return out


def pad(text: str, columns: int) -> str:
    return text + " " * max(0, columns - width(text))


def fit(text: str, columns: int) -> str:
    """`text` cut to at most `columns` display columns, ending in an ellipsis if cut; an
    emoji with its skin tone, VS16 or ZWJ partners is kept whole or left out whole."""
    if width(text) <= columns:
        return text
    out, used = [], 0
    for cluster, w in _clusters(text):
        if used + w > columns - 1:
            break
        out.append(cluster)
        used += w
    return "".join(out) + "…"


# The widest a table cell gets (unless its column has a limit), and a line of `show`.
MAX_CELL = 200
MAX_LINE = 4096


def shown(text: str, columns: int = MAX_LINE) -> str:
    """Free text from the store as it may be printed: control characters escaped
    (`printable`), cut to `columns` display columns with an ellipsis. Only the start of a
    huge value is looked at: the cost follows what is printed, not what is stored."""
    return fit(printable(text[: columns * 4 + 4]), columns)


def shown_lines(text: str, columns: int = MAX_LINE) -> str:
    """`shown`, line by line: for messages whose lines are meant (a spec's errors)."""
    return "\n".join(shown(line, columns) for line in text.split("\n")[:200])


# Shown escaped besides the C0/C1 controls (category Cc): the format characters that
# reorder or hide text (bidirectional overrides and isolates, "Trojan Source"), the line
# and paragraph separators. Zero-width joiners and variation selectors (emoji) are kept.
_HIDDEN = frozenset("\u061c\u200e\u200f\u2028\u2029") | frozenset(
    chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: str) -> str:
    """`text` with every control character shown as its escape (an ESC as `\\x1b`, a
    newline as `\\n`, a bidi override as `\\u202e`), so free text a user sent can neither
    break a table's rows nor drive another user's terminal, and still shows what it holds."""
    if text.isprintable():
        return text  # the common case, in C
    out = []
    for ch in text:
        if ch in _NAMED:
            out.append(_NAMED[ch])
        elif unicodedata.category(ch) == "Cc" or ch in _HIDDEN:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def reason_cell(job: JobView) -> str:
    """The queue's REASON: a running job asked to stop shows it is stopping (its grace
    period), not a blank."""
    from gpupool.core.job_enums import JobState

    if job.state is JobState.RUNNING and job.cancel_requested:
        return "Cancelling"
    return job.reason or "-"


def state_cell(job: JobView) -> str:
    """'RUNNING  [Cancelling]', 'PENDING  [Resources]', or the state alone."""
    reason = reason_cell(job)
    return job.state.value + (f"  [{reason}]" if reason != "-" else "")


def clock_time(ts: float | None, now: float | None = None) -> str:
    """'14:05:09' today, 'Nov 21 14:05' otherwise, '-' for never."""
    if not ts:
        return "-"
    now = now or time.time()
    local, today = time.localtime(ts), time.localtime(now)
    if local[:3] == today[:3]:
        return time.strftime("%H:%M:%S", local)
    return time.strftime("%b %d %H:%M", local)


def elapsed(job: JobView, now: float | None = None) -> str:
    start = job.start_time
    if not start:
        return "-"
    end = job.end_time or now or time.time()
    return format_duration(end - start)


def gpus_cell(job: JobView) -> str:
    res = job.resources
    want: str | int = res.gpus
    if res.gpu_fraction:
        want = f"{res.gpu_fraction:g}"
    elif res.gpu_memory_bytes:
        from gpupool.core.units import format_size

        want = format_size(res.gpu_memory_bytes)
    held = job.gpus
    if held:
        return f"{want} ({','.join(str(g) for g in held)})"
    return str(want)
