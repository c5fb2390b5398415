"""hold, release, update, cancel, wait: steering jobs, as scontrol hold/release/update,
scancel and `srun`'s wait do (docs/jobs.md, "Steering jobs").

Each command acts on every job it names and says, one line per job, what became of it; a
job it could not act on gets its own `gpupool: ...` line and the command goes on with the
next. Exit code: 0 when every job was acted on; 2 when any was refused (not allowed, not in
a state it applies to, a bad value); else 1 when some job does not exist or the daemon could
not do it (a full disk), as for every command (cli/commands.py, `api_error_exit`).
`cancel` with filters that select nothing says so and exits 0, as scancel does; many jobs
are cancelled in one request (cli/cancel.py). `wait` exits with the code for how the job
ended (cli/exit_codes.py; an array's id: every task, cli/wait.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from gpupool.cli.argv import job_id
from gpupool.cli.commands import OnPool, Parents, Subparsers, api_error_exit
from gpupool.cli.exit_codes import EXIT_CODE_HELP, EXIT_CODES, Ending
from gpupool.client import ApiError, Client
from gpupool.core.job_enums import JobState

TIMED_OUT = EXIT_CODES[Ending.WAIT_RAN_OUT]  # `wait --timeout`: the job had not ended
CANCEL_STATES = {"pending": JobState.PENDING, "running": JobState.RUNNING}
# Slurm's short names, as scancel -t takes them (any case, as every state here).
_STATE_ALIASES = {"pd": "pending", "r": "running"}


def cancel_state(text: str) -> str:
    """A state as scancel reads it: `PENDING`, `pending`, `PD` are all `pending`; anything
    else is left for argparse's choices to refuse, naming the states it takes."""
    low = text.strip().lower()
    return _STATE_ALIASES.get(low, low)


def register(sub: Subparsers, parents: Parents) -> None:
    common = parents.common
    p = sub.add_parser(
        "hold",
        parents=[common],
        help="keep pending jobs from starting until released (an array id: its pending tasks)",
    )
    p.set_defaults(handler=OnPool(cmd_hold))
    p.add_argument("job_ids", type=job_id, nargs="+", metavar="ID")
    p = sub.add_parser("release", parents=[common], help="let held jobs start again")
    p.set_defaults(handler=OnPool(cmd_release))
    p.add_argument("job_ids", type=job_id, nargs="+", metavar="ID")
    p = sub.add_parser(
        "update",
        parents=[common],
        help="change a pending job's time limit, priority or GPUs (a running job's time limit)",
    )
    p.set_defaults(handler=OnPool(cmd_update))
    p.add_argument("job_id", type=job_id, metavar="ID")
    p.add_argument(
        "--time",
        help="time limit, e.g. 2h (a running job's: its owner may only shorten it, an "
        "admin may lengthen it; it counts from the job's start)",
    )
    p.add_argument("--priority", help="low, normal, high, interactive, or 0-1000 (pending)")
    p.add_argument("--gpus", help="GPUs: a whole number or a fraction of one GPU (pending)")
    p = sub.add_parser(
        "cancel",
        parents=[common],
        help="cancel jobs (SIGTERM, grace, SIGKILL); --signal sends a signal instead",
    )
    p.set_defaults(handler=OnPool(cmd_cancel))
    p.add_argument("job_ids", type=job_id, nargs="*", metavar="ID")
    p.add_argument("--mine", action="store_true", help="all of your active jobs")
    p.add_argument(
        "-s",
        "--signal",
        metavar="SIG",
        help="send SIG (USR1, TERM, 10...) to the jobs' processes and leave them running",
    )
    p.add_argument("-n", "--name", help="only jobs of this name")
    p.add_argument(
        "-t", "--state", type=cancel_state, choices=sorted(CANCEL_STATES),
        help="only jobs in this state (as scancel: PENDING or PD, RUNNING or R, any case)",
    )  # fmt: skip
    p.add_argument(
        "-u", "--user", help="only this user's jobs; `me`: yours (the default with filters)"
    )
    p.add_argument("-p", "--project", help="only jobs of this project")
    p = sub.add_parser(
        "wait",
        parents=[common],
        help="wait for a job; exit with its exit code",
        epilog=EXIT_CODE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(handler=OnPool(cmd_wait))
    p.add_argument("job_id", type=job_id, metavar="ID")
    p.add_argument("-q", "--quiet", action="store_true")
    p.add_argument(
        "--timeout",
        metavar="DURATION",
        help=f"give up after this long (30s, 5m; a bare number is seconds): exit {TIMED_OUT}, "
        "the job untouched",
    )


class Outcomes:
    """What a command did to each job: the exit code of the worst refusal (module
    docstring), and the refusals said as they come."""

    def __init__(self) -> None:
        self.code = 0

    def refused(self, job: int, exc: ApiError, many: bool) -> None:
        """One line: `gpupool: job N: why` among several jobs, `gpupool: why` for one."""
        from gpupool.cli.render import shown_lines

        head = f"job {job}: " if many else ""
        print(f"gpupool: {head}{shown_lines(exc.message)}", file=sys.stderr)
        self.code = max(self.code, api_error_exit(exc.status, exc.code))

    def each(self, ids: Sequence[int], act: Callable[[int], None]) -> int:
        for one in ids:
            try:
                act(one)
            except ApiError as exc:
                self.refused(one, exc, len(ids) > 1)
        return self.code


def cmd_hold(client: Client, args: argparse.Namespace) -> int:
    from gpupool.client.steering import hold

    def act(one: int) -> None:
        _said(one, "held", hold(client, one))

    return Outcomes().each(args.job_ids, act)


def cmd_release(client: Client, args: argparse.Namespace) -> int:
    from gpupool.client.steering import release

    def act(one: int) -> None:
        _said(one, "released", release(client, one))

    return Outcomes().each(args.job_ids, act)


def _said(asked: int, verb: str, done: object) -> None:
    from gpupool.cli.render import shown
    from gpupool.client.steering import Steered

    assert isinstance(done, Steered)
    ids = [j.id for j in done.changed]
    if ids == [asked] and not done.left:
        print(f"job {asked}: {verb}")
    else:  # an array: its tasks
        print(f"job {asked}: {verb} {len(ids)} task{'s' if len(ids) != 1 else ''}"
              + (f" ({', '.join(map(str, ids))})" if ids else ""))  # fmt: skip
    for one, why in done.left:
        print(f"  job {one} left as it is: {shown(why)}")


def cmd_update(client: Client, args: argparse.Namespace) -> int:
    from gpupool.cli.render import shown
    from gpupool.client.steering import update
    from gpupool.spec.changes import changes_to_wire

    body = changes_to_wire(args.time, args.priority, args.gpus)
    if not body:
        print("gpupool: nothing to change: give --time, --priority or --gpus", file=sys.stderr)
        return 2
    job = update(client, args.job_id, body)
    said = job.events[-1].cause if job.events else "changed"
    print(f"job {job.id}: {shown(said)}")
    return 0


def cmd_cancel(client: Client, args: argparse.Namespace) -> int:
    """cli/cancel.py: by ids and/or filters, many jobs in one request."""
    from gpupool.cli.cancel import cmd_cancel as cancel

    return cancel(client, args)


def cmd_wait(client: Client, args: argparse.Namespace) -> int:
    """cli/wait.py: an array's id waits for every task."""
    from gpupool.cli.wait import cmd_wait as wait

    return wait(client, args)
