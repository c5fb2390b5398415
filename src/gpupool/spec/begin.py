"""When a job may start: the forms of Slurm's `sbatch --begin`, read in local time.

Standard library only (rules.py runs it). "Local" is whatever time.localtime says, so the
TZ environment variable (after time.tzset()) decides, as it does for Slurm's commands.

    22:00, 4:30pm, 22:00:30   today at that time, or tomorrow if it has already passed
                              (a time equal to now has passed: Slurm's rule)
    midnight, elevenses, noon, fika, teatime
                              00:00, 11:00, 12:00, 15:00, 16:00, by the same rule
    today, tomorrow           00:00 of that day (today's has passed: starts at once)
    2026-11-23                00:00 on that day
    2026-11-23T02:00[:SS]     that moment ("2026-11-23 02:00" too)
    now, now+90, now+30m      now plus a whole number of seconds (the default unit),
                              s/m/h/d/w or sec/min/hour/day/week, singular or plural

Days are calendar days: "tomorrow at 10:00" across a DST change is 23 or 25 hours away,
while now+1d is always 86400 seconds.
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime, timedelta

EXAMPLES = "examples: 22:00, 2026-11-23T02:00, now+1h, midnight"

_CLOCK = r"(?P<hour>\d{1,2}):(?P<minute>\d{2})(?::(?P<second>\d{2}))?"
_TIME_RE = re.compile(_CLOCK + r"(?:\s*(?P<half>[ap]m))?", re.IGNORECASE)
_DATE_RE = re.compile(
    r"(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})(?:[T ]" + _CLOCK + r")?", re.IGNORECASE
)
_NOW_RE = re.compile(r"now(?:\s*\+\s*(?P<count>\d+)\s*(?P<unit>[a-z]*))?", re.IGNORECASE)

_UNIT_S = {
    "": 1,  # Slurm: now+60 is 60 seconds
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hour", "hours"), 3600),
    **dict.fromkeys(("d", "day", "days"), 86400),
    **dict.fromkeys(("w", "week", "weeks"), 7 * 86400),
}
# Slurm's names for times of day.
_TIME_NAMES = {"midnight": 0, "elevenses": 11, "noon": 12, "fika": 15, "teatime": 16}
_DAY_NAMES = {"today": 0, "tomorrow": 1}
# now+N beyond this (about 3000 years) is reported as too far rather than overflowing.
_HUGE_S = 10**11


class NotATime(ValueError):
    """The text is no begin time; the message says why ("" when it matches no form)."""


def parse_begin(text: str, now: float) -> float:
    """Epoch seconds for `text` (see the module's docstring), relative to `now`.

    The result may be in the past (today, a past date): the job is then free to start.
    It may be math.inf for an absurd now+N; the caller bounds how far ahead it accepts.
    """
    s = text.strip()
    key = s.lower()
    today = datetime.fromtimestamp(now).date()
    if key in _TIME_NAMES:
        return _next(today, _TIME_NAMES[key], 0, 0, now)
    if key in _DAY_NAMES:
        return _local(today + timedelta(days=_DAY_NAMES[key]), 0, 0, 0)
    if m := _NOW_RE.fullmatch(s):
        if m["count"] is None:
            return now
        unit = m["unit"].lower()
        if unit not in _UNIT_S:
            raise NotATime(f"unknown unit {m['unit']!r}: use s, m, h, d or w")
        delta = int(m["count"]) * _UNIT_S[unit]
        return now + delta if delta <= _HUGE_S else math.inf
    if m := _TIME_RE.fullmatch(s):
        hour, minute, second = _clock(m, m["half"])
        return _next(today, hour, minute, second, now)
    if m := _DATE_RE.fullmatch(s):
        try:
            day = date(int(m["year"]), int(m["month"]), int(m["day"]))
        except ValueError as e:  # "day is out of range for month"
            raise NotATime(str(e)) from None
        hour, minute, second = _clock(m, None) if m["hour"] is not None else (0, 0, 0)
        return _local(day, hour, minute, second)
    raise NotATime("")


def _clock(m: re.Match[str], half: str | None) -> tuple[int, int, int]:
    hour, minute = int(m["hour"]), int(m["minute"])
    second = int(m["second"]) if m["second"] is not None else 0
    if half is not None:
        if not 1 <= hour <= 12:
            raise NotATime("the hour must be 1-12 with am or pm")
        hour = hour % 12 + (12 if half.lower() == "pm" else 0)
    if hour > 23:
        raise NotATime("the hour must be 0-23")
    if minute > 59 or second > 59:
        raise NotATime("minutes and seconds must be 00-59")
    return hour, minute, second


def _next(today: date, hour: int, minute: int, second: int, now: float) -> float:
    """Today at that time, or tomorrow when that is not later than now."""
    t = _local(today, hour, minute, second)
    return t if t > now else _local(today + timedelta(days=1), hour, minute, second)


def _local(day: date, hour: int, minute: int, second: int) -> float:
    # A naive datetime's timestamp() reads it in local time. A time skipped by a DST change
    # (02:30 on the night clocks jump from 02:00 to 03:00) comes out as the same length of
    # time after the jump (03:30); a time that occurs twice is its first occurrence.
    try:
        return datetime(day.year, day.month, day.day, hour, minute, second).timestamp()
    except (OverflowError, OSError, ValueError) as e:  # year 1 in some time zones
        raise NotATime(f"out of range: {e}") from None
