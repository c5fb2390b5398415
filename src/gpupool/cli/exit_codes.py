"""What `gpupool wait` and `submit --wait` exit with (docs/jobs.md, "What `wait` exits
with"), as data: how a job ended (`Ending`), the code each ending exits with (`EXIT_CODES`),
and the words `wait --help` prints from them (`EXIT_CODE_HELP`).

0 only for a job that SUCCEEDED, so `gpupool wait J && evaluate` never goes on after a run
that was cancelled or cut by its time limit, whatever its script exited with (a script that
exits 0 on SIGTERM, as Lightning's do). A failed job keeps its own code (128+N for signal
N, as a shell says). Every other ending has a code of gpupool's own, in the style of
timeout(1): 124 when `wait --timeout` gave up (timeout(1)'s), and 201-203 past every code a
shell gives (126-127, 128+N up to 192), so a script can tell them from a program's own
(a job that exits 201 by itself reads as a timeout: the line on stderr says which). An
array's id waits for every task and exits with the highest of their codes, as
`sbatch --wait` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import Enum

from gpupool.core.job_enums import JobState


class Ending(Enum):
    """How a job ended, as far as its exit code goes."""

    SUCCEEDED = "it SUCCEEDED"
    FAILED = "it FAILED without an exit code of its own"  # with one: that code
    TIMED_OUT = "it reached its time limit (TIMEOUT)"
    CANCELLED = "it was CANCELLED (by a user, or its --after can never be met)"
    NODE_LOST = "it FAILED because its node or supervisor was lost"
    WAIT_RAN_OUT = "--timeout ran out before it ended (it is left as it is)"


EXIT_CODES: Mapping[Ending, int] = {
    Ending.SUCCEEDED: 0,
    Ending.FAILED: 1,
    Ending.WAIT_RAN_OUT: 124,
    Ending.TIMED_OUT: 201,
    Ending.CANCELLED: 202,
    Ending.NODE_LOST: 203,
}

_BY_STATE = {
    JobState.SUCCEEDED: Ending.SUCCEEDED,
    JobState.TIMEOUT: Ending.TIMED_OUT,
    JobState.CANCELLED: Ending.CANCELLED,
}


def ending_of(state: JobState, reason: str) -> Ending:
    """How a job in `state` (its REASON code `reason`) ended; WAIT_RAN_OUT if it has not."""
    if not state.terminal:
        return Ending.WAIT_RAN_OUT
    if state is JobState.FAILED:
        return Ending.NODE_LOST if _node_failed(reason) else Ending.FAILED
    return _BY_STATE[state]


def _node_failed(reason: str) -> bool:
    """Whether `reason` is EndReason.NODE_FAIL (core.job imported only for a failed job)."""
    from gpupool.core.job import EndReason

    try:
        return EndReason(reason) is EndReason.NODE_FAIL
    except ValueError:  # a reason this client does not know (a newer daemon's)
        return False


def exit_code_of(state: JobState, own: int | None, reason: str) -> int:
    """The code `wait` exits with for a job in `state` whose run exited with `own`."""
    ending = ending_of(state, reason)
    if ending is Ending.FAILED and own:
        return own
    return EXIT_CODES[ending]


def array_exit_code(codes: Iterable[int]) -> int:
    """An array's: the highest of its tasks' codes (0 only when every task succeeded)."""
    return max(codes, default=0)


def _help() -> str:
    lines = ["exit codes:", "  0    the job SUCCEEDED (an array: every task did)"]
    lines.append("  N    it FAILED with exit code N (128+N: killed by signal N)")
    for ending in sorted(Ending, key=EXIT_CODES.__getitem__)[1:]:
        lines.append(f"  {EXIT_CODES[ending]:<4} {ending.value}")
    lines.append("an array's id waits for every task and exits with the highest of their codes")
    return "\n".join(lines)


EXIT_CODE_HELP = _help()
