"""`signal` (`submit --signal SIG@SECONDS`, sbatch's --signal): read into a WarningSignal in
every form (file/flag, wire, SDK), refused naming the field, sent on the wire and stored only
when given; a run's warning from it (core/warning_signal.py)."""

from __future__ import annotations

import json
import signal

import pytest

from gpupool.core.warning_signal import (
    CHECKPOINT_WARNING,
    NO_WARNING,
    WarningSignal,
    run_warning,
)
from gpupool.sdk import Job
from gpupool.spec import SpecError, build_spec, build_wire, spec_from_wire, spec_to_wire
from gpupool.store.codec import decode_spec, encode_spec

USR1, TERM = int(signal.SIGUSR1), int(signal.SIGTERM)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("USR1@120", WarningSignal(USR1, 120.0)),
        ("SIGUSR1@120", WarningSignal(USR1, 120.0)),
        ("usr1@120", WarningSignal(USR1, 120.0)),
        ("B:USR1@120", WarningSignal(USR1, 120.0)),  # Slurm's batch-shell prefix
        ("b:sigterm@60", WarningSignal(TERM, 60.0)),
        ("TERM@2m", WarningSignal(TERM, 120.0)),  # a duration with a unit
        ("15@1h", WarningSignal(TERM, 3600.0)),  # a signal by number
        (" USR1 @ 1.5 ", WarningSignal(USR1, 1.5)),  # a bare number is seconds, as Slurm's
        ("none", NO_WARNING),
        ("None", NO_WARNING),
    ],
)
def test_the_forms_it_reads(text: str, expected: WarningSignal) -> None:
    assert build_spec({"command": "x", "signal": text}).warning_signal == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("NOPE@120", "signal: no signal 'NOPE'"),
        ("USR1", "signal: needs a time before the limit: SIG@SECONDS such as USR1@120"),
        ("USR1@0", "signal: the time before the limit must be a positive duration"),
        ("USR1@-5", "signal: the time before the limit must be a positive duration"),
        ("USR1@soon", "signal: the time before the limit must be a positive duration"),
        ("USR1@400d", "signal: the time before the limit must be at most 366 days"),
        ("0@120", "signal: no signal 0"),
        ("999@120", "signal: no signal 999"),
        ("KILL@120", "signal: SIGKILL cannot be caught, so it cannot warn a job"),
        ("STOP@120", "signal: SIGSTOP cannot be caught"),
        ("R:USR1@120", "signal: no signal 'R:USR1'"),
        (10, "signal: must be SIG@SECONDS"),
    ],
)
def test_bad_values_are_refused_naming_the_field(value: object, message: str) -> None:
    with pytest.raises(SpecError) as bad:
        build_spec({"command": "x", "signal": value})
    assert message in str(bad.value)
    with pytest.raises(SpecError) as on_the_wire:  # the daemon checks it again, by its name
        spec_from_wire({"command": ["x"], "warning_signal": value})
    assert message.replace("signal:", "warning_signal:", 1) in str(on_the_wire.value)


@pytest.mark.parametrize("text", ["USR1@120", "TERM@0.5", "B:HUP@2m", "40@90", "none"])
def test_it_travels_on_the_wire_and_is_stored_as_it_was_read(text: str) -> None:
    spec = build_spec({"command": "x", "signal": text})
    wire = spec_to_wire(spec)
    assert build_wire({"command": "x", "signal": text})["warning_signal"] == wire["warning_signal"]
    assert spec_from_wire(json.loads(json.dumps(wire))) == spec
    assert decode_spec(json.loads(json.dumps(encode_spec(spec)))) == spec


def test_a_job_that_names_none_sends_and_stores_nothing() -> None:
    spec = build_spec({"command": "x"})
    assert spec.warning_signal is None
    assert "warning_signal" not in spec_to_wire(spec)
    assert "warning_signal" not in encode_spec(spec)
    assert decode_spec(encode_spec(spec)) == spec


def test_the_sdk_takes_it_as_the_cli_does() -> None:
    job = Job(["python", "train.py"], signal="USR1@2m")
    assert job.spec.warning_signal == WarningSignal(USR1, 120.0)
    assert job.to_wire()["warning_signal"] == "USR1@120"
    with pytest.raises(SpecError, match="signal: no signal 'NOPE'"):
        Job(["python", "train.py"], signal="NOPE@1")


def test_a_run_gets_the_checkpoint_default_unless_the_job_named_one_or_none() -> None:
    assert run_warning(None) == CHECKPOINT_WARNING
    assert CHECKPOINT_WARNING == WarningSignal(USR1, 120.0, only_if_checkpointed=True)
    assert run_warning(NO_WARNING) is None
    asked = WarningSignal(TERM, 60.0)
    assert run_warning(asked) == asked
