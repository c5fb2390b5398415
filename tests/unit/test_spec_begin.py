"""begin (--begin, sbatch's --begin): every accepted form, read in local time, and the refusals.

Times are written as local wall-clock text, and "now" is a fixed local wall-clock time in
each time zone under test, so one table holds for every zone; if the parser used UTC
instead of local time, the zones east of UTC would fail it.
"""

from __future__ import annotations

import calendar
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpupool.spec import (
    SpecError,
    build_spec,
    drop_overridden_lines,
    load_spec_file,
    merge_flags,
    spec_from_wire,
    spec_to_wire,
)

# POSIX TZ strings: no tzdata needed. Kolkata is UTC+5:30 all year; Berlin has DST
# (CEST from the last Sunday of March, 02:00 -> 03:00, to the last Sunday of October).
UTC = "UTC0"
KOLKATA = "IST-5:30"
BERLIN = "CET-1CEST,M3.5.0,M10.5.0/3"
WALL = "%Y-%m-%d %H:%M:%S"
NOW = "2026-03-10 14:30:15"  # a Tuesday afternoon


@pytest.fixture(params=[UTC, KOLKATA], ids=["UTC", "Kolkata"])
def tz(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from _in_zone(request.param, monkeypatch)


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from _in_zone(UTC, monkeypatch)


@pytest.fixture
def berlin(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from _in_zone(BERLIN, monkeypatch)


def _in_zone(zone: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    yield zone
    monkeypatch.undo()
    time.tzset()


def local(wall: str) -> float:
    """Epoch seconds of a local wall-clock time (time.mktime: independent of datetime)."""
    return time.mktime(time.strptime(wall, WALL))


def wall(t: float) -> str:
    return time.strftime(WALL, time.localtime(t))


def begin(text: Any, now: str = NOW) -> float | None:
    return build_spec({"command": "x", "begin": text}, now=local(now)).begin_time


# (id, begin, expected local wall-clock time), with now = Tue 2026-03-10 14:30:15
FORMS = [
    ("clock-later-today", "22:00", "2026-03-10 22:00:00"),
    ("clock-next-minute", "14:31", "2026-03-10 14:31:00"),
    ("clock-with-seconds", "22:00:30", "2026-03-10 22:00:30"),
    ("clock-one-digit-hour", "9:05", "2026-03-11 09:05:00"),
    ("clock-passed-is-tomorrow", "08:00", "2026-03-11 08:00:00"),
    ("clock-this-minute-is-tomorrow", "14:30", "2026-03-11 14:30:00"),
    ("clock-equal-to-now-is-tomorrow", "14:30:15", "2026-03-11 14:30:15"),
    ("clock-one-second-ahead", "14:30:16", "2026-03-10 14:30:16"),
    ("clock-last-second", "23:59:59", "2026-03-10 23:59:59"),
    ("clock-00:00-is-tomorrow", "00:00", "2026-03-11 00:00:00"),
    ("clock-pm", "4:30pm", "2026-03-10 16:30:00"),
    ("clock-PM-spaced", "10:00 PM", "2026-03-10 22:00:00"),
    ("clock-am-passed", "9:00am", "2026-03-11 09:00:00"),
    ("clock-12am-is-midnight", "12:00am", "2026-03-11 00:00:00"),
    ("clock-12pm-is-noon", "12:00pm", "2026-03-11 12:00:00"),
    ("date", "2026-11-23", "2026-11-23 00:00:00"),
    ("date-time", "2026-11-23T02:00", "2026-11-23 02:00:00"),
    ("date-time-seconds", "2026-11-23T02:00:30", "2026-11-23 02:00:30"),
    ("date-space-time", "2026-11-23 02:00", "2026-11-23 02:00:00"),
    ("date-lowercase-t", "2026-11-23t02:00", "2026-11-23 02:00:00"),
    ("date-today-is-past", "2026-03-10", "2026-03-10 00:00:00"),
    ("date-past", "2025-01-01T12:00", "2025-01-01 12:00:00"),
    ("date-365-days-ahead", "2027-03-10", "2027-03-10 00:00:00"),
    ("now", "now", "2026-03-10 14:30:15"),
    ("now-plus-0", "now+0", "2026-03-10 14:30:15"),
    ("now-plus-bare-is-seconds", "now+90", "2026-03-10 14:31:45"),
    ("now-plus-s", "now+45s", "2026-03-10 14:31:00"),
    ("now-plus-m", "now+30m", "2026-03-10 15:00:15"),
    ("now-plus-h", "now+1h", "2026-03-10 15:30:15"),
    ("now-plus-d", "now+2d", "2026-03-12 14:30:15"),
    ("now-plus-w", "now+1w", "2026-03-17 14:30:15"),
    ("now-plus-word", "now+1hour", "2026-03-10 15:30:15"),
    ("now-plus-plural", "now+10minutes", "2026-03-10 14:40:15"),
    ("now-plus-spaced", "now + 2 hours", "2026-03-10 16:30:15"),
    ("now-plus-uppercase", "NOW+1H", "2026-03-10 15:30:15"),
    ("now-plus-366-days", "now+366d", "2027-03-11 14:30:15"),
    ("midnight-is-tomorrow", "midnight", "2026-03-11 00:00:00"),
    ("noon-passed-is-tomorrow", "noon", "2026-03-11 12:00:00"),
    ("teatime-today", "teatime", "2026-03-10 16:00:00"),
    ("elevenses-tomorrow", "elevenses", "2026-03-11 11:00:00"),
    ("fika-today", "fika", "2026-03-10 15:00:00"),
    ("today-is-its-midnight", "today", "2026-03-10 00:00:00"),
    ("tomorrow-is-its-midnight", "tomorrow", "2026-03-11 00:00:00"),
    ("keyword-any-case-and-spaces", "  Midnight ", "2026-03-11 00:00:00"),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in FORMS], ids=[c[0] for c in FORMS])
def test_forms_in_local_time(tz: str, text: str, expected: str) -> None:
    t = begin(text)
    assert isinstance(t, float)
    assert wall(t) == expected
    assert t == local(expected)


# Early morning: the same names land today. At 01:00 in Kolkata it is still the day before
# in UTC, so this also tells local days from UTC days.
MORNING = [
    ("noon-today", "noon", "2026-03-10 12:00:00"),
    ("elevenses-today", "elevenses", "2026-03-10 11:00:00"),
    ("clock-today", "08:00", "2026-03-10 08:00:00"),
    ("midnight-still-tomorrow", "midnight", "2026-03-11 00:00:00"),
    ("today-has-passed", "today", "2026-03-10 00:00:00"),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in MORNING], ids=[c[0] for c in MORNING]
)
def test_before_the_time_it_is_today(tz: str, text: str, expected: str) -> None:
    assert wall(begin(text, now="2026-03-10 01:00:00") or 0) == expected


def test_passed_clock_on_new_years_eve_is_next_year(tz: str) -> None:
    assert wall(begin("22:00", now="2026-12-31 23:00:00") or 0) == "2027-01-01 22:00:00"
    assert wall(begin("midnight", now="2026-12-31 23:00:00") or 0) == "2027-01-01 00:00:00"


def test_utc_is_absolute_epoch_seconds() -> None:
    # The tables above compare wall-clock text; pin the absolute value once, by hand.
    now = calendar.timegm((2026, 3, 10, 14, 30, 15, 0, 0, 0))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TZ", UTC)
        time.tzset()
        spec = build_spec({"command": "x", "begin": "2026-11-23T02:00"}, now=now)
        assert spec.begin_time == calendar.timegm((2026, 11, 23, 2, 0, 0, 0, 0, 0))
        mp.setenv("TZ", KOLKATA)
        time.tzset()
        spec = build_spec({"command": "x", "begin": "2026-11-23T02:00"}, now=now)
        assert spec.begin_time == calendar.timegm((2026, 11, 22, 20, 30, 0, 0, 0, 0))
    time.tzset()


def test_tomorrow_across_dst_is_calendar_day(berlin: str) -> None:
    # Sat 2026-03-28 12:00 CET; clocks jump 02:00 -> 03:00 on Sunday night.
    now = "2026-03-28 12:00:00"
    ten = begin("10:00", now=now) or 0
    assert wall(ten) == "2026-03-29 10:00:00"
    assert ten - local(now) == 21 * 3600  # 22 wall-clock hours, one of them skipped
    assert wall(begin("now+1d", now=now) or 0) == "2026-03-29 13:00:00"  # 86400 s exactly
    # 02:30 does not exist that night: as long after the jump as it would be after 02:00.
    assert wall(begin("2026-03-29T02:30", now=now) or 0) == "2026-03-29 03:30:00"


def test_default_now_is_the_clock() -> None:
    before = time.time()
    t = build_spec({"command": "x", "begin": "now+1h"}).begin_time
    assert t is not None and before + 3600 <= t <= time.time() + 3600


def test_absent_or_empty_key_is_no_begin() -> None:
    assert build_spec({"command": "x"}).begin_time is None
    assert build_spec({"command": "x", "begin": None}).begin_time is None


def test_before_1970_is_floored_at_zero(tz: str) -> None:
    assert begin("1969-07-20T20:17") == 0.0


EXAMPLES = "(examples: 22:00, 2026-11-23T02:00, now+1h, midnight)"

# (id, the YAML line 4, text in the message). now is NOW, in UTC.
INVALID = [
    ("word", "begin: soon", f"not a time: 'soon' {EXAMPLES}"),
    ("empty", "begin: ''", f"not a time: '' {EXAMPLES}"),
    ("epoch-number-only-on-the-wire", "begin: 1795392000", "not a time: '1795392000'"),
    ("slurm-MMDDYY-not-supported", "begin: 112326", "not a time: '112326'"),
    ("list", "begin: ['22:00']", "not a time: ['22:00']"),
    ("hour-24", "begin: '24:00'", "not a time: '24:00' (the hour must be 0-23)"),
    ("minute-60", "begin: '12:60'", "minutes and seconds must be 00-59"),
    ("second-60", "begin: '12:00:60'", "minutes and seconds must be 00-59"),
    ("minute-one-digit", "begin: '12:5'", EXAMPLES),
    ("pm-hour-13", "begin: 13:00pm", "the hour must be 1-12 with am or pm"),
    ("pm-hour-0", "begin: 0:30am", "the hour must be 1-12 with am or pm"),
    ("day-31-in-april", "begin: 2026-04-31", "not a time: '2026-04-31' (day is out of range"),
    ("month-13", "begin: 2026-13-01", "month must be in 1..12"),
    ("no-leap-day", "begin: 2027-02-29", "day is out of range for month"),
    ("date-hour-25", "begin: 2026-11-23T25:00", "the hour must be 0-23"),
    ("date-timezone-suffix", "begin: 2026-11-23T02:00Z", EXAMPLES),
    ("date-short-year", "begin: 26-11-23", EXAMPLES),
    ("now-minus", "begin: now-1h", EXAMPLES),
    ("now-fraction", "begin: now+1.5h", EXAMPLES),
    ("now-unit-year", "begin: now+1y", "unknown unit 'y': use s, m, h, d or w"),
    ("now-no-count", "begin: now+h", EXAMPLES),
    ("keyword-with-time", "begin: tomorrowT10:00", EXAMPLES),
    ("too-far-date", "begin: 2027-03-12", "must be at most 366 days from now, got '2027-03-12'"),
    ("too-far-now-plus", "begin: now+31622401", "must be at most 366 days from now"),
    ("too-far-now-plus-huge", "begin: now+" + "9" * 400 + "d", "at most 366 days"),
    ("too-far-year-9999", "begin: 9999-12-31T23:59:59", "at most 366 days"),
]


def write_job(tmp_path: Path, line: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(f"# a job\n\ncommand: python train.py\n{line}\n# end\n")
    return path


@pytest.mark.parametrize(
    ("line", "fragment"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID]
)
def test_invalid_forms_name_field_and_line(
    tmp_path: Path, utc: str, line: str, fragment: str
) -> None:
    data, lines = load_spec_file(write_job(tmp_path, line))
    with pytest.raises(SpecError) as info:
        build_spec(data, lines=lines, source="job.yaml", now=local(NOW))
    (error,) = info.value.errors
    assert (error.field, error.line) == ("begin", 4)
    assert fragment in error.message
    assert str(info.value).startswith("job.yaml:4: begin: ")


def test_error_message_exactly_as_documented(tmp_path: Path) -> None:
    data, lines = load_spec_file(write_job(tmp_path, "begin: soon"))
    with pytest.raises(SpecError) as info:
        build_spec(data, lines=lines, source="job.yaml")
    assert str(info.value) == f"job.yaml:4: begin: not a time: 'soon' {EXAMPLES}"


def test_yaml_reads_times_as_text(tmp_path: Path, tz: str) -> None:
    # YAML 1.1 would read 22:00 as the base-60 int 1320 and 2026-11-23 as a date.
    for line, expected in [
        ("begin: 22:00", "2026-03-10 22:00:00"),
        ("begin: 2026-11-23", "2026-11-23 00:00:00"),
        ("begin: 2026-11-23T02:00:00", "2026-11-23 02:00:00"),
    ]:
        data, lines = load_spec_file(write_job(tmp_path, line))
        spec = build_spec(data, lines=lines, source="job.yaml", now=local(NOW))
        assert wall(spec.begin_time or 0) == expected, line


def test_flag_overrides_file_and_its_error_has_no_line(tmp_path: Path) -> None:
    data, lines = load_spec_file(write_job(tmp_path, "begin: 22:00"))
    flags = {"begin": "later"}
    with pytest.raises(SpecError) as info:
        build_spec(
            merge_flags(data, flags), lines=drop_overridden_lines(lines, flags), source="job.yaml"
        )
    assert str(info.value) == f"begin: not a time: 'later' {EXAMPLES}"
    good = build_spec(merge_flags(data, {"begin": "now+1h"}), now=1795392000.0)
    assert good.begin_time == 1795392000.0 + 3600


def test_unknown_keys_suggest_begin() -> None:
    for key in ("begin_time", "start_at", "start_time", "not_before", "Begin"):
        with pytest.raises(SpecError) as info:
            build_spec({"command": "x", key: "22:00"})
        assert 'did you mean "begin"?' in str(info.value), key


def test_wire_round_trip_through_json(tz: str) -> None:
    now = local(NOW) + 0.123456789
    for text in ("now+90", "22:00", "2026-11-23T02:00", "tomorrow"):
        spec = build_spec({"command": "x", "begin": text}, now=now)
        wire = json.loads(json.dumps(spec_to_wire(spec)))
        assert wire["begin_time"] == spec.begin_time
        assert spec_from_wire(wire) == spec
    assert spec_to_wire(build_spec({"command": "x"}))["begin_time"] is None
