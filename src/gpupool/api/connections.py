"""Who is at the other end of an HTTP connection, told to the app through the ASGI scope.

uvicorn runs one protocol object per connection; `PoolProtocol` is uvicorn's httptools
protocol (a C parser: h11's, in Python, was ~a quarter of the event loop's time under 100
clients submitting at once, bench/load.py) that, when the connection is made, learns
which listener accepted it (the Unix socket or TCP) and, on the Unix socket, the client's
process, user and group from the kernel (SO_PEERCRED: nothing the client sends can change
it). Every request on that connection
then carries both in its scope, under `LISTENER_KEY` and `PEER_KEY`; `listener_of` and
`peer_of` read them back with their types. A TCP connection's requests also share one
`TcpClient` (`TCP_CLIENT_KEY`, `tcp_client_of`): what api/identity.py learnt of its client
(the owner of a loopback client's socket, api/loopback.py) is looked up once a connection.

It also keeps what one client may cost the daemon within `HttpLimits` (api/limits.py):
- a cap on open connections per listener: past it, a new connection is closed as soon as
  it is accepted, so a flood of TCP connections can take neither every file descriptor nor
  the Unix socket's share of them (the caps are cut from the file limit);
- a deadline for each request's head and body, from the connection (or the previous
  answer on it): a half-sent request is answered 408 and dropped, whether its head or its
  body stopped halfway (an app already answering it is only cut off);
- the head's size: past it, 431 (uvicorn would say 400), counted exactly on a whole head,
  and on one still arriving from its second piece on (httptools keeps an unfinished header
  in memory: this bounds it);
- a request that is not HTTP: 400 with the parser's words, as JSON like every answer;
- its log is rate-limited (`gpupool.http`): a flood costs a few lines, not a traceback a
  connection;
- TLS (TCP only) is done here, after the connection is counted and its deadline armed, so
  connections that never finish their handshake are capped and dropped like the rest
  (asyncio's own TLS would hold each, uncounted, for 60 s).
"""

from __future__ import annotations

import asyncio
import enum
import http
import json
import logging
import socket
import ssl
import struct
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from gpupool import __version__
from gpupool.api.checks import API_HEADER
from gpupool.api.limits import HttpLimits

if TYPE_CHECKING:
    from collections.abc import Mapping

    from starlette.types import ASGIApp, Receive, Scope, Send

LISTENER_KEY = "gpupool.listener"
PEER_KEY = "gpupool.peer"
TCP_CLIENT_KEY = "gpupool.tcp_client"


class Listener(enum.Enum):
    UNIX = "unix"  # the local socket: the kernel names the client
    TCP = "tcp"  # the network: the client must prove who it is (a token)


@dataclass(frozen=True)
class Peer:
    """A local client as the kernel saw it when it connected (SO_PEERCRED)."""

    pid: int
    uid: int
    gid: int


_UCRED = struct.Struct("3i")  # struct ucred: pid_t pid; uid_t uid; gid_t gid


def peer_credentials(sock: socket.socket) -> Peer:
    """The connected Unix-socket client's credentials, from the kernel."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return Peer(pid=pid, uid=uid, gid=gid)


def listener_of(scope: Mapping[str, object]) -> Listener:
    """Which listener accepted the request. A scope made without PoolProtocol (a test client)
    counts as TCP: the side that proves nothing."""
    found = scope.get(LISTENER_KEY)
    return found if isinstance(found, Listener) else Listener.TCP


def peer_of(scope: Mapping[str, object]) -> Peer | None:
    """The local client's credentials; None over TCP."""
    found = scope.get(PEER_KEY)
    return found if isinstance(found, Peer) else None


@dataclass
class TcpClient:
    """What is known of a TCP connection's client, for the connection's life."""

    owner_uid: int | None = None  # its socket's owner, once found (api/loopback.py)


def tcp_client_of(scope: Mapping[str, object]) -> TcpClient | None:
    """The connection's `TcpClient`; None on the Unix socket (or a scope made without
    PoolProtocol)."""
    found = scope.get(TCP_CLIENT_KEY)
    return found if isinstance(found, TcpClient) else None


def _tagged(
    app: ASGIApp, listener: Listener, peer: Peer | None, tcp_client: TcpClient | None = None
) -> ASGIApp:
    async def tagged(scope: Scope, receive: Receive, send: Send) -> None:
        scope[LISTENER_KEY] = listener
        scope[PEER_KEY] = peer
        scope[TCP_CLIENT_KEY] = tcp_client
        await app(scope, receive, send)

    return tagged


