"""How the daemon serves its app: one uvicorn server per listener, in one event loop.

The Unix socket and TCP are two servers of the same app because they differ: TLS is for TCP
only (`--tls-cert/--tls-key`; a local client needs none, and its identity is the kernel's),
and each keeps its own connection count (api/connections.py). Around the app, outermost
first: the browser guard (Host, content type; TCP only), the submit rate limit, the body
limit. Signals are handled here once for both servers: SIGINT or SIGTERM stops serving (a
second SIGINT stops at once, not waiting for open requests).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import ssl
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import uvicorn

from gpupool import __version__
from gpupool.api.connections import PoolProtocol
from gpupool.api.guards import BrowserGuard, HostNames
from gpupool.api.limits import HttpLimits, LimitBody
from gpupool.api.ratelimit import SubmitRate, SubmitRateLimit

if TYPE_CHECKING:
    from gpupool.api.checks import Asgi


LISTEN_BACKLOG = 128


@dataclass(frozen=True)
class Tls:
    cert: Path
    key: Path


@dataclass(frozen=True)
class HttpSettings:
    """Everything about how the API is served (`gpupool server` flags)."""

    limits: HttpLimits = field(default_factory=HttpLimits)
    submit_rate: SubmitRate = field(default_factory=SubmitRate)
    server_names: tuple[str, ...] = ()
    tls: Tls | None = None


def guarded(app: Asgi, settings: HttpSettings, tcp: socket.socket | None) -> Asgi:
    """`app` inside the body limit, the submit rate limit and, with TCP, the browser guard."""
    inner: Asgi = LimitBody(app, settings.limits.max_body_bytes, __version__)
    inner = SubmitRateLimit(inner, settings.submit_rate, __version__)
    if tcp is not None:
        hosts = HostNames.of(str(tcp.getsockname()[0]), settings.server_names)
        inner = BrowserGuard(inner, hosts, __version__)
    return inner


class ListenerServer(uvicorn.Server):
    """A uvicorn server for one listening socket, leaving signals to `serve` (two servers,
    one set of handlers)."""

    def __init__(self, config: uvicorn.Config, sock: socket.socket) -> None:
        super().__init__(config)
        self.sock = sock

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def make_servers(
    app: Asgi, unix: socket.socket, tcp: socket.socket | None, settings: HttpSettings
) -> list[ListenerServer]:
    """The Unix socket's server and, with `tcp`, the TCP one (TLS when settings say)."""
    servers = [_server(app, settings.limits, unix, None)]
    if tcp is not None:
        servers.append(_server(app, settings.limits, tcp, settings.tls))
    return servers


def _server(app: Asgi, limits: HttpLimits, sock: socket.socket, tls: Tls | None) -> ListenerServer:
    context = None
    if tls is not None:  # done by PoolProtocol, so that handshakes are capped and timed
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(tls.cert, tls.key)
    config = uvicorn.Config(
        app,
        # Its own class: its own connection count.
        http=PoolProtocol.configured(limits, context),
        log_level="warning",
        access_log=False,
        lifespan="off",
        log_config=None,  # uvicorn's own loggers go through ours (timestamps, one format)
        proxy_headers=False,  # X-Forwarded-For would let a client choose its address
        # asyncio accepts up to `backlog` connections per wakeup before any is closed for
        # being over the cap: this bounds that burst (uvicorn's default is 2048).
        backlog=LISTEN_BACKLOG,
    )
    return ListenerServer(config, sock)


def serve(servers: Sequence[ListenerServer]) -> None:
    """Serve until every server stops (SIGINT/SIGTERM, or `should_exit` set by the caller)."""

    def stop(sig: int, _: FrameType | None) -> None:
        for server in servers:
            if server.should_exit and sig == signal.SIGINT:
                server.force_exit = True
            server.should_exit = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}

    async def all_servers() -> None:
        await asyncio.gather(*(s.serve(sockets=[s.sock]) for s in servers))

    try:
        asyncio.run(all_servers())
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
