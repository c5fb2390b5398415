"""`gpupool project`: create, list, change and delete projects; set your default project.

Like Slurm's sacctmgr, but small. The pool decides who may (docs/security.md): pool admins
create, delete and change projects; a project's admins change its members and default time
limit; everyone sets their own default project, pool admins anyone's.
"""

from __future__ import annotations

import argparse
import functools
import sys
from typing import TYPE_CHECKING

from gpupool.cli.commands import OnPool, Parents, PoolHandler, Subparsers
from gpupool.cli.project_caps import (
    CAP_COLUMNS,
    CAP_FLAGS,
    add_cap_flags,
    cap_cells,
    cap_changes,
    cap_lines,
    cap_parts,
)
from gpupool.cli.render import print_json, print_table, printable
from gpupool.client import ApiError, Client, JsonObject, JsonValue

if TYPE_CHECKING:
    from gpupool.client.project_views import ProjectView

COLUMNS = (
    "NAME", "DEPARTMENT", "QUOTA", "LIMIT", *CAP_COLUMNS, "WEIGHT", "MEMBERS", "IN-USE",
    "PENDING", "PREEMPT-AFTER", "RECLAIM-AFTER", "IDLE POLICY",
)  # fmt: skip
# A minimum run time left to the pool's default (PolicyConfig.min_runtime_s for preemption,
# none for reclaim): the daemon's answer says None, shown as this.
POOL_DEFAULT = "-"
# API field -> the flag that sets it, for error messages in the user's terms.
FLAGS = {
    "quota": "--quota",
    "limit": "--limit",
    "weight": "--weight",
    "department": "--department",
    "members": "--members",
    "add_members": "--add-member",
    "remove_members": "--remove-member",
    "default_time_limit_s": "--default-time-limit",
    "idle_timeout_s": "--idle-timeout",
    "idle_threshold_pct": "--idle-threshold",
    "idle_action": "--idle-action",
    "preempt_min_runtime_s": "--preempt-min-runtime",
    "reclaim_min_runtime_s": "--reclaim-min-runtime",
    **CAP_FLAGS,
}
# The minimum run time flags: (option dest, API field, flag).
MIN_RUNTIME_FLAGS = (
    ("preempt_min_runtime", "preempt_min_runtime_s", "--preempt-min-runtime"),
    ("reclaim_min_runtime", "reclaim_min_runtime_s", "--reclaim-min-runtime"),
)


class BadFlag(ValueError):
    pass


def register(sub: Subparsers, parents: Parents) -> None:
    common, listing = parents.common, parents.listing
    p = sub.add_parser(
        "project",
        parents=[common],
        help="projects (teams): quotas, limits, members, your default project",
        description="Projects (teams): who may submit where, and their GPU quota, limit and "
        "weight. Pool admins create, delete and change projects; a project's admins (gpupool."
        "toml) change its members and default time limit; everyone sets their own default.",
    )
    verbs = p.add_subparsers(dest="project_verb", metavar="ACTION")
    verbs.required = True

    c = verbs.add_parser("create", parents=[common], help="create a project")
    c.set_defaults(handler=_command(cmd_create))
    c.add_argument("name")
    _value_flags(c, creating=True)
    c.add_argument("--members", metavar="U1,U2", help="who may submit (default: everyone)")

    ls = verbs.add_parser(
        "list", aliases=["ls"], parents=[common, listing], help="projects and their GPU use"
    )
    ls.set_defaults(handler=_command(cmd_list))

    sh = verbs.add_parser(
        "show", parents=[common, listing], help="one project: every setting and its GPU use"
    )
    sh.set_defaults(handler=_command(cmd_show))
    sh.add_argument("name")

    s = verbs.add_parser("set", parents=[common], help="change a project")
    s.set_defaults(handler=_command(cmd_set))
    s.add_argument("name")
    _value_flags(s, creating=False)
    s.add_argument("--no-limit", action="store_true", help="remove the limit")
    s.add_argument("--no-department", action="store_true", help="leave its department")
    s.add_argument(
        "--no-default-time-limit", action="store_true", help="remove the default time limit"
    )
    s.add_argument("--no-idle-timeout", action="store_true", help="switch the idle policy off")
    for dest, _, flag in MIN_RUNTIME_FLAGS:
        s.add_argument(
            f"--no-{flag[2:]}", dest=f"no_{dest}", action="store_true",
            help=f"back to the pool's default {flag[2:].replace('-', ' ')}",
        )  # fmt: skip
    s.add_argument("--members", metavar="U1,U2", help="replace the member list ('' = everyone)")
    s.add_argument("--add-member", action="append", default=[], metavar="USER")
    s.add_argument("--remove-member", action="append", default=[], metavar="USER")

    d = verbs.add_parser("delete", parents=[common], help="delete a project (no active jobs)")
    d.set_defaults(handler=_command(cmd_delete))
    d.add_argument("name")

    f = verbs.add_parser(
        "default", parents=[common], help="set (or show) the project your jobs go to by default"
    )
    f.add_argument("project", nargs="?", help="omit to show the current default")
    f.set_defaults(handler=_command(cmd_default))
    f.add_argument("--user", help="for this user instead of you (setting it: pool admins only)")


