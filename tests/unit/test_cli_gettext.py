"""cli/argv.py asks gettext once whether a catalog could translate argparse's messages:
none (almost every install) gives argparse its messages as written, without a disk search
per message; one found keeps gettext, and argparse speaks the user's language."""

from __future__ import annotations

import argparse
import gettext
import struct
from pathlib import Path

import pytest

from gpupool.cli.argv import untranslated_when_no_catalog


def write_catalog(path: Path, entries: dict[str, str]) -> None:
    """A GNU .mo file holding `entries` (the format gettext reads: a header, two tables of
    (length, offset), then the strings, NUL-ended)."""
    keys = sorted(entries)
    ids = b"".join(k.encode() + b"\0" for k in keys)
    strs = b"".join(entries[k].encode() + b"\0" for k in keys)
    start = 7 * 4 + 16 * len(keys)
    key_table, value_table, offset = [], [], start
    for k in keys:
        key_table += [len(k.encode()), offset]
        offset += len(k.encode()) + 1
    for k in keys:
        value_table += [len(entries[k].encode()), offset]
        offset += len(entries[k].encode()) + 1
    header = struct.pack("Iiiiiii", 0x950412DE, 0, len(keys), 28, 28 + 8 * len(keys), 0, 0)
    tables = struct.pack(f"{4 * len(keys)}i", *key_table, *value_table)
    path.parent.mkdir(parents=True)
    path.write_bytes(header + tables + ids + strs)


def test_without_a_catalog_argparse_gets_its_messages_as_written(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(argparse, "_", gettext.gettext)
    monkeypatch.setattr("sys.base_prefix", str(tmp_path))  # no share/locale there
    assert untranslated_when_no_catalog() is True
    assert argparse._ is not gettext.gettext  # type: ignore[attr-defined]
    assert argparse._("usage: ") == "usage: "  # type: ignore[attr-defined]
    assert [argparse.ngettext("a", "as", n) for n in (1, 2, 0)] == ["a", "as", "as"]  # type: ignore[attr-defined]
    parser = argparse.ArgumentParser(prog="x")
    assert parser.format_usage() == "usage: x [-h]\n"


def test_with_a_catalog_argparse_keeps_gettext(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    write_catalog(
        tmp_path / "share" / "locale" / "xx" / "LC_MESSAGES" / "messages.mo",
        {"usage: ": "uso: ", "show this help message and exit": "mostrar"},
    )
    monkeypatch.setattr(argparse, "_", gettext.gettext)
    monkeypatch.setattr("sys.base_prefix", str(tmp_path))
    monkeypatch.setattr(gettext, "_default_localedir", str(tmp_path / "share" / "locale"))
    monkeypatch.setenv("LANGUAGE", "xx")
    assert untranslated_when_no_catalog() is False
    assert argparse._ is gettext.gettext  # type: ignore[attr-defined]
    assert argparse.ArgumentParser(prog="x").format_usage() == "uso: x [-h]\n"
