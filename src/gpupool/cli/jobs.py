"""queue, show, logs, cancel, wait: looking at and steering jobs."""

from __future__ import annotations

import argparse
import getpass
import sys
import time
from typing import Any

from gpupool.cli.render import (
    clock_time,
    elapsed,
    gpus_cell,
    print_json,
    print_json_list,
    print_table,
    reason_cell,
    state_cell,
)
from gpupool.client import Client

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED", "TIMEOUT"}
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
    "EXIT",
    "REASON",
)


def cmd_queue(client: Client, args: argparse.Namespace) -> int:
    if args.priority:  # the same jobs, in the same order, as a table or as JSON
        from gpupool.cli.explain import print_priorities, queue_order

        pending = client.job_page(
            user=args.user, project=args.project, states=["PENDING"], order="queue"
        )["jobs"]
        if args.json:
            print_json(queue_order(pending))
        else:
            print_priorities(pending)
        return 0
    states = [s.strip().upper() for s in args.state.split(",") if s.strip()] if args.state else None
    limit = args.limit
    if limit is None and not args.all and not args.json:
        limit = QUEUE_PAGE  # the table's first page: running, then the head of the queue
    found = client.job_page(
        include_finished=args.all,
        user=args.user,
        project=args.project,
        states=states,
        limit=limit,
        order="queue",
    )
    jobs = found["jobs"]
    if args.json:
        print_json_list(jobs)
        return 0
    now = time.time()
    rows = [
        (
            j["id"],
            j["name"],
            j["user"],
            j["project"],
            gpus_cell(j),
            j["state"],
            clock_time(j["submit_time"], now),
            clock_time(j["start_time"], now),
            elapsed(j, now),
            "-" if j["exit_code"] is None else j["exit_code"],
            reason_cell(j),
        )
        for j in jobs
    ]
    if not rows:
        if states or args.user or args.project:
            print("No jobs match.")
        else:
            print(
                "No jobs." if args.all else "No active jobs (gpupool queue -a shows finished ones)."
            )
        return 0
    print_table(QUEUE_COLUMNS, rows, limits=QUEUE_LIMITS)
    rest = found["total"] - len(jobs)
    if rest > 0:
        print(more_line(found["counts"], jobs, rest))
    return 0


def more_line(counts: dict[str, int], shown: list[dict[str, Any]], rest: int) -> str:
    """'... and 9,950 more (9,948 PENDING, 2 RUNNING): gpupool queue --limit N, or -a for
    every job' under a table that shows the first page only."""
    left = dict(counts)
    for job in shown:
        left[job["state"]] = left.get(job["state"], 0) - 1
    parts = [f"{n:,} {state}" for state, n in sorted(left.items()) if n > 0]
    return (
        f"... and {rest:,} more ({', '.join(parts)}): "
        "gpupool queue --limit N, --state, or -a for every job"
    )


def cmd_show(client: Client, args: argparse.Namespace) -> int:
    job = client.job(args.job_id)
    if args.json:
        print_json(job)
        return 0
    res = job["resources"]
    lines = [
        ("Job", f"{job['id']} ({job['name']})"),
        ("State", state_cell(job)),
        ("Why", job["why"] or "-"),
        ("Binding", _binding(job)),
        ("Expected start", _expected(job)),
        ("User / project", f"{job['user']} / {job['project']}"),
        ("Priority", f"{job['priority_name']} ({job['priority']})"),
        ("Command", " ".join(job["command"])),
        ("Workdir", job["workdir"]),
        (
            "Requested",
            _gpus_requested(job)
            + (f" of {res['gpu_type']}" if res["gpu_type"] else "")
            + (f", {res['cpus']} CPUs" if res["cpus"] else "")
            + (f", {res['mem_bytes'] >> 20} MiB" if res["mem_bytes"] else ""),
        ),
        ("Time limit", _limit(job)),
        ("Node / GPUs", f"{job['node'] or '-'} / {','.join(map(str, job['gpus'])) or '-'}"),
        ("Submitted", clock_time(job["submit_time"])),
        ("Started", clock_time(job["start_time"])),
        ("Ended", clock_time(job["end_time"])),
        ("Elapsed", elapsed(job)),
        ("Exit code", "-" if job["exit_code"] is None else str(job["exit_code"])),
        ("Restarts", str(job["restart_count"])),
        ("Log", job["log_path"]),
    ]
    if job["env"]:
        lines.append(("Env", " ".join(f"{k}={v}" for k, v in sorted(job["env"].items()))))
    width = max(len(k) for k, _ in lines)
    for key, value in lines:
        print(f"{key:<{width}}  {value}")
    print("\nStory:")
    for e in job.get("events", []):
        frm = e["from"] or "(new)"
        print(f"  {clock_time(e['time'])}  {frm:>9} -> {e['to']:<9}  {e['cause']}")
    return 0


def _binding(job: dict[str, Any]) -> str:
    from gpupool.cli.explain import binding_text

    return binding_text(job.get("wait")) or "-"


