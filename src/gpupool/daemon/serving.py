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
import gc
import signal
import socket
import ssl
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import uvicorn

from gpupool import __version__
from gpupool.api.connections import PoolProtocol
from gpupool.api.guards import BrowserGuard, HostNames, routed_by
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
    # TCP clients on this machine without a token are their socket's owner (api/loopback.py);
    # False (`--no-loopback-identity`): every TCP client needs a token, e.g. behind a proxy
    # on this machine that forwards other people's requests.
    loopback_identity: bool = True


def guarded(app: Asgi, settings: HttpSettings, tcp: socket.socket | None) -> Asgi:
    """`app` inside the body limit, the submit rate limit and, with TCP, the browser guard."""
    inner: Asgi = LimitBody(app, settings.limits.max_body_bytes, __version__)
    inner = SubmitRateLimit(inner, settings.submit_rate, __version__)
    if tcp is not None:
        hosts = HostNames.of(str(tcp.getsockname()[0]), settings.server_names)
        # A method no route has is left to the app's routing (405), whatever its content type.
        inner = BrowserGuard(inner, hosts, __version__, routed_by(app))
    return inner


class ListenerServer(uvicorn.Server):
    """A uvicorn server for one listening socket, leaving signals to `serve` (two servers,
    one set of handlers)."""

    def __init__(self, config: uvicorn.Config, sock: socket.socket, tls: bool) -> None:
        super().__init__(config)
        self.sock = sock
        self.tls = tls  # it serves TLS (PoolProtocol starts it)

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
    return ListenerServer(config, sock, tls is not None)


def loop_factory(tls: bool) -> Callable[[], asyncio.AbstractEventLoop]:
    """The daemon's event loop: uvloop's (libuv) where it is installed (a dependency on
    Linux), else asyncio's own. Under 100 clients submitting at once uvloop's transports
    and its cheaper wake-ups from the API's threads gave ~1.5x the submissions per second
    (bench/load.py, docs/benchmarks.md): the daemon is bound by one interpreter's time.

    Not when TCP serves TLS: PoolProtocol starts TLS itself (loop.start_tls, after the
    connection is counted), and uvloop's start_tls lost handshakes here (clients saw EOF;
    uvloop issues #564 and #707 are open on it). asyncio's is the one tested with TLS."""
    if not tls:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop
    return asyncio.new_event_loop


# The youngest generation's threshold (CPython's default is 700 allocations).
YOUNG_GC_THRESHOLD = 20_000
# Young collections between two collections of the middle generation (CPython's default: 10).
MIDDLE_GC_THRESHOLD = 2


def tune_garbage_collector() -> None:
    """Keep the cyclic garbage collector from pausing the daemon under load.

    Under 100 clients the objects of requests in flight outlived CPython's young
    collections (every 700 allocations) and were promoted, so full collections of the whole
    heap (all jobs included) ran every ~1.5 s and held every thread 50-100 ms: the submit
    latency's p99 (bench/load.py, docs/benchmarks.md). Now: what start-up made (modules,
    classes, the jobs read at start) is frozen out of collections, it is never garbage; and
    young collections wait for 20,000 allocations, so a request's objects die young. Garbage
    is still freed at once by reference counting; only cycles wait a little longer.
    The middle generation is collected every 2 young collections, not 10: what survived
    10 young collections of 20,000 (a stream's new jobs, ~110,000 objects at 10,000
    submissions) took 65-75 ms to collect, every thread stopped; after 2, 15-36 ms
    (gc.callbacks, bench/load.py).
    """
    gc.collect()
    gc.freeze()
    old = gc.get_threshold()[2]
    gc.set_threshold(YOUNG_GC_THRESHOLD, MIDDLE_GC_THRESHOLD, old)


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
        with asyncio.Runner(loop_factory=loop_factory(any(s.tls for s in servers))) as runner:
            runner.run(all_servers())
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
