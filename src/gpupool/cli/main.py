"""Entry point: parse the verb, find the pool, turn errors into one clear line and an exit code.

Exit codes: 0 ok; 1 an unknown job or project, or no pool answered (none running, not a gpupool
daemon, no answer in time, an unusable state directory, a submission that could not be
confirmed); 2 bad input or a request refused (at submit, an admin change that cannot be
made, no valid API token over TCP: 401, not allowed: 403); with --wait/wait, the job's own exit code; 130 after Ctrl-C.

Every error is one line on stderr, `gpupool: ...`, and never a traceback. The exceptions are
argparse's usage errors (the usage, then one `error:` line, exit 2: the usage is what the user
needs next) and a job spec with several bad fields (a heading, then one line per field).
A reader that goes away (`gpupool plan catalog | head`) ends the command quietly, exit 0.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from gpupool import __version__
from gpupool.cli.argv import CliParser
from gpupool.cli.commands import (
    NOUNS,
    VERBS,
    OnPool,
    Parents,
    Register,
    Subparsers,
    api_error_exit,
    command_of,
    noun_of,
)

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn


def _common(default: object) -> CliParser:
    # Accepted before and after the verb; after it, SUPPRESS keeps a value given before it.
    common = CliParser(add_help=False)
    common.add_argument(
        "--state-dir",
        default=default,
        help="the pool's state directory (default: $GPUPOOL_STATE_DIR or ~/.local/share/gpupool)",
    )
    common.add_argument(
        "--url",
        default=default,
        help="talk to a pool over TCP instead, e.g. http://127.0.0.1:8765 or "
        "https://pool.example:8765 (or $GPUPOOL_URL; $GPUPOOL_CA_CERT: the CA file that "
        "checks an https daemon's certificate)",
    )
    return common


def _registers(nouns: Sequence[str]) -> list[Register]:
    """Each named noun module's `register`, imported here and only here (cli/commands.py)."""
    import importlib

    registers: list[Register] = []
    for noun in nouns:
        module = importlib.import_module(f"gpupool.cli.{noun}")
        registers.append(module.register)
    return registers


def _parser(nouns: Sequence[str] = NOUNS) -> CliParser:
    """The `gpupool` parser with the verbs of `nouns` (every noun's by default)."""
    parser, sub = _top_parser()
    parents = Parents(common=_common(argparse.SUPPRESS), listing=_listing_flags())
    for register in _registers(nouns):
        register(sub, parents)
    return parser


def _verb_list_parser() -> CliParser:
    """The `gpupool` parser with every verb listed (cli/verb_help.py) and none built: what
    the top help, a missing verb and a mistyped one print, byte for byte the whole parser's,
    importing no verb's module. Each verb's placeholder takes any words and runs nothing:
    `_main` rebuilds the verb's own parser should one be read."""
    from gpupool.cli.verb_help import VERB_HELP

    parser, sub = _top_parser()
    for verb, aliases, help_line in VERB_HELP:
        sub.add_parser(verb, aliases=aliases, help=help_line, add_help=False)
    return parser


def _listing_flags() -> CliParser:
    listing = CliParser(add_help=False)
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    return listing


def _top_parser() -> tuple[CliParser, Subparsers]:
    """The top parser and its (empty) set of verbs."""
    top = _common(None)
    parser = CliParser(
        prog="gpupool",
        description="A shared, scheduled pool of GPUs.",
        parents=[top],
        epilog="Environment: GPUPOOL_STATE_DIR, GPUPOOL_URL (as --state-dir, --url), "
        "GPUPOOL_CA_CERT (CA file for an https:// URL), "
        "GPUPOOL_TIMEOUT (seconds to wait for the daemon's answer, default 30), "
        "GPUPOOL_TOKEN (the API token sent over TCP; else ~/.config/gpupool/token, mode 0600).",
    )
    parser.add_argument("--version", action="version", version=f"gpupool {__version__}")
    # prog given: what argparse would word (the parser's name, as it has no positional), but
    # without a formatter, whose width would cost shutil's import (cli/argv.py CliParser).
    sub = parser.add_subparsers(dest="verb", metavar="COMMAND", prog=parser.prog)
    sub.required = True
    return parser, sub