def _expected(job: dict[str, Any]) -> str:
    if job["state"] != "PENDING":
        return "-"
    from gpupool.cli.explain import estimate_text

    return estimate_text(job, time.time())


def _gpus_requested(job: dict[str, Any]) -> str:
    """ "2 GPUs", "0.5 GPU (shared)", "0.25 GPU (20GiB of GPU memory, shared)": the count the
    pool uses everywhere (the API's gpu_count), with what a shared GPU was asked for by."""
    res = job["resources"]
    count = float(job.get("gpu_count", res["gpus"]))
    text = f"{count:g} GPU{'' if count == 1 or not count.is_integer() else 's'}"
    if res.get("gpu_memory_bytes"):
        from gpupool.core.units import format_size

        return f"{text} ({format_size(res['gpu_memory_bytes'])} of GPU memory, shared)"
    return f"{text} (shared)" if res.get("gpu_fraction") is not None else text


def _limit(job: dict[str, Any]) -> str:
    from gpupool.core.units import format_duration

    return format_duration(job["time_limit_s"]) if job["time_limit_s"] else "none"


def stream_log(client: Client, job_id: int, follow: bool, out: Any = None) -> str:
    """Print the log from the start; with follow, until the job ends. Returns the final state.

    A job that has not started has no output: with follow, say once (on stderr) that the
    output comes when it starts; without, say that it is pending."""
    out = out or sys.stdout.buffer
    offset, state, said_pending = 0, "", False
    while True:
        data, offset, state = client.log(job_id, offset)
        if data:
            out.write(data)
            out.flush()
            continue  # drain before sleeping
        if state == "PENDING" and offset == 0 and not said_pending:
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
        if not follow or state in TERMINAL:
            # One last read: the job may have written its last lines as it ended.
            data, offset, state = client.log(job_id, offset)
            if data:
                out.write(data)
                out.flush()
            return state
        time.sleep(0.2)


def detach_note(client: Client, job_id: int, what: str = "detached") -> str:
    """What Ctrl-C left behind: the job is not cancelled, and where it stands now (asked
    with a short timeout: a user who pressed Ctrl-C is not kept waiting)."""
    timeout, client.timeout = client.timeout, min(client.timeout, 2.0)
    try:
        state = client.job(job_id)["state"]
    except Exception:  # the note must not fail: the daemon may be gone
        return f"({what}; job {job_id} is not cancelled: gpupool show {job_id})"
    finally:
        client.timeout = timeout
    if state == "PENDING":
        return f"({what}; job {job_id} stays queued (pending): gpupool why {job_id})"
    if state == "RUNNING":
        return f"({what}; job {job_id} keeps running: gpupool logs -f {job_id})"
    return f"({what}; job {job_id} is {state})"


def cmd_logs(client: Client, args: argparse.Namespace) -> int:
    try:
        stream_log(client, args.job_id, args.follow)
    except KeyboardInterrupt:
        print(f"\n{detach_note(client, args.job_id)}", file=sys.stderr)
        return 130
    return 0


def wait_for(client: Client, job_id: int) -> dict[str, Any]:
    delay = 0.05
    while True:
        job = client.job(job_id)
        if job["state"] in TERMINAL:
            return job
        time.sleep(delay)
        delay = min(delay * 2, 1.0)


def exit_status(job: dict[str, Any]) -> int:
    """The job's own exit code, as `srun` does; 1 if it ended without one (cancelled early)."""
    if job["exit_code"] is not None:
        return int(job["exit_code"])
    return 0 if job["state"] == "SUCCEEDED" else 1


def final_line(job: dict[str, Any]) -> str:
    """'job 3 SUCCEEDED (exit 0)'; 'job 4 CANCELLED before it started'; never 'exit None'."""
    head = f"job {job['id']} {job['state']}"
    if job["exit_code"] is not None:
        return f"{head} (exit {job['exit_code']})"
    if not job.get("start_time"):
        return f"{head} before it started"
    return f"{head} (no exit code{': ' + job['reason'] if job.get('reason') else ''})"


def cmd_wait(client: Client, args: argparse.Namespace) -> int:
    try:
        job = wait_for(client, args.job_id)
    except KeyboardInterrupt:
        print(f"\n{detach_note(client, args.job_id, 'stopped waiting')}", file=sys.stderr)
        return 130
    if not args.quiet:
        print(final_line(job), file=sys.stderr)
    return exit_status(job)


def cmd_cancel(client: Client, args: argparse.Namespace) -> int:
    me = getpass.getuser()
    ids = list(args.job_ids)
    if args.mine:
        ids += [j["id"] for j in client.jobs(user=me)]
        if not ids:
            print("nothing to cancel: you have no active jobs", file=sys.stderr)
            return 0
    if not ids:
        print("gpupool: nothing to cancel: give job ids or --mine", file=sys.stderr)
        return 2
    for job_id in ids:
        job = client.cancel(job_id, me)
        verb = "cancelling" if job["state"] == "RUNNING" else job["state"].lower()
        print(f"job {job_id}: {verb}")
    return 0
