"""Tables never cut a name or a figure (piped, or in a narrow terminal), and one odd job
name (an emoji, CJK, 120 characters, a control character) neither misaligns nor widens the
listing: it alone is cut, with an ellipsis."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios

import pytest

from gpupool.cli.plan.catalog import _money
from gpupool.cli.render import print_table, width
from gpupool.plan.catalog import load_catalog

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _catalog_text() -> tuple[set[str], set[str]]:
    """Every word of every catalog name, and every price as the table shows it."""
    catalog = load_catalog(None)
    names: set[str] = set()
    prices: set[str] = set()
    for section in ("gpus", "servers", "interconnects", "clouds"):
        for entry in getattr(catalog, section):
            names.update(entry.name.split())
            price = getattr(entry, "price_usd", None) or getattr(entry, "usd_per_hour", None)
            if price:
                prices.add(_money(price))
    return names, prices


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["TERM"] = "xterm"
    return env


def _in_terminal(args: list[str], columns: int) -> str:
    """Run `gpupool ARGS` on a pseudo-terminal `columns` wide; its output, without colours."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpupool", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=_env(),
        close_fds=True,
    )
    os.close(slave)
    out = b""
    try:
        while select.select([master], [], [], 60)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
        proc.wait(30)
    return ANSI.sub("", out.decode()).replace("\r\n", "\n")


def _assert_nothing_cut(text: str) -> None:
    names, prices = _catalog_text()
    assert "…" not in text
    missing = sorted(w for w in names | prices if w not in text)
    assert not missing, missing


def test_a_piped_catalog_has_every_name_and_figure_whole() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gpupool", "plan", "catalog"],
        env={**_env(), "COLUMNS": "80"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    _assert_nothing_cut(proc.stdout)


@pytest.mark.parametrize("columns", [50, 80])
def test_a_narrow_terminal_wraps_names_between_words_and_keeps_figures(columns: int) -> None:
    _assert_nothing_cut(_in_terminal(["plan", "catalog"], columns))


def test_odd_job_names_keep_the_columns_aligned(capsys: pytest.CaptureFixture[str]) -> None:
    names = ["plain", "🚀 launch", "训练任务", "x" * 120, "evil\n\x1b[31mred", "e\u0301t\u00e9"]
    rows = [(i, n, "RUNNING") for i, n in enumerate(names, 1)]
    print_table(("ID", "NAME", "STATE"), rows, limits={"NAME": 20})
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 + len(names)  # a newline in a name does not add a row
    assert "\x1b" not in "".join(lines)
    # STATE starts at the same display column on every line, and no name widened the table.
    starts = {width(line[: line.index("STATE" if n == 0 else "RUNNING")]) for n, line in
              enumerate(lines)}  # fmt: skip
    assert starts == {len("ID  ") + 20 + 2}
    assert "x" * 19 + "…" in lines[4] and "x" * 21 not in lines[4]
    assert "RUNNING" in lines[4]  # figures and states are never cut


def test_display_width_counts_wide_and_combining_characters() -> None:
    assert width("abc") == 3
    assert width("训练") == 4
    assert width("🚀") == 2
    assert width("e\u0301") == 1
    assert width("👍\ufe0f") == 2


# Emoji sequences and marks as a terminal draws them (issue 30, item 18): a symbol made an
# emoji by VS16 (U+FE0F) takes 2 columns, a skin tone or a ZWJ-joined emoji none of its
# own, a keycap's enclosing mark and a Thai vowel sign (Mn, not "combining" by class) none.
DRAWN = {
    "❤️love": 6,
    "👍🏽ok": 4,
    "👩\u200d🔬lab": 5,
    "1️⃣x": 3,
    "🇫🇷fr": 4,
    "ก\u0e31น": 2,
    "ﾊﾝｶｸ": 4,
    "训练": 4,
}


def test_emoji_sequences_and_marks_take_the_columns_a_terminal_draws() -> None:
    assert {name: width(name) for name in DRAWN} == DRAWN


def test_emoji_sequences_keep_the_columns_aligned(capsys: pytest.CaptureFixture[str]) -> None:
    names = list(DRAWN)
    print_table(("ID", "NAME", "STATE"), [(i, n, "RUNNING") for i, n in enumerate(names, 1)])
    lines = capsys.readouterr().out.splitlines()[1:]
    column = max(DRAWN.values()) + 2  # the widest name, then the two spaces between columns
    for name, line in zip(names, lines, strict=True):
        after = line[line.index(name) + len(name) : line.index("RUNNING")]
        assert after.strip() == "" and DRAWN[name] + len(after) == column, (name, line)


def test_a_cut_name_keeps_each_emoji_whole() -> None:
    # An ellipsis never separates an emoji from its skin tone, VS16 or ZWJ partner.
    from gpupool.cli.render import fit

    assert fit("ab👍🏽cd", 4) == "ab…"
    assert fit("ab❤️cd", 5) == "ab❤️…"
    assert fit("a👩\u200d🔬bc", 4) == "a👩\u200d🔬…"
