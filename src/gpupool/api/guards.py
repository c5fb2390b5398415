"""What a web browser must not be able to do to a daemon listening on TCP: DNS rebinding
(the Host check, 421) and cross-site request forgery (the JSON content type, 415).

A page on evil.example can make the browser send a "simple" cross-origin POST (text/plain,
form data) to http://127.0.0.1:PORT, and, by pointing evil.example's DNS at 127.0.0.1, even
read the answers under its own origin. So, over TCP:
- the Host header must name this server: localhost, a literal IP address (no page can
  rebind those: its origin is that address), this machine's host name, the name --listen
  gave, or a name given with `--server-name`. Any port: an ssh tunnel or a proxy forwards
  from ports of its own, and the name is what a rebinding page cannot fake;
- every request with a method the API acts on (POST, PUT, PATCH, DELETE) must say
  `Content-Type: application/json`, which no browser sends cross-origin without a CORS
  preflight, which this API never grants. A method no route answers at the path (OPTIONS,
  TRACE, a PUT where there is no PUT) is left to routing, which answers it 405 (404 for a
  path no route has) before any handler runs: no content type makes that answer unsafe.
The Unix socket is not reachable from a browser: any Host, any content type (the job
supervisors' internal wake request sends neither).

A page on another site can still make the browser *load* a GET answer in no-cors mode (an
<img>, a <script>), and a browser on this machine is identified by its socket's owner
(api/loopback.py): `SameOriginAnswers` marks every answer `Cross-Origin-Resource-Policy:
same-origin` and `X-Content-Type-Options: nosniff`, so the browser hands no other origin
the body (not even as a script or style whose side effects could leak it).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from fastapi.routing import iter_route_contexts
from starlette.routing import Match

from gpupool.api.checks import Asgi, Message, Receive, Scope, Send, send_error
from gpupool.api.connections import Listener, listener_of

# The methods of the API's routes that act: they must be sent as JSON (module docstring).
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
JSON = "application/json"


@dataclass(frozen=True)
class HostNames:
    """The names the TCP listener answers to."""

    names: frozenset[str]  # lower case; IPv6 literals without brackets

    @classmethod
    def of(cls, listen_host: str, server_names: Iterable[str] = ()) -> HostNames:
        names = {"localhost", listen_host.strip("[]").lower()}
        for name in (socket.gethostname(), socket.getfqdn()):
            if name:
                names.add(name.lower())
        names.update(n.strip().strip("[]").lower() for n in server_names if n.strip())
        return cls(frozenset(names))

    def allows(self, host_header: str) -> bool:
        name, _ = split_host(host_header)
        return name is not None and (name in self.names or _is_ip(name))

    def describe(self) -> str:
        shown = sorted(f"[{n}]" if ":" in n else n for n in self.names)
        return f"{', '.join(shown)} or an IP address"


def split_host(header: str) -> tuple[str | None, int | None]:
    """(name in lower case, port or None) of a Host header; (None, None) when malformed."""
    text = header.strip().lower()
    if text.startswith("["):  # [v6] or [v6]:port
        end = text.find("]")
        if end < 0:
            return None, None
        name, rest = text[1:end], text[end + 1 :]
        if rest and not rest.startswith(":"):
            return None, None
        port_text = rest[1:] if rest else ""
    else:
        name, _, port_text = text.partition(":")
        if ":" in port_text:
            return None, None
    if not name:
        return None, None
    if port_text:
        if not port_text.isdigit() or int(port_text) > 65535:
            return None, None
        return name, int(port_text)
    return name, None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _header(scope: Scope, wanted: bytes) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == wanted:
            return bytes(value).decode("latin-1")
    return None


Routed = Callable[[Scope], bool]  # whether a route answers a request's method at its path


def routed_by(app: object) -> Routed:
    """`Routed` for a FastAPI app: one of its routes matches the request's path and method."""
    router = getattr(app, "router", None)

    def routed(scope: Scope) -> bool:
        routes = getattr(router, "routes", ())
        return any(r.matches(scope)[0] is Match.FULL for r in iter_route_contexts(routes))

    return routed


class BrowserGuard:
    """Pure ASGI middleware: the Host check and the JSON content type, over TCP only.
    `routed`: whether the app has a route for a request (module docstring: one it has not is
    left to the app's routing, 405); None: every body method's request is checked."""

    def __init__(
        self, app: Asgi, hosts: HostNames, version: str, routed: Routed | None = None
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.version = version
        self.routed = routed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or listener_of(scope) is Listener.UNIX:
            await self.app(scope, receive, send)
            return
        host = _header(scope, b"host")
        if host is None or not self.hosts.allows(host):
            given = "no Host header" if host is None else f"Host {host[:100]!r}"
            message = (
                f"{given} is not a name of this gpupool server: it answers to "
                f"{self.hosts.describe()} (add a name with `gpupool server --server-name`)"
            )
            await _drain(receive)
            await send_error(send, 421, "wrong_host", message, version=self.version, close=True)
            return
        if scope["method"] in BODY_METHODS:
            kind = (_header(scope, b"content-type") or "").split(";")[0].strip().lower()
            if kind != JSON and (self.routed is None or self.routed(scope)):
                message = (
                    f"{scope['method']} requests must have Content-Type: {JSON}, got "
                    f"{kind or 'none'!r} (a browser cannot send that cross-site)"
                )
                await _drain(receive)
                await send_error(
                    send, 415, "unsupported_media_type", message, version=self.version, close=True
                )
                return
        await self.app(scope, receive, send)


DRAINED_BYTES = 64 * 1024  # of a refused request's body, read before answering


async def _drain(receive: Receive) -> None:
    """Read (and drop) a refused request's body, up to DRAINED_BYTES, before answering: a
    socket closed with unread data in it is reset, and the reset can destroy the answer
    before the client reads it. A longer body is left: its connection is closed anyway
    (PoolProtocol's read deadline bounds the wait)."""
    read = 0
    while read <= DRAINED_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            return
        read += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


SAME_ORIGIN_HEADERS = (
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)


class SameOriginAnswers:
    """Pure ASGI middleware: every HTTP answer is for this origin only (module docstring)."""

    def __init__(self, app: Asgi) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_marked(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SAME_ORIGIN_HEADERS]
            await send(message)

        await self.app(scope, receive, send_marked)
