"""An HTTP server speaking the API's header, for CLI tests that go through the real client:
it answers each request with `answer(method, path, body)` (by default, the status and JSON
set in `answers` for (method, path)), and keeps the bodies it was sent. `running` serves one
on a thread for the test. Shared by test_cli_drain.py, test_cli_health.py and
test_project_user_caps.py (pytest puts this folder on sys.path)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gpupool.client.wire_json import JsonValue


class FakeDaemon:
    def __init__(self) -> None:
        self.answers: dict[tuple[str, str], tuple[int, JsonValue]] = {}
        self.sent: list[tuple[str, str, JsonValue]] = []
        daemon = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                daemon.sent.append((method, self.path, body))
                status, answer = daemon.answer(method, self.path, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("x-gpupool-version", "99.0")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802  (http.server's names)
                self._answer("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._answer("POST")

            def do_PATCH(self) -> None:  # noqa: N802
                self._answer("PATCH")

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, method: str, path: str, body: Any) -> tuple[int, JsonValue]:
        return self.answers[(method, path)]


@contextmanager
def running(fake: FakeDaemon) -> Iterator[FakeDaemon]:
    """`fake` served on a thread until the block ends."""
    # A short poll: shutdown() waits for serve_forever's next look (0.5 s by default).
    thread = threading.Thread(target=fake.server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()
