"""PoolProtocol's answers to what is not a well-formed request within its limits: a head
too large (whole, or still arriving piece by piece), bytes that are not HTTP, a request
that never arrives whole; and that well-formed requests, one after another on one
connection or sent together, are all answered."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn

from gpupool.api.connections import PoolProtocol
from gpupool.api.limits import HttpLimits

MAX_HEAD = 4096
READ_TIMEOUT_S = 1.0


async def _ok(scope, receive, send):  # type: ignore[no-untyped-def]
    while (await receive()).get("more_body"):
        pass
    body = json.dumps({"path": scope["path"]}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
def address() -> Iterator[tuple[str, int]]:
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(64)
    limits = HttpLimits(max_head_bytes=MAX_HEAD, read_timeout_s=READ_TIMEOUT_S)
    protocol = PoolProtocol.configured(limits)
    server = uvicorn.Server(uvicorn.Config(_ok, http=protocol, lifespan="off", log_config=None))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[tcp])))
    thread.start()
    try:
        yield tcp.getsockname()
    finally:
        server.should_exit = True
        thread.join(10)
        tcp.close()


def _read_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def _answers(data: bytes) -> list[tuple[int, dict[str, object]]]:
    """Each (status, JSON body) in `data`, in order (bodies sized by content-length)."""
    found = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        fields = dict(line.lower().split(b": ", 1) for line in lines[1:])
        size = int(fields[b"content-length"])
        found.append((int(lines[0].split()[1]), json.loads(rest[:size])))
        data = rest[size:]
    return found


def _send(address: tuple[str, int], *pieces: bytes) -> list[tuple[int, dict[str, object]]]:
    with socket.create_connection(address, timeout=20) as sock:
        for piece in pieces:
            try:
                sock.sendall(piece)
            except OSError:
                break  # answered and closed before the rest was sent
        return _answers(_read_all(sock))


def _get(path: str, extra: bytes = b"", close: bool = True) -> bytes:
    last = b"Connection: close\r\n" if close else b""
    return b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n" + extra + last + b"\r\n"


def test_a_whole_head_over_the_limit_is_431(address: tuple[str, int]) -> None:
    [(status, answer)] = _send(address, _get("/", b"X-Big: " + b"a" * MAX_HEAD + b"\r\n"))
    assert status == 431
    assert answer["error"] == "head_too_large" and str(MAX_HEAD) in str(answer["message"])


def test_a_head_that_keeps_arriving_without_end_is_431(address: tuple[str, int]) -> None:
    """One header value sent and never finished: the parser would keep it all in memory;
    the connection is answered 431 once the pieces read after the first pass the limit
    (4 MB are more than one read can take, so the later reads come)."""
    with socket.create_connection(address, timeout=20) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Endless: ")
        sent = 0
        while sent < 1000 * MAX_HEAD:  # far past the limit: it is refused well before
            try:
                sock.sendall(b"a" * 512)
            except OSError:
                break  # refused and closed
            sent += 512  # the server reads what has arrived, in pieces of its own size
        [(status, answer)] = _answers(_read_all(sock))
    assert status == 431 and answer["error"] == "head_too_large"


def test_a_head_under_the_limit_in_many_pieces_is_served(address: tuple[str, int]) -> None:
    request = _get("/pieces", b"X-Fill: " + b"b" * (MAX_HEAD - 200) + b"\r\n")
    pieces = [request[i : i + 97] for i in range(0, len(request), 97)]
    assert _send(address, *pieces) == [(200, {"path": "/pieces"})]


def test_bytes_that_are_not_http_get_400_with_the_parsers_words(
    address: tuple[str, int],
) -> None:
    [(status, answer)] = _send(address, b"\x16\x03\x01 this is not http\r\n\r\n")
    assert status == 400 and answer["error"] == "bad_http"
    assert str(answer["message"]).startswith("not a valid HTTP request: ")
    assert len(str(answer["message"])) > len("not a valid HTTP request: ")


def test_a_request_that_never_arrives_whole_is_408(address: tuple[str, int]) -> None:
    started = time.monotonic()
    [(status, answer)] = _send(address, b"GET / HTTP/1.1\r\nHost: x\r\n")
    assert status == 408 and answer["error"] == "request_timeout"
    assert time.monotonic() - started >= READ_TIMEOUT_S * 0.9


def test_requests_one_after_another_and_sent_together_are_all_answered(
    address: tuple[str, int],
) -> None:
    together = _get("/a", close=False) + _get("/b", close=False) + _get("/c")
    assert _send(address, together) == [(200, {"path": p}) for p in ("/a", "/b", "/c")]
    body = b'{"x": 1}'
    post = b"POST /d HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
    answers = _send(address, _get("/first", close=False), post + body, _get("/last"))
    assert answers == [(200, {"path": p}) for p in ("/first", "/d", "/last")]


def test_a_connection_idle_after_an_answer_is_closed_without_a_word(
    address: tuple[str, int],
) -> None:
    """At the read deadline a connection that was answered and has sent nothing since is
    closed, not answered 408: a client keeping it for its next request could take an
    answer nobody asked for as its own (client/kept_connections.py)."""
    started = time.monotonic()
    assert _send(address, _get("/kept", close=False)) == [(200, {"path": "/kept"})]
    assert time.monotonic() - started >= READ_TIMEOUT_S * 0.9  # closed at the deadline
