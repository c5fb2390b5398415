"""The client finds a pool's state directory and socket as text (core/state_location.py,
without pathlib): the same place core/paths.py's `Path` names, for any input."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpupool.core.paths import socket_path, state_dir
from gpupool.core.state_location import absolute_text, socket_text, state_dir_text

PART = st.sampled_from(["a", "b c", ".", "..", "", "~", "~root", "x~", "é"])
TEXT = st.builds(lambda lead, parts: lead + "/".join(parts), st.sampled_from(["", "/", "//", "///", "~/", "./"]), st.lists(PART, max_size=5))  # fmt: skip


def pathlib_absolute(text: str) -> str:
    """What the client used before: pathlib's spelling of the place."""
    return str(Path(text).expanduser().absolute())


@given(TEXT)
def test_absolute_text_is_pathlibs_spelling(text: str) -> None:
    if not text:  # Path("") is ".": the working directory; an empty option is not given
        text = "."
    assert absolute_text(text) == pathlib_absolute(text)


@given(
    st.none() | TEXT.filter(bool), st.none() | TEXT.filter(bool), st.none() | TEXT, st.none() | TEXT
)
def test_the_state_directory_is_found_where_pathlib_found_it(
    explicit: str | None, gpupool_state_dir: str | None, xdg: str | None, home: str | None
) -> None:
    env = {
        k: v
        for k, v in {
            "GPUPOOL_STATE_DIR": gpupool_state_dir,
            "XDG_DATA_HOME": xdg,
            "HOME": home,
        }.items()
        if v is not None
    }
    if not explicit and not gpupool_state_dir and not xdg and not home:
        env["HOME"] = "/home/someone"  # with no HOME pathlib asks the password database
    found = state_dir_text(explicit, env)
    assert found == str(state_dir(explicit, env))
    assert socket_text(found) == str(socket_path(Path(found)))


def test_the_defaults_in_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    assert state_dir_text("here", {"GPUPOOL_STATE_DIR": "/x"}) == f"{tmp_path}/here"
    assert state_dir_text(None, {"GPUPOOL_STATE_DIR": "/x//y/.", "XDG_DATA_HOME": "/d"}) == "/x/y"
    assert state_dir_text(None, {"XDG_DATA_HOME": "/d", "HOME": "/h"}) == "/d/gpupool"
    assert state_dir_text(None, {"HOME": "/h"}) == "/h/.local/share/gpupool"
    assert socket_text("/h/s") == "/h/s/gpupool.sock"
    assert os.path.isabs(state_dir_text(None, {}))
