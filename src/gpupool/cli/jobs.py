"""queue, show, why, logs: looking at jobs (steering them: cli/steer.py)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence

from gpupool.cli.argv import job_id, job_ids
from gpupool.cli.array_rows import queue_rows
from gpupool.cli.commands import OnPool, Parents, Subparsers
from gpupool.cli.render import (
    clock_time,
    elapsed,
    gpus_cell,
    print_json,
    print_json_list,
    print_table,
    reason_cell,
    shown,
    state_cell,
    write_bytes,
)
from gpupool.cli.when import limit_cell
from gpupool.client import Client, JobView
from gpupool.core.job_enums import JobState

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import BinaryIO

MAX_TAIL_LINES = 1_000_000  # as the API's (service/log_tail.py)
QUEUE_PAGE = 50  # jobs in `gpupool queue`'s table unless --limit or -a says otherwise
# Names are cut to this many columns (with an ellipsis), so one long name cannot widen
# every row; figures and states are never cut.
QUEUE_LIMITS = {"NAME": 32, "USER": 16, "PROJECT": 20}
QUEUE_COLUMNS = (
    "ID",
    "NAME",
    "USER",
    "PROJECT",
    "GPUS",
    "STATE",
    "SUBMITTED",
    "STARTED",
    "ELAPSED",
    "TIME LIMIT",
    "EXIT",
    "REASON",
)


def backend_line(job: JobView) -> str:
    """`show`'s Backend line: the backend, the nodes, and the backend's name for its run."""
    nodes = f"{job.nodes} node{'s' if job.nodes != 1 else ''}"
    return f"{job.backend}, {nodes}, run {job.backend_ref or '(not known yet)'}"


def register(sub: Subparsers, parents: Parents) -> None:
    common, listing = parents.common, parents.listing
    p = sub.add_parser(
        "queue",
        aliases=["ps"],
        parents=[common, listing],
        help="list active jobs (-a: finished too)",
    )
    p.set_defaults(handler=OnPool(cmd_queue))
    p.add_argument(
        "-a", "--all", action="store_true", help="every job, finished ones too (no page)"
    )
    p.add_argument(
        "-j",
        "--jobs",
        type=job_ids,
        metavar="IDS",
        help="only these jobs, comma-separated (squeue -j 12,15), finished ones too; an "
        "array's tasks by their own ids",
    )
    p.add_argument("-u", "--user", help="only this user's jobs")
    p.add_argument("--project", help="only this project's jobs")
    p.add_argument(
        "--state",
        metavar="STATES",
        help="only jobs in these states, comma-separated (e.g. pending,running)",
    )
    p.add_argument(
        "--since",
        metavar="WHEN",
        help="only jobs submitted since: a duration back from now (2h, 7d) or a date "
        "(2026-05-01, 2026-05-01T14:00); with -a, finished ones too",
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
    p.add_argument(
        "--expand",
        action="store_true",
        help="every pending task of an array on its own line (by default: 12_[3-99%%8])",
    )
    p = sub.add_parser("show", parents=[common, listing], help="a job's full record and history")
    p.set_defaults(handler=OnPool(cmd_show))
    p.add_argument("job_id", type=job_id)
    p = sub.add_parser(
        "why", parents=[common, listing], help="why a job waits, and when it is expected to start"
    )
    p.set_defaults(handler=OnPool(_cmd_why))
    p.add_argument("job_id", type=job_id)
    p = sub.add_parser("logs", parents=[common], help="print a job's output (-f follows)")
    p.set_defaults(handler=OnPool(cmd_logs))
    p.add_argument("job_id", type=job_id)
    p.add_argument("-f", "--follow", action="store_true", help="follow until the job ends")
    p.add_argument(
        "-n",
        "--tail",
        type=_lines,
        metavar="N",
        help="only its last N lines (with -f: then what follows, as tail -n N -f)",
    )
    p.add_argument(
        "--rank",
        type=int,
        metavar="N",
        help="only rank N's output, of a --distributed job (default: all ranks, each line "
        "prefixed [rank N])",
    )
    p.add_argument(
        "--stderr",
        action="store_true",
        help="its stderr, of a job submitted with --separate-stderr (its log is then stdout)",
    )


def _lines(text: str) -> int:
    """argparse type of --tail: a whole number of lines, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_TAIL_LINES:
        raise argparse.ArgumentTypeError(f"not a number of lines (0 to {MAX_TAIL_LINES}): {text!r}")
    return value


def _cmd_why(client: Client, args: argparse.Namespace) -> int:
    """`gpupool why`: cli/explain.py's, imported when run (`queue` never needs it)."""
    from gpupool.cli.explain import cmd_why

    return cmd_why(client, args)


