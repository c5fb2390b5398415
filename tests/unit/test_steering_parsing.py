"""What the steering verbs parse and decide without a daemon (docs/jobs.md, "Steering jobs"):
`update`'s fields (spec/changes.py), `queue --since`, `wait --timeout` and the TIME LIMIT
cell (cli/when.py), where `logs --tail N` starts (service/log_tail.py), signal names, the
stored hold (store/codec.py), and that the gating leaves a held job out of a pass with
its status (engine/gating.py)."""

from __future__ import annotations

import signal
from datetime import datetime

import pytest

from gpupool.cli.when import limit_cell, parse_since, parse_timeout
from gpupool.core.access import Action, Authority, Caller, Mode, Target, Via, permit
from gpupool.core.job import Hold, Job, JobSpec, JobState, Resources
from gpupool.engine.gating import EndedJobs, controls, gate
from gpupool.policy import Code
from gpupool.policy.render import status_text
from gpupool.service.log_tail import tail_offset
from gpupool.service.steering import parse_signal, signal_name
from gpupool.spec import SpecError, build_spec, spec_from_wire, spec_to_wire
from gpupool.spec.changes import JobChanges, changes_from_wire, changes_to_wire
from gpupool.store.codec import decode_spec, encode_spec

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"time": "2h"}, JobChanges(time_limit_s=7200.0)),
        ({"time": "90"}, JobChanges(time_limit_s=5400.0)),  # a bare number: minutes (sbatch)
        ({"priority": "high"}, JobChanges(priority=300)),
        ({"priority": "7"}, JobChanges(priority=7)),
        ({"gpus": "3"}, JobChanges(gpus=3)),
        ({"gpus": "0.5"}, JobChanges(gpus=0.5)),
        ({"gpus": 2, "time": "1-00:00:00"}, JobChanges(time_limit_s=86400.0, gpus=2)),
    ],
)
def test_changes_are_read_by_the_submit_rules(
    body: dict[str, object], expected: JobChanges
) -> None:
    assert changes_from_wire(body) == expected


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"time": "soon"}, "time: not a duration: 'soon'"),
        ({"time": "-5m"}, "time: duration must be positive"),
        ({"time": "400d"}, "time: must be at most 366 days"),
        ({"priority": "urgent"}, "priority: must be one of low, normal, high, interactive"),
        ({"gpus": "-1"}, "gpus: must be a whole number of GPUs >= 0"),
        ({"gpus": "1.5"}, "gpus: must be a whole number of GPUs"),
        ({"name": "x"}, "name: cannot be changed (only time, priority, gpus)"),
        ({}, "nothing to change"),
    ],
)
def test_bad_changes_name_their_field(body: dict[str, object], said: str) -> None:
    with pytest.raises(SpecError) as err:
        changes_from_wire(body)
    assert said in str(err.value)


def test_every_bad_field_is_named_at_once() -> None:
    with pytest.raises(SpecError) as err:
        changes_from_wire({"time": "soon", "gpus": "x"})
    assert [e.field for e in err.value.errors] == ["time", "gpus"]


def test_the_cli_sends_only_the_flags_given() -> None:
    assert changes_to_wire("2h", None, "1") == {"time": "2h", "gpus": "1"}
    assert changes_to_wire(None, None, None) == {}


def test_since_reads_a_duration_back_or_a_local_date() -> None:
    assert parse_since("2h", NOW) == NOW - 7200
    assert parse_since("7d", NOW) == NOW - 7 * 86400
    day = datetime(2026, 5, 1, 14, 0)
    assert parse_since("2026-05-01T14:00", NOW) == day.timestamp()
    assert parse_since("2026-05-01", NOW) == datetime(2026, 5, 1).timestamp()
    for bad in ("5", "yesterday", "", "2026-13-01"):
        with pytest.raises(ValueError, match="--since: not a duration back from now"):
            parse_since(bad, NOW)


def test_timeout_takes_seconds_bare_as_timeout_1_does() -> None:
    assert parse_timeout("30") == 30.0
    assert parse_timeout("30s") == 30.0
    assert parse_timeout("2m") == 120.0
    assert parse_timeout("1.5") == 1.5
    for bad in ("0", "-1", "soon", "inf"):
        with pytest.raises(ValueError, match="--timeout: not a positive duration"):
            parse_timeout(bad)


