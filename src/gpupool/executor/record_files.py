"""The supervisor's records on disk (supervisor.py's sibling, run with it as a script:
standard library only, never importing gpupool): whole files or none, replaced atomically,
durable when asked, and an exit record retried until a full disk takes it.
"""

import contextlib
import json
import os
import time

TYPE_CHECKING = False  # typing costs ~4 ms of every launch; mypy takes this as true
if TYPE_CHECKING:
    from collections.abc import Mapping

FILE_MODE = 0o600  # as core.paths.FILE_MODE: every file here is private (docs/security.md)


def write_file(path: str, data: bytes, durable: bool) -> None:
    """Create ``path`` with all of ``data``; on failure (a full disk) remove it and raise.
    On a nearly full disk write() may take only part of the data without an error."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise


def fsync_path(path: str, flags: int = 0) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_json(jobdir: str, name: str, obj: "Mapping[str, object]", durable: bool) -> None:
    """Replace JOBDIR/name atomically; raises (leaving no temporary) when it cannot."""
    tmp = os.path.join(jobdir, f"{name}.tmp-{os.getpid()}")
    write_file(tmp, json.dumps(obj, sort_keys=True).encode(), durable)
    try:
        os.replace(tmp, os.path.join(jobdir, name))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_path(jobdir, os.O_DIRECTORY)


def claim(jobdir: str, obj: "Mapping[str, object]") -> bool:
    """Create JOBDIR/claim.json with ``obj`` (True), unless it exists (False).

    link() fails if claim.json exists, so of any number of supervisors racing on one
    JOBDIR exactly one wins, and claim.json is never seen half-written.
    """
    tmp = os.path.join(jobdir, f"claim.json.tmp-{os.getpid()}")
    # Not fsynced here (that would sit on the spawn path); made durable after the spawn.
    write_file(tmp, json.dumps(obj, sort_keys=True).encode(), False)
    try:
        os.link(tmp, os.path.join(jobdir, "claim.json"))
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


# Retrying a record that cannot be written yet (a full disk): first after RETRY_FIRST_S,
# then twice as long each time, up to RETRY_MAX_S, for as long as it takes. Only a job
# directory that is gone (nothing could ever be recorded in it) ends the attempts.
RETRY_FIRST_S = 0.05
RETRY_MAX_S = 1.0


def write_until_done(jobdir: str, name: str, obj: "Mapping[str, object]") -> bool:
    """Write JOBDIR/name durably, retrying while the disk refuses; False if JOBDIR is gone.

    The record stays in memory meanwhile, and the daemon keeps the job RUNNING: its
    supervisor is alive, so the job is not lost, and a full disk never turns into a
    failure. Once space is back the record is written, true end time included.
    """
    import errno

    delay = RETRY_FIRST_S
    while True:
        try:
            atomic_json(jobdir, name, obj, durable=True)
            return True
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return False
        time.sleep(delay)
        delay = min(delay * 2, RETRY_MAX_S)


def notify(path: "str | None") -> None:
    """Best-effort: tell the daemon (its socket, launch.json's `notify_socket`) an exit is
    recorded. It may be dead; that is fine."""
    if not path:
        return
    import socket

    with contextlib.suppress(OSError, ValueError), socket.socket(socket.AF_UNIX) as s:
        s.settimeout(1.0)
        s.connect(path)
        s.sendall(
            b"POST /v1/internal/wake HTTP/1.1\r\nHost: gpupool\r\n"
            b"Content-Length: 0\r\nConnection: close\r\n\r\n"
        )
        s.recv(1024)  # let the server read the request before we hang up
