"""Entry point: parse the verb, find the pool, turn errors into one clear line and an exit code.

Exit codes: 0 ok; 1 an unknown job or project, or no pool answered (none running, not a gpupool
daemon, no answer in time, an unusable state directory, a submission that could not be
confirmed); 2 bad input or a request refused (at submit, or an admin change that cannot be
made); with --wait/wait, the job's own exit code; 130 after Ctrl-C.

Every error is one line on stderr, `gpupool: ...`, and never a traceback. The exceptions are
argparse's usage errors (the usage, then one `error:` line, exit 2: the usage is what the user
needs next) and a job spec with several bad fields (a heading, then one line per field).
A reader that goes away (`gpupool plan catalog | head`) ends the command quietly, exit 0.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from gpupool import __version__
from gpupool.cli.argv import CliParser, job_id

# Why the daemon refused a job it understood (exit 2, "job refused: ...").
SUBMIT_REFUSALS = frozenset(
    {"unsatisfiable", "quota_never_fits", "bad_workdir", "unknown_project", "not_a_member"}
)


def _common(default: object) -> argparse.ArgumentParser:
    # Accepted before and after the verb; after it, SUPPRESS keeps a value given before it.
    common = CliParser(add_help=False)
    common.add_argument(
        "--state-dir",
        default=default,
        help="the pool's state directory (default: $GPUPOOL_STATE_DIR or ~/.local/share/gpupool)",
    )
    common.add_argument(
        "--url",
        default=default,
        help="talk to a pool over TCP instead, e.g. http://127.0.0.1:8765 (or $GPUPOOL_URL)",
    )
    return common


def _parser() -> argparse.ArgumentParser:
    top = _common(None)
    common = _common(argparse.SUPPRESS)
    listing = CliParser(add_help=False)
    listing.add_argument("--json", action="store_true", help="machine-readable output")

    parser = CliParser(
        prog="gpupool",
        description="A shared, scheduled pool of GPUs.",
        parents=[top],
        epilog="Environment: GPUPOOL_STATE_DIR, GPUPOOL_URL (as --state-dir, --url), "
        "GPUPOOL_TIMEOUT (seconds to wait for the daemon's answer, default 30).",
    )
    parser.add_argument("--version", action="version", version=f"gpupool {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="COMMAND")
    sub.required = True

    from gpupool.cli import project as project_cmd
    from gpupool.cli import server as server_cmd
    from gpupool.cli import submit as submit_cmd

    p = sub.add_parser("server", parents=[common], help="run the pool (daemon) in the foreground")
    server_cmd.add_arguments(p)
    p = sub.add_parser(
        "submit",
        parents=[common],
        help="queue a job (flags or job.yaml)",
        description="gpupool submit [flags] -- CMD ARGS...   or   gpupool submit job.yaml [flags]",
        epilog=submit_cmd.SPEC_RULE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    submit_cmd.add_arguments(p)
    for name, aliases in (("queue", ["ps"]),):
        p = sub.add_parser(
            name,
            aliases=aliases,
            parents=[common, listing],
            help="list active jobs (-a: finished too)",
        )
        p.add_argument(
            "-a", "--all", action="store_true", help="every job, finished ones too (no page)"
        )
        p.add_argument("-u", "--user", help="only this user's jobs")
        p.add_argument("--project", help="only this project's jobs")
        p.add_argument(
            "--state",
            metavar="STATES",
            help="only jobs in these states, comma-separated (e.g. pending,running)",
        )
        p.add_argument(
            "--limit",
            type=int,
            metavar="N",
            help="list at most N jobs (default: 50 in the table, every one with --json)",
        )
        p.add_argument(
            "--priority",
            action="store_true",
            help="pending jobs in queue order with their priority factors (sprio)",
        )
    p = sub.add_parser("show", parents=[common, listing], help="a job's full record and story")
    p.add_argument("job_id", type=job_id)
    p = sub.add_parser(
        "why", parents=[common, listing], help="why a job waits, and when it is expected to start"
    )
    p.add_argument("job_id", type=job_id)
    p = sub.add_parser("logs", parents=[common], help="print a job's output (-f follows)")
    p.add_argument("job_id", type=job_id)
    p.add_argument("-f", "--follow", action="store_true", help="follow until the job ends")
    p = sub.add_parser("cancel", parents=[common], help="cancel jobs (SIGTERM, grace, SIGKILL)")
    p.add_argument("job_ids", type=job_id, nargs="*")
    p.add_argument("--mine", action="store_true", help="all of your active jobs")
    p = sub.add_parser("wait", parents=[common], help="wait for a job; exit with its exit code")
    p.add_argument("job_id", type=job_id)
    p.add_argument("-q", "--quiet", action="store_true")
    sub.add_parser("gpus", parents=[common, listing], help="GPUs, holders and NVLink peers")
    project_cmd.add_parser(sub, common, listing)
    from gpupool.cli import sim as sim_cmd

    p = sub.add_parser(
        "sim",
        help="replay a job trace through scheduling policies and compare them",
        description="Replay a job trace through named scheduling policies on a simulated "
        "cluster, with the daemon's own policy code (docs/simulator.md). Prints the "
        "comparison; writes files (metrics.json, plots) only with --out DIR.",
    )
    sim_cmd.add_arguments(p)
    from gpupool.cli import plan as plan_cmd

    p = sub.add_parser(
        "plan",
        help="cost, power, network, scaling, memory and training-time arithmetic",
        description="The infrastructure playbook as arithmetic, with sources (docs/plan.md).",
    )
    plan_cmd.add_arguments(p, common)
    return parser


def _handlers() -> dict[str, Callable[..., int]]:
    from gpupool.cli import explain, gpus, jobs, project, submit

    return {
        "submit": submit.cmd_submit,
        "queue": jobs.cmd_queue,
        "ps": jobs.cmd_queue,
        "show": jobs.cmd_show,
        "logs": jobs.cmd_logs,
        "cancel": jobs.cmd_cancel,
        "wait": jobs.cmd_wait,
        "gpus": gpus.cmd_gpus,
        "why": explain.cmd_why,
        "project": project.cmd_project,
    }


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `gpupool queue | head`: the reader is gone, nothing to say
        # Point stdout at /dev/null so the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 0


def _main(argv: list[str] | None) -> int:
    from gpupool.client import ApiError, BadClientSetting, Client, PoolUnreachable

    args = _parser().parse_args(argv)
    try:
        if args.verb == "server":
            from gpupool.cli.server import cmd_server

            return cmd_server(args)
        if args.verb == "sim":  # offline: no daemon involved
            from gpupool.cli.sim import run as cmd_sim

            return cmd_sim(args)
        if args.verb == "plan":  # offline, except `plan cost --from-usage`
            from gpupool.cli.plan import run as cmd_plan

            return cmd_plan(args)
        if args.verb == "submit":
            from gpupool.cli.submit import take_spec_file

            take_spec_file(args)  # flags after a spec file may set --url / --state-dir
        client = Client(args.state_dir, url=args.url)
        return _handlers()[args.verb](client, args)
    except BadClientSetting as exc:
        from gpupool.cli.failures import bad_setting

        print(bad_setting(exc), file=sys.stderr)
        return 2
    except PoolUnreachable as exc:
        from gpupool.cli.failures import unreachable

        print(unreachable(exc), file=sys.stderr)
        return 1
    except ApiError as exc:
        refused = args.verb == "submit" and exc.code in SUBMIT_REFUSALS
        print(f"gpupool: {'job refused: ' if refused else ''}{exc.message}", file=sys.stderr)
        if exc.code == "not_found":
            return 1
        return 2 if exc.status in (400, 409, 422) else 1


if __name__ == "__main__":
    sys.exit(main())
