"""`gpupool submit`: from flags (`-- cmd args`) or a YAML file, with --wait and --parsable.

Which words are a spec file and which a command (README, `gpupool submit --help`):
- after `--`, everything is the command, whatever it is called (`submit -- ./run.yaml` runs it);
- otherwise the first word that is not a flag is a job spec file if it ends in .yaml or .yml,
  or names an existing file that is not executable; flags may stand before or after it, and a
  spec file that does not exist is an error (exit 2), never a command;
- otherwise that word is the command and every word after it is the command's
  (`submit ./train.sh --lr 3e-4`, as srun and docker run read them).
"""

from __future__ import annotations

import argparse
import os
import sys

from gpupool.cli.commands import OnPool, Parents, Subparsers
from gpupool.client import Client, JsonObject
from gpupool.spec.flags import SPEC_KEYS
from gpupool.spec.submitter import absolute_workdir, current_umask, submitter_environment

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from gpupool.spec import SpecError

SPEC_RULE = """which words are what:
  gpupool submit [flags] -- CMD ARGS...    after --, everything is the command
  gpupool submit [flags] job.yaml [flags]  a job spec file: the first word that is not a
                                           flag, if it ends in .yaml/.yml or names an
                                           existing file that is not executable (flags
                                           override the file; a missing file is an error)
  gpupool submit [flags] CMD ARGS...       otherwise the first word starts the command and
                                           all words after it are the command's
"""

# Every spec key is also a flag of the same name (gpu_type: --gpu-type); command and env
# come from `-- CMD` and repeated --env instead.
FLAG_FIELDS = tuple(k for k in SPEC_KEYS if k not in ("command", "env"))
# Why the daemon refused a job it understood (exit 2, "job refused: ...").
SUBMIT_REFUSALS = frozenset(
    {
        "unsatisfiable",
        "quota_never_fits",
        "bad_workdir",
        "unknown_project",
        "not_a_member",
        "not_supported",
        "no_container_engine",
        "bad_command",
    }
)


