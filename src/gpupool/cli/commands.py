"""How a noun plugs into `gpupool`: one registration function per module, two kinds of handler.

Each noun module (server, submit, jobs, gpus, project, sim, plan) has
`register(sub: Subparsers, parents: Parents) -> None`, which adds its parsers and gives each
leaf parser its command with `set_defaults(handler=...)`:
- `OnPool(run)`: talks to a pool; main makes the `Client` (from --state-dir / --url) and
  calls `run(client, args)`. `prepare(args)` runs first, before the client exists (submit
  reads flags after a spec file there: they may set --url); `refusals` are the API error
  codes this command words as "job refused: ..." (exit 2).
- `Offline(run)`: needs no daemon (server, sim, plan); main calls `run(args)`.
main.py turns exceptions into exit codes for both.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

from gpupool.cli.argv import CliParser

if TYPE_CHECKING:
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
Register: TypeAlias = Callable[[Subparsers, Parents], None]


def command_of(args: argparse.Namespace) -> Command:
    """The command the parsed verb set (every leaf parser sets one)."""
    command = getattr(args, "handler", None)
    if not isinstance(command, (OnPool, Offline)):
        raise TypeError(f"no command registered for {args.verb!r}")  # a registration bug
    return command