def cmd_queue(client: Client, args: argparse.Namespace) -> int:
    since = None
    if args.since is not None:
        from gpupool.cli.when import parse_since

        try:
            since = parse_since(args.since, time.time())
        except ValueError as exc:
            print(f"gpupool: {exc}", file=sys.stderr)
            return 2
    if args.priority:  # the same jobs, in the same order, as a table or as JSON
        from gpupool.cli.explain import print_priorities, queue_order

        pending = client.job_page(
            user=args.user, project=args.project, states=["PENDING"], order="queue"
        ).jobs
        if args.json:
            print_json([j.wire for j in queue_order(pending)])
        else:
            print_priorities(pending)
        return 0
    states = [s.strip().upper() for s in args.state.split(",") if s.strip()] if args.state else None
    named = args.jobs is not None  # jobs asked for by id: whatever their state, all of them
    limit = args.limit
    if limit is None and not args.all and not args.json and not named:
        limit = QUEUE_PAGE  # the table's first page: running, then the head of the queue
    if args.json:  # the daemon's lines as they came: not parsed into views to be dumped again
        found_lines = client.job_page_lines(
            args.all or named, args.user, project=args.project, states=states,
            limit=limit, order="queue", since=since, ids=args.jobs,
        )  # fmt: skip
        write_bytes(found_lines.as_json_list())
        return 0
    found = client.job_page(
        include_finished=args.all or named,
        user=args.user,
        project=args.project,
        states=states,
        limit=limit,
        order="queue",
        since=since,
        ids=args.jobs,
    )
    jobs = found.jobs
    now = time.time()
    rows = [
        (
            row.label,
            j.name,
            j.user,
            j.project,
            gpus_cell(j),
            j.state.value,
            clock_time(j.submit_time, now),
            clock_time(j.start_time, now),
            elapsed(j, now),
            limit_cell(j.time_limit_s),
            "-" if j.exit_code is None else j.exit_code,
            reason_cell(j),
        )
        for row in queue_rows(jobs, args.expand)
        for j in (row.job,)
    ]
    if not rows:
        if states or args.user or args.project or since is not None:
            print("No jobs match.")
        else:
            print(
                "No jobs." if args.all else "No active jobs (gpupool queue -a shows finished ones)."
            )
        return 0
    print_table(QUEUE_COLUMNS, rows, limits=QUEUE_LIMITS)
    rest = found.total - len(jobs)
    if rest > 0:
        print(more_line(found.counts, jobs, rest))
    return 0


def more_line(counts: Mapping[str, int], shown: Sequence[JobView], rest: int) -> str:
    """'... and 9,950 more (9,948 PENDING, 2 RUNNING): gpupool queue --limit N, or -a for
    every job' under a table that shows the first page only."""
    left = dict(counts)
    for job in shown:
        left[job.state.value] = left.get(job.state.value, 0) - 1
    parts = [f"{n:,} {state}" for state, n in sorted(left.items()) if n > 0]
    return (
        f"... and {rest:,} more ({', '.join(parts)}): "
        "gpupool queue --limit N, --state, or -a for every job"
    )


def _restarts(job: JobView) -> str:
    """'3 (1 after a failure, 2 by preemption or requeue)': its requeues, and the retries."""
    if job.failed_attempts == 0:
        return str(job.restart_count)
    others = job.restart_count - job.failed_attempts
    parts = [f"{job.failed_attempts} after a failure"]
    if others:
        parts.append(f"{others} by preemption or requeue")
    return f"{job.restart_count} ({', '.join(parts)})"


def _gpu_use(client: Client, job_id: int) -> str:
    """A job's sampled GPU use in one line; '-' before a sample (or from an older daemon)."""
    from gpupool.client import ApiError
    from gpupool.core.units import format_size

    try:
        usage = client.job_usage(job_id)
    except ApiError:
        return "-"
    if usage is None or usage.samples == 0:
        return "- (not sampled yet)"
    parts = [f"mean {usage.mean_util_pct or 0:.0f}%", f"p95 {usage.p95_util_pct or 0:.0f}%"]
    if usage.peak_memory_bytes is not None:
        parts.append(f"peak memory {format_size(usage.peak_memory_bytes)}")
    parts.append(f"{usage.used_gpu_hours:.2f} GPU-h used")
    parts.append(f"energy {usage.energy_j / 3.6e6:.3f} kWh")
    return ", ".join(parts) + (" (simulated)" if usage.simulated else "")