class QuietLog(logging.Filter):
    """Lets through at most `burst` records per `window_s` seconds; the first record after a
    quiet spell says how many were left out."""

    def __init__(self, burst: int = 10, window_s: float = 60.0) -> None:
        super().__init__()
        self.burst, self.window_s = burst, window_s
        self.window_start, self.passed, self.dropped = 0.0, 0, 0

    def filter(self, record: logging.LogRecord) -> bool:
        now = time.monotonic()
        if now - self.window_start >= self.window_s:
            if self.dropped:
                record.msg = (
                    f"{self.dropped} messages about HTTP connections left out in the last "
                    f"{self.window_s:.0f} s; then: {record.msg}"
                )
            self.window_start, self.passed, self.dropped = now, 0, 0
        if self.passed >= self.burst:
            self.dropped += 1
            return False
        self.passed += 1
        return True


http_log = logging.getLogger("gpupool.http")
http_log.addFilter(QuietLog())


class HeadTooLarge(Exception):
    """Raised from a parser callback when the head passes its limit (httptools then raises
    its HttpParserCallbackError and uvicorn answers through `send_400_response`)."""


@dataclass
class OpenConnections:
    """Connections open now on each listener (shared by a server's protocol objects)."""

    count: dict[Listener, int] = field(default_factory=lambda: dict.fromkeys(Listener, 0))
    refused: int = 0


class PoolProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with the listener and the peer put into every request's
    scope, within `limits` (see the module's docstring). `configured` makes the class a server
    uses, with its limits and its own connection counts."""

    limits: ClassVar[HttpLimits] = HttpLimits()
    open_connections: ClassVar[OpenConnections] = OpenConnections()
    tls: ClassVar[ssl.SSLContext | None] = None  # TCP connections speak TLS with it

    @classmethod
    def configured(
        cls, limits: HttpLimits, tls: ssl.SSLContext | None = None
    ) -> type[PoolProtocol]:
        return type(
            "PoolProtocol",
            (cls,),
            {"limits": limits, "open_connections": OpenConnections(), "tls": tls},
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.logger = http_log
        self.listener: Listener | None = None  # None: refused (over the cap) or not yet made
        self.raw_transport: asyncio.Transport | None = None  # before TLS, if any
        self.served = False  # uvicorn's connection_made has run (after TLS, if any)
        self.deadline: asyncio.TimerHandle | None = None
        self.cycle_before: RequestResponseCycle | None = None  # the cycle answered last
        # The head being read: its size as the parser has handed it over (the request line
        # and each whole header), and the bytes of the pieces that came after its first
        # (an unfinished header is in none of the parser's callbacks yet).
        self.head_open = False
        self.head_began_in_piece = False
        self.head_bytes = 0
        self.head_piece_bytes = 0
        self.head_too_large = False  # the parser's callbacks found it over (send_400_response)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        unix = sock is not None and sock.family == socket.AF_UNIX
        listener = Listener.UNIX if unix else Listener.TCP
        opened = self.open_connections
        cap = self.limits.max_unix_connections if unix else self.limits.max_tcp_connections
        if opened.count[listener] >= cap:
            opened.refused += 1
            http_log.warning(
                "%s connections at their cap (%d): closing new ones (%d so far; "
                "`gpupool server --max-connections`)",
                listener.value,
                cap,
                opened.refused,
            )
            transport.abort()
            return
        opened.count[listener] += 1
        self.listener = listener
        self.raw_transport = transport
        if unix:
            self.app = _tagged(self.app, Listener.UNIX, peer_credentials(sock))
        else:
            self.app = _tagged(self.app, Listener.TCP, None, TcpClient())
        self._arm()  # the deadline covers the TLS handshake too
        if self.tls is not None and not unix:
            transport.pause_reading()  # no byte of the handshake may reach the parser
            self.loop.create_task(self._start_tls(transport, self.tls))
            return
        self.served = True
        super().connection_made(transport)

    async def _start_tls(self, transport: asyncio.Transport, context: ssl.SSLContext) -> None:
        try:
            secure = await self.loop.start_tls(
                transport,
                self,
                context,
                server_side=True,
                ssl_handshake_timeout=self.limits.read_timeout_s,
            )
        except (OSError, RuntimeError, ValueError):  # SSLError and TimeoutError are OSErrors
            # A failed handshake: nothing to answer. asyncio does not call connection_lost
            # for a connection lost during its handshake: count it out here.
            transport.abort()
            self._release()
            return
        if secure is None or self.listener is None:  # lost meanwhile
            return
        self.served = True
        super().connection_made(secure)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._release() and self.served:
            super().connection_lost(exc)

    def _release(self) -> bool:
        """Count this connection out (once); False if it was never counted in (refused) or
        already counted out."""
        if self.listener is None:
            return False
        self.open_connections.count[self.listener] -= 1
        self.listener = None
        self._disarm()
        return True

    # The parser's callbacks, counting the head (see `head_bytes`).
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.head_open, self.head_began_in_piece = True, True
        self.head_bytes = self.head_piece_bytes = 0

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        self._count_head(len(url))

    def on_header(self, name: bytes, value: bytes) -> None:
        super().on_header(name, value)
        self._count_head(len(name) + len(value) + 4)  # ": " and CRLF

    def on_headers_complete(self) -> None:
        self.head_open = False
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle is not self.cycle_before:
            cycle.transport = JoinedWrites(self.transport, self.loop)  # type: ignore[assignment]

    def _count_head(self, size: int) -> None:
        self.head_bytes += size
        if self.head_bytes > self.limits.max_head_bytes:
            self.head_too_large = True
            raise HeadTooLarge

    def data_received(self, data: bytes) -> None:
        self.head_began_in_piece = False
        super().data_received(data)
        if self.transport.is_closing():
            return
        if self.head_open and not self.head_began_in_piece:  # a piece wholly of the head
            self.head_piece_bytes += len(data)
            if self.head_piece_bytes > self.limits.max_head_bytes:
                self._refuse_head_too_large()
                return
        cycle = self.cycle
        if cycle is not None and cycle is not self.cycle_before and not cycle.more_body:
            self._disarm()  # the whole request is in: the deadline is met

    def on_response_complete(self) -> None:
        self.cycle_before = self.cycle
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()  # the next request on this connection has its own deadline

    def send_400_response(self, msg: str) -> None:
        """uvicorn calls this from inside its `except` for the parser's error: the error
        (sys.exc_info) has the parser's own words, uvicorn's `msg` only "invalid"."""
        if self.head_too_large:
            self._refuse_head_too_large()
            return
        error = sys.exc_info()[1]
        self._refuse(400, "bad_http", f"not a valid HTTP request: {error or msg}")

    def _refuse_head_too_large(self) -> None:
        limit = self.limits.max_head_bytes
        message = f"the request line and headers are too large: at most {limit} bytes"
        self._refuse(431, "head_too_large", message)

    def _refuse(self, status: int, code: str, message: str) -> None:
        """Answer `status` with the API's JSON error and close. Not while an answer to an
        earlier request on this connection is still being written (its bytes would mix
        with ours): then only close."""
        answering = self.cycle is not None and not self.cycle.response_complete
        if not answering:
            self.transport.write(_error_answer(status, code, message))
        self.transport.close()

    def _arm(self) -> None:
        self._disarm()
        self.deadline = self.loop.call_later(self.limits.read_timeout_s, self._timed_out)

    def _disarm(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def _timed_out(self) -> None:
        self.deadline = None
        if not self.served:  # the TLS handshake did not finish in time
            if self.raw_transport is not None:
                self.raw_transport.abort()
            self._release()
            return
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is not None and cycle is not self.cycle_before:  # the head came, not the body
            if cycle.response_started:  # the app answers already: its bytes are not ours to mix
                self.transport.close()
                return
            # The app waits for the rest of the body: it reads a disconnect, answers nothing.
            cycle.disconnected = True
            cycle.message_event.set()
        elif cycle is not None and not self.head_open:
            # Idle after an answer, not a byte of another request: closed without a word,
            # as at uvicorn's keep-alive timeout. An answer nobody asked for could be read
            # as the answer to a request a kept connection sends as it closes
            # (client/kept_connections.py).
            self.transport.close()
            return
        # Not even the head came, or the body stopped halfway: the client is told (408).
        message = f"the request did not arrive whole within {self.limits.read_timeout_s:g} s"
        self.transport.write(_error_answer(408, "request_timeout", message))
        self.transport.close()


class JoinedWrites:
    """The transport as an answer's cycle sees it: what the app writes in one step (the
    head and the body of a plain answer, which uvicorn writes apart) goes out in one
    write at the end of the step, as one system call and one wake-up of the client.
    Two writes an answer were ~a tenth of the event loop's time for a submission from 8
    SDK clients (docs/benchmarks.md, issue 35 goal 4). Order is kept: the bytes are out
    before the cycle's close, and before any later callback of the loop (the next data
    read, a deadline) runs."""

    __slots__ = ("_transport", "_loop", "_pending")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(data)

    def _flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()


def _error_answer(status: int, code: str, message: str) -> bytes:
    """A whole HTTP/1.1 answer carrying the API's JSON error, that closes the connection."""
    body = json.dumps({"error": code, "message": message}).encode()
    head = (
        f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
        f"{API_HEADER}: {__version__}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body