def main(argv: list[str] | None = None) -> int:
    """The command `argv` (default: this process's arguments) runs, and its exit code."""
    return _guarded(argv)[0]


def run() -> NoReturn:
    """The `gpupool` command (and `python -m gpupool`): main, then the exit.

    A command that only talked to a pool (`submit`, `queue`, ...) leaves without the
    interpreter's teardown, once its output is flushed: unloading ~100 modules took ~4 ms of
    a ~35 ms `gpupool queue` (issue 35, goal 6). Such a command leaves no thread, temporary
    file or atexit work behind. Every other (`server` with its atexit writer, `sim`, `plan`)
    exits as usual."""
    code, on_pool = _guarded(None)
    if not on_pool:
        sys.exit(code)
    try:
        try:
            sys.stdout.flush()
        except BrokenPipeError:  # the reader is gone, as in `_guarded`: nothing to say
            code = 0
        except OSError as exc:  # a full disk: what the interpreter's own flush would meet
            print(f"gpupool: cannot write the output: {exc.strerror or exc}", file=sys.stderr)
            code = code or 1
        sys.stderr.flush()
    finally:
        os._exit(code & 0xFF)


def _guarded(argv: list[str] | None) -> tuple[int, bool]:
    """The exit code, and whether the command only talked to a pool (`run`)."""
    ran = _Ran()
    try:
        return _main(argv, ran), ran.on_pool
    except KeyboardInterrupt:
        return 130, ran.on_pool
    except BrokenPipeError:  # `gpupool queue | head`: the reader is gone, nothing to say
        # Point stdout at /dev/null so the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 0, ran.on_pool


class _Ran:
    """What `_main` found out about the command it ran."""

    __slots__ = ("on_pool",)

    def __init__(self) -> None:
        self.on_pool = False


def _main(argv: list[str] | None, ran: _Ran) -> int:
    words = sys.argv[1:] if argv is None else argv
    noun = noun_of(words)
    if noun is None:
        # --help before a verb, no verb, a typo: argparse prints the list of verbs and exits,
        # here without importing any verb's module (cli/verb_help.py). Should it read a verb
        # after all, that verb's own parser reads the words again below.
        listed, _ = _verb_list_parser().parse_known_args(argv)
        noun = VERBS[listed.verb]
    args = _parser((noun,)).parse_args(argv)
    from gpupool.client import ApiError, BadClientSetting, Client, PoolUnreachable

    args.argv = list(words)  # the words as given (`bench --gpus` passes its own on to the job)
    command = command_of(args)
    try:
        if not isinstance(command, OnPool):  # offline (plan cost --from-usage asks a pool)
            return command.run(args)
        ran.on_pool = True
        if command.prepare is not None:
            command.prepare(args)  # may set --url / --state-dir (flags after a spec file)
        client = Client(args.state_dir, url=args.url)
        return command.run(client, args)
    except BadClientSetting as exc:
        from gpupool.cli.failures import bad_setting

        print(bad_setting(exc), file=sys.stderr)
        return 2
    except PoolUnreachable as exc:
        from gpupool.cli.failures import unreachable

        print(unreachable(exc), file=sys.stderr)
        return 1
    except ApiError as exc:
        refused = isinstance(command, OnPool) and exc.code in command.refusals
        from gpupool.cli.render import shown_lines  # the daemon's words may quote user input

        said = shown_lines(exc.message)
        print(f"gpupool: {'job refused: ' if refused else ''}{said}", file=sys.stderr)
        return api_error_exit(exc.status, exc.code)


if __name__ == "__main__":
    run()
