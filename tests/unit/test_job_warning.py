"""The supervisor's rule for the warning before the time limit (executor/job_warning.py):
when it is due, that it is sent once, that it moves with the limit, and the checkpoint
default's condition. No processes: the clock is the test's."""

from __future__ import annotations

import signal
from pathlib import Path

from gpupool.executor.job_warning import LimitWarning

USR1 = int(signal.SIGUSR1)


def asked(before_s: float, checkpoint_dir: Path | None = None) -> LimitWarning:
    gate = None if checkpoint_dir is None else str(checkpoint_dir)
    return LimitWarning({"signal": USR1, "before_s": before_s, "if_checkpointed": gate})


def test_it_is_sent_once_when_due_and_not_before() -> None:
    warning = asked(120.0)
    deadline = 1000.0
    assert warning.wake_at(0.0, deadline) == 880.0  # the loop wakes when it is due
    assert warning.take(879.9, deadline) is None
    assert warning.take(880.0, deadline) == "sending SIGUSR1, 120 s before the time limit"
    assert warning.take(881.0, deadline) is None  # never again
    assert warning.wake_at(881.0, deadline) == deadline


def test_it_moves_with_the_limit_and_is_not_sent_again_after_a_move() -> None:
    warning = asked(60.0)
    assert warning.take(100.0, 1000.0) is None
    assert warning.take(100.0, 150.0) is not None  # the limit came nearer: due at 90, now
    assert warning.take(1000.0, 2000.0) is None  # lengthened after it was sent: not again


def test_a_limit_nearer_than_asked_sends_it_at_once_saying_so() -> None:
    line = asked(120.0).take(0.0, 4.0)
    assert line == "sending SIGUSR1, 4 s before the time limit (120 s asked: the limit was nearer)"


def test_never_without_a_limit_nor_once_the_limit_is_reached_nor_when_none_was_asked() -> None:
    assert asked(120.0).take(5.0, None) is None
    assert asked(120.0).wake_at(5.0, None) is None
    assert asked(120.0).take(1000.0, 1000.0) is None  # the time limit's SIGTERM instead
    assert LimitWarning(None).take(0.0, 4.0) is None


def test_the_checkpoint_default_waits_for_a_checkpoint(tmp_path: Path) -> None:
    warning = asked(120.0, tmp_path)
    assert warning.take(900.0, 1000.0) is None  # nothing checkpointed: a USR1 could kill it
    assert warning.wake_at(900.0, 1000.0) == 1000.0  # looked at on the loop's turns
    (tmp_path / "step-100.pt").write_bytes(b"")
    line = warning.take(950.0, 1000.0)
    assert line is not None and line.startswith("sending SIGUSR1, 50 s before the time limit: ")
    assert "the job has checkpointed" in line and "--signal none" in line
    assert warning.take(960.0, 1000.0) is None


def test_an_unreadable_checkpoint_directory_counts_as_empty(tmp_path: Path) -> None:
    assert asked(120.0, tmp_path / "gone").take(900.0, 1000.0) is None
