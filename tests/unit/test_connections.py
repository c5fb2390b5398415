"""PoolProtocol: a request knows its listener and, on the Unix socket, the kernel's peer."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
from pathlib import Path

import uvicorn

from gpupool.api.connections import Listener, PoolProtocol, listener_of, peer_of


async def _echo(scope, receive, send):  # type: ignore[no-untyped-def]
    peer = peer_of(scope)
    body = json.dumps(
        {
            "listener": listener_of(scope).value,
            "peer": None if peer is None else [peer.pid, peer.uid, peer.gid],
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _get(sock: socket.socket) -> dict[str, object]:
    sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return json.loads(data.split(b"\r\n\r\n", 1)[1])  # type: ignore[no-any-return]


def test_unix_requests_carry_the_kernel_peer_and_tcp_requests_none(tmp_path: Path) -> None:
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(str(tmp_path / "s"))
    unix.listen(8)
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    server = uvicorn.Server(
        uvicorn.Config(_echo, http=PoolProtocol, lifespan="off", log_config=None)
    )
    thread = threading.Thread(
        target=lambda: asyncio.run(server.serve(sockets=[unix, tcp])), daemon=True
    )
    thread.start()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.settimeout(10)
            c.connect(str(tmp_path / "s"))
            assert _get(c) == {
                "listener": "unix",
                "peer": [os.getpid(), os.getuid(), os.getgid()],
            }
        with socket.create_connection(tcp.getsockname(), timeout=10) as c:
            assert _get(c) == {"listener": "tcp", "peer": None}
    finally:
        server.should_exit = True
        thread.join(10)


def test_a_scope_without_the_protocol_counts_as_tcp_without_a_peer() -> None:
    assert listener_of({}) is Listener.TCP
    assert peer_of({"gpupool.peer": "root"}) is None
