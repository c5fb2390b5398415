"""`python -m gpupool.sdk.runner CALL OUTCOME`: what a function job runs (Client.submit_fn);
`python -m gpupool.sdk.runner --array DIR`: what each task of a mapped call runs (Client.map,
one array job): the call and outcome files of task $GPUPOOL_ARRAY_INDEX in DIR.

Loads the call from the file CALL, runs it, writes its outcome (the return value, or the
exception with its traceback) to OUTCOME (sdk/payload.py has both formats), and exits 0 when
the function returned, 1 when it raised, 2 when the call could not be loaded (the outcome
then says why, as a PayloadError). A job killed before the end writes no outcome: the
submitter tells that apart (sdk/errors.py, JobFailed).

An exception is also printed to the job's log, as an uncaught one would be, so
`gpupool logs ID` shows it too.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from gpupool.sdk.payload import (
    Raised,
    raised,
    read_call,
    run_call,
    task_call_file,
    task_outcome_file,
    write_outcome,
)

USAGE = (
    "usage: python -m gpupool.sdk.runner CALL_FILE OUTCOME_FILE\n"
    "       python -m gpupool.sdk.runner --array DIR   (in a task of an array job)"
)


def files(argv: list[str]) -> tuple[Path, Path] | None:
    """The call and outcome files the arguments name; None when they name none."""
    if len(argv) == 2 and argv[0] == "--array":
        index = os.environ.get("GPUPOOL_ARRAY_INDEX", "")
        if not index.isdigit():
            return None  # not run as a task of an array job
        where = Path(argv[1])
        return where / task_call_file(int(index)), where / task_outcome_file(int(index))
    if len(argv) == 2 and not argv[0].startswith("-"):
        return Path(argv[0]), Path(argv[1])
    return None


def main(argv: list[str]) -> int:
    named = files(argv)
    if named is None:
        print(USAGE, file=sys.stderr)
        return 2
    call_path, outcome_path = named
    try:
        call = read_call(call_path)
    except Exception as exc:  # noqa: BLE001 - any failure to load is the job's outcome
        failed = raised(exc)
        print(failed.traceback, file=sys.stderr, end="")
        write_outcome(outcome_path, failed)
        return 2
    outcome = run_call(call)
    del call  # the arguments may be large: free them before pickling the result
    if isinstance(outcome, Raised):
        print(outcome.traceback, file=sys.stderr, end="")
    sys.stdout.flush()
    write_outcome(outcome_path, outcome)
    return 1 if isinstance(outcome, Raised) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
