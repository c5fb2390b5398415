"""Times the CLI reads and writes for steering and listing: `queue --since 2h|DATE`,
`wait --timeout 30s`, and the TIME LIMIT column (squeue's TIME_LIMIT form). Stdlib only."""

from __future__ import annotations

import re

from gpupool.core.units import parse_duration

_BARE = re.compile(r"\s*\d+(\.\d+)?\s*")
SINCE_FORMS = "a duration back from now (2h, 30m, 7d) or a date (2026-05-01, 2026-05-01T14:00)"


def parse_since(text: str, now: float) -> float:
    """The epoch second `queue --since` means: `now` less a duration (a unit is needed:
    a bare number could be minutes or a year), or a local date and time (ISO 8601).
    ValueError naming the flag."""
    word = text.strip()
    if word and not _BARE.fullmatch(word):
        try:
            return now - parse_duration(word)
        except ValueError:
            pass
        from datetime import datetime  # only here: `queue` without --since never needs it

        try:
            return datetime.fromisoformat(word).timestamp()
        except ValueError:
            pass
    raise ValueError(f"--since: not {SINCE_FORMS}: {text!r}")


def parse_timeout(text: str) -> float:
    """Seconds for `wait --timeout`: 30s, 5m, 1h; a bare number is seconds, as timeout(1)
    reads it. ValueError naming the flag."""
    word = text.strip()
    try:
        seconds = float(word) if _BARE.fullmatch(word) else parse_duration(word)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise ValueError(f"--timeout: not a positive duration such as 30s, 5m or 1h: {text!r}")
    return seconds


def limit_cell(seconds: float | None) -> str:
    """A time limit as squeue's TIME_LIMIT shows it: 'h:mm:ss', 'd-hh:mm:ss' from a day
    on; '-' for none."""
    if seconds is None or seconds <= 0:
        return "-"
    total = int(round(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{hours}:{minutes:02d}:{secs:02d}"
