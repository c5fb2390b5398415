"""The rule of a job's warning signal: `--signal SIG@SECONDS` (a spec file's `signal`, the
wire's `warning_signal`, the SDK's `signal=`), read into core.warning_signal.WarningSignal
and written back as text for the wire.

The forms, as Slurm's `sbatch --signal=[B:]SIG@SECONDS`: SIG by name, with or without SIG,
in any case (`USR1`, `SIGUSR1`, `usr1`), or by number; SECONDS a bare number of seconds (as
Slurm's) or a duration with a unit (`2m`); Slurm's `B:` (signal the batch shell) is taken
and means the same here: gpupool signals every process of the job. `none` turns the
warning off, the checkpoint default included. The @SECONDS is required (Slurm defaults it
to 60 s): a warning whose time is not written is easy to misread.

Standard library only. The signal module and the WarningSignal dataclass are imported when
a spec names a signal, never for a plain `gpupool submit` (tests/integration/
test_cli_imports.py).
"""

from __future__ import annotations

import math
import re

from gpupool.core.units import parse_duration
from gpupool.spec.rules import MAX_TIME_S, BadValue, got

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpupool.core.warning_signal import WarningSignal

FORMS = "SIG@SECONDS such as USR1@120, TERM@2m or B:USR1@120, or none"
_SECONDS_RE = re.compile(r"\d+(\.\d*)?")  # a bare number: seconds, as Slurm's @N


def check_signal(value: object) -> WarningSignal | None:
    """The WarningSignal a spec's `signal` asks for; None when not given (the default
    applies); BadValue naming what is wrong."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadValue(f"must be {FORMS}, got {got(value)}")
    from gpupool.core.warning_signal import NO_WARNING, WarningSignal

    text = value.strip()
    if text.lower() == "none":
        return NO_WARNING
    body = text[2:] if text[:2].upper() == "B:" else text
    name, at, when = body.partition("@")
    if not at:
        raise BadValue(f"needs a time before the limit: {FORMS}, got {got(value)}")
    return WarningSignal(_signum(name.strip(), value), _seconds_before(when.strip(), value))


def _signum(name: str, value: str) -> int:
    import signal

    word = name.upper()
    if word.isascii() and word.isdigit():
        number = int(word)
        if not 0 < number < signal.NSIG:
            raise BadValue(f"no signal {number} (1 to {signal.NSIG - 1}), in {got(value)}")
    else:
        try:
            number = int(signal.Signals[word if word.startswith("SIG") else f"SIG{word}"])
        except KeyError:
            raise BadValue(
                f"no signal {name!r} (a name such as USR1, USR2, TERM, INT, or a number), "
                f"in {got(value)}"
            ) from None
    if number in (signal.SIGKILL, signal.SIGSTOP):
        # Neither can be caught: it would end or freeze the job, not warn it.
        what = signal.Signals(number).name
        raise BadValue(f"{what} cannot be caught, so it cannot warn a job: {got(value)}")
    return number


def _seconds_before(when: str, value: str) -> float:
    """SECONDS: a bare number is seconds (Slurm's @N), else a duration with a unit; kept to
    the millisecond, so that its text on the wire (signal_text) reads back the same."""
    problem = "the time before the limit must be a positive duration, such as 120 or 2m"
    if _SECONDS_RE.fullmatch(when):
        seconds = float(when)
    else:
        try:
            seconds = parse_duration(when)
        except (ValueError, OverflowError):
            raise BadValue(f"{problem}, got {got(value)}") from None
    seconds = round(seconds, 3) if math.isfinite(seconds) else seconds
    if not (math.isfinite(seconds) and seconds > 0):
        raise BadValue(f"{problem} (at least 1 ms), got {got(value)}")
    if seconds > MAX_TIME_S:
        raise BadValue(f"the time before the limit must be at most 366 days, got {got(value)}")
    return seconds


def signal_text(warning: WarningSignal) -> str:
    """The wire's text for `warning`, which check_signal reads back to the same value:
    `USR1@120`, `USR1@0.5`, `none` (a number for a signal without a name)."""
    if warning.off:
        return "none"
    import signal

    try:
        name = signal.Signals(warning.signum).name.removeprefix("SIG")
    except ValueError:
        name = str(warning.signum)
    before = warning.before_s
    return f"{name}@{int(before) if before.is_integer() else repr(before)}"
