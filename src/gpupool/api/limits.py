"""What one HTTP client may cost the daemon: the numbers (`HttpLimits`), the request-body
limit (`LimitBody`, 413) and the file-descriptor budget the connection caps are cut from.

The limits are layered so that each is enforced where it is cheapest (docs/security.md,
"Limits"):
- the connection (api/connections.py): open connections per listener, a deadline for a
  request's head and body, the head's size (431);
- the body, here: refused by its Content-Length before a byte of it is read, or as soon as
  a chunked body passes the limit (413);
- the fields (spec/rules.py and the routes): lengths of names, commands, environments (422
  or 400 naming the field).
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

from gpupool.api.checks import Asgi, Receive, Scope, Send, replaying, send_error
from gpupool.core.units import format_size

DEFAULT_MAX_BODY = 1024 * 1024  # a spec with the submitter's whole environment fits easily
DEFAULT_MAX_HEAD = 16 * 1024  # request line and headers (as h11, uvicorn's other parser)
DEFAULT_READ_TIMEOUT_S = 10.0
DEFAULT_MAX_TCP_CONNECTIONS = 256
DEFAULT_MAX_UNIX_CONNECTIONS = 1024
# Descriptors kept for everything but connections: the database, job logs, supervisors'
# pipes, the listeners themselves.
RESERVED_FDS = 256


@dataclass(frozen=True)
class HttpLimits:
    """Limits on what HTTP clients may cost the daemon (`gpupool server` flags)."""

    max_body_bytes: int = DEFAULT_MAX_BODY
    max_head_bytes: int = DEFAULT_MAX_HEAD
    # A request's head and body must have arrived this long after the connection was made
    # (or after the previous answer on it); then the connection is closed.
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    max_tcp_connections: int = DEFAULT_MAX_TCP_CONNECTIONS
    max_unix_connections: int = DEFAULT_MAX_UNIX_CONNECTIONS

    def within(self, file_limit: int) -> HttpLimits:
        """These limits with the connection caps cut to fit `file_limit` descriptors: the
        Unix socket and TCP together never take more than what is left after RESERVED_FDS,
        and TCP at most a third of it, so a TCP flood leaves the Unix socket room to answer."""
        room = max(file_limit - RESERVED_FDS, 16)
        tcp = max(min(self.max_tcp_connections, room // 3), 1)
        unix = max(min(self.max_unix_connections, room - tcp), 1)
        return HttpLimits(self.max_body_bytes, self.max_head_bytes, self.read_timeout_s, tcp, unix)


def raise_file_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit (allowed to any process);
    return the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # kept as it was: the caps are cut to fit it (HttpLimits.within)
    return soft


def body_too_large(size: int | None, limit: int) -> str:
    given = "" if size is None else f" ({format_size(size)})"
    return (
        f"the request body is too large{given}: this daemon accepts at most "
        f"{format_size(limit)} (`gpupool server --max-body`); a job's command and "
        "environment must fit in it"
    )


class LimitBody:
    """Pure ASGI middleware: a request body over `limit` bytes is refused with 413 (and the
    connection closed) before the app sees it: by its Content-Length before any of it is
    read, or, chunked, as soon as the bytes read pass the limit. The body is read whole
    here, so a client that hangs up halfway (or is dropped by the read deadline) ends the
    request quietly, never as an exception in a route."""

    def __init__(self, app: Asgi, limit: int, version: str) -> None:
        self.app = app
        self.limit = limit
        self.version = version

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await _linger(receive)
            await self._refuse(send, declared)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client is gone: nobody to answer
            chunk = bytes(message.get("body", b""))
            size += len(chunk)
            if size > self.limit:
                await self._refuse(send, None)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, replaying(b"".join(chunks), receive), send)

    async def _refuse(self, send: Send, size: int | None) -> None:
        message = body_too_large(size, self.limit)
        await send_error(send, 413, "body_too_large", message, version=self.version, close=True)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            text = bytes(value).decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None


LINGER_BYTES = 64 * 1024 * 1024  # of a refused body, read and dropped before the answer
LINGER_IDLE_S = 0.25  # a refused body that stops arriving this long is not waited for


async def _linger(receive: Receive) -> None:
    """Read and drop what a client is already sending of a body refused by its
    Content-Length, chunk by chunk (nothing is kept), while it keeps arriving: a socket
    closed with unread data in it is reset, and the reset can destroy the 413 before the
    client reads it (nginx's lingering close). A client that waits for the answer before
    sending (Expect: 100-continue, or just the head) is answered after LINGER_IDLE_S."""
    import asyncio

    read = 0
    while read <= LINGER_BYTES:
        try:
            message = await asyncio.wait_for(receive(), LINGER_IDLE_S)
        except TimeoutError:
            return
        if message["type"] != "http.request":
            return
        read += len(message.get("body", b""))
        if not message.get("more_body", False):
            return