@pytest.mark.parametrize(
    ("seconds", "cell"),
    [(None, "-"), (0, "-"), (5, "0:00:05"), (5400, "1:30:00"), (86400, "1-00:00:00"),
     (2 * 86400 + 3723, "2-01:02:03")],
)  # fmt: skip
def test_the_time_limit_cell_is_squeues(seconds: float | None, cell: str) -> None:
    assert limit_cell(seconds) == cell


def _tail(log: bytes, lines: int) -> bytes:
    def read(offset: int, n: int) -> bytes:
        return log[offset : offset + n]

    return log[tail_offset(read, len(log), lines) :]


def test_tail_starts_at_the_last_n_lines() -> None:
    log = b"".join(b"line %d\n" % i for i in range(1, 31))
    assert _tail(log, 2) == b"line 29\nline 30\n"
    assert _tail(log, 30) == log
    assert _tail(log, 100) == log
    assert _tail(log, 0) == b""
    assert _tail(b"a\nb\npartial", 1) == b"partial"  # a last line without its newline
    assert _tail(b"a\nb\npartial", 2) == b"b\npartial"
    assert _tail(b"", 5) == b""


def test_tail_reads_back_over_several_blocks() -> None:
    long = b"x" * 200_000 + b"\n"
    log = b"first\n" + long + b"last\n"
    assert _tail(log, 2) == long + b"last\n"
    assert _tail(log, 3) == log


def test_signals_by_name_or_number() -> None:
    assert parse_signal("USR1") == signal.SIGUSR1
    assert parse_signal("sigusr2") == signal.SIGUSR2
    assert parse_signal(" 15 ") == signal.SIGTERM
    assert signal_name(int(signal.SIGUSR1)) == "USR1"
    for bad in ("NOPE", "0", "999", ""):
        with pytest.raises(ValueError, match="signal: no signal"):
            parse_signal(bad)


def test_submit_hold_is_the_owners_and_survives_the_wire_and_the_store() -> None:
    spec = build_spec({"command": ["true"], "hold": True})
    assert spec.hold is Hold.USER
    wire = spec_to_wire(spec)
    assert wire["hold"] is True and spec_from_wire(wire).hold is Hold.USER
    admin = JobSpec(command=("true",), hold=Hold.ADMIN)
    assert decode_spec(encode_spec(admin)) == admin
    assert "hold" not in encode_spec(JobSpec(command=("true",)))  # older rows read the same


def _job(job_id: int, hold: Hold | None) -> Job:
    spec = JobSpec(command=("train",), resources=Resources(gpus=1), hold=hold)
    return Job(job_id, spec, "alice", JobState.PENDING, NOW)


def test_a_held_job_is_left_out_of_the_pass_with_its_status() -> None:
    jobs = [_job(1, Hold.USER), _job(2, Hold.ADMIN), _job(3, None)]
    assert [controls(j) for j in jobs] == [True, True, False]
    made = gate(jobs[:2], {j.id: j for j in jobs}, (), EndedJobs())
    assert made.left_out == {1, 2}
    assert made.held[1].code is Code.HELD_USER and made.held[2].code is Code.HELD_ADMIN
    assert "held by its owner" in status_text(made.held[1])
    assert "released by an admin" in status_text(made.held[2])


def test_steering_is_allowed_to_the_owner_and_admins_only() -> None:
    authority = Authority(Mode.SHARED, "root", frozenset({"ops"}), {"vision": frozenset({"lead"})})
    target = Target(owner="alice", project="vision", job_id=7)
    for action in (Action.HOLD_JOB, Action.RELEASE_JOB, Action.UPDATE_JOB, Action.SIGNAL_JOB):
        for name in ("alice", "lead", "ops", "root"):
            assert permit(authority, Caller(name, Via.UNIX), action, target) is None
        refusal = permit(authority, Caller("bob", Via.UNIX), action, target)
        assert refusal is not None and f"may {action.value} job 7" in refusal.message
    assert authority.is_job_admin("lead", "vision") and not authority.is_job_admin(
        "alice", "vision"
    )
