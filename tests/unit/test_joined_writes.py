"""An answer's writes joined into one (api/connections.py's `JoinedWrites`), on a real
event loop and socket: nothing leaves within the step that wrote it, all of it leaves in
order at the step's end, and a close sends what is pending first."""

from __future__ import annotations

import asyncio
import socket

from gpupool.api.connections import JoinedWrites


def _received(sock: socket.socket) -> bytes:
    """What has arrived by now, without waiting."""
    sock.setblocking(False)
    try:
        return sock.recv(65536)
    except BlockingIOError:
        return b""


def _until_eof(sock: socket.socket) -> bytes:
    """Everything until the other end closes (at most 10 s of waiting for each piece)."""
    sock.setblocking(True)
    sock.settimeout(10)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def _at_least(sock: socket.socket, size: int) -> bytes:
    """At least `size` bytes (at most 10 s of waiting for each piece)."""
    sock.setblocking(True)
    sock.settimeout(10)
    data = b""
    while len(data) < size and (chunk := sock.recv(65536)):
        data += chunk
    return data


HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


def test_the_writes_of_one_step_leave_together_in_order_at_its_end() -> None:
    ours, theirs = socket.socketpair()

    async def answer() -> tuple[bytes, bytes, bytes]:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
        joined = JoinedWrites(transport, loop)
        joined.write(HEAD)
        joined.write(b"{}")
        within_the_step = _received(theirs)
        # The step ends while the other end waits (off the loop): the loop runs the write.
        after_it = await loop.run_in_executor(None, _at_least, theirs, len(HEAD) + 2)
        joined.write(b"last")
        joined.close()  # pending bytes first, then the close
        rest = await loop.run_in_executor(None, _until_eof, theirs)
        return within_the_step, after_it, rest

    within_the_step, after_it, rest = asyncio.run(answer())
    theirs.close()
    assert within_the_step == b""
    assert after_it == HEAD + b"{}"
    assert rest == b"last"


def test_what_is_written_after_the_connection_closed_is_dropped() -> None:
    ours, theirs = socket.socketpair()

    async def answer() -> tuple[bytes, bool]:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
        joined = JoinedWrites(transport, loop)
        joined.write(b"late")
        transport.close()  # the connection was closed meanwhile (a deadline, the client)
        received = await loop.run_in_executor(None, _until_eof, theirs)
        return received, joined.is_closing()

    received, closing = asyncio.run(answer())
    theirs.close()
    assert received == b""  # EOF, not the late bytes
    assert closing