def _value_flags(p: argparse.ArgumentParser, creating: bool) -> None:
    def default(text: str) -> str:
        return f" (default {text})" if creating else ""

    p.add_argument("--quota", metavar="GPUS", help="GPUs guaranteed" + default("0"))
    p.add_argument("--limit", metavar="GPUS", help="most GPUs its jobs may hold" + default("none"))
    p.add_argument("--weight", metavar="W", help="share of idle GPUs above quota" + default("1"))
    p.add_argument("--department", help="department the project belongs to")
    p.add_argument(
        "--default-time-limit",
        metavar="DURATION",
        help="assumed run time of its jobs without --time, e.g. 12h",
    )
    p.add_argument(
        "--idle-timeout",
        metavar="DURATION",
        help="a job whose GPUs stay below --idle-threshold this long is idle, e.g. 30m",
    )
    p.add_argument(
        "--idle-threshold",
        metavar="PCT",
        help="GPU utilization under which a job is idle" + default("5"),
    )
    p.add_argument(
        "--idle-action",
        choices=("notify", "stop", "requeue"),
        help="what happens to an idle job (default: stop interactive jobs, notify the others)",
    )
    p.add_argument(
        "--preempt-min-runtime",
        metavar="DURATION",
        help="a job of the project runs this long before a higher priority class may preempt "
        "it, e.g. 30m; 0: at once" + default("the pool's minimum run time"),
    )
    p.add_argument(
        "--reclaim-min-runtime",
        metavar="DURATION",
        help="a job of the project runs this long before another project may reclaim its "
        "GPUs, e.g. 1h" + default("0: at once"),
    )
    add_cap_flags(p, creating)  # --max-gpus/jobs-per-user, --cpu/mem-limit (and --no-...)


