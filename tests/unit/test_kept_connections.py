"""A client's connections kept for its next request (client/kept_connections.py) and the
answers read by their framing on them (client/transport.py's `read_framed`)."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator

import pytest

from gpupool.client import kept_connections
from gpupool.client.kept_connections import MAX_KEPT, KeptConnections
from gpupool.client.transport import ClosedUnanswered, exchange_kept, parsed_answer, read_framed


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, theirs = socket.socketpair()
    ours.settimeout(10)
    yield ours, theirs
    ours.close()
    theirs.close()


def _answer(body: bytes, *fields: str) -> bytes:
    head = ["HTTP/1.1 200 OK", "x-gpupool-api: 1", *fields]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def _sent_in_pieces(sock: socket.socket, data: bytes, piece: int = 7) -> threading.Thread:
    """`data` written to `sock` a few bytes at a time, from a thread: the reader must wait
    for the rest of what the framing says, not stop at what has come."""

    def write() -> None:
        for i in range(0, len(data), piece):
            sock.sendall(data[i : i + piece])

    thread = threading.Thread(target=write)
    thread.start()
    return thread


def test_an_answer_with_a_length_is_read_to_its_length_and_the_connection_kept(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    answer = _answer(b'{"id": 12}', "content-length: 10")
    _sent_in_pieces(theirs, answer).join()
    assert read_framed(ours) == (answer, True)  # returned with the daemon's end still open


def test_a_chunked_answer_is_read_to_its_last_chunk(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    chunks = b"5\r\nhello\r\n1;ext\r\n \r\n6\r\nworld!\r\n0\r\n\r\n"
    answer = _answer(chunks, "transfer-encoding: chunked")
    writer = _sent_in_pieces(theirs, answer, piece=3)
    raw, reusable = read_framed(ours)
    writer.join()
    assert (raw, reusable) == (answer, True)
    status, _, body = parsed_answer(raw)
    assert (status, body) == (200, b"hello world!")


def test_connection_close_or_no_framing_ends_the_connection(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    closing = _answer(b"{}", "content-length: 2", "connection: close")
    theirs.sendall(closing)
    assert read_framed(ours) == (closing, False)
    unframed = _answer(b'{"to": "eof"}')
    theirs.sendall(unframed)
    theirs.shutdown(socket.SHUT_WR)  # read to EOF: no length, no chunks
    assert read_framed(ours) == (unframed, False)


def test_an_answer_cut_short_is_not_kept_and_no_answer_at_all_is_closed_unanswered(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, theirs = pair
    theirs.sendall(_answer(b'{"a"', "content-length: 10"))
    theirs.shutdown(socket.SHUT_WR)
    raw, reusable = read_framed(ours)
    assert not reusable and raw.endswith(b'{"a"')
    # The daemon closed an idle connection as the request went: EOF, not a byte.
    fresh, closing = socket.socketpair()
    closing.shutdown(socket.SHUT_WR)
    with pytest.raises(ClosedUnanswered):
        exchange_kept(fresh, "GET", "/v1/info", None, "gpupool")
    closing.close()  # ... or before: the request cannot be written
    with pytest.raises(BrokenPipeError):
        exchange_kept(fresh, "GET", "/v1/info", None, "gpupool")
    fresh.close()


def test_a_kept_connection_is_used_again(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, _ = pair
    kept = KeptConnections()
    kept.keep(ours, "gpupool")
    assert kept.take() == (ours, "gpupool")
    assert kept.take() is None  # taken: no two requests at once on one connection


def test_a_connection_the_daemon_closed_or_wrote_to_is_not_used_again() -> None:
    kept = KeptConnections()
    closed_ours, closed_theirs = socket.socketpair()
    wrote_ours, wrote_theirs = socket.socketpair()
    kept.keep(closed_ours, "gpupool")
    kept.keep(wrote_ours, "gpupool")
    closed_theirs.close()
    wrote_theirs.sendall(b"HTTP/1.1 408 Request Timeout\r\n\r\n")  # unasked
    assert kept.take() is None
    assert closed_ours.fileno() == -1 and wrote_ours.fileno() == -1  # closed here too
    wrote_theirs.close()


def test_a_connection_idle_too_long_is_not_used_again(
    pair: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, _ = pair
    kept = KeptConnections()
    now = 1000.0
    monkeypatch.setattr(kept_connections.time, "monotonic", lambda: now)
    kept.keep(ours, "gpupool")
    now += kept_connections.KEPT_FOR_S + 0.01
    assert kept.take() is None
    assert ours.fileno() == -1


def test_at_most_max_kept_are_kept() -> None:
    kept = KeptConnections()
    pairs = [socket.socketpair() for _ in range(MAX_KEPT + 2)]
    for ours, _ in pairs:
        kept.keep(ours, "gpupool")
    closed = [ours for ours, _ in pairs if ours.fileno() == -1]
    assert len(closed) == 2
    taken = 0
    while kept.take() is not None:
        taken += 1
    assert taken == MAX_KEPT
    for ours, theirs in pairs:
        ours.close()
        theirs.close()


def test_a_forked_child_does_not_use_its_parents_connection(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, _ = pair
    kept = KeptConnections()
    kept.keep(ours, "gpupool")
    child = os.fork()
    if child == 0:  # pragma: no cover (the child's verdict is its exit status)
        os._exit(0 if kept.take() is None else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert kept.take() == (ours, "gpupool")  # still the parent's, and still open
    assert ours.fileno() != -1
