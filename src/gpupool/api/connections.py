"""Who is at the other end of an HTTP connection, told to the app through the ASGI scope.

uvicorn runs one protocol object per connection; `PoolProtocol` is uvicorn's h11 protocol
that, when the connection is made, learns which listener accepted it (the Unix socket or
TCP) and, on the Unix socket, the client's process, user and group from the kernel
(SO_PEERCRED: nothing the client sends can change it). Every request on that connection
then carries both in its scope, under `LISTENER_KEY` and `PEER_KEY`; `listener_of` and
`peer_of` read them back with their types.
"""

from __future__ import annotations

import asyncio
import enum
import socket
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

from uvicorn.protocols.http.h11_impl import H11Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping

    from starlette.types import ASGIApp, Receive, Scope, Send

LISTENER_KEY = "gpupool.listener"
PEER_KEY = "gpupool.peer"


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


def _tagged(app: ASGIApp, listener: Listener, peer: Peer | None) -> ASGIApp:
    async def tagged(scope: Scope, receive: Receive, send: Send) -> None:
        scope[LISTENER_KEY] = listener
        scope[PEER_KEY] = peer
        await app(scope, receive, send)

    return tagged


class PoolProtocol(H11Protocol):
    """uvicorn's h11 protocol, with the listener and the peer put into every request's scope."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family == socket.AF_UNIX:
            self.app = _tagged(self.app, Listener.UNIX, peer_credentials(sock))
        else:
            self.app = _tagged(self.app, Listener.TCP, None)
        super().connection_made(transport)
