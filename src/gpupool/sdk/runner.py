"""`python -m gpupool.sdk.runner CALL OUTCOME`: what a function job runs (Client.submit_fn).

Loads the call from the file CALL, runs it, writes its outcome (the return value, or the
exception with its traceback) to OUTCOME (sdk/payload.py has both formats), and exits 0 when
the function returned, 1 when it raised, 2 when the call could not be loaded (the outcome
then says why, as a PayloadError). A job killed before the end writes no outcome: the
submitter tells that apart (sdk/errors.py, JobFailed).

An exception is also printed to the job's log, as an uncaught one would be, so
`gpupool logs ID` shows it too.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gpupool.sdk.payload import Raised, raised, read_call, run_call, write_outcome

USAGE = "usage: python -m gpupool.sdk.runner CALL_FILE OUTCOME_FILE"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(USAGE, file=sys.stderr)
        return 2
    call_path, outcome_path = Path(argv[0]), Path(argv[1])
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
