"""Network faults for client tests: servers that are not gpupool, a daemon that never answers,
and a proxy in front of a real daemon that resets or holds connections.

Each runs in a thread of the test process, on 127.0.0.1 (or a Unix socket), and is stopped
by the test that started it (context managers).
"""

from __future__ import annotations

import http.server
import json
import socket
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType


class _Served:
    url = ""

    def __enter__(self) -> _Served:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError


class _JsonOkHandler(http.server.BaseHTTPRequestHandler):
    """Answers every request 200 with a JSON body: a web app that is not gpupool."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        body = json.dumps({"ok": True}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    def log_message(self, *args: object) -> None:  # keep test output clean
        pass


class _NotFoundHandler(http.server.BaseHTTPRequestHandler):
    """Answers every request 404 with an HTML page, as a static file server does."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.send_error(404, "File not found")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    def log_message(self, *args: object) -> None:
        pass


class OtherHttpServer(_Served):
    """An HTTP server that is not a gpupool daemon: `kind` "html-404" or "json-200"."""

    def __init__(self, kind: str) -> None:
        handler = {"html-404": _NotFoundHandler, "json-200": _JsonOkHandler}[kind]
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class HungServer(_Served):
    """Accepts connections (the kernel's backlog does) and never answers: a hung daemon.

    On TCP (`url`), or on a Unix socket at `unix_path` (a state dir's socket)."""

    def __init__(self, unix_path: Path | None = None) -> None:
        if unix_path is None:
            self.sock = socket.socket()
            self.sock.bind(("127.0.0.1", 0))
            self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        else:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.bind(str(unix_path))
        self.sock.listen(64)

    def close(self) -> None:
        self.sock.close()


def reset(conn: socket.socket) -> None:
    """Close with an RST, not a FIN: the peer's next read gets ConnectionResetError."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def _read_message(conn: socket.socket) -> bytes:
    """One HTTP request or answer with a Content-Length body (what gpupool's client sends
    and its daemon answers): read by its length, as the connection may stay open."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def _read_to_eof(conn: socket.socket) -> bytes:
    chunks = []
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


# What the proxy does with connection n (0-based) once the daemon has answered it:
# "pass" forwards the answer; "reset" drops it and resets the client's connection;
# "hold" keeps the answer until the client gives up (closes its side), then drops it.
Fault = Callable[[int], str]


class FaultyProxy(_Served):
    """A TCP proxy to a gpupool daemon's TCP listener that forwards every request whole,
    waits for the daemon's whole answer (so the daemon has done the work), and then does
    what `fault(n)` says with connection n."""

    def __init__(self, upstream: tuple[str, int], fault: Fault) -> None:
        self.upstream = upstream
        self.fault = fault
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections = 0
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                n = self.connections
                self.connections += 1
            threading.Thread(target=self._one, args=(conn, n), daemon=True).start()

    def _one(self, conn: socket.socket, n: int) -> None:
        request = _read_message(conn)
        with socket.create_connection(self.upstream, timeout=60) as up:
            up.sendall(request)
            answer = _read_message(up)
        action = self.fault(n)
        if action == "reset":
            reset(conn)
        elif action == "hold":
            conn.settimeout(120)
            try:
                _read_to_eof(conn)  # until the client times out and closes
            except OSError:
                pass
            conn.close()
        else:
            conn.sendall(answer)
            conn.close()

    def close(self) -> None:
        self.sock.close()
