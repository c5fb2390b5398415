"""`gpupool cancel`, as `scancel`: jobs by id (an array's id: every task of it) and/or
selected by --name, --state, --user (`me`: you) and --project, the filters combined with
AND; or, with --signal, a signal sent to running jobs instead (docs/jobs.md, "Steering
jobs" and "Cancel many jobs at once").

Several jobs, or any filter, are cancelled in ONE request (`POST /v1/jobs/cancel`), which
the daemon carries out in one transaction; a lone id keeps its own request (`POST
/v1/jobs/ID/cancel`, an array's id included). What the daemon did is said as it answered
it: a line per job (up to `_EACH`), a count of what was cancelled and skipped, and each job
skipped with why (on stderr). Exit code: 2 when a job was not the caller's to cancel, else
1 when an id named no job, else 0 (filters that select nothing included, as scancel)."""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from gpupool.cli.steer import CANCEL_STATES, Outcomes
from gpupool.client import Client, JobView
from gpupool.client.bulk_cancel import CancelFilters, CancelReport, SkipWhy
from gpupool.core.job_enums import JobState

ME = "me"  # --user me: the caller, as the daemon names it
_EACH = 20  # jobs said one line each; past it, counted
_SKIP_WORDS = {
    SkipWhy.NOT_ALLOWED: "not allowed",
    SkipWhy.ENDED: "already ended",
    SkipWhy.NOT_FOUND: "not found",
}
_SKIP_EXIT = {SkipWhy.NOT_ALLOWED: 2, SkipWhy.NOT_FOUND: 1, SkipWhy.ENDED: 0}


def filtered(args: argparse.Namespace) -> bool:
    return bool(
        args.mine
        or args.name is not None
        or args.state
        or args.user is not None
        or args.project is not None
    )


def cmd_cancel(client: Client, args: argparse.Namespace) -> int:
    """Cancel (or signal) the jobs named and/or selected (module docstring)."""
    if not args.job_ids and not filtered(args):
        print("gpupool: nothing to cancel: give job ids or filters (--mine, --name, --state, "
              "--user, --project)", file=sys.stderr)  # fmt: skip
        return 2
    if args.signal is not None:
        return _signal(client, args)
    if len(args.job_ids) == 1 and not filtered(args):
        return _cancel_one(client, args.job_ids[0])
    report = _cancel_many(client, args)
    if not report.cancelled and not report.skipped:
        print(f"nothing to cancel: no active job matches {_filters(args)}", file=sys.stderr)
        return 0
    return said(report)


def _cancel_one(client: Client, job_id: int) -> int:
    def act(one: int) -> None:
        job = client.cancel(one)
        verb = "cancelling" if job.state is JobState.RUNNING else job.state.value.lower()
        print(f"job {one}: {verb}")

    return Outcomes().each([job_id], act)


def _cancel_many(client: Client, args: argparse.Namespace) -> CancelReport:
    from gpupool.client.bulk_cancel import cancel_jobs

    user = None if args.user in (None, ME) or args.mine else args.user
    # Filters without --user select your own jobs; ids alone, whoever's they are.
    mine = args.mine or args.user == ME or (args.user is None and _filters_given(args))
    states = [CANCEL_STATES[args.state].value] if args.state else None
    filters = CancelFilters(tuple(args.job_ids), args.name, states, user, mine, args.project)
    return cancel_jobs(client, filters)


def _filters_given(args: argparse.Namespace) -> bool:
    """Filters other than --user and --mine."""
    return args.name is not None or bool(args.state) or args.project is not None


def said(report: CancelReport) -> int:
    """Say what a bulk cancel did (module docstring); the exit code."""
    from gpupool.cli.render import shown

    done, skipped = report.cancelled, report.skipped
    if len(done) <= _EACH:
        for job in done:
            print(f"job {job.id}: {'cancelling' if job.stopping else 'cancelled'}")
    if len(done) + len(skipped) > 1:
        stopping = sum(1 for j in done if j.stopping)
        parts = [f"{n} {w}" for n, w in ((len(done) - stopping, "pending"),
                                          (stopping, "stopping")) if n]  # fmt: skip
        line = f"cancelled {len(done)} job{'' if len(done) == 1 else 's'}"
        line += f" ({', '.join(parts)})" if parts else ""
        if skipped:
            counts = Counter(s.why for s in skipped)
            why = ", ".join(f"{counts[w]} {words}" for w, words in _SKIP_WORDS.items() if counts[w])
            line += f"; skipped {len(skipped)}: {why}"
        print(line)
    for one in skipped[:_EACH]:
        print(f"gpupool: job {one.id}: {shown(one.message)}", file=sys.stderr)
    if len(skipped) > _EACH:
        print(f"gpupool: ... and {len(skipped) - _EACH} more skipped", file=sys.stderr)
    return max((_SKIP_EXIT[s.why] for s in skipped), default=0)


def _signal(client: Client, args: argparse.Namespace) -> int:
    """Send --signal to each job named and/or selected (running ones), a request each."""
    from gpupool.cli.steer import Outcomes
    from gpupool.client.steering import send_signal

    ids = list(args.job_ids)
    if filtered(args):
        keep = [j.id for j in _running_selected(client, args)]
        ids = [i for i in ids if i in set(keep)] if args.job_ids else keep
        if not ids:
            print(f"nothing to signal: no active job matches {_filters(args)}", file=sys.stderr)
            return 0

    def signal_one(one: int) -> None:
        send_signal(client, one, args.signal)
        print(f"job {one}: sent {args.signal.upper().removeprefix('SIG')}")

    return Outcomes().each(ids, signal_one)


def _running_selected(client: Client, args: argparse.Namespace) -> list[JobView]:
    """The running jobs the filters select: of --user (else yours), --name and --project."""
    yours = args.user is None or args.user == ME or args.mine
    user = client.whoami().user if yours else args.user
    jobs = client.job_page(user=user, states=[JobState.RUNNING.value], project=args.project).jobs
    return [j for j in jobs if args.name is None or j.name == args.name]


def _filters(args: argparse.Namespace) -> str:
    said = [f"--user {args.user}" if args.user not in (None, ME) and not args.mine else "yours"]
    if args.name is not None:
        said.append(f"--name {args.name}")
    if args.state:
        said.append(f"--state {args.state}")
    if args.project is not None:
        said.append(f"--project {args.project}")
    if args.signal is not None:
        said.append("running (--signal)")
    return ", ".join(said)