def register(sub: Subparsers, parents: Parents) -> None:
    p = sub.add_parser(
        "submit",
        parents=[parents.common],
        help="queue a job (flags or job.yaml)",
        description="gpupool submit [flags] -- CMD ARGS...   or   gpupool submit job.yaml [flags]",
        epilog=SPEC_RULE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command = OnPool(cmd_submit, prepare=take_spec_file, refusals=SUBMIT_REFUSALS)
    p.set_defaults(handler=command)
    _add_arguments(p)


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--gpus",
        type=str,
        help="GPUs: a whole number, or a fraction of one GPU, e.g. 0.5 (default 0)",
    )
    p.add_argument("--gpu-type", help="GPU model, e.g. A100 or A100-80GB")
    p.add_argument(
        "--gpu-memory",
        help="share one GPU: this much of its memory, e.g. 20GiB or 20GB (10^9 bytes; "
        "or --gpus 0.5 for half of it)",
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
    p.add_argument(
        "--workdir",
        help="working directory; a relative one is taken from where you submit "
        "(default: where you submit)",
    )
    p.add_argument("--grace", help="SIGTERM-to-SIGKILL grace on cancel/time limit (default 30s)")
    p.add_argument(
        "--signal",
        metavar="SIG@SECONDS",
        help="send SIG to every process of the job SECONDS before its time limit, as sbatch "
        "--signal: USR1@120, TERM@2m (B:USR1@120 too); default: USR1@120 if the job has "
        "written to its GPUPOOL_CHECKPOINT_DIR by then; none: no signal",
    )
    p.add_argument(
        "--retry",
        metavar="N",
        help="run a failed attempt again, up to N times (GPUPOOL_RESTART_COUNT counts them)",
    )
    p.add_argument(
        "--retry-on-exit",
        metavar="CODES",
        help="retry only these exit codes, e.g. 33,137 (default: any non-zero code)",
    )
    p.add_argument(
        "--after",
        action="append",
        metavar="ID[:ok|:any]",
        help="start after these jobs ended: ok (default) = succeeded, any = in any way; "
        "comma-separated or repeated (reason Dependency meanwhile)",
    )
    p.add_argument(
        "--array",
        metavar="INDICES[%K]",
        help="an array of jobs, one per index: 0-99, 1,3,5-7; %%K: at most K running at "
        "once (GPUPOOL_ARRAY_INDEX in each)",
    )
    p.add_argument(
        "--distributed",
        metavar="LAUNCHER",
        help="run one process per GPU as a gang: torchrun (RANK, LOCAL_RANK, WORLD_SIZE, "
        "MASTER_ADDR/PORT set for each; docs/distributed.md)",
    )
    p.add_argument(
        "--hold",
        action="store_const",
        const=True,
        default=None,
        help="queue it held: it starts only after `gpupool release ID` (reason JobHeldUser)",
    )
    p.add_argument(
        "--separate-stderr",
        action="store_const",
        const=True,
        default=None,
        help="keep its stderr in a log of its own (`gpupool logs --stderr ID`; by default "
        "stdout and stderr share one log, in order)",
    )
    p.add_argument(
        "--backend",
        metavar="NAME",
        help="run it on this backend of the pool (Slurm, Ray, Kubernetes: `gpupool "
        "backends` lists them), `local` for the pool's own machine, or `any`: wherever "
        "the pool would start it first (default: its project's backend, else local; "
        "docs/backends.md)",
    )
    p.add_argument(
        "--nodes",
        metavar="N",
        help="nodes it spans, a backend's job only; --gpus, --cpus and --mem are per node "
        "(default 1)",
    )
    p.add_argument(
        "--image",
        help="run the command in a container of this image, with only its GPUs visible "
        "(docs/containers.md)",
    )
    p.add_argument(
        "--container-engine",
        metavar="ENGINE",
        help="podman, docker or apptainer (default: the first installed on the pool's "
        "machine, in that order)",
    )
    p.add_argument(
        "--wait",
        action="store_true",
        help="stream the log and exit with the job's exit code (Ctrl-C detaches)",
    )
    p.add_argument("--parsable", action="store_true", help="print only the job id")
    p.add_argument(
        "--token",
        help="idempotency token: a submission with a token already used returns that job "
        "instead of queueing another (default: a new random token)",
    )
    p.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        help="job.yaml, or the command to run (after --; see below)",
    )
    p.set_defaults(submit_parser=p, spec_file=None)


def is_spec_file(word: str) -> bool:
    """The rule for a first word without `--` before it (module docstring)."""
    if word.lower().endswith((".yaml", ".yml")):
        return True
    return os.path.isfile(word) and not os.access(word, os.X_OK)


def take_spec_file(args: argparse.Namespace) -> None:
    """Split `args.command` into the spec file (`args.spec_file`) and the command, parsing
    the flags that follow a spec file as flags. A usage error exits 2 (argparse)."""
    words = list(args.command)
    if words and words[0] == "--":
        args.command = words[1:]
        return
    if not words or not is_spec_file(words[0]):
        return  # the command and its arguments, or nothing
    parser: argparse.ArgumentParser = args.submit_parser
    args.spec_file, args.command = words[0], []
    parser.parse_args(words[1:], namespace=args)  # later flags win, --env adds up
    rest = list(args.command)
    if rest and rest[0] == "--":
        args.command = rest[1:]  # a command after -- replaces the file's
    elif rest:
        parser.error(
            f"unexpected {rest[0]!r} after the job spec {args.spec_file} "
            "(one spec file; a command goes after --)"
        )


def build_wire_spec(args: argparse.Namespace) -> JsonObject:
    from gpupool.spec import (
        build_wire,
        drop_overridden_lines,
        load_spec_file,
        merge_flags,
        parse_env_assignments,
    )

    spec_file, command = args.spec_file, list(args.command)
    data: dict[str, Any] = {}
    lines: dict[str, int] = {}
    if spec_file:
        data, lines = load_spec_file(spec_file)
    flags: dict[str, Any] = {f: getattr(args, f, None) for f in FLAG_FIELDS}
    for numeric in ("gpus", "cpus", "nodes"):
        flags[numeric] = _number(flags[numeric])
    if flags["after"] is not None:  # repeated --after adds up
        flags["after"] = ",".join(flags["after"])
    if command:
        flags["command"] = command
    if args.env:
        flags["env"] = parse_env_assignments(args.env)
    merged = merge_flags(data, flags)
    merged = absolute_workdir(merged)
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
    wire = build_wire(
        merged,
        lines=lines,
        source=spec_file,
        base_env=submitter_environment(),
        default_workdir=os.getcwd(),
        umask=current_umask(),
    )
    if merged.get("project") is None:
        wire["project"] = None  # not given: the daemon picks the user's default project
    return wire


