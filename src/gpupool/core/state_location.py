"""Where a pool's state directory is, as text: what the client needs to reach its socket on
every `gpupool submit` or `queue`, without importing `pathlib` (and the `urllib.parse` and
`ipaddress` it imports: ~2.5 ms of each command). core/paths.py gives the same as a `Path`.
"""

from __future__ import annotations

import os

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

SOCKET_NAME = "gpupool.sock"


def state_dir_text(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """--state-dir, else $GPUPOOL_STATE_DIR, else $XDG_DATA_HOME/gpupool (~/.local/share);
    absolute, with the user's home expanded, and written as `pathlib` writes it."""
    env = os.environ if environ is None else environ
    if explicit:
        return absolute_text(explicit)
    if env.get("GPUPOOL_STATE_DIR"):
        return absolute_text(env["GPUPOOL_STATE_DIR"])
    base = env.get("XDG_DATA_HOME") or os.path.join(env.get("HOME", "~"), ".local", "share")
    return absolute_text(os.path.join(os.path.expanduser(base), "gpupool"))


def socket_text(state: str) -> str:
    """The daemon's Unix socket in the state directory `state`."""
    return os.path.join(state, SOCKET_NAME)


def absolute_text(text: str) -> str:
    """`str(Path(text).expanduser().absolute())`: empty and `.` parts dropped, `..` kept (a
    symlink's parent is not its lexical one), a leading `~` or `~user` part expanded, made
    absolute against the working directory and, as POSIX allows, a leading `//` kept."""
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if text.startswith("/"):
        root = "//" if text.startswith("//") and not text.startswith("///") else "/"
        return root + "/".join(parts)
    if parts and parts[0].startswith("~"):
        home = os.path.expanduser(parts[0])
        if not home.startswith("~"):  # else no such user: pathlib raises, the kernel refuses
            return absolute_text("/".join([home, *parts[1:]]))
    return absolute_text(os.getcwd() + "/" + "/".join(parts))
