"""What `gpupool wait` (and `submit --wait`) exits with, as data (cli/exit_codes.py;
docs/jobs.md, "What `wait` exits with"; issue 30, item 4): 0 only for SUCCEEDED, the job's
own code for a failure that has one, a code of gpupool's own for every other end; an array
exits with the highest of its tasks' codes."""

from __future__ import annotations

import pytest

from gpupool.cli.exit_codes import EXIT_CODES, Ending, array_exit_code, exit_code_of
from gpupool.core.job_enums import JobState


@pytest.mark.parametrize(
    ("state", "own", "reason", "expected"),
    [
        ("SUCCEEDED", 0, "", 0),
        ("FAILED", 3, "NonZeroExit", 3),
        ("FAILED", 137, "Signal", 137),
        ("FAILED", None, "NodeFail", 203),
        ("TIMEOUT", 0, "TimeLimit", 201),  # its script exited 0 on SIGTERM: still a timeout
        ("TIMEOUT", 143, "TimeLimit", 201),
        ("CANCELLED", 0, "Cancelled", 202),
        ("CANCELLED", None, "Cancelled", 202),  # before it started
        ("CANCELLED", None, "DependencyNeverSatisfied", 202),
    ],
)
def test_only_success_exits_0(state: str, own: int | None, reason: str, expected: int) -> None:
    assert exit_code_of(JobState(state), own, reason) == expected


def test_the_codes_are_distinct_and_none_is_a_shells() -> None:
    ours = [EXIT_CODES[e] for e in (Ending.TIMED_OUT, Ending.CANCELLED, Ending.NODE_LOST)]
    assert len(set(ours)) == len(ours)
    assert all(c > 128 + 64 for c in ours), ours  # past 128+N of every signal
    assert EXIT_CODES[Ending.WAIT_RAN_OUT] == 124  # as timeout(1): the wait gave up


def test_an_array_exits_with_its_worst_task() -> None:
    assert array_exit_code([0, 0, 0]) == 0
    assert array_exit_code([0, 3, 201, 0]) == 201
    assert array_exit_code([]) == 0
