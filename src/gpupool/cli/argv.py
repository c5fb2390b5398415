"""argparse as gpupool uses it: values that start with '-', and job ids the pool can hold."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable

from gpupool.core.batch import MAX_JOB_ID, job_ids_of

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeVar, overload

    _N = TypeVar("_N")


def untranslated_when_no_catalog() -> bool:
    """Give argparse its messages as written when no gettext catalog could translate them;
    whether it did.

    argparse looks every message up with gettext, which searches the disk for a catalog on
    each call (importing `locale` on the first): 21 calls and ~1.5 ms of each `gpupool
    queue` (issue 35, goal 6). Asked once here instead: gettext's default domain, for the
    user's languages, in its default directory (the CLI binds no other). Almost every
    install has none there, and then the lookup can only give back the message. Where one
    exists, argparse keeps gettext."""
    import gettext

    default_dir = os.path.join(sys.base_prefix, "share", "locale")  # gettext's default
    if os.path.isdir(default_dir) and gettext.find(gettext.textdomain()) is not None:
        return False
    argparse._ = _as_written  # type: ignore[attr-defined]
    argparse.ngettext = _singular_or_plural  # type: ignore[attr-defined]
    return True


def _as_written(message: str) -> str:
    return message


def _singular_or_plural(singular: str, plural: str, n: int) -> str:
    return singular if n == 1 else plural  # gettext's own rule without a catalog


untranslated_when_no_catalog()

# Job ids are 64-bit integers in the store (and the API refuses larger ones by name).


def job_id(text: str) -> int:
    """argparse type of a job id: a whole number from 1 to 2^63-1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a job id: {text!r}") from None
    if not 1 <= value <= MAX_JOB_ID:
        raise argparse.ArgumentTypeError(f"not a job id: {text} (job ids are 1 to {MAX_JOB_ID})")
    return value


def job_ids(text: str) -> list[int]:
    """argparse type of a comma-separated list of job ids (`-j 12,15`): core.batch's rule."""
    try:
        return job_ids_of(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class CliParser(argparse.ArgumentParser):
    """An ArgumentParser whose value flags take the next word even when it starts with '-'.

    Plain argparse reads `--time -5m` as a flag missing its value ("expected one argument");
    here it is `--time=-5m`, so the value reaches the check that can say what is wrong with
    it ("time must be positive"). A word that is itself one of the parser's flags is not
    taken (`--name --gpus 1` still says --name lacks a value). Words after `--`, and after
    the first positional of a parser whose positional takes the rest (a sub-command, or
    `submit`'s command), are never touched: they belong to the sub-command or to the job.
    Sub-parsers are of this class too (argparse makes them of the parent's class).

    Adding an argument checks its metavar against its nargs with a HelpFormatter, which
    asks shutil for the terminal's width: shutil (with bz2 and lzma) costs every command
    ~2 ms, and that check never reads the width. It gets a formatter of a fixed width here;
    help, usage and --version text still get argparse's, sized to the terminal. (The other
    builder of a formatter, add_subparsers, is given its `prog`: cli/main.py.)
    """

    _fixed_width = False  # True while add_argument runs (the class docstring says why)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        self._fixed_width = True
        try:
            return super().add_argument(*args, **kwargs)
        finally:
            self._fixed_width = False

    def _get_formatter(self) -> argparse.HelpFormatter:
        if self._fixed_width:
            # Any class checks alike: argparse's formatters differ in how they fill text.
            return argparse.HelpFormatter(self.prog, width=80)
        return super()._get_formatter()

    if TYPE_CHECKING:  # the signatures of ArgumentParser's, for the type checker

        @overload
        def parse_known_args(
            self, args: Iterable[str] | None = None, namespace: None = None
        ) -> tuple[argparse.Namespace, list[str]]: ...

        @overload
        def parse_known_args(
            self, args: Iterable[str] | None, namespace: _N
        ) -> tuple[_N, list[str]]: ...

        @overload
        def parse_known_args(self, *, namespace: _N) -> tuple[_N, list[str]]: ...

    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: _N | None = None
    ) -> tuple[_N | argparse.Namespace, list[str]]:
        words = self._attach_dash_values(list(sys.argv[1:] if args is None else args))
        if namespace is None:
            return super().parse_known_args(words)
        return super().parse_known_args(words, namespace)

    def _attach_dash_values(self, words: list[str]) -> list[str]:
        flags = self._option_string_actions
        takes_value = {s for s, a in flags.items() if a.nargs is None}
        rest_positional = any(
            not a.option_strings and a.nargs in (argparse.REMAINDER, argparse.PARSER)
            for a in self._actions
        )
        out: list[str] = []
        i = 0
        while i < len(words):
            word = words[i]
            if word == "--":
                break
            if word in takes_value and i + 1 < len(words):
                value = words[i + 1]
                if value.startswith("-") and value != "--" and value not in flags:
                    out.append(f"{word}={value}")
                else:
                    out += [word, value]
                i += 2
                continue
            if not word.startswith("-") or self._looks_negative(word):
                if rest_positional:
                    break
            out.append(word)
            i += 1
        return out + words[i:]

    def _looks_negative(self, word: str) -> bool:
        matcher = self._negative_number_matcher
        return bool(matcher.match(word)) and not self._has_negative_number_optionals