def cmd_show(client: Client, args: argparse.Namespace) -> int:
    """A job's record and history; an array's id: every task's, in index order (Slurm's
    `scontrol show job`), and with --json a list of them."""
    job = client.job(args.job_id)
    tasks = [job]
    if job.array_id == job.id:
        from gpupool.client.arrays import array_page

        tasks = list(array_page(client, job.id).jobs) or [job]
    if args.json:
        if job.array_id == job.id:
            print_json_list([t.wire for t in tasks])
        else:
            print_json(job.wire)
        return 0
    for i, task in enumerate(tasks):
        if i:
            print()
        _show(client, task)
    return 0


def _show(client: Client, job: JobView) -> None:
    from gpupool.cli.cpu_memory import cpu_memory_text

    res = job.resources
    task = "" if job.array_id is None else f"{job.array_id}_{job.array_index}, "
    cpu_memory = cpu_memory_text(job.cgroup_usage, job.state.terminal)
    lines = [
        ("Job", f"{job.id} ({task}{job.name})"),
        ("State", state_cell(job)),
        ("Why", job.why or "-"),
        ("Binding", _binding(job)),
        ("Expected start", _expected(job)),
        ("User / project", f"{job.user} / {job.project}"),
        ("Priority", f"{job.priority_name} ({job.priority})"),
        ("Command", " ".join(job.command)),
        ("Workdir", job.workdir),
        (
            "Requested",
            _gpus_requested(job)
            + (f" of {res.gpu_type}" if res.gpu_type else "")
            + (f", {res.cpus} CPUs" if res.cpus else "")
            + (f", {res.mem_bytes >> 20} MiB" if res.mem_bytes else ""),
        ),
        ("Time limit", _limit(job)),
        ("Node / GPUs", f"{job.node or '-'} / {','.join(map(str, job.gpus)) or '-'}"),
        ("Submitted", clock_time(job.submit_time)),
        ("Started", clock_time(job.start_time)),
        ("Ended", clock_time(job.end_time)),
        ("Elapsed", elapsed(job)),
        ("Exit code", "-" if job.exit_code is None else str(job.exit_code)),
        ("Restarts", _restarts(job)),
        ("GPU use", _gpu_use(client, job.id) if job.start_time is not None else "-"),
        # Only where its cgroup counted something (not a backend's job, nor one without).
        *([("CPU / memory", cpu_memory)] if cpu_memory is not None else []),
        ("Log", job.log_path),
    ]
    if job.signal is not None:  # --signal named (none: the checkpoint default applies)
        signal = _signal(job.signal)
        lines.insert([k for k, _ in lines].index("Time limit") + 1, ("Signal", signal))
    if job.env:
        lines.append(("Env", " ".join(f"{k}={v}" for k, v in sorted(job.env.items()))))
    if job.backend is not None:  # handed to a backend (docs/backends.md): which, and its run
        lines.append(("Backend", backend_line(job)))
    if job.container_engine is not None:  # --image: in which image, with which engine
        lines.append(("Container", f"{job.image or '(hidden)'} ({job.container_engine})"))
    if job.hidden:  # not yours: the pool sent no command, workdir, env or log path
        hidden = f"(hidden: only {job.user}, an admin of project {job.project} or a pool admin)"
        lines = [(k, hidden if k in ("Command", "Workdir", "Log") else v) for k, v in lines]
    width = max(len(k) for k, _ in lines)
    for key, value in lines:
        print(f"{key:<{width}}  {shown(value)}")  # free text from the store: escaped, cut
    print("\nHistory:")  # each state change, with its cause (the dashboard's "history")
    for e in job.events:
        frm = e.frm.value if e.frm else "(new)"
        print(f"  {clock_time(e.time)}  {frm:>9} -> {e.to.value:<9}  {shown(e.cause)}")


def _binding(job: JobView) -> str:
    from gpupool.cli.explain import binding_text

    return binding_text(job.wait) or "-"


def _expected(job: JobView) -> str:
    if job.state is not JobState.PENDING:
        return "-"
    from gpupool.cli.explain import estimate_text

    return estimate_text(job, time.time())


def _gpus_requested(job: JobView) -> str:
    """ "2 GPUs", "0.5 GPU (shared)", "0.25 GPU (20GiB of GPU memory, shared)": the count the
    pool uses everywhere (the API's gpu_count), with what a shared GPU was asked for by."""
    res = job.resources
    count = float(job.gpu_count)
    text = f"{count:g} GPU{'' if count == 1 or not count.is_integer() else 's'}"
    if job.nodes > 1:  # a backend's job over several nodes: the same GPUs on each
        return f"{text} ({res.gpus} per node on {job.nodes} nodes)"
    if res.gpu_memory_bytes:
        from gpupool.core.units import format_size

        return f"{text} ({format_size(res.gpu_memory_bytes)} of GPU memory, shared)"
    return f"{text} (shared)" if res.gpu_fraction is not None else text


