"""drain, resume, drains: keep new jobs off GPUs for maintenance and let them back, as Slurm's
`scontrol update nodename=N state=drain reason=...`, `state=resume` and `sinfo -R` do, per GPU
(core/drain.py, api/drains.py, docs/operations.md).

TARGET names the GPUs: `NODE` (every GPU of it), `NODE:GPU` (one of them), or a bare `GPU`
(that GPU of the pool's only node: the daemon names the nodes when there are several). A
TARGET of none of these forms is a usage error (exit 2) naming them. Drain and resume are a
pool admin's: a refusal (403), or a node or GPU the pool does not have (422, the daemon
naming what there is), is the daemon's one line on stderr and exit 2, as for every command
(cli/main.py). Resuming GPUs that were not drained says so and exits 0.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from gpupool.cli.commands import OnPool, Parents, Subparsers
from gpupool.cli.render import Cell, clock_time, print_json, print_table, shown
from gpupool.client import Client
from gpupool.core.values import record

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from gpupool.client.drain_views import DrainReport, DrainView

TARGET_FORMS = "NODE, NODE:GPU, or GPU (a GPU's index on the pool's only node)"
DRAINS_COLUMNS = ("NODE", "GPU", "REASON", "BY", "SINCE")
RUN_TO_END = "Jobs running there run to their end; no new job starts there."
NOTHING_DRAINED = "No GPU is drained."
NOTHING_RESUMED = "Nothing was drained there"


@record
class DrainTarget:
    """The GPUs a TARGET names, as the API takes them: `node` None is the pool's only node,
    `gpu` None every GPU of the node."""

    node: str | None
    gpu: int | None


def drain_target(text: str) -> DrainTarget:
    """argparse type of TARGET (module docstring): `box`, `box:3` or `3`. Digits alone are a
    GPU's index, never a node's name; ArgumentTypeError naming the forms for anything else
    (`a:b:c`, `box:x`, `box:`, `:3`, "")."""
    node, colon, index = text.partition(":")
    if not colon:
        if _is_index(text):
            return DrainTarget(None, int(text))
        if text.strip():
            return DrainTarget(text, None)
    elif node.strip() and _is_index(index):
        return DrainTarget(node, int(index))
    raise argparse.ArgumentTypeError(f"not a TARGET: {text!r}: give {TARGET_FORMS}")


def _is_index(text: str) -> bool:
    return text.isascii() and text.isdigit()  # int() would also take " 3", "+3", "３"


def register(sub: Subparsers, parents: Parents) -> None:
    common = parents.common
    p = sub.add_parser(
        "drain",
        parents=[common],
        help="stop new jobs starting on GPUs for maintenance, as Slurm's drain (pool admins)",
        description="No new job starts on the GPUs TARGET names until `gpupool resume` lets "
        "them back; jobs running there run to their end (--now: they are requeued). Draining "
        "a drained GPU again keeps its first drain's time, with the new reason.",
    )
    p.set_defaults(handler=OnPool(cmd_drain))
    p.add_argument("target", type=drain_target, metavar="TARGET", help=TARGET_FORMS)
    p.add_argument(
        "--reason",
        default="",
        metavar="TEXT",
        help="why, shown by `gpupool drains` and `gpus` (one line, at most 200 characters)",
    )
    p.add_argument(
        "--now",
        action="store_true",
        help="requeue the jobs running there (SIGTERM, their grace period) instead of "
        "letting them run to their end",
    )
    p = sub.add_parser(
        "resume", parents=[common], help="let jobs start again on drained GPUs (pool admins)"
    )
    p.set_defaults(handler=OnPool(cmd_resume))
    p.add_argument("target", type=drain_target, metavar="TARGET", help=TARGET_FORMS)
    p = sub.add_parser(
        "drains",
        parents=[common, parents.listing],
        help="the drained GPUs: why, by whom and since when",
    )
    p.set_defaults(handler=OnPool(cmd_drains))


def cmd_drain(client: Client, args: argparse.Namespace) -> int:
    from gpupool.client.drain_views import drain

    target: DrainTarget = args.target
    report = drain(client, target.node, target.gpu, args.reason, args.now)
    print("\n".join(drained_lines(report, args.now)))
    return 0


def cmd_resume(client: Client, args: argparse.Namespace) -> int:
    from gpupool.client.drain_views import resume

    target: DrainTarget = args.target
    print("\n".join(resumed_lines(resume(client, target.node, target.gpu))))
    return 0


def cmd_drains(client: Client, args: argparse.Namespace) -> int:
    from gpupool.client.drain_views import drains

    found = drains(client)
    if args.json:
        print_json(found.wire)
    elif not found.drains:
        print(NOTHING_DRAINED)
    else:
        print_table(DRAINS_COLUMNS, drains_rows(found.drains), limits={"NODE": 32, "BY": 32})
    return 0


def gpu_words(d: DrainView) -> str:
    """'node box GPU 3', as the daemon's log and audit lines say it (service/drains.py)."""
    return f"node {shown(d.node, 64)} GPU {d.gpu}"


def drained_lines(report: DrainReport, now: bool) -> list[str]:
    """A line per GPU drained ('Drained node box GPU 3: cooling fan'), then what becomes of
    the jobs running there: requeued (`now`), else left to run to their end."""
    lines = [
        f"Drained {gpu_words(d)}" + (f": {shown(d.reason)}" if d.reason else "")
        for d in report.drained
    ]
    if not now:
        lines.append(RUN_TO_END)
    elif report.requeued:  # one wording for one job or many: scripts grep "Requeued jobs"
        ids = ", ".join(map(str, report.requeued))
        lines.append(f"Requeued jobs {ids} (they stop with their grace period)")
    else:
        lines.append("No job was running there.")
    return lines


def resumed_lines(gone: Sequence[DrainView]) -> list[str]:
    """'Resumed node box GPU 3' per GPU that was drained, or that none was."""
    return [f"Resumed {gpu_words(d)}" for d in gone] or [NOTHING_RESUMED]


def drains_rows(found: Sequence[DrainView], now: float | None = None) -> list[tuple[Cell, ...]]:
    """NODE, GPU, REASON ('-' when none was given), BY, SINCE (a clock time as `queue`
    shows times: today's '14:05:09', else 'Nov 21 14:05')."""
    return [(d.node, d.gpu, d.reason or "-", d.by, clock_time(d.since, now)) for d in found]
