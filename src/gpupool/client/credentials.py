"""The API token a client sends over TCP: $GPUPOOL_TOKEN, else the token file.

The token file is `$XDG_CONFIG_HOME/gpupool/token` (default `~/.config/gpupool/token`), or
the file $GPUPOOL_TOKEN_FILE names. It must be the user's own and readable by nobody else
(mode 0600 or stricter): a token another user could read is refused with the command that
fixes it, as ssh refuses a private key others can read. Over the Unix socket no token is
sent: the kernel names the caller.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gpupool.client.errors import BadClientSetting

MAX_TOKEN_FILE_BYTES = 4096


def token_file() -> tuple[Path, str]:
    """The token file's path and the setting that chose it (for messages)."""
    named = os.environ.get("GPUPOOL_TOKEN_FILE")
    if named:
        return Path(named), "GPUPOOL_TOKEN_FILE"
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(Path.home(), ".config")
    return Path(config) / "gpupool" / "token", "token file"


def find_token() -> str | None:
    """The token to send over TCP (None: none is set up; the pool answers 401 saying how
    to get one). BadClientSetting for a token file that is not safe or not readable."""
    text = os.environ.get("GPUPOOL_TOKEN", "").strip()
    if text:
        return text
    path, setting = token_file()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        if setting == "GPUPOOL_TOKEN_FILE":
            raise BadClientSetting(setting, f"no such file: {path}") from None
        return None
    except OSError as exc:
        raise BadClientSetting(setting, f"cannot read {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise BadClientSetting(setting, f"{path} is not a regular file")
        if info.st_uid != os.getuid():
            raise BadClientSetting(
                setting, f"{path} belongs to uid {info.st_uid}, not to you: a token file "
                "must be your own"
            )  # fmt: skip
        if info.st_mode & 0o077:
            mode = stat.S_IMODE(info.st_mode)
            raise BadClientSetting(
                setting,
                f"{path} is readable by other users (mode {mode:04o}): run `chmod 600 {path}` "
                "(a token is a password)",
            )
        data = f.read(MAX_TOKEN_FILE_BYTES + 1)
    if len(data) > MAX_TOKEN_FILE_BYTES:
        raise BadClientSetting(setting, f"{path} is too large to be a token")
    token = data.decode("utf-8", errors="replace").strip()
    return token or None