def _signal(asked: str) -> str:
    """`--signal USR1@120` as `show` says it: "SIGUSR1 120 s before the time limit"."""
    if asked == "none":
        return "none (not even the checkpoint default)"
    name, _, before = asked.partition("@")
    signal = name if name.isdigit() else f"SIG{name}"
    return f"{signal} {before} s before the time limit"


def _limit(job: JobView) -> str:
    from gpupool.core.units import format_duration

    return format_duration(job.time_limit_s) if job.time_limit_s else "none"


def stream_log(
    client: Client,
    job_id: int,
    follow: bool,
    out: BinaryIO | None = None,
    rank: int | None = None,
    tail: int | None = None,
    stderr: bool = False,
) -> JobState | None:
    """Print the log from the start (with `tail`, its last `tail` lines); with follow, until
    the job ends. Returns the final state.

    A job that has not started has no output: with follow, say once (on stderr) that the
    output comes when it starts; without, say that it is pending."""
    sink = out or sys.stdout.buffer
    offset, said_pending = 0, False
    while True:
        chunk = client.log(job_id, offset, rank, tail=tail, stderr=stderr)
        offset, state, tail = chunk.offset, chunk.state, None
        if chunk.data:
            sink.write(chunk.data)
            sink.flush()
            continue  # drain before sleeping
        if state is JobState.PENDING and offset == 0 and not said_pending:
            said_pending = True
            if follow:
                print(
                    f"job {job_id} is pending: its output follows when it starts "
                    f"(Ctrl-C detaches; gpupool why {job_id})",
                    file=sys.stderr,
                )
            else:
                print(
                    f"job {job_id} is pending: no output yet "
                    f"(gpupool logs -f {job_id} waits for it to start)",
                    file=sys.stderr,
                )
                return state
        if not follow or (state is not None and state.terminal):
            # One last read: the job may have written its last lines as it ended.
            chunk = client.log(job_id, offset, rank, stderr=stderr)
            if chunk.data:
                sink.write(chunk.data)
                sink.flush()
            return chunk.state
        time.sleep(0.2)


def detach_note(client: Client, job_id: int, what: str = "detached") -> str:
    """What Ctrl-C left behind: the job is not cancelled, and where it stands now (asked
    with a short timeout: a user who pressed Ctrl-C is not kept waiting)."""
    timeout, client.timeout = client.timeout, min(client.timeout, 2.0)
    try:
        state = client.job(job_id).state
    except Exception:  # the note must not fail: the daemon may be gone
        return f"({what}; job {job_id} is not cancelled: gpupool show {job_id})"
    finally:
        client.timeout = timeout
    if state is JobState.PENDING:
        return f"({what}; job {job_id} stays queued (pending): gpupool why {job_id})"
    if state is JobState.RUNNING:
        return f"({what}; job {job_id} keeps running: gpupool logs -f {job_id})"
    return f"({what}; job {job_id} is {state.value})"


def cmd_logs(client: Client, args: argparse.Namespace) -> int:
    try:
        stream_log(
            client, args.job_id, args.follow, rank=args.rank, tail=args.tail, stderr=args.stderr
        )
    except KeyboardInterrupt:
        print(f"\n{detach_note(client, args.job_id)}", file=sys.stderr)
        return 130
    return 0


def wait_for(client: Client, job_id: int) -> JobView:
    delay = 0.05
    while True:
        job = client.job(job_id)
        if job.state.terminal:
            return job
        time.sleep(delay)
        delay = min(delay * 2, 1.0)


def exit_status(job: JobView) -> int:
    """What `wait` and `submit --wait` exit with: 0 only for SUCCEEDED, a failed job's own
    code, gpupool's own code for every other end (cli/exit_codes.py)."""
    from gpupool.cli.exit_codes import exit_code_of

    return exit_code_of(job.state, job.exit_code, job.reason)


def final_line(job: JobView, task: str | None = None) -> str:
    """'job 3 SUCCEEDED (exit 0)'; 'job 4 CANCELLED before it started'; never 'exit None'.
    `task`: an array task's name, `job 5 (4_1) FAILED (exit 3)`."""
    head = f"job {job.id}{'' if task is None else f' ({task})'} {job.state.value}"
    if job.exit_code is not None:
        return f"{head} (exit {job.exit_code})"
    if not job.start_time:
        return f"{head} before it started"
    return f"{head} (no exit code{': ' + job.reason if job.reason else ''})"
