"""`gpupool VERB` builds its parser from VERB's module alone (cli/commands.py): the table
says which module registers each verb, and the parser so built reads every command line as
the whole parser does."""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest

from gpupool.cli.argv import CliParser
from gpupool.cli.commands import NOUNS, VERBS, noun_of
from gpupool.cli.main import _parser, _verb_list_parser
from gpupool.cli.verb_help import VERB_HELP


def _verbs(parser: CliParser) -> dict[str, argparse.ArgumentParser]:
    """The top-level verbs (aliases included) a parser knows, and their parsers."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no sub-commands")


def _help(parser: CliParser, argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        parser.parse_args(argv)
    return out.getvalue()


def _answer(parser: CliParser, argv: list[str]) -> tuple[str, str, object]:
    """What the parser prints on stdout and stderr for `argv`, and the code it exits with."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        with pytest.raises(SystemExit) as exited:
            parser.parse_args(argv)
    return out.getvalue(), err.getvalue(), exited.value.code


def test_the_table_names_every_verb_by_the_module_that_registers_it() -> None:
    assert set(NOUNS) == set(VERBS.values())
    for noun in NOUNS:
        registered = set(_verbs(_parser((noun,))))
        assert registered == {v for v, n in VERBS.items() if n == noun}, noun
    assert set(_verbs(_parser())) == set(VERBS)


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_a_verb_alone_reads_and_helps_as_the_whole_parser(verb: str) -> None:
    alone, whole = _parser((VERBS[verb],)), _parser()
    assert _help(alone, [verb, "--help"]) == _help(whole, [verb, "--help"])


@pytest.mark.parametrize(
    ("argv", "noun"),
    [
        (["queue"], "jobs"),
        (["ps", "-a"], "jobs"),
        (["--state-dir", "/s", "submit", "--", "queue"], "submit"),
        (["--state-dir=/s", "logs", "3"], "jobs"),
        (["--st", "gpus", "top"], "top"),  # an abbreviation takes its value: "gpus" is it
        (["--url", "-x", "plan", "cost"], "plan"),  # a value that looks like a flag (argv.py)
        (["--url=http://h:1", "--state", "sim", "usage"], "usage"),
        (["--version", "token", "list"], "tokens"),
        (["--help", "queue"], None),  # the top help lists every verb
        (["-h"], None),
        (["--he", "queue"], None),
        ([], None),
        (["--state-dir", "/s"], None),
        (["qeueu"], None),  # a typo: the whole parser says which verbs there are
        (["--", "queue"], None),
    ],
)
def test_noun_of_finds_the_verb_the_parser_reads(argv: list[str], noun: str | None) -> None:
    assert noun_of(argv) == noun
    if noun is not None:  # (--version prints and exits before the verb is read)
        args, _ = _parser().parse_known_args([a for a in argv if a != "--version"])
        assert VERBS[args.verb] == noun


def test_the_verb_list_is_the_whole_parsers_verbs_in_its_order() -> None:
    listed = [
        (action.dest, action.metavar, action.help)
        for parser in (_parser(),)
        for sub in parser._actions
        if isinstance(sub, argparse._SubParsersAction)
        for action in sub._choices_actions
    ]
    rows = [
        (verb, f"{verb} ({', '.join(aliases)})" if aliases else verb, line)
        for verb, aliases, line in VERB_HELP
    ]
    assert rows == listed


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["-h"], ["--he"], ["--url", "http://h:1", "--help"], [], ["qeueu"], ["--", "queue"],
     ["--version"]],
)  # fmt: skip
def test_the_top_help_and_its_errors_read_as_the_whole_parsers(argv: list[str]) -> None:
    # `gpupool --help`, no verb, a typo: answered from cli/verb_help.py, no verb's module
    # imported (issue 30, item 16), and printed byte for byte as the whole parser prints them.
    assert _answer(_verb_list_parser(), argv) == _answer(_parser(), argv)


def test_adding_an_argument_still_checks_its_metavar_against_nargs() -> None:
    # CliParser checks it with a formatter of a fixed width (no shutil): the check is kept.
    with pytest.raises(ValueError, match="length of metavar tuple does not match nargs"):
        CliParser().add_argument("--pair", nargs=2, metavar=("A", "B", "C"))


@pytest.mark.parametrize("columns", ["30", "60", "200"])
def test_help_is_sized_to_the_terminal_as_argparse_sizes_it(
    columns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only add_argument's check gets the fixed width: help and usage follow $COLUMNS.
    monkeypatch.setenv("COLUMNS", columns)
    parsers = []
    for cls in (argparse.ArgumentParser, CliParser):
        p = cls(prog="gpupool", description="A shared, scheduled pool of GPUs " * 4)
        p.add_argument("--state-dir", help="the pool's state directory " * 5)
        p.add_argument("words", nargs="*", metavar="WORD")
        parsers.append(p)
    plain, ours = parsers
    assert ours.format_help() == plain.format_help()
    assert ours.format_usage() == plain.format_usage()
