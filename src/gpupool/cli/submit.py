"""`gpupool submit`: from flags (`-- cmd args`) or a YAML file, with --wait and --parsable."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from gpupool.cli.jobs import exit_status, stream_log, wait_for
from gpupool.client import Client
from gpupool.spec.flags import SPEC_KEYS

# Every spec key is also a flag of the same name (gpu_type: --gpu-type); command and env
# come from `-- CMD` and repeated --env instead.
FLAG_FIELDS = tuple(k for k in SPEC_KEYS if k not in ("command", "env"))


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpus", type=str, help="number of whole GPUs (default 0)")
    p.add_argument("--gpu-type", help="GPU model, e.g. A100 or A100-80GB")
    p.add_argument(
        "--gpu-memory",
        help="share one GPU: this much of its memory, e.g. 20GB (or --gpus 0.5 for half of it)",
    )
    p.add_argument(
        "--preemptible",
        action="store_const",
        const=True,
        default=None,
        help="may be stopped and requeued to give GPUs back; lets a job borrow "
        "GPUs above its project's quota (default for all but interactive jobs)",
    )
    p.add_argument(
        "--no-preemptible",
        dest="preemptible",
        action="store_const",
        const=False,
        help="never preempt this job (it then runs only within its quota)",
    )
    p.add_argument("--cpus", type=str, help="CPU cores")
    p.add_argument("--mem", help="host memory, e.g. 32GB")
    p.add_argument("--time", help="time limit, e.g. 2h, 30m, 1-12:00:00")
    p.add_argument(
        "--begin",
        help="start no earlier than, e.g. 22:00, 2026-11-23T02:00, "
        "now+1h, midnight (held until then, reason BeginTime)",
    )
    p.add_argument("--name", help="job name (default: the command)")
    p.add_argument("--project", help="project (team) to charge")
    p.add_argument("--priority", help="low, normal, high, interactive, or 0-1000")
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="K=V",
        help="extra environment variable (repeatable)",
    )
    p.add_argument("--workdir", help="working directory (default: where you submit)")
    p.add_argument("--grace", help="SIGTERM-to-SIGKILL grace on cancel/time limit (default 30s)")
    p.add_argument(
        "--wait",
        action="store_true",
        help="stream the log and exit with the job's exit code (Ctrl-C detaches)",
    )
    p.add_argument("--parsable", action="store_true", help="print only the job id")
    p.add_argument(
        "command", nargs=argparse.REMAINDER, help="job.yaml, or -- followed by the command to run"
    )


def _split_command(rest: list[str]) -> tuple[str | None, list[str]]:
    if rest and rest[0] == "--":
        rest = rest[1:]
    if len(rest) == 1 and rest[0].endswith((".yaml", ".yml")) and Path(rest[0]).is_file():
        return rest[0], []
    return None, rest


def build_wire_spec(args: argparse.Namespace) -> dict[str, Any]:
    from gpupool.spec import (
        build_spec,
        drop_overridden_lines,
        load_spec_file,
        merge_flags,
        parse_env_assignments,
        spec_to_wire,
    )

    spec_file, command = _split_command(list(args.command))
    data: dict[str, Any] = {}
    lines: dict[str, int] = {}
    if spec_file:
        data, lines = load_spec_file(spec_file)
    flags: dict[str, Any] = {f: getattr(args, f, None) for f in FLAG_FIELDS}
    for numeric in ("gpus", "cpus"):
        flags[numeric] = _number(flags[numeric])
    if command:
        flags["command"] = command
    if args.env:
        flags["env"] = parse_env_assignments(args.env)
    merged = merge_flags(data, flags)
    lines = drop_overridden_lines(lines, flags)  # a bad flag is not the file's fault
    if "command" not in merged:
        from gpupool.spec import FieldError, SpecError

        raise SpecError(
            [
                FieldError(
                    "command",
                    "no command given: use `gpupool submit "
                    "[flags] -- CMD ARGS...` or a job.yaml with `command:`",
                )
            ],
            spec_file,
        )
    spec = build_spec(
        merged,
        lines=lines,
        source=spec_file,
        base_env=dict(os.environ),
        default_workdir=os.getcwd(),
    )
    wire = spec_to_wire(spec)
    if merged.get("project") is None:
        wire["project"] = None  # not given: the daemon picks the user's default project
    return wire


def _number(value: str | None) -> Any:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return value  # the spec layer names the field in its error


def cmd_submit(client: Client, args: argparse.Namespace) -> int:
    from gpupool.spec import SpecError

    try:
        wire = build_wire_spec(args)
    except SpecError as exc:
        print(f"gpupool: invalid job spec:\n{exc}", file=sys.stderr)
        return 2
    job = client.submit(wire, getpass.getuser(), token=uuid.uuid4().hex)
    job_id = job["id"]
    if args.parsable:
        print(job_id)
    else:
        print(f"Submitted job {job_id}")
    sys.stdout.flush()
    if not args.wait:
        return 0
    try:
        stream_log(client, job_id, follow=True)
        final = wait_for(client, job_id)
    except KeyboardInterrupt:
        print(
            f"\n(detached; job {job_id} keeps running: gpupool logs -f {job_id})", file=sys.stderr
        )
        return 130
    print(f"job {job_id} {final['state']} (exit {final['exit_code']})", file=sys.stderr)
    return exit_status(final)