def _number(flag: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise BadFlag(f"{flag}: must be a number of GPUs, got {text!r}") from None


def _members(text: str) -> list[JsonValue]:
    return [m.strip() for m in text.split(",") if m.strip()]


def _changes(args: argparse.Namespace) -> JsonObject:
    """The fields the flags set (only those given)."""
    out: JsonObject = {}
    if args.quota is not None:
        out["quota"] = _number("--quota", args.quota)
    if args.limit is not None:
        out["limit"] = _number("--limit", args.limit)
    if args.weight is not None:
        out["weight"] = _number("--weight", args.weight)
    if args.department is not None:
        out["department"] = args.department
    if args.default_time_limit is not None:
        from gpupool.core.units import parse_duration

        try:
            out["default_time_limit_s"] = parse_duration(args.default_time_limit)
        except ValueError as exc:
            raise BadFlag(f"--default-time-limit: {exc}") from None
    if args.members is not None:
        out["members"] = _members(args.members)
    for flag, key in (("no_limit", "limit"), ("no_department", "department")):
        if getattr(args, flag, False):
            if key in out:
                raise BadFlag(f"--{key} and --{flag.replace('_', '-')} contradict each other")
            out[key] = None
    if getattr(args, "no_default_time_limit", False):
        out["default_time_limit_s"] = None
    if args.idle_timeout is not None:
        from gpupool.core.units import parse_duration

        try:
            out["idle_timeout_s"] = parse_duration(args.idle_timeout)
        except ValueError as exc:
            raise BadFlag(f"--idle-timeout: {exc}") from None
    if getattr(args, "no_idle_timeout", False):
        out["idle_timeout_s"] = None
    if args.idle_threshold is not None:
        try:
            out["idle_threshold_pct"] = float(args.idle_threshold.rstrip("%"))
        except ValueError:
            raise BadFlag(
                f"--idle-threshold: must be a percentage, got {args.idle_threshold!r}"
            ) from None
    if args.idle_action is not None:
        out["idle_action"] = args.idle_action
    out.update(_min_runtime_changes(args))
    try:
        out.update(cap_changes(args))
    except ValueError as exc:
        raise BadFlag(str(exc)) from None
    if getattr(args, "add_member", None):
        out["add_members"] = [u for text in args.add_member for u in _members(text)]
    if getattr(args, "remove_member", None):
        out["remove_members"] = [u for text in args.remove_member for u in _members(text)]
    return out


def _min_runtime_changes(args: argparse.Namespace) -> JsonObject:
    """--preempt-min-runtime / --reclaim-min-runtime (a duration, 0 included) and their
    --no-... on `set` (None: back to the pool's default)."""
    from gpupool.core.project import parse_min_runtime

    out: JsonObject = {}
    for dest, key, flag in MIN_RUNTIME_FLAGS:
        text = getattr(args, dest)
        cleared = getattr(args, f"no_{dest}", False)
        if text is not None and cleared:
            raise BadFlag(f"{flag} and --no-{flag[2:]} contradict each other")
        if cleared:
            out[key] = None
        elif text is not None:
            try:
                out[key] = parse_min_runtime(text)
            except ValueError as exc:
                raise BadFlag(f"{flag}: {exc}") from None
    return out


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def describe(p: ProjectView) -> str:
    """'quota 4, limit 8, max 2 GPUs per user, weight 2, department research, members
    alice,bob'."""
    parts = [
        f"quota {_fmt(p.quota)}",
        f"limit {'none' if p.limit is None else _fmt(p.limit)}",
        *cap_parts(p),
    ]
    parts.append(f"weight {_fmt(p.weight)}")
    if p.department:
        parts.append(f"department {p.department}")
    parts.append(f"members {','.join(p.members)}" if p.members else "open to every user")
    if p.default_time_limit_s:
        from gpupool.core.units import format_duration

        parts.append(f"default time limit {format_duration(p.default_time_limit_s)}")
    if p.idle_timeout_s:
        parts.append(f"idle: {_idle_policy(p)}")
    if p.preempt_min_runtime_s is not None:
        parts.append(f"preempt after {_min_runtime(p.preempt_min_runtime_s)}")
    if p.reclaim_min_runtime_s is not None:
        parts.append(f"reclaim after {_min_runtime(p.reclaim_min_runtime_s)}")
    return ", ".join(parts)


def _min_runtime(value: float | None) -> str:
    """'30m00s'; '0s'; POOL_DEFAULT for None."""
    if value is None:
        return POOL_DEFAULT
    from gpupool.core.units import format_duration

    return format_duration(value)


def _command(run: PoolHandler) -> OnPool:
    """A project verb: a bad flag, or fields the daemon refused, are one line each (exit 2)."""

    @functools.wraps(run)
    def guarded(client: Client, args: argparse.Namespace) -> int:
        try:
            return run(client, args)
        except BadFlag as exc:
            print(f"gpupool: {exc}", file=sys.stderr)
            return 2
        except ApiError as exc:
            problems = exc.field_errors()
            if exc.code != "invalid_project" or not problems:
                raise
            for field, message in problems:
                print(f"gpupool: {FLAGS.get(field, field)}: {message}", file=sys.stderr)
            return 2

    return OnPool(guarded)


def _print_warnings(p: ProjectView) -> None:
    """The daemon's warnings about the quotas the change touched, to the admin who made it."""
    for warning in p.warnings:
        print(f"gpupool: warning: {printable(warning.message)}", file=sys.stderr)


def cmd_create(client: Client, args: argparse.Namespace) -> int:
    p = client.create_project(args.name, _changes(args))
    print(f"Created project {p.name}: {describe(p)}")
    _print_warnings(p)
    return 0


def cmd_list(client: Client, args: argparse.Namespace) -> int:
    found = client.projects()
    if args.json:
        print_json(found.wire)
        return 0
    rows = [
        (
            p.name,
            p.department or "-",
            _fmt(p.quota),
            _fmt(p.limit),
            *cap_cells(p),
            _fmt(p.weight),
            ",".join(p.members) or "(everyone)",
            _fmt(p.in_use_gpus),
            p.pending_jobs,
            _min_runtime(p.preempt_min_runtime_s),
            _min_runtime(p.reclaim_min_runtime_s),
            _idle_policy(p),
        )
        for p in found.projects
    ]
    print_table(COLUMNS, rows, limits={"MEMBERS": 40})
    return 0


def cmd_show(client: Client, args: argparse.Namespace) -> int:
    if args.json:  # the daemon's answer as received, as `project list --json`
        from gpupool.client.transport import quoted

        print_json(client.request("GET", f"/v1/projects/{quoted(args.name)}"))
        return 0
    p = client.project(args.name)
    for label, value in _show_lines(p):
        print(f"{label + ':':<22}{printable(value)}")
    return 0


def _show_lines(p: ProjectView) -> list[tuple[str, str]]:
    """`project show`'s lines: every setting, defaults said as such, then its GPU use."""
    from gpupool.core.units import format_duration

    preempt, reclaim = p.preempt_min_runtime_s, p.reclaim_min_runtime_s
    return [
        ("Name", p.name),
        ("Department", p.department or "-"),
        ("Quota", _fmt(p.quota)),
        ("Limit", "none" if p.limit is None else _fmt(p.limit)),
        *cap_lines(p),
        ("Weight", _fmt(p.weight)),
        ("Members", ",".join(p.members) or "(everyone)"),
        ("Default time limit", format_duration(p.default_time_limit_s)),
        ("Idle policy", _idle_policy(p)),
        ("Preempt after", "pool default" if preempt is None else _min_runtime(preempt)),
        ("Reclaim after", "0s (pool default)" if reclaim is None else _min_runtime(reclaim)),
        ("In use", f"{_fmt(p.in_use_gpus)} GPUs, {p.running_jobs} running job(s)"),
        ("Pending", f"{_fmt(p.pending_gpus)} GPUs, {p.pending_jobs} pending job(s)"),
    ]


def _idle_policy(p: ProjectView) -> str:
    """'stop after 30m below 5%'; '-' without one."""
    if not p.idle_timeout_s:
        return "-"
    from gpupool.core.units import format_duration

    action = p.idle_action or "stop interactive, notify others"
    return f"{action} after {format_duration(p.idle_timeout_s)} below {p.idle_threshold_pct:g}%"


def cmd_set(client: Client, args: argparse.Namespace) -> int:
    changes = _changes(args)
    if not changes:
        print("gpupool: nothing to change (see gpupool project set --help)", file=sys.stderr)
        return 2
    p = client.update_project(args.name, changes)
    print(f"Updated project {p.name}: {describe(p)}")
    _print_warnings(p)
    if not p.members and ("remove_members" in changes or "members" in changes):
        print(f"note: project {p.name} has no members now: it is open to every user")
    return 0


def cmd_delete(client: Client, args: argparse.Namespace) -> int:
    client.delete_project(args.name)
    print(f"Deleted project {args.name}")
    return 0


def cmd_default(client: Client, args: argparse.Namespace) -> int:
    user = args.user or client.whoami().user  # the pool's name for you, not $USER
    if args.project is not None:
        d = client.set_default_project(user, args.project)
        print(f"Default project of {user}: {d.project}")
        return 0
    d = client.default_project(user)
    chosen = f"default project {d.project}" if d.project else "no default project set"
    if d.effective:
        print(f"{user}: {chosen}; jobs without --project go to {d.effective}")
    else:
        print(f"{user}: {chosen}; jobs without --project are refused: {d.problem}")
    return 0
