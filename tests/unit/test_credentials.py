"""The API token a client sends over TCP: $GPUPOOL_TOKEN, else a token file that must be
the user's own and readable by nobody else; none over the Unix socket."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpupool.client import BadClientSetting, Client
from gpupool.client.credentials import find_token

TOKEN = "gpupool_3_" + "ab" * 32


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("GPUPOOL_TOKEN", raising=False)
    monkeypatch.delenv("GPUPOOL_TOKEN_FILE", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "gpupool").mkdir()
    return tmp_path


def test_no_token_anywhere_is_none(config_home: Path) -> None:
    assert find_token() is None


def test_a_private_token_file_is_read(config_home: Path) -> None:
    path = config_home / "gpupool" / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    assert find_token() == TOKEN
    assert Client(url="http://127.0.0.1:9").token == TOKEN


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_token_file_others_can_read_is_refused(config_home: Path, mode: int) -> None:
    path = config_home / "gpupool" / "token"
    path.write_text(TOKEN)
    path.chmod(mode)
    with pytest.raises(BadClientSetting) as refused:
        find_token()
    assert refused.value.setting == "token file"
    assert f"(mode {mode:04o}): run `chmod 600 {path}`" in refused.value.problem


def test_the_environment_comes_first(config_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = config_home / "gpupool" / "token"
    path.write_text("from-the-file")
    path.chmod(0o644)  # not even looked at
    monkeypatch.setenv("GPUPOOL_TOKEN", TOKEN)
    assert find_token() == TOKEN


def test_a_named_token_file_must_exist(config_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPOOL_TOKEN_FILE", str(config_home / "nope"))
    with pytest.raises(BadClientSetting, match="no such file"):
        find_token()


def test_the_unix_socket_sends_no_token(
    config_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GPUPOOL_TOKEN", TOKEN)
    monkeypatch.delenv("GPUPOOL_URL", raising=False)
    assert Client(tmp_path / "state").token is None