def _number(value: str | None) -> int | float | str | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return value  # the spec layer names the field in its error


class BadSubmitArgs(ValueError):
    """A submit argument that is wrong before any spec is read: one line, exit 2."""


def _check_args(args: argparse.Namespace) -> None:
    if args.spec_file and not os.path.isfile(args.spec_file):
        what = "no such file" if not os.path.exists(args.spec_file) else "not a file"
        raise BadSubmitArgs(
            f"{what}: {args.spec_file} (a first word ending in .yaml or .yml is a job spec "
            "file; to run a command of that name, put it after --)"
        )
    token = args.token
    if token is not None and not (0 < len(token) <= 128 and token.isprintable()):
        raise BadSubmitArgs(f"--token: must be 1 to 128 printable characters, got {token!r}")
    if token is not None and " " in token:
        raise BadSubmitArgs(f"--token: must not contain spaces, got {token!r}")


def _check_command(wire: JsonObject) -> None:
    """BadSubmitArgs when the job's command names a file that can never start, as this
    process sees it: it runs as the submitter, who the job runs as (spec/command_path.py).
    Not for a job in a container (its own filesystem) or sent to a backend (another
    machine's): those are found out where they run."""
    command, workdir = wire.get("command"), wire.get("workdir")
    if wire.get("image") is not None or wire.get("backend") is not None:
        return
    if not (isinstance(command, list) and command and isinstance(command[0], str)):
        return
    if not isinstance(workdir, str):
        return
    from gpupool.spec.command_path import unstartable

    waits = bool(wire.get("after"))
    problem = unstartable(command[0], workdir, waits_for_another=waits, as_submitter=True)
    if problem is not None:
        raise BadSubmitArgs(problem)


def cmd_submit(client: Client, args: argparse.Namespace) -> int:
    from gpupool.spec import SpecError

    try:
        _check_args(args)
        wire = build_wire_spec(args)
        _check_command(wire)
    except BadSubmitArgs as exc:
        print(f"gpupool: {exc}", file=sys.stderr)
        return 2
    except SpecError as exc:
        print(spec_error_text(exc, args.spec_file), file=sys.stderr)
        return 2
    # 128 random bits, as uuid4().hex gave, without importing uuid (~2 ms).
    job = client.submit_receipt(wire, token=args.token or os.urandom(16).hex())
    job_id = job.id
    if args.parsable:
        print(job_id)
    else:
        print(f"Submitted job {job_id} to project {job.project}")
    sys.stdout.flush()
    for warning in job.warnings:  # queued all the same (its backend cannot be reached now)
        print(f"gpupool: warning: {warning}", file=sys.stderr)
    if not args.wait:
        return 0
    from gpupool.cli.jobs import detach_note, exit_status, final_line, stream_log, wait_for

    try:
        stream_log(client, job_id, follow=True)
        final = wait_for(client, job_id)
    except KeyboardInterrupt:
        print(f"\n{detach_note(client, job_id)}", file=sys.stderr)
        return 130
    print(final_line(final), file=sys.stderr)
    return exit_status(final)


def spec_error_text(exc: SpecError, spec_file: str | None) -> str:
    """One line for one problem; a heading and one line per problem for several. A file
    read as a spec only because it is not executable gets a hint about --."""
    problems = str(exc).splitlines()
    if len(problems) == 1:
        text = f"gpupool: invalid job spec: {problems[0]}"
    else:
        text = f"gpupool: invalid job spec ({len(problems)} problems):\n" + "\n".join(problems)
    if spec_file and not spec_file.lower().endswith((".yaml", ".yml")):
        text += (
            f" ({spec_file} was read as a job spec because it is a file that is not "
            "executable; to run a command, put it after --)"
        )
    return text
