"""Connections to the daemon kept open between one client's requests (HTTP/1.1 keep-alive).

A program that sends many requests (the SDK submitting a job a call, a wait that polls)
paid a new connection for each: the connect, and in the daemon the accept, a protocol
object, the peer's credentials from the kernel and the close, about a fifth of the daemon's
time for a submission from 8 SDK clients (docs/benchmarks.md, issue 35 goal 4). Now a
`Client` keeps the connection an answer left open and sends its next request on it.

Contract (client/http.py's `request_raw` keeps it):
- a connection is used again only by the process that opened it (a forked child does not
  share its parent's), only within KEPT_FOR_S of its last answer (the daemon closes an idle
  connection after 5 s, uvicorn's keep-alive timeout, or its read deadline), and only when
  nothing waits to be read on it (the daemon closed it, or sent something unasked);
- a request whose reused connection failed before a byte of an answer came is sent once
  more on a new connection when sending it twice is harmless: a GET, or a submission with
  its token (the daemon stores a token's job once). Any other raises ConnectionLost, as a
  lost connection always did;
- at most MAX_KEPT idle connections a client; threads share them, never one at once.
"""

from __future__ import annotations

import _thread
import os
import time

from gpupool.client.errors import PoolUnreachable
from gpupool.client.transport import ClosedUnanswered, exchange_kept

TYPE_CHECKING = False  # typing costs every CLI command ~2 ms (gpupool/__init__.py)
if TYPE_CHECKING:
    from _socket import socket as Socket
    from collections.abc import Callable

KEPT_FOR_S = 2.0
MAX_KEPT = 8


class KeptConnections:
    """The idle connections of one client, the most recently used first."""

    def __init__(self) -> None:
        self._idle: list[tuple[Socket, str, float, int]] = []  # socket, host, since, pid
        self._lock = _thread.allocate_lock()

    def take(self) -> tuple[Socket, str] | None:
        """An idle connection that may carry a request now (and its Host), or None."""
        now, pid = time.monotonic(), os.getpid()
        while True:
            with self._lock:
                if not self._idle:
                    return None
                sock, host, since, owner = self._idle.pop()
            # Closing a forked child's copy closes its descriptor only: the parent's
            # connection stays open.
            if owner != pid or now - since > KEPT_FOR_S or _readable(sock):
                sock.close()
                continue
            return sock, host

    def keep(self, sock: Socket, host: str) -> None:
        """`sock` answered whole and may carry another request: keep it (or close it when
        MAX_KEPT are kept already)."""
        with self._lock:
            if len(self._idle) < MAX_KEPT:
                self._idle.append((sock, host, time.monotonic(), os.getpid()))
                return
        sock.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for sock, *_ in idle:
            sock.close()


def exchange_on(
    kept: KeptConnections,
    connect: Callable[[], tuple[Socket, str]],
    method: str,
    path: str,
    payload: bytes | None,
    token: str | None,
    replayable: bool,
) -> tuple[Socket, str, tuple[int, dict[str, str], bytes, bool]]:
    """`exchange_kept` on a kept connection when there is one, else on a new one from
    `connect`; the socket and its Host come back with the answer, for the caller to keep or
    close (closed here when this raises). A kept connection that fails before a byte of an
    answer came is one the daemon closed idle: the request goes again on a new connection
    if it is `replayable` or a GET (the module's contract), else the failure is raised."""
    taken = kept.take()
    sock, host = taken if taken is not None else connect()
    try:
        try:
            return sock, host, exchange_kept(sock, method, path, payload, host, token)
        except (ClosedUnanswered, BrokenPipeError, ConnectionResetError) as exc:
            if taken is None or not (replayable or method == "GET"):
                raise
            sock.close()
            try:
                sock, host = connect()
            except PoolUnreachable:  # the first try was sent: say it was lost
                raise exc from None
            return sock, host, exchange_kept(sock, method, path, payload, host, token)
    except BaseException:
        sock.close()
        raise


def _readable(sock: Socket) -> bool:
    """Whether anything (EOF included) waits to be read on an idle connection: the daemon
    closed it or sent something unasked. Either way it carries no more requests."""
    import select  # only once a connection is used again: never on a one-request CLI call

    try:
        ready, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):  # closed under us
        return True
    return bool(ready)
