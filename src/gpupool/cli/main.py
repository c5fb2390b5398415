"""Entry point: parse the verb, find the pool, turn errors into one clear line and an exit code.

Exit codes: 0 ok; 1 an unknown job or project, or no daemon; 2 bad input or a request refused
(at submit, or an admin change that cannot be made); with --wait/wait, the job's own exit code.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from gpupool import __version__

# Why the daemon refused a job it understood (exit 2, "job refused: ...").
SUBMIT_REFUSALS = frozenset(
    {"unsatisfiable", "quota_never_fits", "bad_workdir", "unknown_project", "not_a_member"}
)


def _common(default: object) -> argparse.ArgumentParser:
    # Accepted before and after the verb; after it, SUPPRESS keeps a value given before it.
    common = argparse.ArgumentParser(add_help=False)
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
    listing = argparse.ArgumentParser(add_help=False)
    listing.add_argument("--json", action="store_true", help="machine-readable output")

    parser = argparse.ArgumentParser(
        prog="gpupool", description="A shared, scheduled pool of GPUs.", parents=[top]
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
        description="gpupool submit [flags] -- CMD ARGS...   or   gpupool submit [flags] job.yaml",
    )
    submit_cmd.add_arguments(p)
    for name, aliases in (("queue", ["ps"]),):
        p = sub.add_parser(
            name,
            aliases=aliases,
            parents=[common, listing],
            help="list active jobs (-a: finished too)",
        )
        p.add_argument("-a", "--all", action="store_true", help="include finished jobs")
        p.add_argument("-u", "--user", help="only this user's jobs")
        p.add_argument(
            "--priority",
            action="store_true",
            help="pending jobs in queue order with their priority factors (sprio)",
        )
    p = sub.add_parser("show", parents=[common, listing], help="a job's full record and story")
    p.add_argument("job_id", type=int)
    p = sub.add_parser(
        "why", parents=[common, listing], help="why a job waits, and when it is expected to start"
    )
    p.add_argument("job_id", type=int)
    p = sub.add_parser("logs", parents=[common], help="print a job's output (-f follows)")
    p.add_argument("job_id", type=int)
    p.add_argument("-f", "--follow", action="store_true", help="follow until the job ends")
    p = sub.add_parser("cancel", parents=[common], help="cancel jobs (SIGTERM, grace, SIGKILL)")
    p.add_argument("job_ids", type=int, nargs="*")
    p.add_argument("--mine", action="store_true", help="all of your active jobs")
    p = sub.add_parser("wait", parents=[common], help="wait for a job; exit with its exit code")
    p.add_argument("job_id", type=int)
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
    args = _parser().parse_args(argv)
    if args.verb == "server":
        from gpupool.cli.server import cmd_server

        return cmd_server(args)
    if args.verb == "sim":  # offline: no daemon involved
        from gpupool.cli.sim import run as cmd_sim

        return cmd_sim(args)
    if args.verb == "plan":  # offline, except `plan cost --from-usage`
        from gpupool.cli.plan import run as cmd_plan

        return cmd_plan(args)

    from gpupool.client import ApiError, Client, DaemonNotRunning

    client = Client(args.state_dir, url=args.url)
    try:
        return _handlers()[args.verb](client, args)
    except DaemonNotRunning:
        print(
            f"gpupool: no daemon is running for {client.where()}.\n"
            f"Start one with `gpupool server` (or `make run` in a clone), "
            f"or point at it with --state-dir / GPUPOOL_STATE_DIR / --url.",
            file=sys.stderr,
        )
        return 1
    except ApiError as exc:
        refused = args.verb == "submit" and exc.code in SUBMIT_REFUSALS
        print(f"gpupool: {'job refused: ' if refused else ''}{exc.message}", file=sys.stderr)
        if exc.code == "not_found":
            return 1
        return 2 if exc.status in (400, 409, 422) else 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `gpupool queue | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
