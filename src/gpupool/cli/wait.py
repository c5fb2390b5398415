"""`gpupool wait ID [--timeout T]`: until the job ends, then exit with the code for how it
ended (cli/exit_codes.py; docs/jobs.md, "What `wait` exits with"). An array's id waits for
every task of it, as in Slurm, and exits with the highest of their codes; the tasks that did
not succeed are said one line each (up to `_EACH`), then a count by state."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from gpupool.cli.exit_codes import EXIT_CODES, Ending, array_exit_code, exit_code_of
from gpupool.client import Client, JobView
from gpupool.core.job_enums import JobState

_EACH = 20  # tasks that did not succeed, said one line each
_POLL_MAX_S = 1.0


def cmd_wait(client: Client, args: argparse.Namespace) -> int:
    from gpupool.cli.jobs import detach_note, final_line

    deadline = None
    if args.timeout is not None:
        from gpupool.cli.when import parse_timeout

        try:
            deadline = time.monotonic() + parse_timeout(args.timeout)
        except ValueError as exc:
            print(f"gpupool: {exc}", file=sys.stderr)
            return 2
    try:
        job = client.job(args.job_id)
        if job.array_id == job.id:
            return _wait_array(client, job.id, deadline, args)
        job = wait_until(client, args.job_id, deadline)
    except KeyboardInterrupt:
        print(f"\n{detach_note(client, args.job_id, 'stopped waiting')}", file=sys.stderr)
        return 130
    if not job.state.terminal:
        print(
            f"gpupool: job {job.id} has not ended after {args.timeout} (it is "
            f"{job.state.value}; left as it is)",
            file=sys.stderr,
        )
        return EXIT_CODES[Ending.WAIT_RAN_OUT]
    if not args.quiet:
        print(final_line(job), file=sys.stderr)
    return exit_code_of(job.state, job.exit_code, job.reason)


def wait_until(client: Client, job: int, deadline: float | None) -> JobView:
    """The job once it has ended, or as it is at `deadline` (monotonic; None: no end)."""
    delay = 0.05
    while True:
        found = client.job(job)
        if found.state.terminal:
            return found
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return found
        time.sleep(delay if left is None else min(delay, left))
        delay = min(delay * 2, _POLL_MAX_S)


def _wait_array(
    client: Client, array_id: int, deadline: float | None, args: argparse.Namespace
) -> int:
    """Wait for every task of the array; its exit code (module docstring)."""
    from gpupool.client.arrays import array_page

    delay = 0.05
    while True:
        active = array_page(client, array_id, include_finished=False, limit=0)
        if active.total == 0:
            break
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            counts = ", ".join(f"{_tasks(n)} {state}" for state, n in active.counts.items())
            print(
                f"gpupool: array {array_id} has not ended after {args.timeout} ({counts}; "
                "left as they are)",
                file=sys.stderr,
            )
            return EXIT_CODES[Ending.WAIT_RAN_OUT]
        time.sleep(delay if left is None else min(delay, left))
        delay = min(delay * 2, _POLL_MAX_S)
    tasks = array_page(client, array_id).jobs
    if not args.quiet:
        _say_array(array_id, tasks)
    return array_exit_code(exit_code_of(t.state, t.exit_code, t.reason) for t in tasks)


def _say_array(array_id: int, tasks: Sequence[JobView]) -> None:
    from gpupool.cli.jobs import final_line

    failed = [t for t in tasks if t.state is not JobState.SUCCEEDED]
    for task in failed[:_EACH]:
        print(final_line(task, f"{array_id}_{task.array_index}"), file=sys.stderr)
    if len(failed) > _EACH:
        print(f"... and {len(failed) - _EACH} more tasks that did not succeed", file=sys.stderr)
    by_state: dict[str, int] = {}
    for task in tasks:
        by_state[task.state.value] = by_state.get(task.state.value, 0) + 1
    order = [s.value for s in JobState if s.value in by_state]
    counts = ", ".join(f"{by_state[s]} {s}" for s in order)
    print(f"array {array_id}: {_tasks(len(tasks))} ended: {counts}", file=sys.stderr)


def _tasks(n: int) -> str:
    return f"{n} task{'' if n == 1 else 's'}"
