"""How a noun plugs into `gpupool`: one registration function per module, two kinds of handler.

Each noun module (NOUNS below) has
`register(sub: Subparsers, parents: Parents) -> None`, which adds its parsers and gives each
leaf parser its command with `set_defaults(handler=...)`:
- `OnPool(run)`: talks to a pool; main makes the `Client` (from --state-dir / --url) and
  calls `run(client, args)`. `prepare(args)` runs first, before the client exists (submit
  reads flags after a spec file there: they may set --url); `refusals` are the API error
  codes this command words as "job refused: ..." (exit 2).
- `Offline(run)`: needs no daemon (server, sim, plan); main calls `run(args)`.
main.py turns exceptions into exit codes for both.

`gpupool VERB ...` imports only the module that registers VERB (VERBS below): a command pays
for its own module, not for every noun's (plan's alone cost ~20 ms). Anything else (no verb,
--help before it, a typo) only lists the verbs: that list is built from cli/verb_help.py,
importing no noun module (issue 30, item 16), and prints what the whole parser would;
tests/unit/test_cli_verbs.py checks VERBS and VERB_HELP against what each module registers.
A new noun: its module with `register`, a row in NOUNS, its verbs in VERBS and VERB_HELP.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from gpupool.cli.argv import CliParser

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeAlias

    from gpupool.client import Client

Subparsers: TypeAlias = "argparse._SubParsersAction[CliParser]"
PoolHandler: TypeAlias = "Callable[[Client, argparse.Namespace], int]"
OfflineHandler: TypeAlias = Callable[[argparse.Namespace], int]


# Plain slotted classes, not dataclasses: every command builds them, and a dataclass costs
# about a millisecond to define.
class Parents:
    """Parent parsers a noun's parsers take: `common` (--state-dir, --url, accepted after the
    verb too) and `listing` (--json)."""

    __slots__ = ("common", "listing")

    def __init__(self, common: CliParser, listing: CliParser) -> None:
        self.common = common
        self.listing = listing


class OnPool:
    __slots__ = ("run", "prepare", "refusals")

    def __init__(
        self,
        run: PoolHandler,
        prepare: Callable[[argparse.Namespace], None] | None = None,
        refusals: frozenset[str] = frozenset(),
    ) -> None:
        self.run = run
        self.prepare = prepare
        self.refusals = refusals


class Offline:
    __slots__ = ("run",)

    def __init__(self, run: OfflineHandler) -> None:
        self.run = run


Command: TypeAlias = OnPool | Offline

# The noun modules (gpupool.cli.<name>), in the order `gpupool --help` lists their verbs.
NOUNS: tuple[str, ...] = (
    "server",
    "submit",
    "shell",
    "notebook",
    "jobs",
    "steer",
    "gpus",
    "drain",
    "health",
    "topo",
    "backends",
    "top",
    "usage",
    "project",
    "tokens",
    "sim",
    "plan",
    "bench",
)
# Every top-level verb and alias, and the noun module whose `register` adds it.
VERBS: dict[str, str] = {
    "server": "server",
    "submit": "submit",
    "shell": "shell",
    "notebook": "notebook",
    "queue": "jobs",
    "ps": "jobs",
    "show": "jobs",
    "why": "jobs",
    "logs": "jobs",
    "cancel": "steer",
    "wait": "steer",
    "hold": "steer",
    "release": "steer",
    "update": "steer",
    "gpus": "gpus",
    "drain": "drain",
    "resume": "drain",
    "drains": "drain",
    "health": "health",
    "topo": "topo",
    "backends": "backends",
    "top": "top",
    "usage": "usage",
    "project": "project",
    "token": "tokens",
    "audit": "tokens",
    "sim": "sim",
    "plan": "plan",
    "bench": "bench",
}
# Statuses of a refusal (the request as asked cannot be done: exit 2); any other error, a
# job that does not exist, a full disk or a daemon failing, exits 1.
REFUSED_STATUSES = frozenset({400, 401, 403, 409, 413, 422})


def api_error_exit(status: int, code: str) -> int:
    """The exit code of a command the daemon answered with an error (HTTP `status`, API
    error `code`): 1 for a job not found, 2 for a refusal, 1 for anything else."""
    if code == "not_found":
        return 1
    return 2 if status in REFUSED_STATUSES else 1


# The top parser's options that take a value (main._common); argparse also takes any
# unambiguous prefix of them (`--st DIR`), and `--url=X` in one word.
_TOP_VALUE_FLAGS = ("--state-dir", "--url")


def noun_of(argv: Sequence[str]) -> str | None:
    """The noun module whose verb `argv` runs, read as the top parser reads it: the first
    word that is neither an option nor an option's value; None when there is none before
    `--`, when -h/--help comes before it (the top help lists every verb), or when the word
    is not in VERBS."""
    words = iter(argv)
    for word in words:
        if (
            word == "--"
            or word in ("-h", "--help")
            or (len(word) > 2 and "--help".startswith(word))
        ):
            return None
        if not word.startswith("-"):
            return VERBS.get(word)
        if "=" not in word and len(word) > 2 and any(f.startswith(word) for f in _TOP_VALUE_FLAGS):
            next(words, None)  # the option's value, whatever it looks like (cli/argv.py)
    return None


Register: TypeAlias = Callable[[Subparsers, Parents], None]


def command_of(args: argparse.Namespace) -> Command:
    """The command the parsed verb set (every leaf parser sets one)."""
    command = getattr(args, "handler", None)
    if not isinstance(command, (OnPool, Offline)):
        raise TypeError(f"no command registered for {args.verb!r}")  # a registration bug
    return command
