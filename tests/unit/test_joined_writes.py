"""An answer's writes joined into one (api/connections.py's `JoinedWrites`), on a real
event loop and socket: nothing leaves within the step that wrote it, all of it leaves in
order at the step's end, and a close sends what is pending first."""

from __future__ import annotations

import asyncio
import socket

from gpupool.api.connections import JoinedWrites


def _received(sock: socket.socket) -> bytes:
    sock.setblocking(False)
    try:
        return sock.recv(65536)
    except BlockingIOError:
        return b""


def test_the_writes_of_one_step_leave_together_in_order_at_its_end() -> None:
    ours, theirs = socket.socketpair()

    async def answer() -> tuple[bytes, bytes, bytes]:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
        joined = JoinedWrites(transport, loop)
        joined.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        joined.write(b"{}")
        within_the_step = _received(theirs)
        await asyncio.sleep(0)  # the step ends: the loop runs what it scheduled
        await asyncio.sleep(0)
        after_it = _received(theirs)
        joined.write(b"last")
        joined.close()  # pending bytes first, then the close
        await asyncio.sleep(0)
        theirs.setblocking(True)
        theirs.settimeout(10)
        rest = b""
        while chunk := theirs.recv(65536):
            rest += chunk
        return within_the_step, after_it, rest

    within_the_step, after_it, rest = asyncio.run(answer())
    theirs.close()
    assert within_the_step == b""
    assert after_it == b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"
    assert rest == b"last"


def test_what_is_written_after_the_connection_closed_is_dropped() -> None:
    ours, theirs = socket.socketpair()

    async def answer() -> bool:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.connect_accepted_socket(asyncio.Protocol, ours)
        joined = JoinedWrites(transport, loop)
        joined.write(b"late")
        transport.close()  # the connection was closed meanwhile (a deadline, the client)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return joined.is_closing()

    assert asyncio.run(answer())
    theirs.settimeout(10)
    assert theirs.recv(65536) == b""  # EOF, not the late bytes
    theirs.close()
