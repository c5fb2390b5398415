"""What `gpupool server` checks before it writes anything, and the state directory it makes.

Bad input (a state directory that is a file or cannot be made, a --listen that is no
address or is in use, a database URL the store cannot use) is one line of error, exit 2, and
leaves nothing behind: these checks run before the state directory, its lock, its socket or
its database is created. DaemonError carries the line and the exit status.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
from pathlib import Path

from sqlalchemy.engine import URL

from gpupool.core.paths import DIR_MODE, PARENT_MODE, PASSABLE_DIRS, TOP_MODE
from gpupool.store.urls import BadDatabaseUrl, check_database_url

BAD_INPUT = 2  # the CLI's exit status for bad input


class DaemonError(RuntimeError):
    """The daemon does not start (or stops): `str()` is the message, `exit_code` the status
    (1: the environment, e.g. another daemon; BAD_INPUT: what the user gave)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _nearest_existing(path: Path) -> Path:
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return Path(path.anchor or "/")


def check_state_dir(path: Path) -> None:
    """DaemonError unless `path` is a directory this user may write, or can be made one."""
    where = f"--state-dir {path}"
    found = _nearest_existing(path)
    if found == path:
        if not path.is_dir():
            raise DaemonError(f"{where}: not a directory", BAD_INPUT)
        if not os.access(path, os.W_OK | os.X_OK):
            raise DaemonError(f"{where}: not writable by this user", BAD_INPUT)
        return
    if not found.is_dir():
        raise DaemonError(f"{where}: cannot be created: {found} is not a directory", BAD_INPUT)
    if not os.access(found, os.W_OK | os.X_OK):
        raise DaemonError(f"{where}: cannot be created: {found} is not writable", BAD_INPUT)


def make_state_dir(path: Path) -> None:
    """Create `path` and its missing parents; on failure, remove what was made (DaemonError).

    The parents are made PARENT_MODE whatever the umask (the daemon's is private): other
    users must pass through them to reach the socket. `path` itself is made DIR_MODE;
    `secure_state_dir` gives it its final mode.
    """
    missing = [p for p in (path, *path.parents) if not os.path.lexists(p)]
    made: list[Path] = []
    try:
        for p in reversed(missing):
            p.mkdir(mode=DIR_MODE)
            made.append(p)
            if p != path:
                p.chmod(PARENT_MODE)
    except OSError as exc:
        for p in reversed(made):
            try:
                p.rmdir()
            except OSError:
                pass
        why = exc.strerror or str(exc)
        raise DaemonError(f"--state-dir {path}: cannot be created: {why}", BAD_INPUT) from None


def secure_state_dir(path: Path) -> None:
    """Give the state directory its modes (core/paths.py, docs/security.md): the top level
    TOP_MODE, every directory and file below it its owner's alone.

    A top level at TOP_MODE was secured by an earlier start, and since then everything was
    created under the daemon's PRIVATE_UMASK: nothing to walk. Any other (new, or left by an
    older version with 0755 directories and 0644 files, the database and launch.json among
    them) has group and other permissions taken off every entry below it first, and its
    top level set last, so that a start interrupted half-way walks again. Owners are kept
    (a job's log is its owner's); symbolic links and sockets are left alone.
    """
    try:
        if stat.S_IMODE(os.lstat(path).st_mode) == TOP_MODE:
            return
        for root, dirs, files in os.walk(path):  # does not follow links to directories
            for name in (*dirs, *files):
                _make_private(os.path.join(root, name))
        for name in PASSABLE_DIRS:  # passable by design (core/paths.py)
            passable = path / name
            if passable.is_dir() and not passable.is_symlink():
                os.chmod(passable, TOP_MODE)
        os.chmod(path, TOP_MODE)
    except OSError as exc:  # e.g. an entry of another user's: refuse rather than run open
        where = exc.filename or path
        why = exc.strerror or str(exc)
        raise DaemonError(f"--state-dir {path}: cannot make {where} private: {why}") from None


def _make_private(entry: str) -> None:
    with contextlib.suppress(FileNotFoundError):  # gone meanwhile: nothing to do
        st = os.lstat(entry)
        if stat.S_ISLNK(st.st_mode) or stat.S_ISSOCK(st.st_mode):
            return
        if st.st_mode & 0o077:
            os.chmod(entry, stat.S_IMODE(st.st_mode) & ~0o077)


def parse_listen(listen: str) -> tuple[str, int]:
    """(host, port) of a --listen value; DaemonError when it is not HOST:PORT."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit():
        raise DaemonError(
            f"--listen wants HOST:PORT, e.g. 127.0.0.1:8765, got {listen!r}", BAD_INPUT
        )
    if not 0 <= int(port) <= 65535:
        raise DaemonError(f"--listen {listen}: port must be 0-65535, got {port}", BAD_INPUT)
    return host, int(port)


def bind_tcp(listen: str) -> socket.socket:
    """A listening TCP socket for --listen; DaemonError (nothing left open) when it cannot be."""
    host, port = parse_listen(listen)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        why = f"unknown host {host!r} ({exc.strerror})"
        raise DaemonError(f"--listen {listen}: {why}", BAD_INPUT) from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            why = "the address is already in use (another gpupool daemon, or another program)"
        elif exc.errno == errno.EADDRNOTAVAIL:
            why = f"{host} is not an address of this machine"
        elif exc.errno == errno.EACCES:
            why = f"permission denied (ports below 1024 need privileges): {exc.strerror}"
        else:
            why = exc.strerror or str(exc)
        raise DaemonError(f"--listen {listen}: {why}", BAD_INPUT) from None
    return sock


def database_url(text: str) -> URL:
    """The parsed --database-url (see store/urls.py); DaemonError when it cannot be used."""
    try:
        return check_database_url(text)
    except BadDatabaseUrl as exc:
        raise DaemonError(f"--database-url {exc}", BAD_INPUT) from None


def is_loopback(host: str) -> bool:
    """Whether every address `host` names is a loopback one (127.0.0.0/8, ::1); an unknown
    host is not (bind_tcp says why it cannot be used)."""
    import ipaddress

    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(
        ipaddress.ip_address(str(a).split("%")[0]).is_loopback for a in addresses
    )


def check_exposure(listen: str | None, tls: tuple[str, str] | None, insecure_listen: bool) -> None:
    """DaemonError (bad input) for TCP that would carry requests in clear text beyond this
    machine, unless --insecure-listen says so; for half a TLS pair, or TLS without TCP; for
    a certificate and key that do not load."""
    if tls is not None and listen is None:
        raise DaemonError("--tls-cert/--tls-key: TLS is for TCP: give --listen too", BAD_INPUT)
    if listen is None:
        return
    host, _ = parse_listen(listen)
    if tls is None and not insecure_listen and not is_loopback(host):
        raise DaemonError(
            f"--listen {listen}: not a loopback address, and without TLS every request (API "
            "tokens included) would cross the network in clear text: serve HTTPS with "
            "--tls-cert FILE --tls-key FILE, listen on 127.0.0.1 behind a TLS proxy, or add "
            "--insecure-listen on a network you trust",
            BAD_INPUT,
        )
    if tls is not None:
        import ssl

        cert, key = tls
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert, key)
        except (OSError, ssl.SSLError) as exc:
            why = getattr(exc, "strerror", None) or str(exc)
            raise DaemonError(
                f"--tls-cert {cert} --tls-key {key}: cannot be used: {why}", BAD_INPUT
            ) from None
